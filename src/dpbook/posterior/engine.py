"""The log-likelihood grid of the exact posterior (5), compiled for any location-scale
family with the Laplace or Gaussian mechanism.  For theta = (m, c) and each release
(eq. 7's density, x integrated out), in z = (x - m)/c:

    p(y | m, c) = G(z_l) g_b(y - l) + S(z_r) g_b(y - r) + int_{z_l}^{z_r} g(z) g_b(y - m - c z) dz,

g, G, S the base density, cdf and sf, g_b the noise density of scale b = (r - l)/eps.
The rule of :mod:`dpbook.likelihood.quadrature` (checked against it in tests) in the
base's coordinate: Gauss-Legendre (8 nodes a panel) on [z_l, z_r] cut to the base's
[1e-14, 1 - 1e-14] quantiles widened by the noise's reach, panels ending at the base's
quantiles (computed once), at z_u = (T_l^r(y) - m)/c and z_u +- the noise's
half-widths for e^-2 ... 1e-17 (Laplace: 2, 6, 15, 39 b/c); sums in log space.  The
family's numpy ``base_logpdf``, ``base_cdf`` and ``base_sf`` are compiled by the SMC
engine's machinery (:func:`dpbook.smc.engine.compiled_primitive`); a family that does
not compile runs the numpy quadrature, with one warning naming the primitive.  Chosen
by :mod:`dpbook.backends` (``ENGINES["posterior"]``).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from dpbook import vmath
from dpbook.likelihood.quadrature import NOISE_TOLS
from dpbook.model.families.base import LocationScaleFamily
from dpbook.model.mechanisms import get_mechanism
from dpbook.posterior.exact import GridModel
from dpbook.smc.engine import (
    NotCompilable,
    compiled_primitive,
    family_state,
    run_chunks,
    warn_not_compiled,
)
from dpbook.smc.sweep import KIND

LEVELS = np.array([1e-14, 1e-9, 1e-4, 0.01, 0.15, 0.5, 0.85, 0.99, 1 - 1e-4, 1 - 1e-9,
                   1 - 1e-14])  # base quantiles: panel ends (the outer two: the support)
GL_NODES = 8
SLIVER = 0.25  # no noise half-width point within this (x min(1, b/c)) of another
_ARGS = (-30.0, -3.0, -1.2, -0.3, 0.0, 0.4, 1.1, 2.5, 30.0)  # where compiled = numpy


@njit(inline="always", error_model="numpy")
def _sum_exp(vals, hw, nv, mx):
    """sum_k hw[k] exp(vals[k] - mx): the exponentials in a vectorised loop (into
    ``vals``: it is spent), then the sum (in order)."""
    for k in range(nv):
        vals[k] = hw[k] * vmath.exp(vals[k] - mx)
    s = 0.0
    for k in range(nv):
        s += vals[k]
    return s


def make_kernel(logpdf, cdf, sf):
    """The compiled grid kernel for a family's compiled base logpdf, cdf and sf: flat
    grid points g0 <= g < g1 (it releases the GIL: threads run disjoint ranges)."""

    @njit(nogil=True, error_model="numpy")
    def kernel(g0, g1, state, mus, sigs, y, l, r, b, lnorm, kind, qz, offs, gx, gw, top, out):
        """out[g] = sum_t log p(y_t | mus[i], sigs[j]), g = i n_sig + j (module
        docstring)."""
        fs = state[0]
        n_sig, n = sigs.shape[0], y.shape[0]
        nq, no, ng = qz.shape[0], offs.shape[0], gx.shape[0]
        npts = 3 + 2 * no + nq
        pts = np.empty(npts)
        near = np.empty(2 * no + 1)
        vals = np.empty((npts - 1) * ng)
        zs = np.empty((npts - 1) * ng)
        hw = np.empty((npts - 1) * ng)
        for g in range(g0, g1):
            i = g // n_sig
            m = mus[i]
            c = sigs[g - i * n_sig]
            ic = 1.0 / c
            acc = 0.0
            for t in range(n):
                ib = 1.0 / b[t]
                zl = (l[t] - m) * ic
                zr = (r[t] - m) * ic
                zu = (min(max(y[t], l[t]), r[t]) - m) * ic
                sc = b[t] * ic  # the noise scale in z
                lo = max(zl, min(qz[0], zu - offs[no - 1] * sc))
                hi = max(lo, min(zr, max(qz[nq - 1], zu + offs[no - 1] * sc)))
                # panel ends: two sorted lists (the noise's around zu, the base's
                # quantiles) merged, clipped to [lo, hi]
                for k in range(no):
                    near[no - 1 - k] = zu - offs[k] * sc
                    near[no + 1 + k] = zu + offs[k] * sc
                near[no] = zu
                # inside (lo, hi): zu and the base's quantiles (where a kink of g may
                # be) stay; a noise half-width point closer than ``gap`` to the last
                # point kept or to the next quantile, zu or hi would only make a sliver
                # panel: dropped
                gap = SLIVER * min(1.0, sc)
                pts[0] = lo
                kept = 1
                a = 0
                q = 0
                for _ in range(npts - 2):
                    if q >= nq or (a <= 2 * no and near[a] <= qz[q]):
                        v = near[a]
                        a += 1
                        if a - 1 != no:  # a half-width point, not zu
                            nxt = min(hi, qz[q] if q < nq else hi, zu if v < zu else hi)
                            if not (v - pts[kept - 1] > gap and nxt - v > gap):
                                continue
                    else:
                        v = qz[q]
                        q += 1
                    if lo < v < hi:
                        pts[kept] = v
                        kept += 1
                pts[kept] = hi
                nv = 0
                for p in range(kept):  # the nodes, then one flat loop over them
                    if pts[p + 1] > pts[p]:
                        half = 0.5 * (pts[p + 1] - pts[p])
                        mid = 0.5 * (pts[p + 1] + pts[p])
                        for k in range(ng):
                            zs[nv + k] = mid + half * gx[k]
                            hw[nv + k] = half * gw[k]
                        nv += ng
                va, vb = (y[t] - l[t]) * ib, (y[t] - r[t]) * ib
                la = vmath.log(cdf(fs, zl)) + (-abs(va) if kind == 0 else -0.5 * va * va)
                lb = vmath.log(sf(fs, zr)) + (-abs(vb) if kind == 0 else -0.5 * vb * vb)
                yt = y[t] - m
                for k in range(nv):  # vectorised: no carried state
                    z = zs[k]
                    e = (yt - c * z) * ib
                    vals[k] = logpdf(fs, z) + (-abs(e) if kind == 0 else -0.5 * e * e)
                # shift: a bound of the log integrand (log g <= top, noise <= 1), then
                # the exact maximum where that bound would underflow the sum
                mx = max(max(la, lb), top)
                s = _sum_exp(vals, hw, nv, mx) + vmath.exp(la - mx) + vmath.exp(lb - mx)
                if not 1e-200 < s < math.inf:  # rare: the nodes again, with their maximum
                    mx = max(la, lb)
                    for k in range(nv):
                        z = zs[k]
                        e = (yt - c * z) * ib
                        vals[k] = logpdf(fs, z) + (-abs(e) if kind == 0 else -0.5 * e * e)
                        v = vals[k] + vmath.log(hw[k])
                        mx = v if v > mx else mx
                    if not mx > -math.inf:
                        acc = -math.inf
                        continue
                    s = _sum_exp(vals, hw, nv, mx) + vmath.exp(la - mx) + vmath.exp(lb - mx)
                acc += mx + vmath.log(s) + lnorm[t]
            out[g] = acc

    return kernel


@functools.cache
def _kernel(logpdf, cdf, sf):
    return make_kernel(logpdf, cdf, sf)


@functools.cache
def _one_minus(cdf):
    @njit(inline="always", error_model="numpy")
    def sf(state, z):
        return 1.0 - cdf(state, z)
    return sf


def _primitives(family):
    logpdf = compiled_primitive(family, "base_logpdf", _ARGS)
    cdf = compiled_primitive(family, "base_cdf", _ARGS)
    if type(family).base_sf is LocationScaleFamily.base_sf:  # 1 - cdf, as the numpy code
        return logpdf, cdf, _one_minus(cdf)
    return logpdf, cdf, compiled_primitive(family, "base_sf", _ARGS)




def engine_model(family, mechanism):
    """For :mod:`dpbook.backends`: a function (y, l, r, eps) -> :class:`GridModel` whose
    log-likelihood grid is compiled, or None (the numpy quadrature runs; a family whose
    primitive does not compile is named in one warning)."""
    mech = get_mechanism(mechanism)
    if not isinstance(family, LocationScaleFamily) or type(mech) not in KIND:
        return None
    try:
        prims = _primitives(family)
    except NotCompilable as e:
        warn_not_compiled(family, f"the exact posterior of the {family.name} family runs "
                          f"the numpy quadrature, not the compiled engine: {e}.  To "
                          f"compile, write base_logpdf, base_cdf and base_sf with numpy or "
                          f"math functions of one value (no scipy but special.expit, ndtr, "
                          f"erf, erfc, gammaln); see dpbook.posterior.engine", stacklevel=4)
        return None
    kernel = _kernel(*prims)
    state = family_state(family)
    with np.errstate(divide="ignore"):
        qz = np.asarray(family.base_ppf(LEVELS), float)
    if not np.all(np.isfinite(qz)) or np.any(np.diff(qz) < 0):
        return None
    offs = np.array([float(mech.tail(1.0, tol)) for tol in NOISE_TOLS])
    with np.errstate(all="ignore"):  # the base's largest log density, with a margin
        top = float(np.nanmax(family.base_logpdf(np.linspace(qz[0], qz[-1], 20001)))) + 1.0
    gx, gw = np.polynomial.legendre.leggauss(GL_NODES)
    kind = KIND[type(mech)]

    def make(y, l, r, eps):
        b = (r - l) / eps
        lnorm = -np.log(2.0 * b) if kind == 0 else -np.log(b * math.sqrt(2 * math.pi))

        def loglik(axes):
            mu, sigma = (np.ascontiguousarray(a, dtype=float) for a in axes)
            out = np.empty(mu.size * sigma.size)
            run_chunks(kernel, out.size, y.size, state, mu, sigma, y, l, r, b, lnorm, kind,
                       qz, offs, gx, gw, top, out)
            return out.reshape(mu.size, sigma.size)

        return GridModel(family, mech, y, l, r, eps, loglik)

    return make
