"""SMC (Algorithms 2-3): reproducibility and agreement with the exact posterior."""

import numba
import numpy as np
import pytest

from dpbook.model.mechanisms import release
from dpbook.smc import SMC, smc_posterior
from dpbook.smc.resampling import systematic, systematic_keyed, thompson_index


def _data(n=30, eps=2.0, seed=0, width=8.0):
    rng = np.random.default_rng(seed)
    x = rng.normal(1.0, 1.5, n)
    l, r = np.full(n, 1.0 - width / 2), np.full(n, 1.0 + width / 2)
    return release(x, l, r, eps, rng), l, r, eps


@pytest.mark.slow
def test_same_seed_bit_identical_any_thread_count():
    y, l, r, eps = _data(40)
    old = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        a = smc_posterior(y, l, r, eps, n_particles=200, seed=11)
        numba.set_num_threads(min(2, numba.config.NUMBA_NUM_THREADS))
        b = smc_posterior(y, l, r, eps, n_particles=200, seed=11)
    finally:
        numba.set_num_threads(old)
    np.testing.assert_array_equal(a.mu, b.mu)
    np.testing.assert_array_equal(a.history.mean_sigma, b.history.mean_sigma)
    c = smc_posterior(y, l, r, eps, n_particles=200, seed=12)
    assert not np.array_equal(a.mu, c.mu)


def test_records_history():
    y, l, r, eps = _data(40)
    s = smc_posterior(y, l, r, eps, n_particles=100, seed=1)
    h = s.history
    assert len(h.mean_mu) == 40 and h.snapshot_t == [20, 40]
    assert all(1 <= e <= 100 + 1e-9 for e in h.ess)
    assert all(0 <= a <= 1 for a in h.acceptance[1:])


def _weighted_quantiles(x, w, qs):
    order = np.argsort(x)
    cdf = np.cumsum(w[order])
    return np.array([x[order][np.searchsorted(cdf, q * cdf[-1])] for q in qs])


QS = (0.25, 0.5, 0.75)


def _smc_within_tolerance(first_seed):
    """The check of test_smc_matches_exact_posterior with runs seeded first_seed, ..., +7:
    a list of the comparisons that fail."""
    from dpbook.posterior import exact_posterior

    y, l, r, eps = _data(30, eps=2.0, seed=5)
    post = exact_posterior(y, l, r, eps)
    ref = post.summary()
    # The posterior of sigma has infinite variance (clipping makes the likelihood tend to a
    # positive constant as sigma grows, and the IG(1, 1) prior gives p(sigma) ~ sigma^-3),
    # so sd(sigma) is not compared; its quartiles are.
    targets = {("mu", "mean"): ref["mu"]["mean"], ("mu", "sd"): ref["mu"]["sd"],
               ("sigma", "mean"): ref["sigma"]["mean"]}
    q_sigma = post.quantile(QS)[:, 1]
    grid_tol = {"mu": 0.01 * ref["mu"]["sd"], "sigma": 0.01 * (q_sigma[2] - q_sigma[0])}
    # R independent SMC runs; the tolerance is 4 standard errors of their average
    # (this includes the O(1/N) bias only as far as the runs' spread reveals it, so N is
    # large enough for the bias to be small against the posterior sd) plus 1% of the
    # posterior spread for the grid
    runs = [smc_posterior(y, l, r, eps, n_particles=2000, seed=s)
            for s in range(first_seed, first_seed + 8)]
    bad = []
    for (p, stat), target in targets.items():
        v = np.array([run.summary()[p][stat] for run in runs])
        se = v.std(ddof=1) / np.sqrt(len(v))
        if not abs(v.mean() - target) < 4 * se + grid_tol[p]:
            bad.append((p, stat, v.mean(), target, se))
    v = np.array([_weighted_quantiles(run.sigma, run.w, QS) for run in runs])
    se = v.std(axis=0, ddof=1) / np.sqrt(len(v))
    if not np.all(np.abs(v.mean(axis=0) - q_sigma) < 4 * se + grid_tol["sigma"]):
        bad.append(("sigma quartiles", v.mean(axis=0), q_sigma, se))
    return bad


def test_smc_matches_exact_posterior():
    """The paper kernel's posterior mean and sd of mu, mean and quartiles of sigma (n =
    30, eps = 2, N = 2000) against the exact grid posterior, within 4 standard errors of
    the average of 8 runs (from their spread) plus 1% of the posterior spread.

    False failures: (average - exact)/se is ~t_7, P(|t_7| > 4) = 0.5% per comparison,
    6 comparisons: at most 3% per run if the runs were unbiased; measured 2 of 20 sets
    of seeds (test_smc_tolerance_false_failure_rate_over_20_seeds), so about 10%: the
    O(1/N) bias, which the runs' spread does not reveal, is not negligible here.
    Smallest error detected: a bias of 4 se + 1% of the posterior spread half the time,
    8 se almost always, se being one run's Monte Carlo sd / sqrt(8)."""
    bad = _smc_within_tolerance(0)
    assert not bad, bad


@pytest.mark.slow
def test_smc_tolerance_false_failure_rate_over_20_seeds():
    """test_smc_matches_exact_posterior's check over 20 disjoint sets of 8 seeds: at most
    3% false failures each if unbiased, so 0.6 expected; measured 2 (seeds 24-31 and
    120-127).  Fails at 4 or more (P = 0.3% at a 3% rate, 13% at the measured 10%)."""
    failed = [k for k in range(20) if _smc_within_tolerance(8 * (k + 1))]
    print(f"{len(failed)} of 20 failed: {failed}")
    assert len(failed) < 4, failed


@pytest.mark.parametrize("kw, msg", [
    (dict(eps=0.0), "eps"), (dict(n_particles=1), "particles"),
])
def test_bad_construction(kw, msg):
    args = dict(eps=1.0, n_particles=10, n_max=5)
    args.update(kw)
    with pytest.raises(ValueError, match=msg):
        SMC(**args)


def test_bad_update():
    s = SMC(1.0, n_particles=10, n_max=2)
    with pytest.raises(ValueError, match="finite"):
        s.update(np.nan, 0.0, 1.0)
    with pytest.raises(ValueError, match="l < r"):
        s.update(0.5, 1.0, 1.0)


def _reference_update(smc, y, l, r):
    """One SMC.update (Algorithm 2 with Algorithm 3) written plainly, particle by
    particle, with the kernel's random streams and the MH test u < math.exp(d).
    Returns (paths (N, t+1), mu, sigma, log weights) after the update."""
    import math

    from dpbook import rng
    from dpbook.smc import paper_kernel as S

    t, N, key = smc.t, smc.N, smc.key
    ys, ls, rs = (np.append(v, w) for v, w in zip(smc.releases(), (y, l, r)))
    invb = smc.eps / (rs - ls)
    anc = np.arange(N)
    if t > 0:
        systematic_keyed(key, S.P_RESAMPLE, t, smc.w, anc)
    old = smc.paths()
    paths, mus, sigs, logw = np.zeros((N, t + 1)), np.zeros(N), np.zeros(N), np.zeros(N)
    for i in range(N):
        a = anc[i]
        m, sg = smc.mu[a], smc.sigma[a]
        st = [np.uint64(w) for w in rng.xoshiro_seed(key, 8 * t + S.P_MH, i)]
        s1 = s2 = 0.0
        for k in range(t):
            *st, w1 = rng.xoshiro_next(*st)
            *st, w2 = rng.xoshiro_next(*[np.uint64(v) for v in st])
            st = [np.uint64(v) for v in st]
            j, mag = rng.ziggurat_split(np.uint64(w1))
            z = rng.ziggurat_fast(j, mag)
            if np.isnan(z):
                st_slow = np.uint64(rng.stream_key(key, 8 * t + S.P_ZIG, (i << 32) | k))
                z = rng.ziggurat_slow(st_slow, j, mag)
            u = rng.u64_to_uniform(np.uint64(w2))
            xc, xp = old[a, k], m + sg * z
            d = (abs(ys[k] - min(max(xc, ls[k]), rs[k]))
                 - abs(ys[k] - min(max(xp, ls[k]), rs[k]))) * invb[k]
            x = xp if u < math.exp(d) else xc
            paths[i, k] = x
            s1 += x
            s2 += x * x
        m, sg, xt = S.gibbs_propagate(key, 8 * t + S.P_GIBBS, i, t, m, sg, s1, s2, smc._pr)
        paths[i, t], mus[i], sigs[i] = xt, m, sg
        logw[i] = -abs(ys[t] - min(max(xt, ls[t]), rs[t])) * invb[t]
    return paths, mus, sigs, logw


@pytest.mark.parametrize("eps, width", [(1.0, 60.0), (10.0, 2.0)])
def test_kernel_equals_plain_algorithm(eps, width):
    """The vectorised sweep gives bit for bit what the plain algorithm gives (several
    blocks of particles, narrow and wide intervals, accept rates from ~0.3 to ~1)."""
    import copy

    rng = np.random.default_rng(3)
    n, N = 12, 300
    y = rng.normal(50, 3, n)
    smc = SMC(eps, n_particles=N, n_max=n, seed=4)
    for t in range(n):
        c = 50 + rng.normal()
        l, r = c - width / 2, c + width / 2
        before = copy.deepcopy(smc)
        smc.update(y[t], l, r)
        paths, mus, sigs, logw = _reference_update(before, y[t], l, r)
        np.testing.assert_array_equal(smc.paths(), paths)
        np.testing.assert_array_equal(smc.mu, mus)
        np.testing.assert_array_equal(smc.sigma, sigs)
        w = np.exp(logw - logw.max())
        np.testing.assert_array_equal(smc.w, w / w.sum())


def test_exp_approx_accuracy():
    """The polynomial exp of the MH test is within a fifth of the tolerance that
    sends a decision to math.exp, over the whole clamped range."""
    from dpbook import vmath
    from dpbook.smc import paper_kernel as S

    d = np.concatenate([np.linspace(-700, 0, 200_001),
                        -np.random.default_rng(1).exponential(2, 200_000),
                        [-0.0, -1e-300, -0.34657359, -0.34657360]])
    got = np.array([S.exp_approx(v) for v in d])
    rel = np.abs(got / np.exp(d) - 1)
    assert rel.max() < vmath.EXP_TOL / 5, rel.max()
    assert S.exp_approx(0.0) == 1.0  # so u < 1 = e accepts every d >= 0


@pytest.mark.parametrize("n", [5, 64])
def test_systematic_resampling_counts_are_floor_or_ceil(n):
    """Systematic resampling (Algorithm 2, step 1) gives particle i floor(N w_i) or
    ceil(N w_i) copies, N in all, in index order, for any uniform: checked for both
    implementations on fixed weights (one heavy first particle, a tail of light ones)
    over 200 uniforms.  Deterministic: an off-by-one in the grid u + i moves one copy
    from the first particle to the last and fails here for every uniform."""
    w = np.r_[0.4, np.linspace(1.0, 0.05, n - 1)]
    w[1:] *= 0.6 / w[1:].sum()
    lo, hi = np.floor(n * w), np.ceil(n * w)
    for k in range(200):
        keyed = np.empty(n, np.int64)
        systematic_keyed(k, 3, 1, w, keyed)
        for anc in (keyed, systematic(np.random.default_rng(k), w)):
            counts = np.bincount(anc, minlength=n)
            assert np.all(np.diff(anc) >= 0) and counts.sum() == n
            assert np.all((counts >= lo) & (counts <= hi)), (k, counts, n * w)


def test_thompson_index_is_rng_choice_bit_for_bit():
    """Step 1 of Section 5.1 without rng.choice's checks: same index, same draw."""
    bad = 0
    for seed in range(300):
        g = np.random.default_rng(seed)
        n = int(g.integers(2, 500))
        w = g.random(n) ** g.uniform(0.1, 30)
        if seed % 7 == 0:  # all mass on one particle
            w = np.zeros(n)
            w[g.integers(n)] = 1.0
        w /= w.sum()
        ra, rb = np.random.default_rng(seed + 1000), np.random.default_rng(seed + 1000)
        bad += sum(ra.choice(n, p=w) != thompson_index(w, rb) for _ in range(5))
        bad += ra.random() != rb.random()
    assert bad == 0
