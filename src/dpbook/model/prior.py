"""The prior eta(theta) of Section 6, shared by every algorithm.

For the normal model theta = (mu, sigma): mu ~ N(0, 10^4) and sigma^2 ~ IG(1, 1) (shape 1,
scale 1), independent.  :class:`dpbook.model.families.LocationScaleFamily` gives every
location-scale family theta = (m, c) the same prior (m for mu, c for sigma); the compiled
kernels of :mod:`dpbook.smc`, :mod:`dpbook.mhaar` and :mod:`dpbook.likelihood` read the
constants from here.
"""

LOC_MEAN = 0.0  # mu ~ N(LOC_MEAN, LOC_VAR)
LOC_VAR = 1.0e4
SCALE2_SHAPE = 1.0  # sigma^2 ~ IG(SCALE2_SHAPE, SCALE2_SCALE)
SCALE2_SCALE = 1.0
