"""The compiled loops of the generic SMC (:class:`dpbook.smc.SMC`) for the shipped mechanisms.

Algorithm 3 steps 1-3 (the independent MH moves of every x_k, k < t, started from the
resampled ancestors' paths) and Algorithm 2 step 4 (the weights), with the Laplace or
Gaussian noise density written out (``KIND`` codes).  Any other Mechanism object runs
the same algorithm through its own vectorised ``logpdf`` in :mod:`dpbook.smc.resample_move`.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange


@njit(cache=True)
def _logg(kind, v, invb, lnorm):
    """log g_b(v) = lnorm - |v|/b (Laplace) or lnorm - (v/b)^2/2 (Gaussian)."""
    z = v * invb
    if kind == 0:
        return lnorm - abs(z)
    return lnorm - 0.5 * z * z


@njit(cache=True)
def _mh_row(kind, i, a, x_old, ll_old, x_new, ll_new, xp, e, y, l, r, invb, lnorm):
    """The MH moves of particle i, started from its ancestor a's path (see _mh_sweep)."""
    n_acc = 0
    for k in range(xp.shape[1]):
        xk = xp[i, k]
        lp = _logg(kind, y[k] - min(max(xk, l[k]), r[k]), invb[k], lnorm[k])
        lc = ll_old[a, k]
        if lp - lc > -e[i, k]:
            x_new[i, k] = xk
            ll_new[i, k] = lp
            n_acc += 1
        else:
            x_new[i, k] = x_old[a, k]
            ll_new[i, k] = lc
    return n_acc


def _mh_sweep(kind, anc, x_old, ll_old, x_new, ll_new, xp, e, y, l, r, invb, lnorm):
    """Algorithm 3 steps 1-3 for all particles i and k < t, after resampling: particle i
    starts from its ancestor's path x_old[anc[i]] (with its log-likelihoods ll_old) and
    x_k moves to xp[i, k] ~ P_theta w.p. min(1, exp(ll' - ll)), i.e. if
    ll' - ll > -e[i, k] with e ~ Exp(1).  Returns the number of accepted moves (the
    result does not depend on the number of threads: every (i, k) is independent)."""
    acc = np.zeros(xp.shape[0], np.int64)
    for i in prange(xp.shape[0]):
        acc[i] = _mh_row(kind, i, anc[i], x_old, ll_old, x_new, ll_new, xp, e, y, l, r,
                         invb, lnorm)
    return acc.sum()


# threads only pay off for large sweeps (starting them costs more than small ones)
mh_sweep_serial = njit(cache=True)(_mh_sweep)
mh_sweep_parallel = njit(cache=True, parallel=True)(_mh_sweep)
PARALLEL_MIN = 1 << 18  # particles x time steps


@njit(cache=True)
def log_weights(kind, x, y, l, r, invb, lnorm, out):
    """Step 4 of Algorithm 2: out[i] = log g_b(y_t - T(x_t^(i)))."""
    for i in range(x.shape[0]):
        out[i] = _logg(kind, y - min(max(x[i], l), r), invb, lnorm)


# ------------------------------------------------------------------ vector latent values
@njit(cache=True)
def _mh_row_vec(kind, i, a, x_old, ll_old, x_new, ll_new, mu, L, z, e, y, l, r, invb,
                lnorm):
    """_mh_row for a vector x_k (dpbook.multivariate), proposed as x'_k = mu + L z_k
    (the family's ``affine``: N_d(mu, L L^T) for the normal): its log-likelihood is the
    sum of the components' noise densities, one scale per release."""
    d = z.shape[2]
    xk = np.empty(d)
    n_acc = 0
    for k in range(z.shape[1]):
        lp = 0.0
        for j in range(d):
            acc = 0.0
            for m in range(j + 1):
                acc += L[i, j, m] * z[i, k, m]
            xk[j] = mu[i, j] + acc
            lp += _logg(kind, y[k, j] - min(max(xk[j], l[k, j]), r[k, j]), invb[k],
                        lnorm[k])
        lc = ll_old[a, k]
        if lp - lc > -e[i, k]:
            x_new[i, k] = xk
            ll_new[i, k] = lp
            n_acc += 1
        else:
            x_new[i, k] = x_old[a, k]
            ll_new[i, k] = lc
    return n_acc


@njit(cache=True)
def mh_sweep_vec(kind, anc, x_old, ll_old, x_new, ll_new, mu, L, z, e, y, l, r, invb, lnorm):
    """:func:`_mh_sweep` for vector latent values ((N, t, d) arrays), the proposals
    x'_k = mu_i + L_i z_ik computed here from particle i's (mu_i, L_i) and the standard
    normals z: the numbers of the family's ``sample`` from the same z, without writing
    them out."""
    acc = 0
    for i in range(z.shape[0]):
        acc += _mh_row_vec(kind, i, anc[i], x_old, ll_old, x_new, ll_new, mu, L, z, e, y,
                           l, r, invb, lnorm)
    return acc


@njit(cache=True)
def log_weights_vec(kind, x, y, l, r, invb, lnorm, out):
    """:func:`log_weights` for vector x_t^(i) (rows of x): the components' sum."""
    for i in range(x.shape[0]):
        s = 0.0
        for j in range(x.shape[1]):
            s += _logg(kind, y[j] - min(max(x[i, j], l[j]), r[j]), invb, lnorm)
        out[i] = s
