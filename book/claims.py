"""The checks of the ledger (book/ledger.py): one function per statement of the paper.

Each reads the package, a store or a chapter's glued numbers through the context, and
returns a :class:`ledger.Result`: the verdict, the evidence (value, Monte Carlo error,
sample size) and the parameters its rule is rendered from.
"""

from __future__ import annotations

import functools
import sys

import audit  # independent references (book/audit.py)
import numpy as np
from ledger import (  # noqa: F401 - REGISTRY: the checks below, for ledger.build
    FAILS,
    HOLDS,
    NOT_CHECKED,
    NOT_REPRODUCED,
    PAPER_B,
    PAPER_EPS,
    REGISTRY,
    UNDECIDED,
    NotInBuild,
    Result,
    all_verdict,
    claim,
    ev,
    fingerprint,
    holm,
)
from scipy import stats

EPS = PAPER_EPS
FULL_ONLY = ("quick mode's stores and streams are smaller than the paper's: the numbers "
             "are shown, the verdict needs the full build (`make book`)")


def _quick(ctx, res: Result) -> Result:
    """In quick mode a Section 6 verdict is not decided: say so, keep the numbers."""
    if ctx.full_only:
        res.note = "; ".join(filter(None, [res.note, f"would be '{res.verdict}' at quick "
                                           f"sizes; {FULL_ONLY}"]))
        res.verdict = NOT_CHECKED
        for c in res.cells:
            c["verdict"] = NOT_CHECKED
    return res


# ---- power: the smallest effect a statistical rule detects with 80% power -----------

Z80 = float(stats.norm.isf(0.2))
# a posterior whose sd is off by this factor, either way, is what a calibration test
# must detect for its non-rejection to say "calibrated"
PIT_TARGET = 1.5


@functools.lru_cache
def pit_power(n, level) -> float:
    """The factor k (>= 1) by which a normal posterior's sd must be off, too narrow or too
    wide, for a KS test of n PIT values at ``level`` to reject with 80% power (the PIT's
    cdf is then Phi(Phi^-1(u)/k) or Phi(k Phi^-1(u)); normal approximation, the
    statistic's se at most 1/(2 sqrt n)); inf beyond 20."""
    need = (stats.kstwobign.isf(level) + 0.5 * Z80) / np.sqrt(n)
    z = np.linspace(-6, 6, 1201)
    u = stats.norm.cdf(z)
    for k in np.exp(np.linspace(0, np.log(20), 600)):
        if min(np.max(np.abs(stats.norm.cdf(z / k) - u)),
               np.max(np.abs(stats.norm.cdf(z * k) - u))) >= need:
            return float(k)
    return float("inf")


def ratio_power(boot, level) -> float:
    """The RMSE ratio below 1 that a one-sided bootstrap test at ``level`` detects with
    80% power, from the bootstrap spread of the log ratio."""
    return float(np.exp(-(stats.norm.isf(level) + Z80) * np.std(np.log(boot))))


# ---- Section 2 and 3 -------------------------------------------------------------------

L_AUDIT, R_AUDIT = -1.5, 2.0
# inputs inside, at and far outside [l, r]
X_AUDIT = (L_AUDIT - 1e6, L_AUDIT - 1.0, L_AUDIT, 0.25, R_AUDIT, R_AUDIT + 1.0, R_AUDIT + 1e6)


def _shipped(x, eps, seed, k):
    """k releases of each value in ``x`` through the path Algorithm 1 takes
    (``privacy.population.Population.release``, which calls ``release_one``), the same
    noise stream for every value: an array (len(x), k)."""
    from dpbook.privacy.population import Population

    out = []
    for v in x:
        pop = Population(np.full(k, v), eps, np.random.default_rng(seed))
        out.append([pop.release(L_AUDIT, R_AUDIT) for _ in range(k)])
    return np.array(out)


def _ks_power(n, alpha):
    """The smallest relative error of a Laplace noise's scale that a KS test at level
    alpha on n draws detects with 80% power (normal approximation: the statistic at
    its largest gap has se at most 1/(2 sqrt(n)))."""
    need = (stats.kstwobign.isf(alpha) + 0.5 * stats.norm.isf(0.2)) / np.sqrt(n)
    k = np.linspace(1e-3, 1, 1000)
    x = np.linspace(0, 30, 3001)
    gap = [np.max(np.abs(np.exp(-x) - np.exp(-x / (1 + d)))) / 2 for d in k]
    return float(k[np.argmax(np.array(gap) >= need)])


@claim(id="theorem-2", paper_ref="Theorem 2; eq. (10)", category="Privacy",
       claim="Releasing a clipped value plus Laplace noise of scale (r - l)/ε is ε-DP.",
       chapter="ch-dp-basics",
       check="the release Algorithm 1 calls (`privacy.population.Population.release`, "
             "i.e. `model.mechanisms.release_one`) at {inputs} values inside, at and far "
             "outside [l, r] (up to 10^6 beyond), {k} draws each from one noise stream; "
             "the mechanism's density `model.mechanisms.noise_logpdf`",
       rule="per ε: the shipped release moves by at most (r - l)(1 + {tol:g}) between any "
            "two inputs (its sensitivity), so with noise of scale (r - l)/ε the loss is at "
            "most ε(1 + {tol:g}); the density's largest |log-ratio| between T = l and r at "
            "most ε(1 + {tol:g}).  The noise (ε = 2, {draws:,} shipped releases): KS "
            "against Laplace((r - l)/ε), p > {alpha}, with 80% power against a scale off "
            "by {power:.1%} (holds only if that is below {target:.0%}, else inconclusive)",
       params=dict(tol=1e-12, alpha=0.01, draws=20_000, k=400, inputs=len(X_AUDIT),
                   target=0.1))
def theorem_2(ctx, tol, alpha, draws, k, inputs, target):
    from dpbook.model.mechanisms import noise_logpdf

    l, r = L_AUDIT, R_AUDIT
    ys = np.linspace(-60, 60, 24_001)
    cells = []
    for eps in (0.5, *EPS):
        y = _shipped(X_AUDIT, eps, ctx.rng("theorem-2").integers(2**32), k)
        moved = float(np.max(y.max(0) - y.min(0)) / (r - l))
        dens = np.max(np.abs(noise_logpdf(ys, l, l, r, eps) - noise_logpdf(ys, r, l, r, eps)))
        ok = moved <= 1 + tol and dens <= eps * (1 + tol)
        cells.append({"cell": f"privacy loss, ε = {eps:g}", "verdict": HOLDS if ok else FAILS,
                      "evidence": {"largest move / (r - l)": ev(moved, n=k * inputs),
                                   "density's log-ratio / ε": ev(dens / eps, n=ys.size)}})
    eps, x = 2.0, np.resize(np.array(X_AUDIT), draws)
    from dpbook.privacy.population import Population

    pop = Population(x, eps, ctx.rng("theorem-2-noise"))
    noise = np.array([pop.release(l, r) for _ in range(draws)]) - np.clip(x, l, r)
    p = stats.kstest(noise, stats.laplace(scale=(r - l) / eps).cdf).pvalue
    power = _ks_power(draws, alpha)
    cells.append({"cell": "the shipped noise is Laplace((r - l)/ε), ε = 2",
                  "verdict": FAILS if p <= alpha else HOLDS if power <= target else UNDECIDED,
                  "evidence": {"KS p-value": ev(p, n=draws),
                               "scale error detected with 80% power": ev(power)}})
    return Result(all_verdict(cells), {}, dict(power=power), cells=cells)


@claim(id="privacy-audit", paper_ref="Theorem 2; eq. (10); Proposition 1",
       category="Privacy",
       claim="The release that ships is ε-DP: no pair of neighbouring inputs can be told "
             "apart beyond e^ε.",
       chapter="ch-dp-basics",
       check="{draws:,} releases at each of two neighbouring inputs, [l, r] = [-1.5, 2]: "
             "the interval's ends, and 100 widths beyond them; the events Y > t and "
             "Y <= t at {events} thresholds; `model.mechanisms.release` (vectorised), "
             "tied bit for bit to the shipped `Population.release` at {inputs} inputs",
       rule="the {conf:.0%} lower confidence bound on the loss (Clopper-Pearson on the two "
            "masses, Bonferroni over the events and the {cells_n} cells) at most ε in every "
            "cell: does not hold "
            "above it; holds only if the audit detects, with 80% power, a loss (√2 - 1)ε "
            "above ε (the noise-scale slip's), else inconclusive; and the shipped path "
            "equal to the vectorised one",
       params=dict(draws=10**6, alpha=0.05, events=21, inputs=len(X_AUDIT)))
def privacy_audit(ctx, draws, alpha, events, inputs):
    from dpbook.model import mechanisms

    l, r = L_AUDIT, R_AUDIT
    w = r - l
    seed = int(ctx.rng("privacy-audit").integers(2**32))
    shipped = _shipped(X_AUDIT, 2.0, seed, 200)
    vector = np.array([mechanisms.release(np.full(200, v), l, r, 2.0, np.random.default_rng(
        seed)) for v in X_AUDIT])
    same = bool(np.array_equal(shipped, vector))
    cells = [{"cell": "the shipped release equals the audited one", "verdict":
              HOLDS if same else FAILS, "evidence": {"bit-identical": ev(same, n=200 * inputs)}}]
    rng = ctx.rng("privacy-audit-draws")
    thresholds = l + w * np.arange(-8, events - 8) / 4
    cells_n = 2 * len(EPS)
    for eps in EPS:
        for name, x0, x1 in (("the ends", l, r), ("beyond", l - 100 * w, r + 100 * w)):
            y0 = mechanisms.release(np.full(draws, x0), l, r, eps, rng)
            y1 = mechanisms.release(np.full(draws, x1), l, r, eps, rng)
            lb, excess = audit.loss_lower_bound(y0, y1, thresholds, alpha / cells_n)
            verdict = FAILS if lb > eps else HOLDS if excess <= (2**0.5 - 1) * eps else \
                UNDECIDED
            cells.append({"cell": f"ε = {eps:g}, {name}", "verdict": verdict, "evidence": {
                "lower bound on the loss": ev(lb, n=draws),
                "excess detected with 80% power": ev(excess)}})
    return Result(all_verdict(cells), {}, dict(conf=1 - alpha, cells_n=cells_n), cells=cells)


@claim(id="proposition-1", paper_ref="Proposition 1; Theorem 1; Appendix A",
       category="Privacy",
       claim="Algorithm 1 is ε-DP: every update uses the releases, never the values.",
       chapter="ch-dp-basics",
       check="Algorithm 1 (`online.run_online`) run twice: on a population, then on a "
             "replay of its releases whose hidden values are different",
       rule="intervals and posterior particles bit-identical over {n} releases, "
            "{particles} particles",
       params=dict(n=100, particles=200))
def proposition_1(ctx, n, particles):
    eps = 2.0
    from dpbook.online import run_online
    from dpbook.privacy.policies import AdaptivePolicy
    from dpbook.privacy.population import normal_population


    class Replay:  # other hidden values, the same releases
        def __init__(self, y):
            self.y, self.k, self.eps, self.mechanism = list(y), 0, eps, "laplace"
            self.values = -np.asarray(y)  # never to be read

        def release(self, l, r):
            self.k += 1
            return self.y[self.k - 1]

        def __len__(self):
            return len(self.y) - self.k

    policy = AdaptivePolicy(-0.18, 0.18)
    one = run_online(normal_population(n, 50, 10**0.5, eps, seed=5), policy, n, particles,
                     seed=9)
    two = run_online(Replay(one.y), policy, n, particles, seed=9)
    same = bool(np.array_equal(one.l, two.l) and np.array_equal(one.r, two.r)
                and np.array_equal(one.smc.theta, two.smc.theta)
                and np.array_equal(one.smc.w, two.smc.w))
    return Result(HOLDS if same else FAILS, {"bit-identical": ev(same, n=n)})


@claim(id="lemmas-1-2", paper_ref="Lemmas 1-2; Appendix B", category="Theorems",
       claim="Clipping to [ca + m, cb + m] and adding noise keeps a location-scale "
             "family: p(y | m, c) = g((y - m)/c)/c.",
       chapter="ch-location-scale",
       check="at (m, c) in the original coordinates, from scipy's distribution (`book/"
             "audit.py`): the clipped variable's cdf (scipy's mass below l plus the "
             "quadrature of its density from l), and the release's density (the clipped "
             "masses and the quadrature of density times noise); against dpbook's base "
             "functions at (0, 1): `family.base_cdf` of (x - m)/c (Lemma 1) and "
             "`likelihood.quadrature.log_density` at (0, 1) minus log c (Lemma 2), for "
             "three families at {points} points and three (m, c)",
       rule="both identities to {tol:g} relative at every point",
       params=dict(tol=1e-9, points=39))
def lemmas(ctx, tol, points):
    from dpbook.likelihood.quadrature import log_density
    from dpbook.model.families import get_family

    a, b, eps = -0.7, 1.1, 2.0
    z = np.linspace(-3, 3, points // 3)
    u = np.linspace(a, b, points // 3, endpoint=False)  # inside [a, b): Lemma 1's cdf
    cells = []
    for name, make in audit.SCIPY_FAMILIES.items():
        fam = get_family(name)
        worst1 = worst2 = 0.0
        for m, c in ((0.0, 1.0), (50.0, 3.0), (-4.0, 0.2)):
            d, l, r = make(m, c), c * a + m, c * b + m
            x = c * u + m
            # from l to x in two panels split at m (the Laplace density's kink)
            pts = np.stack([np.full_like(x, l), np.clip(m, l, x), x], axis=-1)
            nodes, w = audit.gl_nodes(pts, 48)
            cdf = d.cdf(l) + np.sum(w * d.pdf(nodes), axis=-1)
            worst1 = max(worst1, float(np.max(np.abs(cdf / fam.base_cdf(u) - 1))))
            dens = audit.release_density(c * z + m, l, r, eps, d, m)
            base = log_density(z, a, b, eps, (0.0, 1.0), family=fam) - np.log(c)
            worst2 = max(worst2, float(np.max(np.abs(np.exp(base) / dens - 1))))
        cells.append({"cell": name, "verdict": HOLDS if max(worst1, worst2) <= tol else FAILS,
                      "evidence": {"Lemma 1 (cdf), largest relative difference": ev(worst1),
                                   "Lemma 2 (density), largest relative difference": ev(
                                       worst2, n=3 * z.size)}})
    return Result(all_verdict(cells), {}, cells=cells)


@claim(id="theorem-3", paper_ref="Theorem 3; eq. (11)-(13)", category="Theorems",
       claim="c² F at (ac + m, bc + m) and (m, c) equals F at (a, b) and (0, 1): one best "
             "(a, b) serves every (m, c).",
       chapter="ch-location-scale",
       check="`book/audit.py`: the Fisher information (eq. 7) by quadrature in the "
             "original coordinates (scipy's distribution at (m, c), finite-difference "
             "scores: no rescaling, no closed form) at {pairs} random (a, b) and three "
             "(m, c) besides (0, 1), ε = 2 and 10, for the normal, Laplace and Student-t "
             "(df 5) families; and the same at (0, 1) against dpbook's `fisher_exact`",
       rule="holds: c² F(m, c) = F(0, 1) to {tol:g} relative (the whole matrix: the μ and "
            "σ scores), the order of the pairs by F[μ, μ], F[σ, σ] and the trace the same "
            "at every (m, c), and the quadrature's own error (its change at half the "
            "nodes) below {tol:g}; does not hold: a difference beyond {tol:g}; "
            "inconclusive: the quadrature's error above it.  The code's cell: dpbook's "
            "`fisher_exact` equal to the quadrature at (0, 1) to {tol:g}",
       params=dict(tol=1e-8, pairs=5))
def theorem_3(ctx, tol, pairs):
    from dpbook.fisher import fisher_exact
    from dpbook.model.families import get_family

    rng = ctx.rng("theorem-3")
    ab = np.sort(rng.uniform(-2.5, 2.5, size=(pairs, 2)), axis=1)
    thetas = ((50.0, 10**0.5), (-3.0, 0.1), (1e3, 30.0))
    cells = []
    for name, make in audit.SCIPY_FAMILIES.items():
        fam = get_family(name)
        worst = code = err = 0.0
        same = True
        for eps in (2.0, 10.0):
            F0 = [audit.fisher_by_quadrature(a, b, eps, make, 0.0, 1.0, n=32)[0] for a, b in ab]
            half = audit.fisher_by_quadrature(*ab[0], eps, make, 0.0, 1.0, n=16)[0]
            err = max(err, float(np.max(np.abs(half - F0[0])) / np.max(np.abs(F0[0]))))
            mine = fisher_exact(ab[:, 0], ab[:, 1], eps, family=fam)
            code = max(code, max(float(np.max(np.abs(m - f)) / np.max(np.abs(f)))
                                 for m, f in zip(mine, F0)))
            order = [np.argsort([sc(f) for f in F0]) for sc in _SCORES]
            for m, c in thetas:
                F = [c * c * audit.fisher_by_quadrature(c * a + m, c * b + m, eps, make, m,
                                                        c, n=32)[0] for a, b in ab]
                worst = max(worst, max(float(np.max(np.abs(f - g)) / np.max(np.abs(g)))
                                       for f, g in zip(F, F0)))
                same &= all(np.array_equal(np.argsort([sc(f) for f in F]), o)
                            for sc, o in zip(_SCORES, order))
        verdict = FAILS if worst > tol or not same else UNDECIDED if err > tol else HOLDS
        cells += [{"cell": f"{name}: Theorem 3", "verdict": verdict, "evidence": {
                      "largest relative difference of c² F(m, c) and F(0, 1)": ev(worst),
                      "same order of the pairs (3 scores)": ev(bool(same)),
                      "quadrature's error estimate": ev(err)}},
                  {"cell": f"{name}: dpbook's fisher_exact", "verdict":
                      HOLDS if code <= tol else FAILS,
                   "evidence": {"largest relative difference": ev(code, n=2 * pairs)}}]
    return Result(all_verdict(cells), {}, cells=cells)


_SCORES = (lambda f: f[0, 0], lambda f: f[1, 1], np.trace)


# ---- Section 5 -------------------------------------------------------------------------

@claim(id="eq-8", paper_ref="eq. (8) with Algorithm 4 against eq. (7)",
       category="Algorithms",
       claim="The Monte Carlo Fisher information (eq. 8, Algorithm 4 scores) estimates "
             "eq. (7).",
       chapter="ch-fisher-grid",
       check="`fisher.fisher_mc` against `fisher.fisher_exact` at {cells_n} random "
             "intervals, ε = 2",
       rule="at most {frac:.0%} of intervals with |z| > 3 at K = {K_big:,} (z: difference "
            "over the Monte Carlo se, M = {M}); the mean |bias| smaller at K = {K_big:,} "
            "than at K = {K_small:,}; the mean z times √n within ±3; holds only if that "
            "sees a relative bias of {target:.0%} common to the intervals with 80% power, "
            "else inconclusive",
       params=dict(frac=0.01, K_big=10_000, K_small=1000, M=1000, target=0.05))
def eq_8(ctx, frac, K_big, K_small, M, target):
    from dpbook.fisher import fisher_exact, fisher_mc

    rng = ctx.rng("eq-8")
    n_cells, eps = (24 if ctx.full_only else 60), 2.0
    ab = np.sort(rng.uniform(-3, 3, size=(n_cells, 2)), axis=1)
    exact = fisher_exact(ab[:, 0], ab[:, 1], eps)[:, 0, 0]
    z, bias = {}, {}
    for K in (K_small, K_big):
        est = [fisher_mc(a, b, eps, M=M, K=K, rng=rng) for a, b in ab]
        F = np.array([e.F[0, 0] for e in est])
        se = np.array([e.se[0, 0] for e in est])
        z[K], bias[K] = (F - exact) / se, np.mean(np.abs(F - exact) / exact)
        if K == K_big:  # a relative bias common to the intervals, seen with 80% power
            seen = float((3 + Z80) / (np.sqrt(n_cells) * np.mean(exact / se)))
    big = float(np.mean(np.abs(z[K_big]) > 3))
    pooled = float(np.mean(z[K_big]) * np.sqrt(n_cells))
    verdict = FAILS if big > frac or abs(pooled) > 3 or bias[K_big] >= bias[K_small] \
        else HOLDS if seen <= target else UNDECIDED
    return Result(verdict, {
        "share of |z| > 3 at K = 10^4": ev(big, n=n_cells),
        f"mean |relative error|, K = {K_small:,}": ev(bias[K_small], n=n_cells),
        f"mean |relative error|, K = {K_big:,}": ev(bias[K_big], n=n_cells),
        "mean z × √n": ev(pooled, n=n_cells),
        "common relative bias detected with 80% power": ev(seen)},
        dict(cells_n=n_cells))


@claim(id="algorithm-4", paper_ref="Algorithm 4; Fisher's identity (Appendix C)",
       category="Algorithms",
       claim="Algorithm 4's Monte Carlo gradient estimates the score of one release.",
       chapter="ch-location-scale",
       check="Algorithm 4 as printed (weights Laplace(y - T(x))) against the exact score "
             "`likelihood.normal_laplace.score`",
       rule="does not hold: a component beyond {k} se of the exact score at one of "
            "{points} (y, θ) points ({draws:,} draws each) with Holm p under {alpha}; "
            "holds: none, and a bias of {target:.0%} of the score's sd (over releases at "
            "that θ: the root of F's diagonal) seen with 80% power at every point "
            "(({k} + 0.84) se); else inconclusive",
       params=dict(k=3, points=20, draws=200_000, alpha=0.01, target=0.05))
def algorithm_4(ctx, k, points, draws, alpha, target):
    eps, l, r = 2.0, -1.0, 1.5
    from dpbook.fisher import fisher_exact
    from dpbook.likelihood.normal_laplace import score

    rng = ctx.rng("algorithm-4")
    pvals, worst, seen = [], 0.0, 0.0
    at = np.column_stack([rng.normal(0, 1, points), rng.uniform(0.5, 2, points),
                          rng.normal(0, 2, points)])  # (μ, σ, y), then the draws
    for mu, sigma, y in at:
        x = rng.normal(mu, sigma, draws)  # step 2
        w = np.exp(-np.abs(y - np.clip(x, l, r)) * eps / (r - l))  # step 3
        g = np.stack([(x - mu) / sigma**2, ((x - mu) ** 2 - sigma**2) / sigma**3])
        est = (g * w).sum(1) / w.sum()  # step 4
        # delta-method se of the self-normalised estimate
        se = np.sqrt(((g - est[:, None]) ** 2 * w**2).sum(1)) / w.sum()
        exact = np.asarray(score(y, l, r, eps, mu, sigma)).ravel()[:2]
        zz = np.abs(est - exact) / se
        worst = max(worst, float(zz.max()))
        # the bias this point would show with 80% power, against the score's spread
        # over releases at this θ (the root of the Fisher information's diagonal)
        spread = np.sqrt(np.diag(fisher_exact(l, r, eps, theta=(mu, sigma))))
        seen = max(seen, float(np.max((k + Z80) * se / spread)))
        pvals.append(min(1.0, 2 * 2 * stats.norm.sf(zz.max())))
    p = holm(pvals)
    verdict = FAILS if worst > k and p.min() <= alpha else HOLDS if seen <= target else \
        UNDECIDED
    return Result(verdict, {"largest |z|": ev(worst, n=points),
                            "smallest Holm p": ev(float(p.min()), n=points),
                            "bias detected with 80% power / score's sd": ev(seen)})


@claim(id="fisher-falls-with-eps", paper_ref="Section 5, after eq. (7)",
       category="Section 5",
       claim="The Fisher information is smaller for a smaller ε.",
       chapter="ch-fisher-grid",
       check="`fisher.fisher_grid` (eq. 7) at ε = 1, 2, 5, 10 on the 50 × 50 grid",
       rule="no grid cell where F[μ, μ] at a larger ε is below its value at a smaller ε")
def fisher_falls(ctx):
    from dpbook.fisher import fisher_grid

    S = np.array([fisher_grid(e).scores() for e in EPS])
    ok = ~np.isnan(S[0])
    bad = int(np.sum(np.diff(S[:, ok], axis=0) < 0))
    return Result(HOLDS if bad == 0 else FAILS,
                  {"cells violating": ev(bad, n=int(ok.sum()) * (len(EPS) - 1))})


def _best(eps):
    from dpbook.fisher import best_interval

    return best_interval(eps)


@claim(id="best-interval-widens", paper_ref="Section 6 (the best intervals)",
       category="Section 5",
       claim="The best interval widens as ε grows.",
       chapter="ch-fisher-grid", check="`fisher.best_interval` (eq. 13, exact) at each ε",
       rule="b* - a* strictly increases over ε = 1, 2, 5, 10")
def widens(ctx):
    width = [(_best(e)["b"] - _best(e)["a"]) for e in EPS]
    return Result(HOLDS if np.all(np.diff(width) > 0) else FAILS,
                  {f"b* - a* at ε = {e:g}": ev(w) for e, w in zip(EPS, width)})


@claim(id="best-interval-symmetric", paper_ref="Section 6 (the best intervals)",
       category="Section 5",
       claim="For N(0, 1) the best interval is symmetric, [-b*, b*].",
       chapter="ch-fisher-grid", check="`fisher.best_interval` (eq. 13, exact) at each ε",
       rule="|a* + b*| at most half a grid step ({half:.3f}) at every ε",
       params=dict(half=6 / 49 / 2))
def symmetric(ctx, half):
    cells = [{"cell": f"ε = {e:g}", "verdict": HOLDS if abs(_best(e)["a"] + _best(e)["b"])
              <= half + 1e-12 else FAILS,
              "evidence": {"a* + b*": ev(_best(e)["a"] + _best(e)["b"])}} for e in EPS]
    return Result(all_verdict(cells), {}, cells=cells)


@claim(id="best-interval-unique", paper_ref="Section 5.1 ('if the maximiser ... is unique "
       "for every θ')", category="Section 5",
       claim="The best interval, the maximiser of F[μ, μ] over (a, b), is unique (Thompson "
             "sampling's premise; for every θ by Theorem 3).",
       chapter="ch-fisher-grid",
       check="F[μ, μ] (eq. 7, `fisher.fisher_exact`) on a {grid} × {grid} grid of "
             "[-3, 3]², a < b: its local maxima, each refined by Nelder-Mead, at each ε",
       rule="holds: the refined local maxima all end at one (a, b) (to {tol:g}); does not "
            "hold: two ends apart by more than {tol:g}, the lower within {ftol:.0e} of the "
            "higher (two best intervals).  The flatness is shown, not judged: the range of "
            "b over the cells within 1% of the maximum",
       params=dict(grid=41, tol=1e-3, ftol=1e-6))
def unique(ctx, grid, tol, ftol):
    from scipy.optimize import minimize

    from dpbook.fisher import fisher_exact

    g = np.linspace(-3, 3, grid)
    a, b = np.meshgrid(g, g, indexing="ij")
    cells = []
    for e in EPS:
        F = np.full(a.shape, -np.inf)
        ok = a < b
        F[ok] = fisher_exact(a[ok], b[ok], e)[:, 0, 0]
        pad = np.pad(F, 1, constant_values=-np.inf)
        nb = np.stack([pad[1 + i:grid + 1 + i, 1 + j:grid + 1 + j] for i in (-1, 0, 1)
                       for j in (-1, 0, 1) if i or j])
        starts = np.argwhere(ok & (F >= nb.max(0)))

        def neg(v, e=e):
            return -fisher_exact(v[0], v[1], e)[0, 0] if v[0] < v[1] else 0.0

        ends = [minimize(neg, [g[i], g[j]], method="Nelder-Mead",
                         options=dict(xatol=tol / 10, fatol=1e-12)) for i, j in starts]
        best = min(ends, key=lambda o: o.fun)
        rivals = [o for o in ends if np.max(np.abs(o.x - best.x)) > tol
                  and o.fun <= best.fun * (1 - ftol)]  # fun is -F: as high as the best
        near = b[ok & (F >= 0.99 * F[ok].max())]
        cells.append({"cell": f"ε = {e:g}", "verdict": FAILS if rivals else HOLDS,
                      "evidence": {"grid local maxima": ev(len(starts)),
                                   "refined b*": ev(float(best.x[1])),
                                   "refined a* + b*": ev(float(best.x.sum())),
                                   "maximisers apart": ev(len(rivals)),
                                   "b within 1% of the maximum": ev(
                                       f"[{near.min():.2f}, {near.max():.2f}]")}})
    return Result(all_verdict(cells), {}, cells=cells)


@claim(id="exact-fisher", paper_ref="Section 5 ('The exact calculation of F ... is not "
       "possible in general')", category="Section 5",
       claim="The Fisher information of eq. (7) cannot be calculated exactly, hence the "
             "Monte Carlo estimate of eq. (8).",
       chapter="ch-fisher-grid",
       check="eq. (7) by dpbook's `fisher.fisher_exact` (quadrature of the closed-form or "
             "numerically integrated density and score) against the independent "
             "quadrature of `book/audit.py` at {pairs} intervals, ε = 2, for the normal, "
             "Laplace and Student-t families; eq. (8) (M = 1000, K = 10^4) beside them",
       rule="does not reproduce: the two deterministic computations agree to {tol:g} "
            "relative (eq. 7 is calculated, to quadrature precision); holds: they do not "
            "(no calculation reaches that precision)",
       params=dict(pairs=3, tol=1e-8))
def exact_fisher(ctx, pairs, tol):
    import time

    from dpbook.fisher import fisher_exact, fisher_mc
    from dpbook.model.families import get_family

    ab = np.sort(ctx.rng("exact-fisher").uniform(-2.5, 2.5, size=(pairs, 2)), axis=1)
    worst, took = 0.0, []
    for name, make in audit.SCIPY_FAMILIES.items():
        for a, b in ab:
            t0 = time.perf_counter()
            mine = fisher_exact(a, b, 2.0, family=get_family(name))
            took.append(time.perf_counter() - t0)
            ref = audit.fisher_by_quadrature(a, b, 2.0, make, 0.0, 1.0, n=32)[0]
            worst = max(worst, float(np.max(np.abs(mine - ref)) / np.max(np.abs(ref))))
    t0 = time.perf_counter()
    mc = fisher_mc(*ab[0], 2.0, M=1000, K=10_000, rng=ctx.rng("exact-fisher-mc"))
    mc_time = time.perf_counter() - t0
    exact = fisher_exact(*ab[0], 2.0)[0, 0]
    return Result(NOT_REPRODUCED if worst <= tol else HOLDS, {
        "eq. (7): largest relative difference of two quadratures": ev(worst, n=3 * pairs),
        "eq. (7): median milliseconds per matrix": ev(1e3 * float(np.median(took))),
        "eq. (8): relative se of F[μ, μ]": ev(float(mc.se[0, 0] / exact)),
        "eq. (8): relative error of F[μ, μ]": ev(float(mc.F[0, 0] / exact - 1)),
        "eq. (8): seconds": ev(mc_time)},
        note="the paper's route (eq. 8) is what the authors could do; this build "
             "computes eq. (7) by one-dimensional quadrature, which is what costs the "
             "paper its best intervals at ε = 5 and 10 (the 'best-intervals' row)")


@claim(id="best-intervals", paper_ref="Section 6: [-0.06, 0.06], [-0.12, 0.12], "
       "[-0.54, 0.54], [-0.96, 0.96]", category="Section 6",
       claim="The best intervals for ε = 1, 2, 5, 10 are the paper's.",
       chapter="ch-fisher-grid",
       check="`fisher.best_interval` (eq. 13, exact) against F at the paper's interval",
       rule="holds: b* within one grid step ({step:.3f}) of the paper's; otherwise does not "
            "reproduce, with the cost of the paper's interval: the share of F[μ, μ] lost "
            "there against b*",
       params=dict(step=6 / 49))
def best_intervals(ctx, step):
    from dpbook.fisher import fisher_exact

    cells = []
    for e in EPS:
        best, b = _best(e), PAPER_B[e]
        lost = 1 - float(fisher_exact(-b, b, e)[0, 0] / best["score"])
        cells.append({"cell": f"ε = {e:g}", "verdict": HOLDS if abs(best["b"] - b) <= step
                      + 1e-12 else NOT_REPRODUCED, "evidence": {
            "b (paper)": ev(b), "b* (this build)": ev(best["b"]),
            "information lost at the paper's interval": ev(lost)}})
    return Result(all_verdict(cells), {}, cells=cells,
                  note="the objective is flat near its maximum; the paper searched it by "
                       "Monte Carlo (eq. 8) and the authors' code with its noise-scale "
                       "slip, this build exactly (eq. 7): see {ref}`reproduction-notes`")


# ---- Section 6: the stores -------------------------------------------------------------

def _paired_boot(err_a, err_b, B, rng):
    """Bootstrap of the RMSE ratio a/b over runs (paired): ratio, one-sided p-values."""
    idx = rng.integers(0, len(err_a), size=(B, len(err_a)))
    ra = np.sqrt((err_a[idx] ** 2).mean(1))
    rb = np.sqrt((err_b[idx] ** 2).mean(1))
    ratio = float(np.sqrt(np.mean(err_a**2) / np.mean(err_b**2)))
    boot = ra / rb
    return ratio, (np.sum(boot >= 1) + 1) / (B + 1), (np.sum(boot <= 1) + 1) / (B + 1), boot


def _errors(est, method, eps, p):
    g = est[(est.method == method) & (est.eps == eps)].sort_values("run")
    return g.run.to_numpy(), (g[f"{p}_hat"] - g[f"{p}_true"]).to_numpy()


@claim(id="figure-3", paper_ref="Section 6, Figure 3", category="Section 6",
       claim="SMC-adaptive beats SMC-non-adaptive and MHAAR for μ and σ at every ε.",
       chapter="ch-boxplots",
       check="the Section 6 store (`results/paper`): RMSE over the runs, paired bootstrap "
             "of the RMSE ratio (adaptive over the other), {B:,} resamples",
       rule="holds: the ratio's bootstrap p-value for 'below 1' under {alpha} after Holm "
            "over the {cells} cells; does not hold: the same for 'above 1'; otherwise "
            "inconclusive (each cell states the ratio it detects with 80% power, at "
            "{alpha} / {cells})",
       params=dict(B=4000, alpha=0.05))
def figure_3(ctx, B, alpha):
    stored = ctx.store("paper")
    est, rng = stored[0], ctx.rng("figure-3")
    rows = []
    for e in sorted(est.eps.unique()):
        for p in ("mu", "sigma"):
            runs, ea = _errors(est, "smc-adaptive", e, p)
            for other in ("smc-fixed", "mhaar"):
                runs_b, eb = _errors(est, other, e, p)
                assert np.array_equal(runs, runs_b), "runs must pair"
                ratio, p_below, p_above, boot = _paired_boot(ea, eb, B, rng)
                rows.append((e, p, other, ratio, p_below, p_above, boot, len(runs)))
    adj_below = holm([r[4] for r in rows])
    adj_above = holm([r[5] for r in rows])
    cells = []
    for (e, p, other, ratio, _, _, boot, n), pb, pa in zip(rows, adj_below, adj_above):
        verdict = HOLDS if pb < alpha else FAILS if pa < alpha else UNDECIDED
        cells.append({"cell": f"ε = {e:g}, {p}, vs {other}", "verdict": verdict, "evidence": {
            "RMSE ratio": ev(ratio, se=float(np.std(boot)), n=n),
            "Holm p (below 1)": ev(float(pb)), "Holm p (above 1)": ev(float(pa)),
            "ratio detected with 80% power": ev(ratio_power(boot, alpha / len(rows)))}})
    held = sum(c["verdict"] == HOLDS for c in cells)
    return _quick(ctx, Result(all_verdict(cells), {"cells that hold": ev(held, n=len(cells))},
                              dict(cells=len(cells)), cells))


SMC_METHODS = ("smc-adaptive", "smc-fixed")


@claim(id="figure-2-eps", paper_ref="Section 6, Figure 2 ('accuracy increases with ε')",
       category="Section 6",
       claim="Both SMC methods' estimates are more accurate at a larger ε.",
       chapter="ch-four-eps",
       check="the Section 6 store: RMSE of SMC-adaptive and of SMC-non-adaptive at "
             "consecutive ε, paired bootstrap",
       rule="holds: the RMSE ratio (larger ε over smaller) below 1 with bootstrap p < "
            "{alpha} after Holm over the {cells} cells (two methods, two parameters, three "
            "steps of ε) in every cell; does not hold: above 1 in one; else inconclusive "
            "(each cell states the ratio it detects with 80% power)",
       params=dict(B=4000, alpha=0.05))
def figure_2_eps(ctx, B, alpha):
    stored = ctx.store("paper")
    est, rng = stored[0], ctx.rng("figure-2-eps")
    eps = sorted(est.eps.unique())
    rows = []
    for m in SMC_METHODS:
        for p in ("mu", "sigma"):
            for lo, hi in zip(eps, eps[1:]):
                _, e_lo = _errors(est, m, lo, p)
                _, e_hi = _errors(est, m, hi, p)
                rows.append((m, p, lo, hi, *_paired_boot(e_hi, e_lo, B, rng), len(e_lo)))
    adj_b, adj_a = holm([r[5] for r in rows]), holm([r[6] for r in rows])
    cells = [{"cell": f"{m}, {p}, ε = {hi:g} over {lo:g}",
              "verdict": HOLDS if pb < alpha else FAILS if pa < alpha else UNDECIDED,
              "evidence": {"RMSE ratio": ev(ratio, se=float(np.std(boot)), n=n),
                           "Holm p (below 1)": ev(float(pb)),
                           "ratio detected with 80% power": ev(ratio_power(
                               boot, alpha / len(rows)))}}
             for (m, p, lo, hi, ratio, _, _, boot, n), pb, pa in zip(rows, adj_b, adj_a)]
    return _quick(ctx, Result(all_verdict(cells), {}, dict(cells=len(rows)), cells))


def _course(tr, method, e, runs, p):
    """(runs, n) arrays of the posterior sd of parameter p and of its root mean square
    distance to the true value, sqrt(sd^2 + (mean - true)^2), after each release."""
    true = {"mu": 50.0, "sigma": 10**0.5}[p]
    sd = np.array([tr[method, e, run][f"sd_{p}"] for run in runs])
    mean = np.array([tr[method, e, run][f"mean_{p}"] for run in runs])
    return sd, np.sqrt(sd**2 + (mean - true) ** 2)


def _runs(est, e):
    """The runs at eps e that both SMC methods completed (paired)."""
    done = [set(est[(est.method == m) & (est.eps == e)].run) for m in SMC_METHODS]
    return sorted(set.intersection(*done))


def _sign_cells(rows, alpha):
    """Cells of sign tests (label, wins, n) after Holm over them: holds when the wins are
    significantly more than half, does not hold when significantly fewer."""
    p_more = holm([stats.binomtest(w, n, alternative="greater").pvalue for _, w, n in rows])
    p_less = holm([stats.binomtest(w, n, alternative="less").pvalue for _, w, n in rows])
    return [{"cell": label, "verdict": HOLDS if pm < alpha else FAILS if pl < alpha
             else UNDECIDED, "evidence": {"runs in favour": ev(w, n=n),
                                          "share detected with 80% power": ev(
                                              shown(_sign_power(n, alpha / len(rows))))}}
            for (label, w, n), pm, pl in zip(rows, p_more, p_less)]


def _sign_power(n, alpha) -> float:
    """The share of runs (above 1/2) in which one method wins that a one-sided sign test
    at ``alpha`` on n runs detects with 80% power (exact binomial)."""
    crit = stats.binom.isf(alpha, n, 0.5) + 1  # wins needed to reject
    q = np.linspace(0.5, 1, 501)
    power = stats.binom.sf(crit - 1, n, q) >= 0.8
    return float(q[np.argmax(power)]) if power.any() else float("inf")


def shown(x):
    """A detectable effect as evidence: the number, or words where none is detected."""
    return x if np.isfinite(x) else "none at this n"


CHECKPOINTS = (0.1, 0.25, 0.5, 1.0)  # shares of the stream at which Figure 2 is read


@claim(id="figure-2-concentrates", paper_ref="Section 6, Figure 2 ('more concentrated "
       "around the true values')", category="Section 6",
       claim="SMC-adaptive's particles are more concentrated around the true values than "
             "SMC-non-adaptive's, for μ and σ, over the whole stream.",
       chapter="ch-four-eps",
       check="the Section 6 store's trajectories: the posterior's root mean square "
             "distance to the true value, √(sd² + (mean - true)²), after {shares} of the "
             "releases, paired by run",
       rule="holds: adaptive's smaller in more runs than not, sign test p < {alpha} after "
            "Holm over the {cells} cells (ε, parameter, time), in every cell; does not "
            "hold: larger, the same way, in one; else inconclusive (each cell states the "
            "share of runs it detects with 80% power)",
       params=dict(alpha=0.01, shares=", ".join(f"{s:.0%}" for s in CHECKPOINTS)))
def concentrates(ctx, alpha, shares):
    est, tr = ctx.store("paper")
    rows = []
    for e in sorted(est.eps.unique()):
        runs = _runs(est, e)
        for p in ("mu", "sigma"):
            _, a = _course(tr, "smc-adaptive", e, runs, p)
            _, f = _course(tr, "smc-fixed", e, runs, p)
            for share in CHECKPOINTS:
                t = max(1, round(share * a.shape[1])) - 1
                rows.append((f"ε = {e:g}, {p}, t = {t + 1}",
                             int(np.sum(a[:, t] < f[:, t])), len(runs)))
    cells = _sign_cells(rows, alpha)
    return _quick(ctx, Result(all_verdict(cells), {}, dict(cells=len(cells)), cells))


@claim(id="figure-2-quickly", paper_ref="Section 6, Figure 2 ('and do that much more "
       "quickly')", category="Section 6",
       claim="SMC-adaptive concentrates much more quickly than SMC-non-adaptive.",
       chapter="ch-four-eps",
       check="the Section 6 store's trajectories: per run, the first release after which "
             "adaptive's root mean square distance to the true value stays at or below "
             "non-adaptive's after the whole stream",
       rule="'much more quickly' read as 'within the first half of the stream': holds: "
            "in more runs than not, sign test p < {alpha} after Holm over the {cells} cells "
            "(ε, parameter), in every cell; does not hold: in fewer, the same way, in "
            "one; else inconclusive",
       params=dict(alpha=0.01))
def quickly(ctx, alpha):
    est, tr = ctx.store("paper")
    rows, halves = [], {}
    for e in sorted(est.eps.unique()):
        runs = _runs(est, e)
        for p in ("mu", "sigma"):
            _, a = _course(tr, "smc-adaptive", e, runs, p)
            _, f = _course(tr, "smc-fixed", e, runs, p)
            above = a > f[:, -1:]
            # the releases after which it stays at or below: one more than the last
            # release after which it is above (n + 1 if it is above at the end)
            last = np.where(above.any(1), a.shape[1] - np.argmax(above[:, ::-1], 1), 0) + 1
            rows.append((f"ε = {e:g}, {p}", int(np.sum(last <= a.shape[1] / 2)), len(runs)))
            halves[rows[-1][0]] = float(np.median(last) / a.shape[1])
    cells = _sign_cells(rows, alpha)
    for c in cells:
        c["evidence"]["median share of the stream"] = ev(halves[c["cell"]])
    return _quick(ctx, Result(all_verdict(cells), {}, dict(cells=len(cells)), cells))


@claim(id="figure-2-spread", paper_ref="Section 6, Figure 2 ('the decreasing amount of "
       "spread of the particles')", category="Section 6",
       claim="The spread of both SMC methods' particles decreases over time.",
       chapter="ch-four-eps",
       check="the Section 6 store's trajectories: the posterior sd of μ and σ after the "
             "whole stream against after its first {first:.0%}, per run",
       rule="holds: smaller at the end in more runs than not, sign test p < {alpha} after "
            "Holm over the {cells} cells (method, ε, parameter), in every cell; does not "
            "hold: larger, the same way, in one; else inconclusive",
       params=dict(alpha=0.01, first=0.1))
def spread(ctx, alpha, first):
    est, tr = ctx.store("paper")
    rows = []
    for m in SMC_METHODS:
        for e in sorted(est.eps.unique()):
            runs = _runs(est, e)
            for p in ("mu", "sigma"):
                sd, _ = _course(tr, m, e, runs, p)
                t = max(1, round(first * sd.shape[1])) - 1
                rows.append((f"{m}, ε = {e:g}, {p}", int(np.sum(sd[:, -1] < sd[:, t])),
                             len(runs)))
    cells = _sign_cells(rows, alpha)
    return _quick(ctx, Result(all_verdict(cells), {}, dict(cells=len(cells)), cells))


@claim(id="exploration-shrinks", paper_ref="Section 5.1 ('handled automatically by Step 1')",
       category="Section 5",
       claim="Thompson sampling explores less as the posterior concentrates.",
       chapter="ch-four-eps",
       check="the Section 6 store: the spread (sd) of the interval centres (l + r)/2 over "
             "the last 50 releases against the first 50, per SMC-adaptive run",
       rule="the median ratio over runs below {limit} at every ε",
       params=dict(limit=0.2))
def exploration(ctx, limit):
    stored = ctx.store("paper")
    est, tr = stored
    cells = []
    for e in sorted(est.eps.unique()):
        ratios = []
        for run in sorted(est[(est.method == "smc-adaptive") & (est.eps == e)].run):
            arr = tr["smc-adaptive", e, run]
            centre = (arr["l"] + arr["r"]) / 2
            ratios.append(np.std(centre[-50:]) / np.std(centre[1:51]))
        med = float(np.median(ratios))
        cells.append({"cell": f"ε = {e:g}", "verdict": HOLDS if med < limit else FAILS,
                      "evidence": {"median spread ratio, last/first": ev(med, n=len(ratios))}})
    return _quick(ctx, Result(all_verdict(cells), {}, cells=cells))


@claim(id="resample-move-guard", paper_ref="Section 4 ('the rejuvenation and resampling "
       "steps prevent the particle approximation from collapsing to a single point')",
       category="Algorithms",
       claim="Resampling with rejuvenation keeps the particles from collapsing to a point.",
       chapter="ch-smc",
       check="the Section 6 store: the distinct values of μ among the particles at the "
             "last snapshot of each SMC run that keeps them, and every run's smallest ESS "
             "after t = {burn}; beside it, the "
             "first {stream} of the same releases (one run per ε) filtered by resampling "
             "alone, no move ({control} particles)",
       rule="holds: in every such run of both SMC methods at least {share:.0%} of the "
            "particles distinct and the ESS never below {floor} after t = {burn}, while the "
            "filter "
            "without the move keeps fewer than {share:.0%} distinct; does not hold "
            "otherwise",
       params=dict(share=0.5, floor=10, burn=10, control=1000, stream=200))
def guard(ctx, share, floor, burn, control, stream):
    from dpbook.likelihood.normal_laplace import log_density
    from dpbook.model.families import get_family

    est, tr = ctx.store("paper")
    cells = []
    for e in sorted(est.eps.unique()):
        runs = _runs(est, e)
        distinct, low = [], []
        for m in SMC_METHODS:
            for run in runs:
                arr = tr[m, e, run]
                if "snapshot_mu" in arr:  # the runs whose particles the store keeps
                    last = np.asarray(arr["snapshot_mu"])[-1]
                    distinct.append(np.unique(last).size / last.size)
                low.append(float(np.min(np.asarray(arr["ess"])[burn:])))
        # resampling alone on run 0's releases: θ from the prior, weighted by p(y_t | θ)
        arr = tr["smc-adaptive", e, runs[0]]
        rng = ctx.rng(f"resample-move-guard-{e:g}")
        theta = get_family("normal").sample_prior(rng, control)
        for y, l, r in list(zip(arr["y"], arr["l"], arr["r"]))[:stream]:
            lw = log_density(y, l, r, e, theta[:, 0], theta[:, 1])
            w = np.exp(lw - lw.max())
            theta = theta[rng.choice(control, control, p=w / w.sum())]
        alone = np.unique(theta[:, 0]).size / control
        ok = min(distinct) >= share and min(low) >= floor and alone < share
        cells.append({"cell": f"ε = {e:g}", "verdict": HOLDS if ok else FAILS, "evidence": {
            "smallest share of distinct μ (SMC)": ev(min(distinct), n=len(distinct)),
            "smallest ESS after the burn-in (SMC)": ev(min(low)),
            "share of distinct μ, resampling alone": ev(alone, n=control)}})
    return _quick(ctx, Result(all_verdict(cells), {}, cells=cells))


INVARIANT_FAMILY = "normal"  # the family whose SMC (Algorithms 2-3) is checked


@claim(id="algorithm-3-invariant", paper_ref="Algorithm 3; Section 4 (its invariant "
       "distributions)", category="Algorithms",
       claim="Algorithm 3's moves (x_k given θ, y_k; θ given x_{{1:t}}) leave the "
             "posterior (5) invariant, so the resample-move SMC targets it.",
       chapter="ch-smc",
       check="the shipped SMC (`smc.smc_posterior`, N = {N:,}) on {n} releases of "
             "N(50, 10) through [40, 60], ε = 2, {seeds} seeds: the posterior mean of μ "
             "and σ against the exact posterior (`posterior.exact_posterior`, eq. 5 on a "
             "grid)",
       rule="does not hold: a mean over the seeds off the exact mean with t-test p < "
            "{alpha} (Bonferroni over the two parameters); holds: neither, and the test "
            "sees a bias of {target} exact posterior sd with 80% power; else inconclusive",
       params=dict(N=2000, n=30, seeds=8, alpha=0.01, target=0.1))
def invariant(ctx, N, n, seeds, alpha, target):
    from dpbook.model.families import get_family
    from dpbook.model.mechanisms import release
    from dpbook.posterior import exact_posterior
    from dpbook.smc import smc_posterior

    fam = get_family(INVARIANT_FAMILY) if isinstance(INVARIANT_FAMILY, str) else \
        INVARIANT_FAMILY
    rng = ctx.rng("algorithm-3-invariant")
    l, r = np.full(n, 40.0), np.full(n, 60.0)
    y = release(rng.normal(50, 10**0.5, n), l, r, 2.0, rng)
    post = exact_posterior(y, l, r, 2.0)
    mean, sd = np.atleast_1d(post.mean()), np.atleast_1d(post.sd())
    got = np.array([[smc_posterior(y, l, r, 2.0, family=fam, n_particles=N, seed=s)
                     .summary()[p]["mean"] for p in ("mu", "sigma")] for s in range(seeds)])
    se = got.std(0, ddof=1) / np.sqrt(seeds)
    tstat = (got.mean(0) - mean[:2]) / se
    pv = 2 * stats.t.sf(np.abs(tstat), seeds - 1)
    crit = stats.t.isf(alpha / 4, seeds - 1)
    seen = (crit + Z80) * se / sd[:2]
    cells = [{"cell": p, "verdict": FAILS if pv[j] < alpha / 2 else HOLDS
              if seen[j] <= target else UNDECIDED, "evidence": {
                  "SMC mean - exact mean (exact sd)": ev(float((got.mean(0) - mean)[j]
                                                               / sd[j]), n=seeds),
                  "t-test p": ev(float(pv[j])),
                  "bias detected with 80% power (exact sd)": ev(float(seen[j]))}}
             for j, p in enumerate(("μ", "σ"))]
    return Result(all_verdict(cells), {}, cells=cells)


@claim(id="smc-targets-eq-5", paper_ref="Section 4, eq. (5); Algorithm 2",
       category="Algorithms",
       claim="The SMC approximates the posterior of eq. (5).",
       chapter="ch-calibration",
       check="chapter 8's calibration store: PIT values of SMC-adaptive and "
             "SMC-non-adaptive against the uniform (simulation-based calibration)",
       rule="does not hold: a KS p-value at most {alpha} / {tests} (Bonferroni over "
            "methods, ε and parameters); holds: none, and each test would have seen, with "
            "80% power, a posterior sd off by a factor {target} either way; else "
            "inconclusive (too few replications for that)",
       params=dict(alpha=0.01, target=PIT_TARGET))
def smc_targets(ctx, alpha, target):
    df = ctx.calibration()
    methods = ("smc-adaptive", "smc-fixed")
    main = df[df.method.isin(methods)]
    main = main[main.n == main.n.max()]
    groups = list(main.groupby(["method", "eps"]))
    tests = 2 * len(groups)
    cells = []
    for (m, e), g in groups:
        for p in ("mu", "sigma"):
            pv = stats.kstest(g[p].to_numpy(), "uniform").pvalue
            k80 = pit_power(len(g), alpha / tests)
            cells.append({"cell": f"{m}, ε = {e:g}, {p}",
                          "verdict": FAILS if pv <= alpha / tests else HOLDS
                          if k80 <= PIT_TARGET else UNDECIDED,
                          "evidence": {"KS p-value": ev(float(pv), n=len(g)),
                                       "sd factor detected with 80% power": ev(shown(k80))}})
    return _quick(ctx, Result(all_verdict(cells), {}, dict(tests=tests), cells))


@claim(id="mhaar-agrees", paper_ref="Section 6 (MHAAR, the batch baseline); eq. (5)",
       category="Algorithms",
       claim="MHAAR and SMC-non-adaptive, given the same releases, both find the posterior "
             "of eq. (5).",
       chapter="ch-boxplots",
       check="the Section 6 store: each method's posterior mean of μ per run against the "
             "exact posterior (`posterior.exact_posterior`, eq. 5 on a grid) of the same "
             "releases",
       rule="each method within {k} exact posterior sd of the exact mean in at least "
            "{share:.0%} of the runs at every ε",
       params=dict(k=0.5, share=0.95))
def mhaar_agrees(ctx, k, share):
    from dpbook.posterior import exact_posterior

    stored = ctx.store("paper")
    est, tr = stored
    cells = []
    for e in sorted(est.eps.unique()):
        runs = sorted(est[(est.method == "smc-fixed") & (est.eps == e)].run)
        dist = {m: [] for m in ("smc-fixed", "mhaar")}
        for run in runs:
            arr = tr["smc-fixed", e, run]
            post = exact_posterior(arr["y"], arr["l"], arr["r"], e)
            mean, sd = np.atleast_1d(post.mean())[0], np.atleast_1d(post.sd())[0]
            for m in dist:
                row = est[(est.method == m) & (est.eps == e) & (est.run == run)]
                dist[m].append(abs(float(row.mu_hat.iloc[0]) - mean) / sd)
        within = {m: float(np.mean(np.array(d) <= k)) for m, d in dist.items()}
        cells.append({"cell": f"ε = {e:g}",
                      "verdict": HOLDS if min(within.values()) >= share else FAILS,
                      "evidence": {**{f"{m}: share within": ev(w, n=len(runs))
                                      for m, w in within.items()},
                                   **{f"{m}: largest distance (sd)": ev(max(d))
                                      for m, d in dist.items()}}})
    return _quick(ctx, Result(all_verdict(cells), {}, cells=cells))


@claim(id="gaussian-mechanism", paper_ref="Section 7 (other mechanisms); Section 2",
       category="Algorithms",
       claim="Another additive mechanism, the Gaussian, changes only p(y | x): the same "
             "SMC then targets its posterior.",
       chapter="ch-new-family",
       check="`smc.smc_posterior(..., mechanism='gaussian')` against the exact posterior "
             "with the Gaussian p(y | x), on {n} releases of N(50, 10) through [30, 70]",
       rule="the SMC's posterior medians of μ and σ within {k} exact posterior sd (half "
            "the 16-84% range) of the exact medians, and its 16-84% ranges within a factor "
            "{target} of the exact (the calibration rules' target), in each of {runs} runs, "
            "at ε = 1 and 5",
       params=dict(k=0.5, runs=2, n=100, target=PIT_TARGET))
def gaussian_mechanism(ctx, k, runs, n, target):
    from dpbook.model.mechanisms import release
    from dpbook.posterior import exact_posterior
    from dpbook.smc import smc_posterior

    rng = ctx.rng("gaussian-mechanism")
    x, l, r = rng.normal(50, 10**0.5, n), np.full(n, 30.0), np.full(n, 70.0)
    cells = []
    for eps in (1.0, 5.0):
        y = release(x, l, r, eps, rng, mechanism="gaussian")
        post = exact_posterior(y, l, r, eps, mechanism="gaussian")
        q = (0.16, 0.5, 0.84)  # robust summaries: the posterior of σ may have no variance
        lo, med, hi = np.asarray(post.quantile(q))[:, :2]
        worst = np.zeros(2)
        for s in range(runs):
            g_lo, g_med, g_hi = smc_posterior(y, l, r, eps, mechanism="gaussian",
                                              n_particles=1000, seed=s).quantile(q)[:, :2]
            dist = np.abs(g_med - med) / ((hi - lo) / 2)
            off = np.maximum((g_hi - g_lo) / (hi - lo), (hi - lo) / (g_hi - g_lo))
            worst = np.maximum(worst, [dist.max(), off.max()])
        cells.append({"cell": f"ε = {eps:g}", "verdict": HOLDS if worst[0] <= k and
                      worst[1] <= target else FAILS,
                      "evidence": {"largest distance of the medians (exact sd)": ev(
                          float(worst[0]), n=runs),
                          "largest factor between the 16-84% ranges": ev(float(worst[1]))}})
    return Result(all_verdict(cells), {}, cells=cells)


@claim(id="original-code", paper_ref="Section 6 and the authors' code (noise scale)",
       category="The authors' code",
       claim="The authors' code departs from eq. (10): its releases carry noise "
             "(r - l)/(ε√2), analysed as if (r - l)/ε, and this changes Figure 3's σ errors.",
       chapter="ch-boxplots",
       check="chapter 6's store of the original code against the Section 6 store, the "
             "same runs: RMSE of SMC-non-adaptive's σ, paired bootstrap",
       rule="holds: the RMSE ratio (original over corrected) differs from 1 by more than "
            "{k} bootstrap se at some ε; otherwise inconclusive (each cell states the "
            "change it would see with 80% power, ({k} + 0.84) se)",
       params=dict(k=2))
def original_code(ctx, k):
    stored = ctx.store("paper")
    orig = ctx.store("original-code", "chapter 6's store of the original code")
    est, o = stored[0], orig[0]
    rng = ctx.rng("original-code")
    cells = []
    for e in sorted(o.eps.unique()):
        runs, eo = _errors(o, "smc-fixed", e, "sigma")
        runs_p, ep = _errors(est[est.run.isin(runs)], "smc-fixed", e, "sigma")
        ratio, _, _, boot = _paired_boot(eo, ep, 2000, rng)
        se = float(np.std(boot))
        cells.append({"cell": f"ε = {e:g}", "verdict": HOLDS if abs(ratio - 1) > k * se
                      else UNDECIDED, "evidence": {
                          "σ RMSE, original over corrected": ev(ratio, se=se, n=len(runs)),
                          "change seen with 80% power": ev((k + 0.84) * se)}})
    verdict = HOLDS if any(c["verdict"] == HOLDS for c in cells) else UNDECIDED
    return _quick(ctx, Result(verdict, {}, cells=cells,
                              note="the slip: {ref}`notes-authors-code`"))


# ---- cost (chapter 9) ------------------------------------------------------------------

@claim(id="cost-smc", paper_ref="Section 4 ('O(N n²)'); Section 7", category="Cost",
       claim="The latent SMC costs O(N n²): its time grows as n².",
       chapter="ch-long-streams",
       check="chapter 9's timed streams: the log-log slope of wall time against n",
       rule="the fitted slope in n lies in [{lo}, {hi}]",
       params=dict(lo=1.8, hi=2.2))
def cost_smc(ctx, lo, hi):
    slope = ctx.glued("09_long_streams", "smc-slope")
    return _quick(ctx, Result(HOLDS if lo <= slope <= hi else FAILS, {"slope in n": ev(slope)},
                              note="the slope in N is not measured by this build"))


@claim(id="cost-gradient", paper_ref="Section 7 (the online gradient method)",
       category="Cost",
       claim="The online gradient method is cheaper: its cost grows about linearly in n.",
       chapter="ch-long-streams",
       check="chapter 9's timed streams: the log-log slope of the online gradient's wall "
             "time against n",
       rule="the fitted slope at most {hi}",
       params=dict(hi=1.2))
def cost_gradient(ctx, hi):
    slope = ctx.glued("09_long_streams", "gradient-slope")
    return _quick(ctx, Result(HOLDS if slope <= hi else FAILS, {"slope in n": ev(slope)}))


@claim(id="cost-subset", paper_ref="Section 4 ('updating a random subset, of a fixed "
       "size, of x_k's')", category="Cost",
       claim="Moving a random subset of fixed size of the latent values reduces the cost "
             "of the SMC: it grows about linearly in n instead of as n².",
       chapter="ch-long-streams",
       check="chapter 9's timed streams: the log-log slopes of wall time against n of the "
             "subset SMC (m = 100) and of the full one",
       rule="the subset's slope at most {hi} and below the full SMC's by at least {gap}",
       params=dict(hi=1.2, gap=0.5))
def cost_subset(ctx, hi, gap):
    sub = ctx.glued("09_long_streams", "subset-slope")
    full = ctx.glued("09_long_streams", "smc-slope")
    ok = sub <= hi and full - sub >= gap
    return _quick(ctx, Result(HOLDS if ok else FAILS, {"subset's slope in n": ev(sub),
                                                      "full SMC's slope in n": ev(full)}))


# ---- beyond the paper ------------------------------------------------------------------

def _lockin(ctx):
    """Chapter 7's heavy-tail measurement (benchmarks/lockin.py, seed 7), read from the
    stores the chapter made: the table of :func:`lockin.table`."""
    sys.path.insert(0, str(ctx.root / "benchmarks"))
    import lockin

    names = [f"t{df:g}" for df in lockin.SIZES[ctx.mode]["dfs"]] + ["normal"]
    paths = [lockin.store(m, ctx.mode, 7, g, ctx.root) for m in names
             for g in (None, lockin.GUARD)]
    if not all((p / "manifest.json").exists() for p in paths):
        raise NotInBuild("chapter 7's heavy-tail stores")
    for p in paths:
        ctx.fingerprints[str(p.relative_to(ctx.root))] = fingerprint(p)
    return lockin.table(lockin.measure(ctx.mode, 7, root=ctx.root, workers=1))


def _diff_cell(row, pair, target, scale):
    """A paired RMSE difference's cell: its 95% interval, and the difference the interval
    detects with 80% power ((1.96 + 0.84) times the bootstrap se) against ``target``
    times ``scale``."""
    lo, hi = row[f"{pair} lo"], row[f"{pair} hi"]
    seen = (stats.norm.isf(0.025) + Z80) * (hi - lo) / (2 * stats.norm.isf(0.025))
    verdict = FAILS if lo > 0 else HOLDS if seen <= target * scale else UNDECIDED
    return verdict, {"RMSE difference": ev(float(row[pair]), n=int(row["runs"])),
                     "95% interval": ev(f"[{lo:.3g}, {hi:.3g}]"),
                     "difference detected with 80% power": ev(float(seen))}


@claim(id="heavy-tail-lockin", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="With heavy tails (Student-t with 1 to 3 degrees of freedom, ε = 1 and 5) the "
             "adaptive policy's location RMSE is not above the fixed interval's, on the "
             "same data.",
       chapter="ch07-lockin",
       check="chapter 7's heavy-tail stores: RMSE(adaptive) − RMSE(fixed) of the location "
             "over paired runs, with its paired bootstrap 95% interval, per (model, ε)",
       rule="does not hold: some interval lies above 0; holds: none does and each detects "
            "with 80% power a difference of {target:.0%} of the fixed interval's RMSE; "
            "else inconclusive",
       params=dict(target=0.25))
def heavy_tail_lockin(ctx, target):
    tab = _lockin(ctx).drop("normal", level="model")
    cells = []
    for (model, eps), row in tab.iterrows():
        verdict, evidence = _diff_cell(row, "adaptive - fixed", target, row["fixed RMSE"])
        evidence["worst run, adaptive / fixed"] = ev(
            f"{row['adaptive worst']:.3g} / {row['fixed worst']:.3g}")
        cells.append({"cell": f"{model}, ε = {eps:g}", "verdict": verdict,
                      "evidence": evidence})
    return _quick(ctx, Result(all_verdict(cells), {}, cells=cells,
                              note="the worst runs are shown, not judged"))


@claim(id="guard-normal", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="dpbook's guard against lock-in (block of 10 releases, off by default) leaves "
             "the paper's normal model within Monte Carlo error.",
       chapter="ch07-lockin",
       check="chapter 7's normal stores with and without the guard: RMSE(guarded) − "
             "RMSE(adaptive) of μ over paired runs, with its paired bootstrap 95% interval",
       rule="does not hold: some interval excludes 0; holds: every interval holds 0 and "
            "detects with 80% power a difference of {target:.0%} of the unguarded RMSE; "
            "else inconclusive",
       params=dict(target=0.25))
def guard_normal(ctx, target):
    cells = []
    for eps, row in _lockin(ctx).loc["normal"].iterrows():
        verdict, evidence = _diff_cell(row, "guarded - adaptive", target,
                                       row["adaptive RMSE"])
        if row["guarded - adaptive hi"] < 0:
            verdict = FAILS
        cells.append({"cell": f"ε = {eps:g}", "verdict": verdict, "evidence": evidence})
    return _quick(ctx, Result(all_verdict(cells), {}, cells=cells))


def _sbc_cells(df, want, alpha):
    """Cells of a calibration verdict: for each method, calibrated (True) or not, the
    smallest KS p-value of its PIT values over eps and parameters (at its largest n)
    against alpha over the number of tests (Bonferroni)."""
    rows = []
    for m, calibrated in want.items():
        g = df[df.method == m]
        if g.empty:
            continue
        g = g[g.n == g.n.max()]
        pv = [stats.kstest(h[p].to_numpy(), "uniform").pvalue
              for _, h in g.groupby("eps") for p in ("mu", "sigma")]
        rows.append((m, calibrated, min(pv), 2 * len(g) // len(pv), len(pv)))
    tests = sum(r[4] for r in rows)
    # a method that should fail and is not rejected was not seen to fail: too few
    # replications for its effect (the original code's needs several hundred), not
    # evidence that it is calibrated
    # (a calibrated one that is not rejected is calibrated only as far as the test could
    # see: a posterior sd off by PIT_TARGET with 80% power)
    def verdict(cal, rejected, k80):
        if cal:
            return FAILS if rejected else HOLDS if k80 <= PIT_TARGET else UNDECIDED
        return HOLDS if rejected else UNDECIDED

    return [{"cell": m + (" (should be calibrated)" if cal else " (should fail)"),
             "verdict": verdict(cal, p <= alpha / tests, k80 := pit_power(n, alpha / tests)),
             "evidence": {"smallest KS p-value": ev(float(p), n=n),
                          "sd factor detected with 80% power": ev(shown(k80))}}
            for m, cal, p, n, _ in rows], tests


@claim(id="calibration", paper_ref="dpbook (not in the paper)", category="Beyond the paper",
       claim="The exact posterior (eq. 5) is calibrated; the naive posterior (no "
             "mechanism) and the original code's noise scale are not.",
       chapter="ch-calibration",
       check="chapter 8's calibration store: PIT values against the uniform",
       rule="calibrated: KS p-value above {alpha} / {tests} in every cell, each test "
            "seeing with 80% power a posterior sd off by a factor {target} (else "
            "inconclusive); not calibrated: below it in some cell; a method that should "
            "fail and is not rejected is inconclusive (its effect too small for the "
            "replications)",
       params=dict(alpha=0.01, target=PIT_TARGET))
def calibration(ctx, alpha, target):
    df = ctx.calibration()
    cells, tests = _sbc_cells(df, {"exact": True, "naive": False, "original-code": False},
                              alpha)
    return _quick(ctx, Result(all_verdict(cells), {}, dict(tests=tests), cells))


@claim(id="mhaar-coverage", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="MHAAR's 90% credible intervals for σ cover 90% at the paper's 10^5 "
             "iterations, where the posterior is widest (ε = 1, n = 50).",
       chapter="ch-calibration",
       check="chapter 8's long-chain calibration store: coverage of the 90% interval",
       rule="does not hold: the coverage more than {k} binomial se from 0.90; holds: "
            "within, and a departure of {target} detected with 80% power (({k} + 0.84) "
            "se at most {target}); else inconclusive",
       params=dict(k=2, target=0.05))
def mhaar_coverage(ctx, k, target):
    from dpbook.calibration import calibration_summary

    df = ctx.calibration(suffix="-mhaar-long", what="chapter 8's long-chain store")
    row = calibration_summary(df).set_index("param").loc["sigma"]
    ok = abs(row.coverage90 - 0.9) <= k * row.coverage90_se
    seen = (k + Z80) * float(row.coverage90_se)
    return _quick(ctx, Result(FAILS if not ok else HOLDS if seen <= target else UNDECIDED, {
        "coverage of the 90% interval": ev(float(row.coverage90), se=float(row.coverage90_se),
                                           n=len(df)),
        "departure detected with 80% power": ev(seen)}))


@claim(id="central-calibration", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="The central release's noise-aware posteriors are calibrated, the naive one "
             "is not.",
       chapter="ch-local-vs-central",
       check="chapter 11's calibration store: PIT values against the uniform",
       rule="calibrated: KS p-value above {alpha} / {tests} in every cell, each test "
            "seeing with 80% power a posterior sd off by a factor {target} (else "
            "inconclusive); not calibrated: below it in some cell; a method that should "
            "fail and is not rejected is inconclusive (its effect too small for the "
            "replications)",
       params=dict(alpha=0.01, target=PIT_TARGET))
def central_calibration(ctx, alpha, target):
    df = ctx.calibration("central-calibration", what="chapter 11's calibration store")
    cells, tests = _sbc_cells(df, {"central": True, "central-private": True,
                                   "central-naive": False}, alpha)
    return _quick(ctx, Result(all_verdict(cells), {}, dict(tests=tests), cells))


# ---- chapter 14: two dimensions (issue 54) ---------------------------------------------

@claim(id="two-d-privacy", paper_ref="dpbook (not in the paper; Theorem 2 in two dimensions)",
       category="Beyond the paper",
       claim="One release of a box (each component clipped, Laplace noise of one scale "
             "W/ε per component, W the box's L1 width) is ε-DP, and the bound is attained.",
       chapter="ch-two-dimensions",
       check="the log-ratio of the release's densities for two inputs, over a grid of "
             "outputs: opposite corners of the box and {pairs} random pairs, at ε = 1, 2, 5",
       rule="holds: no log-ratio above ε (1 + {tol:g}), and the corners' within {tol:g} "
            "ε of ε; else does not hold",
       params=dict(pairs=200, tol=1e-9))
def two_d_privacy(ctx, pairs, tol):
    from dpbook.multivariate.release import box_scale

    lo, hi = np.array([0.0, -1.0]), np.array([3.0, 4.0])
    grid = np.stack(np.meshgrid(np.linspace(-25, 25, 201), np.linspace(-25, 25, 201)), -1)
    inputs = np.clip(ctx.rng("two-d-privacy").uniform(-10, 10, (pairs, 2, 2)), lo, hi)
    cells = []
    for eps in (1.0, 2.0, 5.0):
        b = box_scale(lo, hi, eps)

        def logp(c, b=b):
            return (-np.abs(grid - c) / b).sum(axis=-1)

        corner = float(np.max(logp(hi) - logp(lo)))
        worst = max(float(np.max(logp(c) - logp(d))) for c, d in inputs)
        ok = max(corner, worst) <= eps * (1 + tol) and abs(corner - eps) <= tol * eps
        cells.append({"cell": f"ε = {eps:g}", "verdict": HOLDS if ok else FAILS,
                      "evidence": {"corners' log-ratio": ev(corner),
                                   "random pairs' largest": ev(worst, n=pairs)}})
    return Result(all_verdict(cells), {}, cells=cells)


@claim(id="two-d-factorised", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="With ρ fixed at 0 and independent priors, the one SMC's posterior of a pair "
             "is the product of the two one-dimensional exact posteriors at "
             "ε_j = ε w_j / W.",
       chapter="ch-two-dimensions",
       check="chapter 14's table: the quartiles of μ_j and σ_j, averaged over independent "
             "SMC runs, against the exact grid posteriors",
       rule="holds: every comparison within 4 standard errors of the runs' average plus 1% "
            "of the exact IQR; else does not hold")
def two_d_factorised(ctx):
    outside = ctx.glued("14_two_dimensions", "two-d-exact-outside")
    n = ctx.glued("14_two_dimensions", "two-d-exact-comparisons")
    z = ctx.glued("14_two_dimensions", "two-d-exact-z")
    return Result(HOLDS if outside == 0 else FAILS, {
        "comparisons outside": ev(int(outside), n=int(n)),
        "largest |difference| in standard errors": ev(z)})


@claim(id="two-d-calibration", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="The two-dimensional latent SMC is calibrated for all five parameters.",
       chapter="ch-two-dimensions",
       check="chapter 14's simulation-based calibration: each parameter's PIT values "
             "against the uniform (KS)",
       rule="does not hold: the smallest p-value at most {alpha} / 5; holds: above it, and "
            "each test sees with 80% power a posterior sd off by a factor {target}; else "
            "inconclusive",
       params=dict(alpha=0.01, target=PIT_TARGET))
def two_d_calibration(ctx, alpha, target):
    p = ctx.glued("14_two_dimensions", "two-d-sbc-min-p")
    reps = int(ctx.glued("14_two_dimensions", "two-d-sbc-reps"))
    k80 = pit_power(reps, alpha / 5)
    verdict = FAILS if p <= alpha / 5 else HOLDS if k80 <= target else UNDECIDED
    return Result(verdict, {"smallest KS p-value": ev(p, n=reps),
                            "sd factor detected with 80% power": ev(shown(k80))})


def _two_d(ctx):
    """Chapter 14's experiment (benchmarks/two_d.py), read from its stores."""
    sys.path.insert(0, str(ctx.root / "benchmarks"))
    import two_d

    paths = [two_d.store(n, ctx.mode, 0, ctx.root)
             for n in ("2d", "2d-tracemu", "split-c1", "split-c2")]
    if not all((p / "manifest.json").exists() for p in paths):
        raise NotInBuild("chapter 14's stores")
    for p in paths:
        ctx.fingerprints[str(p.relative_to(ctx.root))] = fingerprint(p)
    return two_d.table(two_d.measure(ctx.mode, 0, root=ctx.root, workers=1))


@claim(id="two-d-adaptive", paper_ref="dpbook (not in the paper)",
       category="Beyond the paper",
       claim="In two dimensions the adaptive box's RMSE is not above the fixed box's, for "
             "any of the five parameters, on the same data.",
       chapter="ch-two-dimensions",
       check="chapter 14's stores: RMSE(adaptive) − RMSE(fixed) of the posterior median "
             "over paired runs, with its paired bootstrap 95% interval, per (ε, parameter)",
       rule="does not hold: some interval lies above 0; holds: none does and each detects "
            "with 80% power a difference of {target:.0%} of the fixed box's RMSE; else "
            "inconclusive",
       params=dict(target=0.25))
def two_d_adaptive(ctx, target):
    tab = _two_d(ctx).rename(columns={"af lo": "adaptive - fixed lo",
                                      "af hi": "adaptive - fixed hi"})
    cells = []
    for (eps, param), row in tab.iterrows():
        verdict, evidence = _diff_cell(row, "adaptive - fixed", target, row["fixed RMSE"])
        cells.append({"cell": f"{param}, ε = {eps:g}", "verdict": verdict,
                      "evidence": evidence})
    return _quick(ctx, Result(all_verdict(cells), {}, cells=cells))
