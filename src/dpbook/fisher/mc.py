"""Monte Carlo Fisher information of one release, eq. (8) with Algorithm 4: one engine
for every family and mechanism.

Paper, Section 5.1 and Appendix C.  The released value is Y = T_l^r(X) + b V with
X ~ P_theta, V the standard noise of the mechanism and b = (r - l)/eps (eq. 10).  Its
Fisher information F_{l,r}^eps(theta) (eq. 7) is estimated by eq. (8),
``F ~ (1/M) sum_j s_j s_j^T``, y_j ~ p(y | theta), each score s_j by Algorithm 4
(self-normalised importance sampling of Fisher's identity): K draws x_i ~ P_theta,
weights w_i = g_b(y_j - T_l^r(x_i)) (the mechanism's density) and
``s_j = sum_i w_i grad log p_theta(x_i) / sum_i w_i``.

One engine, primitives by model
-------------------------------
Everything but the model's primitives is written once: the draws' order, the sorted
samples, the cells below, eq. (13)'s grid over them (:func:`fisher_mc_pairs`), the
fresh-samples path and the standard errors.  The model enters through an engine object
(:class:`FisherEngine`, chosen by :func:`dpbook.backends.backend`) with three
primitives: the release draws (the latent z_j and the noise v_j of the M y's), the
importance draws (K latent values) and the score grad log p_theta(x) at x = m + c z:

* any location-scale family (Definition 2) with the Laplace or Gaussian mechanism:
  :class:`CompiledEngine`.  Its draws are keyed uniforms (:func:`dpbook.rng.uniforms`,
  key from ``rng``) through the family's ``base_ppf`` and the mechanism's inverse cdf,
  its score ``(-g'(z)/c, -(1 + z g'(z))/c)`` from ``base_dlogpdf``, both compiled from
  the family's numpy code by :func:`dpbook.vmath.compile_scalar` (a family written as
  chapter 7 writes one compiles as it is);
* the paper's normal family with the Laplace mechanism (Section 6):
  :class:`dpbook.fisher.normal_mc.PaperEngine`, which overrides only its draws (M
  normals, M Laplace, then the K or M x K normals, from the ``numpy.random.Generator``:
  the draws behind the paper's numbers) and its closed-form score ((x - mu)/sigma^2,
  ((x - mu)^2/sigma^2 - 1)/sigma), as a ``scipy.stats`` distribution overrides a generic
  method with a closed form;
* any other model (not location-scale, a mechanism of the user's, or a family whose
  primitive numba cannot compile: one warning names it): :class:`FisherEngine`, the same
  keyed uniforms through the family's own numpy ``ppf`` (``base_ppf``) and ``score``
  (a mechanism of the user's draws its noise with its ``sample``).

Fast path (``share_samples=True``, the default)
------------------------------------------------
Brute force costs M K weight evaluations per interval (5e10 for the paper's 1225-pair
grid at four eps).  Instead the K x-samples are shared by the M y's of one interval
(common random numbers: each score keeps exactly the distribution of Algorithm 4's
output, only the M scores become dependent through the shared x's).  For the Laplace
mechanism and d <= 2 (path 'sorted') with the samples sorted, the clipped values are
sorted too, the samples at or below l and at or above r are two lumps, and calling the
distinct positions p_0 < p_1 < ... with g-sums G_k, the weight of node i for
p_j <= y < p_{j+1} factorises as

    exp((p_i - y)/b) = exp((p_i - p_j)/b) exp((p_j - y)/b)           (i <= j)
    exp((y - p_i)/b) = exp((p_{j+1} - p_i)/b) exp((y - p_{j+1})/b)   (i > j)

so ``sum_i w_i G_k(i) = P_k[j] e^{d_lo} + Q_k[j+1] e^{d_hi}`` with recursive prefix sums
``P_k[i] = P_k[i-1] exp(-(p_i - p_{i-1})/b) + G_k[i]`` and suffix sums ``Q_k`` likewise:
every factor lies in (0, 1] and the common factor cancels in the ratio, so nothing
overflows for any eps.  Cost O(K log K) once per theta, O(K + M log K) per interval.
Any other mechanism or d (path 'dense') sums directly, O(M K), samples with the same
clipped value merged into one node.  ``share_samples=False`` is the literal Algorithm
4: fresh K samples for every y (O(M K)).

Random numbers
--------------
The release draws come first (M latent values, M noises), then the K importance draws
(M x K, in blocks of rows, with fresh samples), all standardised (x = m + c z), so the
same seed gives bit-identical output and Theorem 3's identity
``F_{m+ac, m+bc}(m, c) = F_{a,b}(0, 1)/c^2`` holds for the estimates too, up to
rounding.  :func:`fisher_mc_pairs` (eq. 13's grid) uses the draws of
``np.random.default_rng(seed)`` for every cell, so cell (l, r) is bit-identical to
``fisher_mc(l, r, ..., rng=np.random.default_rng(seed))``; cells run in a thread pool,
each computed by one thread in a fixed order: the result does not depend on threads.

Standard errors and bias
------------------------
``se_outer`` is the standard error of the mean of the M outer products s_j s_j^T
(ddof 1, over sqrt(M)) and ``se_outer_trace`` that of s_j^T s_j.  With shared samples
``se`` adds the error of the K samples by the delta method,

    se^2 = se_outer^2 + Var_i(H(x_i)) / K,
    H(x_i) = (1/M) sum_j [s_j d_ij^T + d_ij s_j^T],  d_ij = K w_ij/W_j (g(x_i) - s_j),

d_ij the influence of sample i on s_j (computed by the same sorted sums over the y's).
With fresh samples se = se_outer.  Both share the O(1/K) upward bias of eq. (8) with
Algorithm 4 scores, E[s_hat s_hat^T] = F + E[Var(s_hat | y)]: below 1e-3 of F_mumu
for Section 6's intervals at K = 10^4, a few per cent of F_sigmasigma for wide
intervals at small eps (~2/K at [-1, 1], eps = 1); it is not in se.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from numba import njit

from dpbook import vmath
from dpbook.fisher.estimates import FisherEstimate
from dpbook.fisher.mc_primitives import fisher_engine
from dpbook.fisher.shared_samples import (
    dense_shared_cell,
    dot4,
    outer_moments,
    run_cells,
    sorted_shared,
    unpack_cell,
)
from dpbook.model.families import as_family
from dpbook.model.mechanisms import get_mechanism
from dpbook.validation import (
    as_generator,
    check_eps,
    check_interval,
    check_mc_size,
    check_memory,
)

PATHS = ("auto", "sorted", "dense")
_ROWS_PER_CHUNK = 1 << 20  # elements per block in the fresh-samples path


def check_path(path):
    if path not in PATHS:
        raise ValueError(f"unknown path {path!r}; choose one of {', '.join(PATHS)}")
    return path


def _family_theta(family, theta):
    """theta as a tuple of floats; None -> (0, 1) for a location-scale family (its base
    distribution, Theorem 3), else family.default_theta()."""
    if theta is None:
        theta = (0.0, 1.0) if family.location_scale else family.default_theta()
    if np.ndim(theta) == 0:
        theta = (theta,)
    return family.check_theta(*np.asarray(theta, dtype=object).ravel())


def mc_setup(family, mechanism, theta):
    """(Family, Mechanism, theta as a checked tuple) of the arguments."""
    fam = as_family(family)
    return fam, get_mechanism(mechanism), _family_theta(fam, theta)


# --------------------------------------------------------------------------- the estimator
@njit(nogil=True, cache=True, error_model="numpy")
def _fresh_reduce(lw, g, s):
    """Algorithm 4 for rows of y's with their own samples: lw (rows, K) log weights, g
    (d, rows, K) the samples' scores; s (rows, d) = sum_i w_i g_i / sum_i w_i, the
    weights rescaled by the row's largest (fixed-order sums: deterministic)."""
    rows, K = lw.shape
    d = g.shape[0]
    w = np.empty(K)
    one = np.ones(K)
    for j in range(rows):
        mx = -math.inf
        for i in range(K):
            mx = max(mx, lw[j, i])
        for i in range(K):
            w[i] = vmath.exp(lw[j, i] - mx)
        W = dot4(w, one, K)
        for a in range(d):
            s[j, a] = dot4(w, g[a, j], K) / W


@njit(nogil=True, cache=True, error_model="numpy")
def _release_logk(kind, y, x, l, r, b, out):
    """out[j, i] = log g_b(y_j - T_l^r(x_ji)) up to a constant (kind 0 Laplace, 1 Gaussian)."""
    rows, K = x.shape
    for j in range(rows):
        for i in range(K):
            u = (y[j] - min(max(x[j, i], l), r)) / b
            out[j, i] = -abs(u) if kind == 0 else -0.5 * u * u


def _fresh_scores(eng, rng, l, r, eps, theta, y, K):
    """Literal Algorithm 4: fresh K samples for every y_j, in blocks of
    _ROWS_PER_CHUNK // K rows (block k drawn as part 1 + k)."""
    M, d = y.size, len(theta)
    b = (r - l) / eps
    m, c = eng.loc_scale(theta)
    s = np.empty((M, d))
    rows = max(1, _ROWS_PER_CHUNK // K)
    for k, lo in enumerate(range(0, M, rows)):
        hi = min(M, lo + rows)
        z = eng.sample_draws(rng, (hi - lo) * K, 1 + k).reshape(hi - lo, K)
        x = m + c * z
        lw = np.empty(x.shape)
        if eng.kind < 0:
            lw[...] = eng.mech.logpdf(y[lo:hi, None] - np.clip(x, l, r), b)
        else:
            _release_logk(eng.kind, y[lo:hi], x, l, r, b, lw)
        _fresh_reduce(lw, eng.grad(z.ravel(), theta).reshape(d, hi - lo, K), s[lo:hi])
    return s


def _shared_samples(eng, rng, theta, K):
    """The K shared importance samples sorted ascending (x = m + c z) and their scores
    (K, d)."""
    zs = np.sort(eng.sample_draws(rng, K, 0))
    m, c = eng.loc_scale(theta)
    return m + c * zs, eng.grad(zs, theta).T


def _resolve_path(path, mech, d):
    """'sorted' needs the Laplace mechanism (the factorising weights) and d <= 2."""
    ok = mech.name == "laplace" and d <= 2
    if path == "sorted" and not ok:
        raise ValueError("path 'sorted' needs the Laplace mechanism and at most 2 parameters")
    if path == "auto":
        return "sorted" if ok else "dense"
    return path


def fisher_mc_bytes(M, K, d=2) -> int:
    """Memory of one Monte Carlo estimate: the M draws of y with their scores and the K
    draws of x with their gradients (float64), with room for temporaries."""
    return 8 * 3 * (M + K) * (2 + d)


def fisher_mc(l, r, eps, theta=None, family=None, mechanism="laplace", M=1000, K=10000,
              rng=None, share_samples=True, path="auto"):
    """Monte Carlo Fisher information F_{l,r}^eps(theta), eq. (8) with Algorithm 4 scores.

    X ~ P_theta (``family``: a Family object or name, default the normal), Y =
    T_l^r(X) + ((r - l)/eps) V with V the standard noise of ``mechanism`` ('laplace',
    'gaussian' or a Mechanism).  M observations y_j ~ p(y|theta); each score by
    Algorithm 4 with K importance samples x_i ~ P_theta.  theta: a tuple (a scalar for
    one parameter); None -> (0, 1) for a location-scale family (the base distribution of
    eq. 13), else family.default_theta().

    share_samples=True: the K samples are shared by the M y's (common random numbers);
    path 'auto' takes 'sorted' (O(K + M log K) per interval) for the Laplace mechanism
    and d <= 2, 'dense' (O(M K), any mechanism and d) otherwise; both give the same
    numbers up to rounding.  share_samples=False: the literal Algorithm 4 (fresh
    samples per y, O(M K)) and se = se_outer.  ``rng``: Generator, int seed,
    SeedSequence or None; the same seed gives bit-identical output (draws in the module
    docstring's order).  Returns a :class:`FisherEstimate` with F of shape (d, d).
    """
    M, K = check_mc_size("M", M), check_mc_size("K", K)
    check_memory(f"the Monte Carlo Fisher information with M = {M}, K = {K}",
                 fisher_mc_bytes(M, K))
    eps = check_eps(eps)
    l, r = check_interval(l, r)
    if l.ndim or r.ndim:
        raise ValueError("fisher_mc takes scalar l and r; use fisher_grid for many "
                         "intervals")
    l, r = float(l), float(r)
    fam, mech, theta = mc_setup(family, mechanism, theta)
    path = _resolve_path(check_path(path), mech, fam.dim)
    rng = as_generator(rng)
    if share_samples:
        F, se, se_tr, so, so_tr = (a[0] for a in fisher_mc_pairs(
            np.array([l]), np.array([r]), eps, fam, mech, theta, M, K, rng, 1, path))
        if M > 1 and K > 1 and not np.all(np.isfinite(se)):
            # the delta-method kernel overflows when y falls more than ~700 noise scales
            # from every sample (very large eps with few samples)
            raise ValueError(f"the Monte Carlo standard error cannot be computed at eps = "
                             f"{eps:g} with K = {K} samples: use a larger K or the exact "
                             f"method")
        return FisherEstimate(F=F, se=se, se_trace=float(se_tr), se_outer=so,
                              se_outer_trace=float(so_tr))
    eng = fisher_engine(fam, mech, theta)
    m, c = eng.loc_scale(theta)
    z, v = eng.release_draws(rng, M)
    y = np.clip(m + c * z, l, r) + (r - l) / eps * v
    F, se, se_tr = outer_moments(_fresh_scores(eng, rng, l, r, eps, theta, y, K))
    return FisherEstimate(F=F, se=se, se_trace=se_tr, se_outer=se, se_outer_trace=se_tr)


def fisher_mc_pairs(A, B, eps, fam, mech, theta, M, K, seed, workers, path):
    """eq. (8) for the intervals (A[q], B[q]) on common random numbers (the draws of
    :func:`fisher_mc` from ``seed``, a Generator or what it takes, shared by every
    interval), ``workers`` threads: arrays (F, se, se_tr, se_o, se_o_tr) over q."""
    d = fam.dim
    path = _resolve_path(check_path(path), mech, d)
    rng = as_generator(seed, "seed")
    eng = fisher_engine(fam, mech, theta)
    m, c = eng.loc_scale(theta)
    z, v = eng.release_draws(rng, M)
    xs, gs = _shared_samples(eng, rng, theta, K)
    n = A.size
    F = np.empty((n, d, d))
    se = np.empty((n, d, d))
    so = np.empty((n, d, d))
    se_tr = np.empty(n)
    so_tr = np.empty(n)

    def store(q, res):
        F[q], se[q], se_tr[q], so[q], so_tr[q] = res

    if path == "sorted":
        out = run_cells(A, B, eps, m, c, z, v, sorted_shared(xs, gs), workers)
        for q in range(n):
            store(q, unpack_cell(out[q], d))
        return F, se, se_tr, so, so_tr
    xy = m + c * z

    def run(lo, hi):
        for q in range(lo, hi):
            store(q, dense_shared_cell(A[q], B[q], eps, mech, xy, v, xs, gs))

    bounds = [(lo, min(lo + 4, n)) for lo in range(0, n, 4)]
    if workers == 1 or len(bounds) <= 1:
        run(0, n)
    else:
        with ThreadPoolExecutor(max_workers=workers) as ex:
            for fu in [ex.submit(run, lo, hi) for lo, hi in bounds]:
                fu.result()
    return F, se, se_tr, so, so_tr
