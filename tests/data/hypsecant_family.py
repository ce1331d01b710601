"""A user's family for the command-line tests: the hyperbolic secant, numpy only
(dpbook fisher --family tests/data/hypsecant_family.py:HypSecant)."""

import numpy as np

from dpbook.model.families import LocationScaleFamily


class HypSecant(LocationScaleFamily):
    name = "hypsecant"
    summary = "hyperbolic secant(loc, scale): density 1/(pi cosh z)"

    def base_logpdf(self, z):
        z = np.abs(z)
        return -np.log(np.pi / 2) - z - np.log1p(np.exp(-2 * z))

    def base_dlogpdf(self, z):
        return -np.tanh(z)

    def base_cdf(self, z):
        return 2 / np.pi * np.arctan(np.exp(z))

    def base_ppf(self, q):
        return np.log(np.tan(np.pi / 2 * q))

    def base_sample(self, rng, size=None):
        return self.base_ppf(rng.uniform(size=size))


NotAFamily = dict
