"""The model's primitives of eq. (8) with Algorithm 4 (:mod:`dpbook.fisher.mc`): the
release draws, the importance draws and the score grad log p_theta(x), in numpy for any
model (:class:`FisherEngine`) or compiled for a location-scale family
(:class:`CompiledEngine`); :func:`engine_class` chooses."""

from __future__ import annotations

import functools

import numpy as np
from numba import njit

from dpbook import vmath
from dpbook.backends import backend
from dpbook.model.compiler import NotCompilable, compiled_family, warn_not_compiled
from dpbook.model.families.base import LocationScaleFamily
from dpbook.model.mechanisms import KIND, get_mechanism
from dpbook.numba_cache import cached
from dpbook.rng import FISHER_NOISE as P_NOISE
from dpbook.rng import FISHER_RELEASE as P_RELEASE
from dpbook.rng import FISHER_SAMPLES as P_SAMPLES
from dpbook.rng import uniforms


@njit(cache=True, error_model="numpy")
def _std_noise(kind, u, out):
    """The mechanism's standard noise by inversion of keyed uniforms: Laplace(1)
    (kind 0) or N(0, 1) (kind 1)."""
    for i in range(u.shape[0]):
        q = u[i]
        if kind == 0:
            out[i] = vmath.log(2.0 * q) if q < 0.5 else -vmath.log(2.0 - 2.0 * q)
        else:
            out[i] = vmath.ndtri(q)


class FisherEngine:
    """The model's primitives of eq. (8) with Algorithm 4 (module docstring), written
    with the family's and mechanism's numpy code: the fallback of any model.

    ``release_draws(rng, M)`` -> (z, v): the latent values and standard noises of the y's;
    ``sample_draws(rng, n, part)`` -> n latent values of importance samples (part 0:
    the shared ones, part 1 + k: block k of the fresh ones); ``grad(z, theta)`` ->
    (d, n) scores grad log p_theta(x) at x = m + c z (z of shape (n,));
    ``loc_scale(theta)`` -> (m, c), (0, 1) for a family that is not location-scale (its
    latent value is x itself).
    """

    def __init__(self, family, mechanism):
        self.family, self.mech = family, get_mechanism(mechanism)
        self.kind = KIND.get(type(self.mech), -1)  # -1: the mechanism's own sampler
        self._ls = isinstance(family, LocationScaleFamily)
        self._key = None

    def loc_scale(self, theta):
        return (float(theta[0]), float(theta[1])) if self._ls else (0.0, 1.0)

    def _uniforms(self, purpose, n):
        return uniforms(self._key, purpose, n)

    def release_draws(self, rng, M):
        self._key = np.uint64(rng.integers(0, 2**63))
        z = self._latent(self._uniforms(P_RELEASE, M))
        if self.kind < 0:
            v = np.asarray(self.mech.sample(rng, size=M), dtype=float)
        else:
            v = np.empty(M)
            _std_noise(self.kind, self._uniforms(P_NOISE, M), v)
        return z, v

    def sample_draws(self, rng, n, part):
        return self._latent(self._uniforms(P_SAMPLES + 8 * part, n))

    def _latent(self, u):
        if self._ls:
            return np.asarray(self.family.base_ppf(u), dtype=float)
        return np.asarray(self.family.ppf(u, *self.theta), dtype=float)

    def grad(self, z, theta):
        m, c = self.loc_scale(theta)
        g = self.family.score(m + c * z, *theta)
        return np.stack([np.broadcast_to(np.asarray(a, float), z.shape) for a in g])


class CompiledEngine(FisherEngine):
    """A location-scale family's primitives compiled (module docstring): its
    ``base_ppf`` on keyed uniforms and its score from ``base_dlogpdf``."""

    def __init__(self, family, mechanism):
        super().__init__(family, mechanism)
        self._state, self._latent_k, self._grad_k = compiled_fisher(family)

    def _latent(self, u):
        out = np.empty(u.shape[0])
        self._latent_k(self._state, u, out)
        return out

    def grad(self, z, theta):
        out = np.empty((2, z.size))
        self._grad_k(self._state, z, float(theta[1]), out)
        return out


@functools.cache
def _kernels(ppf, dlogpdf):
    """Array kernels of a family's compiled base_ppf and base_dlogpdf."""

    @njit(error_model="numpy")
    def latent(state, u, out):
        fs = state[0]
        for i in range(u.shape[0]):
            out[i] = ppf(fs, u[i])

    @njit(error_model="numpy")
    def grad(state, z, c, out):
        fs = state[0]
        for i in range(z.shape[0]):
            dz = dlogpdf(fs, z[i])
            out[0, i] = -dz / c
            out[1, i] = -(1.0 + z[i] * dz) / c

    return cached(latent), cached(grad)


@functools.cache
def _dlogpdf(cls):
    return vmath.compile_scalar(cls.base_dlogpdf)




def compiled_fisher(family):
    """(state, latent, grad) kernels of a location-scale family whose base_ppf and
    base_dlogpdf compile and agree with its numpy code (checked once per class and
    numeric attributes by :func:`dpbook.model.compiler.compiled_family`, with its
    base_logpdf); :class:`~dpbook.model.compiler.NotCompilable` naming the primitive that
    does not."""
    cf = compiled_family(family)
    if cf.information is None:  # the engine's check of base_dlogpdf failed
        raise NotCompilable("base_dlogpdf: numba cannot compile it, or its compiled form "
                            "differs from the numpy one")
    return (cf.state, *_kernels(cf.ppf, _dlogpdf(type(family))))


def engine_class(family, mechanism):
    """The engine of a model without a registered one (:data:`dpbook.backends.ENGINES`):
    :class:`CompiledEngine` for a location-scale family with the Laplace or Gaussian
    mechanism whose primitives compile, else :class:`FisherEngine` (a family whose
    primitive does not compile is named in one warning)."""
    if not isinstance(family, LocationScaleFamily) or \
            type(get_mechanism(mechanism)) not in KIND:
        return FisherEngine
    try:
        compiled_fisher(family)
    except NotCompilable as e:
        warn_not_compiled(family, f"the {family.name} family's Fisher information runs on "
                          f"numpy, not compiled: {e}.  To compile, write base_ppf and "
                          f"base_dlogpdf with numpy or math functions of one value (no "
                          f"scipy); see dpbook.fisher.mc_primitives", stacklevel=4)
        return FisherEngine
    return CompiledEngine


def fisher_engine(fam, mech, theta):
    eng = backend("fisher_mc", fam, mech)(fam, mech)
    eng.theta = theta
    return eng
