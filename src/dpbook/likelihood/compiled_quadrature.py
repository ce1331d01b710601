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
engine's machinery (:func:`dpbook.model.compiler.compiled_primitive`); a family that does
not compile runs the numpy quadrature, with one warning naming the primitive.  A family
without ``base_sf`` gets the default's rule (1 - cdf, or the upper tail's integral where
1 - cdf loses the atom: :meth:`LocationScaleFamily.base_sf`), compiled.

Where z_u lies beyond the base's quantiles by more than the noise's e^-6 half-width, the
log integrand can peak in between, where no panel ends: a golden-section search finds
the peak and its width, and panels end around it (as in the numpy quadrature); with
Gaussian noise and y beyond an end by d > b, panels end in the boundary layer of width
b^2/(c d) at that end (:func:`_layer`).  Against scipy's ``quad`` over 1680 cases (the
logistic, both mechanisms, l, r = -1, 1, eps 0.5-50, c 0.002-20, m from -30 to 30, y
inside or up to 30 b beyond an end): log p within 3.5e-11, the score within 1.1e-6
relative to 1 + |s| (the worst at c/b = 500, :func:`make_score`'s cancellation).

What it compiles, chosen by :mod:`dpbook.backends` (``ENGINES``): the exact
posterior's grid (``posterior_model``), the log-likelihood at particles and its terms
release by release (``loglik_particles``, ``loglik_terms``: the marginal SMC, the
reliability checks) and the score of one release (``score``: the online gradient of
Section 7; Fisher's identity, Appendix C, on the same panels, :func:`make_score`).
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numba import njit

from dpbook import vmath
from dpbook.likelihood import quadrature
from dpbook.likelihood.compiled import CompiledScore
from dpbook.likelihood.quadrature import NOISE_TOLS
from dpbook.model.compiler import (
    NotCompilable,
    compiled_primitive,
    family_key,
    family_state,
    outlined,
    warn_not_compiled,
)
from dpbook.model.families.base import SF_ENDS, SF_GL, SF_SWITCH, LocationScaleFamily
from dpbook.model.mechanisms import KIND, get_mechanism
from dpbook.numba_cache import cached
from dpbook.parallel import run_chunks
from dpbook.validation import kernel_arrays

LEVELS = np.array([1e-14, 1e-9, 1e-4, 0.01, 0.15, 0.5, 0.85, 0.99, 1 - 1e-4, 1 - 1e-9,
                   1 - 1e-14])  # base quantiles: panel ends (the outer two: the support)
GL_NODES = 8
# the score's: its sums of two signs (either side of the noise's kink) cancel, which
# multiplies the rule's relative error by up to c/b
SCORE_GL_NODES = 16
SLIVER = 0.25  # no noise half-width point within this (x min(1, b/c)) of another
_ARGS = (-30.0, -3.0, -1.2, -0.3, 0.0, 0.4, 1.1, 2.5, 30.0)  # where compiled = numpy


@njit(cache=True, error_model="numpy")
def _log(x):  # vmath.log out of line for the sites outside the loops over the nodes:
    return vmath.log(x)  # the same bits, compiled once instead of inlined at each


@njit(cache=True, error_model="numpy")
def _exp(x):
    return vmath.exp(x)


@njit(cache=True, error_model="numpy")
def _sum_exp(vals, hw, nv, mx):
    """sum_k hw[k] exp(vals[k] - mx): the exponentials in a vectorised loop (into
    ``vals``: it is spent), then the sum (in order).  Compiled once for every family
    (not inlined: as fast, and each family's kernel compiles faster)."""
    for k in range(nv):
        vals[k] = hw[k] * vmath.exp(vals[k] - mx)
    s = 0.0
    for k in range(nv):
        s += vals[k]
    return s


@njit(inline="always", error_model="numpy")
def _nodes(m, c, y, l, r, b, lay, pk, pw, qz, offs, gx, gw, pts, near, zs, hw):
    """The quadrature of one release's integral in z (module docstring): its nodes and
    weights into ``zs`` and ``hw``; returns their number and (z_l, z_r).  Shared by
    the log-likelihood and the score; ``lay`` > 0 (the score's): panel ends at the
    boundary layer of that scale too (:func:`_layer`); ``pw`` > 0: panel ends at the
    integrand's peak pk +- pw PEAK_STEPS (:func:`_peak`)."""
    nq, no, ng = qz.shape[0], offs.shape[0], gx.shape[0]
    npts = 3 + 2 * no + nq
    ic = 1.0 / c
    zl = (l - m) * ic
    zr = (r - m) * ic
    zu = (min(max(y, l), r) - m) * ic
    sc = b * ic  # the noise scale in z
    lo = max(zl, min(qz[0], zu - offs[no - 1] * sc))
    hi = max(lo, min(zr, max(qz[nq - 1], zu + offs[no - 1] * sc)))
    # panel ends: two sorted lists (the noise's around zu, the base's quantiles)
    # merged, clipped to [lo, hi]
    for k in range(no):
        near[no - 1 - k] = zu - offs[k] * sc
        near[no + 1 + k] = zu + offs[k] * sc
    near[no] = zu
    # inside (lo, hi): zu and the base's quantiles (where a kink of g may be) stay; a
    # noise half-width point closer than ``gap`` to the last point kept or to the next
    # quantile, zu or hi would only make a sliver panel: dropped
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
    if lay > 0.0:
        kept = _layer(pts, kept, zu, lay)
    if pw > 0.0:
        for i in range(PEAK_STEPS.shape[0]):
            kept = _insert(pts, kept, pk + pw * PEAK_STEPS[i])
    nv = 0
    extra = TAIL_SPLITS  # geometric sub-panels left to give
    for p in range(kept):  # the nodes, then one flat loop over them
        a, e = pts[p], pts[p + 1]
        if not e > a:
            continue
        # a panel in one tail spanning more than a factor TAIL_RATIO in |z|: a power-law
        # tail (the Student-t's) falls by a power of that factor across it, beyond one
        # rule's reach; cut it at geometric points (the light tails' panels between
        # their quantiles never span such a factor)
        parts = 1
        lo_abs, hi_abs = min(abs(a), abs(e)), max(abs(a), abs(e))
        if a * e > 0.0 and lo_abs >= 1.0 and hi_abs > TAIL_RATIO * lo_abs and extra > 0:
            parts = min(1 + extra, int(math.ceil(math.log(hi_abs / lo_abs)
                                                 / math.log(TAIL_RATIO))))
            extra -= parts - 1
        ratio = (e / a) ** (1.0 / parts) if parts > 1 else 1.0
        for j in range(parts):
            u = a * ratio ** j if j > 0 else a
            v = a * ratio ** (j + 1) if j + 1 < parts else e
            half = 0.5 * (v - u)
            mid = 0.5 * (v + u)
            for k in range(ng):
                zs[nv + k] = mid + half * gx[k]
                hw[nv + k] = half * gw[k]
            nv += ng
    return nv, zl, zr


# geometric cuts of a tail panel (_nodes): t3 between its 1e-9 and 1e-4 quantiles spans
# a factor ~50 in |z|, where 8 nodes lost 8.8e-5 of p (b = 2e5, c = 1); cut, 1e-9
TAIL_RATIO = 3.0
TAIL_SPLITS = 24  # sub-panels at most added to one release's rule


# the peak search (make_release): golden-section steps (the bracket shrinks to
# 0.618^60 ~ 3e-13 of its width) and panel ends at the peak + width x these (the log
# integrand falls by ~72 at 12 widths where it is concave): the numpy quadrature's
GOLDEN = 0.5 * (math.sqrt(5.0) - 1.0)
CDF_ERR, ATOM_TOL = 2.3e-16, 1e-12  # 1 - cdf's rounding (2 ulp of 1); its budget in p
LOG_CDF_ERR, LOG_ATOM_TOL = math.log(CDF_ERR), math.log(ATOM_TOL)
PEAK_ITER = 60
PEAK_TOL = 0.01
PEAK_STEPS = np.array(quadrature._PEAK_STEPS)
LAYER = np.array([-math.log(tol) for tol in NOISE_TOLS])  # e^-x falls to tol at x


@njit(inline="always")
def _insert(pts, kept, v):
    """v put in order among the panel ends pts[0] < ... < pts[kept] if strictly inside
    (pts[0], pts[kept]); returns the new index of the last end."""
    if pts[0] < v < pts[kept]:
        j = kept
        while pts[j] > v:  # insertion: pts[0] < v stops it
            pts[j + 1] = pts[j]
            j -= 1
        pts[j + 1] = v
        kept += 1
    return kept


@njit(inline="always")
def _layer(pts, kept, zu, lay):
    """Panel ends zu +- LAYER lay (inside the integral's range pts[0], pts[kept]) put in
    order among the others; returns the new index of the last end.  With y beyond an
    end, zu is that end, and the integrand decays from it as e^{-|z - zu|/lay}, much
    faster than on the noise's own scale (make_score)."""
    lo = pts[0]
    for i in range(LAYER.shape[0]):
        kept = _insert(pts, kept, zu + LAYER[i] * lay if zu == lo else zu - LAYER[i] * lay)
    return kept


@njit(inline="always")
def _layer_width(kind, y, l, r, b, c):
    """Gaussian noise and y beyond an end by d > b: the integrand's boundary layer at
    that end, of width b^2/(c d) in z (the log-likelihood's and the score's panel ends,
    :func:`_layer`); else 0."""
    out = abs(y - min(max(y, l), r))
    return b * b / (c * out) if kind == 1 and out > b else 0.0


@functools.cache
def make_release(logpdf, cdf, sf):
    """One release's density (module docstring) for a family's compiled base logpdf, cdf
    and sf: ``release(m, c, fs, y, l, r, b, lay, kind, qz, offs, gx, gw, top, pts, near,
    vals, zs, hw)`` -> (ok, mx, s, nv), with p(y | m, c) = e^mx s times the noise's
    constant, and vals[k] = hw_k g(z_k) g_b(y - m - c z_k) e^-mx (the noise density
    without its constant) at the nodes zs[:nv]; ok False: p = 0 at every node and atom.
    ``lay``: :func:`_nodes`; ``pts``, ``near``, ``vals``, ``zs``, ``hw``: scratch of
    :func:`_scratch`'s sizes.  One compiled function per family that the
    log-likelihood and the score call (not inlined: inlining it more than doubles the
    compile time of a family's log-likelihood for a few per cent of run time)."""

    @njit(error_model="numpy")
    def logf(fs, z, yt, c, ib, kind):
        e = (yt - c * z) * ib
        v = logpdf(fs, z) + (-abs(e) if kind == 0 else -0.5 * e * e)
        return v if v == v else -math.inf

    @njit(error_model="numpy")
    def peak(fs, m, c, y, l, r, b, kind, qz, offs):
        """(pk, pw): the peak in z of log g(z) + log g_b(y - m - c z) and a width from
        its curvature, where z_u lies beyond the base's quantiles by more than the noise's
        e^-6 half-width (the peak can then be in between, where no panel ends: the
        numpy quadrature's search, :func:`dpbook.likelihood.quadrature._peak_breaks`);
        else (0, 0).  Golden-section search between the outer quantile and z_u (a
        unimodal log integrand's maximum)."""
        ic, ib = 1.0 / c, 1.0 / b
        zl, zr = (l - m) * ic, (r - m) * ic
        zu = (min(max(y, l), r) - m) * ic
        sc = b * ic
        nq = qz.shape[0]
        gap = offs[1] * sc
        if zu > qz[nq - 1] + gap:
            lo, hi = qz[nq - 1], zu
        elif zu < qz[0] - gap:
            lo, hi = zu, qz[0]
        else:
            return 0.0, 0.0
        lo, hi = min(max(lo, zl), zr), min(max(hi, zl), zr)
        if not hi > lo:
            return 0.0, 0.0
        yt = y - m
        x1, x2 = hi - GOLDEN * (hi - lo), lo + GOLDEN * (hi - lo)
        f1, f2 = logf(fs, x1, yt, c, ib, kind), logf(fs, x2, yt, c, ib, kind)
        # the peak's width is at most the base's (its 0.15-0.85 quantile range) and, with
        # Gaussian noise, the noise's sc: a bracket PEAK_TOL of that places it well enough
        stop = PEAK_TOL * min(sc, qz[6] - qz[4]) if kind == 1 else PEAK_TOL * (qz[6] - qz[4])
        for _ in range(PEAK_ITER):
            if hi - lo < stop:
                break
            if f1 >= f2:  # the maximum is in [lo, x2]
                hi, x2, f2 = x2, x1, f1
                x1 = hi - GOLDEN * (hi - lo)
                f1 = logf(fs, x1, yt, c, ib, kind)
            else:
                lo, x1, f1 = x1, x2, f2
                x2 = lo + GOLDEN * (hi - lo)
                f2 = logf(fs, x2, yt, c, ib, kind)
        xs = 0.5 * (lo + hi)
        h = 1e-4 * min(sc, qz[nq - 1] - qz[0])
        curv = -(logf(fs, xs + h, yt, c, ib, kind) - 2.0 * logf(fs, xs, yt, c, ib, kind)
                 + logf(fs, xs - h, yt, c, ib, kind)) / (h * h)
        if not 0.0 < curv < math.inf:
            return 0.0, 0.0
        return xs, 1.0 / math.sqrt(curv)

    tail = getattr(sf, "tail_default", False)  # a constant of the compiled code
    # the family's functions inlined only in the loop over the nodes (to vectorise it),
    # called out of line elsewhere: the same bits, in half the compile time
    logpdf1, cdf1, sf1 = outlined(logpdf), outlined(cdf), outlined(sf)

    @njit(nogil=True, error_model="numpy")
    def release(m, c, fs, y, l, r, b, lay, kind, qz, offs, gx, gw, top, pts, near, vals, zs,
                hw):
        pk, pw = peak(fs, m, c, y, l, r, b, kind, qz, offs)
        nv, zl, zr = _nodes(m, c, y, l, r, b, lay, pk, pw, qz, offs, gx, gw, pts, near, zs,
                            hw)
        ib = 1.0 / b
        va, vb = (y - l) * ib, (y - r) * ib
        la = _log(cdf1(fs, zl)) + (-abs(va) if kind == 0 else -0.5 * va * va)
        lbn = -abs(vb) if kind == 0 else -0.5 * vb * vb
        far_r = False
        if tail:  # the default sf: its upper tail's integral below, only where it counts
            s_r = 1.0 - cdf1(fs, zr)
            far_r = s_r < SF_SWITCH
            lb = -math.inf if far_r else _log(s_r) + lbn
        else:
            lb = _log(sf1(fs, zr)) + lbn
        yt = y - m
        for k in range(nv):  # vectorised: no carried state
            z = zs[k]
            e = (yt - c * z) * ib
            vals[k] = logpdf(fs, z) + (-abs(e) if kind == 0 else -0.5 * e * e)
        # shift: a bound of the log integrand (log g <= top, noise <= 1), then the exact
        # maximum where that bound would underflow the sum
        mx = max(max(la, lb), top)
        s = _sum_exp(vals, hw, nv, mx) + _exp(la - mx) + _exp(lb - mx)
        if not 1e-200 < s < math.inf:  # rare: the nodes again, with their maximum
            mx = max(la, lb)
            for k in range(nv):
                z = zs[k]
                e = (yt - c * z) * ib
                vals[k] = logpdf1(fs, z) + (-abs(e) if kind == 0 else -0.5 * e * e)
                v = vals[k] + _log(hw[k])
                mx = v if v > mx else mx
            s = 0.0
            if mx > -math.inf:
                s = _sum_exp(vals, hw, nv, mx) + _exp(la - mx) + _exp(lb - mx)
        # S(z_r) < SF_SWITCH, where the default sf integrates the tail: 1 - cdf rounds
        # with an absolute error below CDF_ERR, so its atom's error is below
        # CDF_ERR g_b(y - r); where that is below ATOM_TOL of p, 1 - cdf is kept (it
        # changes log p by < 1e-12; the integral would take ~90 density evaluations)
        if far_r:
            if lbn + LOG_CDF_ERR > mx + _log(s) + LOG_ATOM_TOL:
                lb = _log(sf1(fs, zr)) + lbn
            else:
                lb = _log(s_r) + lbn
            if lb > mx:  # a new shift: the nodes' values (the score's) too
                f = _exp(mx - lb)
                for k in range(nv):  # (mx = -inf: the nodes hold logs of 0)
                    vals[k] = vals[k] * f if mx > -math.inf else 0.0
                s = s * f + 1.0
                mx = lb
            elif lb > -math.inf:
                s += _exp(lb - mx)
        if not (mx > -math.inf and s > 0.0):
            return False, mx, 0.0, nv
        return True, mx, s, nv

    return release


def make_loglik_sum(logpdf, cdf, sf):
    """sum_t log p(y_t | m, c) (module docstring) for a family's compiled base logpdf,
    cdf and sf, inlined in the kernels below (scratch as :func:`make_release`'s)."""
    release = make_release(logpdf, cdf, sf)

    @njit(inline="always", error_model="numpy")
    def loglik_sum(m, c, fs, y, l, r, b, lnorm, kind, qz, offs, gx, gw, top, pts, near,
                   vals, zs, hw):
        acc = 0.0
        for t in range(y.shape[0]):
            ok, mx, s, _ = release(m, c, fs, y[t], l[t], r[t], b[t],
                                   _layer_width(kind, y[t], l[t], r[t], b[t], c), kind, qz,
                                   offs, gx, gw, top, pts, near, vals, zs, hw)
            if not ok:
                acc = -math.inf
                continue
            acc += mx + _log(s) + lnorm[t]
        return acc

    return loglik_sum


def make_score(logpdf, cdf, sf):
    """grad_theta log p(y | m, c) of one release, compiled for a family's base logpdf,
    cdf and sf: a :class:`~dpbook.likelihood.compiled.CompiledScore` kernel, ``ctx`` =
    (state, kind, qz, offs, gx, gw, top, pts, near, vals, zs, hw) (:func:`engine_score`).

    Fisher's identity (Appendix C) for the density of eq. (7) in the module
    docstring's form: differentiating the integral's ends z_l = (l - m)/c and
    z_r = (r - m)/c gives g(z_r) g_b(y - r) dz_r - g(z_l) g_b(y - l) dz_l, which is
    minus the derivative of the atoms G(z_l) g_b(y - l) + S(z_r) g_b(y - r), so

        dp/dm = int g(z) d/dm g_b(y - m - c z) dz,   dp/dc = int z g(z) d/dm g_b(...) dz,

    d/dm g_b(e) = sign(e)/b g_b(e) (Laplace), e/b^2 g_b(e) (Gaussian): no derivative
    of the family is needed.  The density's quadrature (:func:`make_release`: its
    panels, ending at the kink z_u, and its shift) and two more weighted sums, with
    two changes that the moved derivative asks for.  The sums of two signs either side
    of z_u cancel, which multiplies the rule's relative error by up to c/b: the caller
    passes a finer rule (``SCORE_GL_NODES``).  With Gaussian noise and y beyond an end
    by d > b, the atom's derivative becomes a boundary layer of the integral at that
    end, of width b^2/(c d) in z (narrower than the noise's own scale b/c): panel ends
    in it (:func:`_layer`).  ok False where the density is 0 at every node and atom.
    Accuracy: see tests/test_gradient_score.py."""
    release = make_release(logpdf, cdf, sf)

    @njit(error_model="numpy")
    def score(y, l, r, b, m, c, ctx):
        state, kind, qz, offs, gx, gw, top, pts, near, vals, zs, hw = ctx
        lay = _layer_width(kind, y, l, r, b, c)
        ok, _, s, nv = release(m, c, state[0], y, l, r, b, lay, kind, qz, offs, gx, gw,
                               top, pts, near, vals, zs, hw)
        if not ok:
            return False, 0.0, 0.0
        ib = 1.0 / b
        yt = y - m
        g_m = 0.0
        g_c = 0.0
        for k in range(nv):  # vals[k]: the shifted, weighted integrand at zs[k]
            z = zs[k]
            e = yt - c * z
            if kind == 0:  # the nodes are inside panels: e != 0
                d = ib if e > 0.0 else -ib
            else:
                d = e * ib * ib
            g_m += d * vals[k]
            g_c += d * z * vals[k]
        return True, g_m / s, g_c / s

    return cached(score)


@njit(inline="always")
def _scratch(qz, offs, gx):
    """The scratch arrays of a loglik_sum: pts, near, vals, zs, hw."""
    nq, no, ng = qz.shape[0], offs.shape[0], gx.shape[0]
    npts = 3 + 2 * no + nq + LAYER.shape[0] + PEAK_STEPS.shape[0]
    nn = (npts - 1 + TAIL_SPLITS) * ng
    return (np.empty(npts), np.empty(2 * no + 1), np.empty(nn), np.empty(nn), np.empty(nn))


def make_kernel(logpdf, cdf, sf):
    """The compiled kernel for a family's compiled base logpdf, cdf and sf, for g0 <= g <
    g1 (it releases the GIL: threads run disjoint ranges): with one row of ``out``,
    out[0, g] = sum_t log p(y_t | theta[g, 0], theta[g, 1]) (the exact posterior's grid
    is its points in a row); with a row per release, out[t, g] = log p(y_t | theta[g])
    (the marginal SMC's reweighting by a block of releases)."""
    loglik_sum = make_loglik_sum(logpdf, cdf, sf)

    @njit(nogil=True, error_model="numpy")
    def kernel(g0, g1, state, theta, y, l, r, b, lnorm, kind, qz, offs, gx, gw, top, out):
        fs = state[0]
        pts, near, vals, zs, hw = _scratch(qz, offs, gx)
        step = y.shape[0] if out.shape[0] == 1 else 1  # releases summed per row of out
        for g in range(g0, g1):
            for j in range(out.shape[0]):
                s, e = j * step, (j + 1) * step
                out[j, g] = loglik_sum(theta[g, 0], theta[g, 1], fs, y[s:e], l[s:e],
                                       r[s:e], b[s:e], lnorm[s:e], kind, qz, offs, gx, gw,
                                       top, pts, near, vals, zs, hw)

    return cached(kernel)


_kernel = functools.cache(make_kernel)
_score_kernel = functools.cache(make_score)


@functools.cache
def _default_sf(logpdf, cdf):
    """:meth:`LocationScaleFamily.base_sf`'s rule compiled from the compiled base logpdf
    and cdf: 1 - cdf where S >= SF_SWITCH, else :func:`~dpbook.model.families.base.
    upper_tail`'s panels, stopped once a panel past 64 decay lengths adds < 1e-17 of the
    sum (the numpy rule sums all of them: the two agree to that).  The release density
    (:func:`make_release`) calls it only where 1 - cdf's rounding would show in p."""
    ends, (gx, gw) = SF_ENDS, SF_GL

    @njit(error_model="numpy")
    def lpdf(state, z):  # one call site: the primitive is inlined once
        return logpdf(state, z)

    @njit(error_model="numpy")
    def sf(state, z):
        s = 1.0 - cdf(state, z)
        if not s < SF_SWITCH:
            return s
        h = 1e-4 * max(1.0, abs(z))
        k = (lpdf(state, z) - lpdf(state, z + h)) / h
        lam = 1.0 / k if 0.0 < k < math.inf else max(1.0, abs(z))
        acc = 0.0
        for p in range(ends.shape[0] - 1):
            a = z + lam * ends[p]
            half = 0.5 * lam * (ends[p + 1] - ends[p])
            part = 0.0
            for i in range(gx.shape[0]):
                v = math.exp(lpdf(state, a + half * (1.0 + gx[i])))
                if v < math.inf:  # (nan and inf: nothing, as the numpy rule)
                    part += v * half * gw[i]
            acc += part
            if ends[p + 1] >= 64.0 and not part >= 1e-17 * acc:
                break
        return acc

    sf.tail_default = True  # make_release calls it only where the atom counts
    return sf


def _primitives(family):
    logpdf = compiled_primitive(family, "base_logpdf", _ARGS)
    cdf = compiled_primitive(family, "base_cdf", _ARGS)
    if type(family).base_sf is LocationScaleFamily.base_sf:  # the default's rule
        return logpdf, cdf, _default_sf(logpdf, cdf)
    return logpdf, cdf, compiled_primitive(family, "base_sf", _ARGS)


class _Setup:
    """What the compiled likelihood of a location-scale family and mechanism needs
    besides the releases: its kernels (grid and points), the family's numeric state, the
    base's quantiles (panel ends), the noise's half-widths, the Gauss-Legendre rule and
    a bound of log g."""

    def __init__(self, family, mech, prims):
        self.kernel = _kernel(*prims)
        self.prims = prims
        self.state = family_state(family)
        with np.errstate(divide="ignore"):
            self.qz = np.asarray(family.base_ppf(LEVELS), float)
        self.ok = bool(np.all(np.isfinite(self.qz)) and np.all(np.diff(self.qz) >= 0))
        self.offs = np.array([float(mech.tail(1.0, tol)) for tol in NOISE_TOLS])
        if self.ok:
            with np.errstate(all="ignore"):  # the base's largest log density, with a margin
                self.top = float(np.nanmax(family.base_logpdf(
                    np.linspace(self.qz[0], self.qz[-1], 20001)))) + 1.0
        self.gx, self.gw = np.polynomial.legendre.leggauss(GL_NODES)
        self.kind = KIND[type(mech)]

    def releases(self, y, l, r, eps):
        """(y, l, r, b, log of the noise density's constant) as the kernels take them."""
        y, l, r = kernel_arrays(y, l, r)
        b = (r - l) / eps
        lnorm = -np.log(2.0 * b) if self.kind == 0 else -np.log(b * math.sqrt(2 * math.pi))
        return y, l, r, b, lnorm

    def __call__(self, releases, theta, terms=False):
        """sum_t log p(y_t | theta_i) for each row of ``theta`` (k, 2), ``releases`` from
        :meth:`releases`; with ``terms``, the (n, k) array of the terms instead."""
        theta = np.ascontiguousarray(theta, dtype=float)
        out = np.empty((releases[0].size if terms else 1, theta.shape[0]))
        run_chunks(self.kernel, theta.shape[0], releases[0].size, self.state, theta,
                   *releases, self.kind, self.qz, self.offs, self.gx, self.gw, self.top, out)
        return out if terms else out[0]


def compiled_setup(family, mechanism, what):
    """A :class:`_Setup`, or None: not a location-scale family with a shipped mechanism,
    or a primitive that does not compile (named in one warning: ``what`` runs the numpy
    quadrature instead)."""
    mech = get_mechanism(mechanism)
    if not isinstance(family, LocationScaleFamily) or type(mech) not in KIND or \
            type(family).base_cdf is LocationScaleFamily.base_cdf:
        return None  # (without a cdf the numpy code says what is missing)
    try:
        prims = _primitives(family)
    except NotCompilable as e:
        warn_not_compiled(family, f"{what} of the {family.name} family runs "
                          f"the numpy quadrature, not the compiled engine: {e}.  To "
                          f"compile, write base_logpdf, base_cdf and base_sf with numpy or "
                          f"math functions of one value (no scipy but special.expit, ndtr, "
                          f"erf, erfc, gammaln); see dpbook.likelihood.compiled_quadrature",
                          stacklevel=5)
        return None
    # one per family class, numeric attributes and mechanism: the marginal SMC and the
    # checks ask at every step
    key = (family_key(family), type(mech))
    if key not in _SETUPS:
        setup = _Setup(family, mech, prims)
        _SETUPS[key] = setup if setup.ok else None
    return _SETUPS[key]


_SETUPS: dict = {}


def engine_loglik(family, mechanism, terms=False):
    """For :mod:`dpbook.backends` (``loglik_particles``): a function (y, l, r, eps,
    theta) -> sum_t log p(y_t | theta_i) for each row of ``theta`` (k, 2), compiled (the
    marginal SMC's reweighting and moves, the reliability check's reference points), or
    None (the numpy quadrature).  ``terms``: the (len(y), len(theta)) array of the terms
    log p(y_t | theta_i) instead (``loglik_terms``: a block of releases at once)."""
    setup = compiled_setup(family, mechanism, "the likelihood of the marginal SMC and the checks")
    if setup is None:
        return None

    def loglik(y, l, r, eps, theta):
        return setup(setup.releases(y, l, r, eps), theta, terms=terms)

    return loglik


engine_terms = functools.partial(engine_loglik, terms=True)


def engine_score(family, mechanism):
    """For :mod:`dpbook.backends` (``score``): the compiled score of one release
    (:func:`make_score`) as a :class:`~dpbook.likelihood.compiled.CompiledScore` (the
    online gradient's steps, Section 7), with the numpy quadrature's
    (:func:`dpbook.likelihood.quadrature.score`) where it cannot answer; or None."""
    setup = compiled_setup(family, mechanism, "the online gradient's score")
    if setup is None:
        return None
    mech = get_mechanism(mechanism)

    def fallback(y, l, r, eps, m, c):
        return quadrature.score(y, l, r, eps, (m, c), family, mech)

    # scratch of its own: one object per caller
    gx, gw = np.polynomial.legendre.leggauss(SCORE_GL_NODES)
    ctx = (setup.state, setup.kind, setup.qz, setup.offs, gx, gw, setup.top,
           *_scratch(setup.qz, setup.offs, gx))
    return CompiledScore(_score_kernel(*setup.prims), ctx, fallback)
