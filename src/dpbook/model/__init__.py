"""The statistical model: the population families P_theta (Section 3; Definition 2 for
location-scale families), the mechanisms of eq. (2) and (10) (Theorem 2, Section 7) and
the prior eta(theta) of Section 6.  Nothing here imports an algorithm."""
