"""A well-behaved logistic family: the head of the hostile family files that
tests/test_hostile_family.py and benchmarks/hostile_sweep.py write (their bodies, appended
after it, subclass Good and use sys and Family)."""

import sys  # noqa: F401

import numpy as np
from scipy import special

from dpbook.model.families import Family, LocationScaleFamily  # noqa: F401


class Good(LocationScaleFamily):
    name = "good"
    def base_logpdf(self, z): return -np.abs(z) - 2 * np.log1p(np.exp(-np.abs(z)))
    def base_dlogpdf(self, z): return -np.tanh(z / 2)
    def base_cdf(self, z): return special.expit(z)
    def base_ppf(self, q): return np.log(q) - np.log1p(-q)
    def base_sample(self, rng, size=None): return rng.logistic(0.0, 1.0, size)
