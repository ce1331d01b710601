"""Adaptive truncation for a vector X_t ~ N_d(mu, Sigma) (issue 54; the paper's Section 3
"the truncation approach can be applied to each component" and its first open question).

The release clips each component to a box [l, r] and adds independent Laplace noise of
scale W / eps per component, W = sum_j (r_j - l_j) the box's L1 sensitivity.  The
latent SMC is the one :class:`dpbook.smc.SMC`, whose latent values here are vectors.
"""
