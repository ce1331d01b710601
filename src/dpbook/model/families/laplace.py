"""The Laplace (double exponential) location-scale family (Definition 2; one of the
other families Section 7 invites)."""

from __future__ import annotations

import math

import numpy as np

from dpbook.model.families.base import LocationScaleFamily


class Laplace(LocationScaleFamily):
    """p(x; loc, scale) = exp(-|x - loc|/scale) / (2 scale)."""

    name = "laplace"
    summary = "Laplace(loc, scale): heavier tails than the normal; location-scale"

    def base_logpdf(self, z):
        return -np.abs(z) - math.log(2.0)

    def base_dlogpdf(self, z):
        return -np.sign(z)  # almost everywhere

    def base_cdf(self, z):  # the noise's cdf (LaplaceMechanism.cdf), written to compile
        z = np.asarray(z, float)
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)),
                        1.0 - 0.5 * np.exp(-np.maximum(z, 0.0)))

    def base_sf(self, z):  # base_cdf(-z)
        z = np.asarray(z, float)
        return np.where(z > 0, 0.5 * np.exp(np.minimum(-z, 0.0)),
                        1.0 - 0.5 * np.exp(-np.maximum(-z, 0.0)))

    def base_ppf(self, q):
        q = np.asarray(q, float)
        return np.where(q < 0.5, np.log(2 * np.minimum(q, 0.5)),
                        -np.log(2 * (1 - np.maximum(q, 0.5))))

    def base_sample(self, rng, size=None):
        return rng.laplace(0.0, 1.0, size)

    def default_theta(self):
        return 50.0, math.sqrt(5.0)  # variance 2 scale^2 = 10, as in Section 6
