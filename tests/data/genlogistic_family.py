"""A user's family with an option of its own, for the command-line tests: the type I
generalised logistic, cdf expit(z)^shape (shape 1: the logistic), numpy only
(dpbook fisher --family tests/data/genlogistic_family.py:GenLogistic --shape 2 ...)."""

import numpy as np
from scipy import special

from dpbook.model.families import LocationScaleFamily


class GenLogistic(LocationScaleFamily):
    name = "genlogistic"
    summary = "type I generalised logistic(loc, scale): cdf expit(z)^shape"
    options = {"shape": (float, 1.0, "shape of the generalised logistic (1: the logistic)")}

    def __init__(self, shape=1.0):
        if not 0.05 <= shape <= 20:
            raise ValueError(f"shape must be in [0.05, 20], got {shape!r}")
        self.shape = float(shape)

    def base_logpdf(self, z):  # log shape + shape log expit(z) + log expit(-z)
        s = np.log1p(np.exp(-np.abs(z)))
        return np.log(self.shape) - self.shape * (s + np.maximum(-z, 0.0)) - s - np.maximum(z, 0.0)

    def base_dlogpdf(self, z):
        return self.shape * special.expit(-z) - special.expit(z)

    def base_cdf(self, z):
        return special.expit(z) ** self.shape

    def base_sf(self, z):
        log_cdf = -np.log1p(np.exp(-np.abs(z))) - np.maximum(-z, 0.0)
        return -np.expm1(self.shape * log_cdf)

    def base_ppf(self, q):
        lu = np.log(q) / self.shape  # log of u = expit(z)
        return lu - np.log(-np.expm1(lu))

    def base_sample(self, rng, size=None):
        return self.base_ppf(rng.uniform(size=size))


class Clashing(GenLogistic):
    options = {"eps": (float, 1.0, "an option named as one of dpbook's own")}

    def __init__(self, eps=1.0):
        super().__init__()
