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
# (ch-local-vs-central)=
# # What local privacy costs
#
# The paper's setting is *local*: every individual adds noise of scale $(r - l)/\epsilon$
# to their own value before anyone sees it (eq. 10), and the analyst learns from the noisy
# values.  The alternative is *central*: a trusted curator collects the raw values,
# clips them, adds noise once to the sufficient statistics and publishes those
# {cite:p}`bernstein2018differentially`.  This chapter puts the two side by side on the
# same people at the same $\epsilon$.
#
# **The central release** ({mod}`dpbook.privacy.central_curator`,
# {mod}`dpbook.model.central_release`).
# The curator clips each $x_i$ to $[l, r]$, centres it at $c = (l + r)/2$, and releases
# $s_1 = \sum_i z_i$ and $s_2 = \sum_i z_i^2$, $z_i = T_l^r(x_i) - c$, with independent
# Laplace noise.  $n$ is public and neighbouring data sets differ by the substitution of
# one person, so $s_1$ moves by at most $r - l$ and $s_2$ by at most $(r - l)^2/4$; the
# budget is split evenly, $\epsilon/2$ for each sum, so the noise scales are
# $b_1 = 2(r - l)/\epsilon$ and $b_2 = (r - l)^2/(2\epsilon)$.  The tests check these
# scales against OpenDP's Laplace mechanism for the same bounded sums (where a
# substitution is a symmetric distance of 2).  The interval is either public and fixed
# (`central-fixed`, the paper's fixed interval $[\mu - 10\sigma, \mu + 10\sigma]$, the
# same one `local-fixed` uses), or chosen from the same people (`central-private`): a
# quarter of $\epsilon$ buys the private 5% and 95% quantiles
# {cite:p}`smith2011privacy` in a public range that is five times wider, and the sums
# get the remaining $3\epsilon/4$.
#
# **The central posterior** ({func}`dpbook.posterior.central_posterior`).  As
# {cite:t}`bernstein2018differentially` do, the sums given $\theta$ are approximated by a
# bivariate normal (the central limit theorem, with the moments of the clipped normal in
# closed form), convolved with the Laplace noise; the posterior of $(\mu, \sigma)$ is
# computed on a grid, under the paper's prior.  The *naive* central posterior takes the
# noisy sums for the true ones.  Samplers of the posterior given privatised statistics
# that need no normal approximation exist, such as the particle filter of
# {cite:t}`chen2025particle`; with two parameters and two sums, a grid is enough here.
#
# **The local posteriors** are the package's: Algorithm 1 with Thompson sampling and the
# best interval of eq. (13) (`local-adaptive`, the paper's method) or with the fixed
# interval (`local-fixed`), each with the marginal SMC on $\theta$ of {ref}`ch-long-streams`
# (its posterior quartiles after individual $n$ are the ones compared).  The
# `non-private` posterior is the posterior given the raw values (the same prior, on a
# grid).
# `central-oracle` clips to $[\mu - 2\sigma, \mu + 2\sigma]$, which needs the truth: it
# is not a method but the best a central release of this kind can do, a bound for the
# other two.
#
# **What the comparison leaves out.**  Local privacy protects the people against the
# analyst *and* against whoever collects the data: nobody ever holds $x_i$.  Central
# privacy protects them against what is published only; the curator sees every raw value
# and must be trusted with it (and with running the mechanism as stated).  The widths
# below are the price of not needing that trust.

# %% tags=["parameters"]
mode = "quick"  # "quick": n up to 1000, 2 replications (about a minute); "full": up to 10^4
seed = 0  # root seed of the people, the noise and the samplers

# %% tags=["hide-input"]
import time

import numpy as np
import pandas as pd
import seaborn as sns
from scipy import stats

from dpbook import calibration as cal
from dpbook.calibration.replication import naive_posterior
from dpbook.figures import (
    GREEK,
    METHOD_COLOURS,
    figure_saver,
    glue_number,
    glue_phrase,
    repo_root,
    show_table,
)
from dpbook.model.central_release import noise_scales
from dpbook.model.families import get_family
from dpbook.online import streams, warm_up
from dpbook.posterior import central_posterior
from dpbook.posterior.central_grid import sum_cdf
from dpbook.privacy.central_curator import family_release
from dpbook.privacy.population import family_population

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("11_local_vs_central", mode=mode, seed=seed)
SIZES = {"quick": dict(ns=(10, 100, 1000), reps=2, particles=300, cal_reps=20,
                      ks_reps=2000),
         "full": dict(ns=(10, 30, 100, 300, 1000, 3000, 10_000), reps=5, particles=500,
                      cal_reps=150, ks_reps=4000)}[mode]
NS, R, N_PARTICLES = SIZES["ns"], SIZES["reps"], SIZES["particles"]
EPS = (0.1, 1.0, 5.0)
MU, SIGMA = 50.0, 10**0.5  # the paper's population, N(50, 10)
FIXED = (MU - 10 * SIGMA, MU + 10 * SIGMA)  # Section 6's fixed interval
BOUNDS = (FIXED[0] - 2 * (FIXED[1] - FIXED[0]), FIXED[1] + 2 * (FIXED[1] - FIXED[0]))
ORACLE = (MU - 2 * SIGMA, MU + 2 * SIGMA)  # needs theta: a bound, not a method
COLOURS = {"local-adaptive": METHOD_COLOURS["smc-adaptive"],
           "local-fixed": METHOD_COLOURS["smc-fixed"], "central-fixed": "#d55e00",
           "central-private": "#cc78bc", "central-oracle": "#029e73",
           "non-private": "#000000"}
QS = (0.25, 0.5, 0.75)

# %% [markdown]
# ## The noise each side adds
#
# At one $\epsilon$, a local release carries noise of scale $(r - l)/\epsilon$ per
# person, so the mean of $n$ releases has noise of standard deviation
# $\sqrt 2 (r - l)/(\epsilon\sqrt n)$; the central sum $s_1$ carries noise of scale $b_1$
# once, so the mean $s_1/n$ has noise of standard deviation $\sqrt 2 b_1/n$: it falls
# as $1/n$ rather than $1/\sqrt n$.  The table gives both for the fixed interval.

# %% caption="Noise on the released mean of n people through the fixed interval: standard deviation of the local mean and of the central s_1/n, and their ratio." name="tbl-11-noise" tags=["hide-input"]
width = FIXED[1] - FIXED[0]
rows = []
for eps in EPS:
    b1, b2 = noise_scales(*FIXED, eps)
    for n in NS:
        local_sd = 2**0.5 * width / eps / n**0.5
        central_sd = 2**0.5 * b1 / n
        rows.append({"ε": eps, "n": n, "local sd": local_sd, "central sd": central_sd,
                     "local / central": local_sd / central_sd})
show_table(pd.DataFrame(rows).set_index(["ε", "n"]))

# %% [markdown]
# ## How to call it
#
# One central release of $n = 100$ people and its posterior, next to the naive one:

# %%
release = family_release("normal", (MU, SIGMA), 100, 1.0, seed=[seed, 1],
                         interval=FIXED)  # the curator's release of 100 people
aware = central_posterior(release)  # the noise-aware posterior
naive = central_posterior(release, naive=True)  # the noise ignored
print(release)
for name, post in (("noise-aware", aware), ("naive", naive)):
    q = post.quantile([0.25, 0.75]).round(3)
    print(f"{name:>11} quartiles of mu {q[:, 0]}, of sigma {q[:, 1]}")

# %% [markdown]
# ## Does the normal approximation hold at the smallest n?
#
# The central posterior replaces the distribution of the clipped sums by a normal.  At
# the smallest $n$ the sum of squares is skewed (a scaled chi-square when nothing is
# clipped).  The table compares simulated releases of the paper's population through the
# fixed interval with the approximation's marginal distributions, by the
# Kolmogorov-Smirnov statistic (and its p-value), with the noise of each $\epsilon$ and
# without noise.

# %% caption="Normal approximation of the released sums against simulated releases at the smallest n: KS statistic and p-value per sum, with the noise of each ε and without noise." name="tbl-11-approximation" tags=["hide-input"]
def approximation_check(eps, n, reps, rng):
    z = np.clip(rng.normal(MU, SIGMA, (reps, n)), *FIXED) - 0.5 * sum(FIXED)
    b1, b2 = noise_scales(*FIXED, eps) if eps else (0.0, 0.0)
    y1 = z.sum(1) + b1 * rng.laplace(size=reps)
    y2 = (z * z).sum(1) + b2 * rng.laplace(size=reps)
    k1 = stats.kstest(y1, lambda y: sum_cdf(1, y, MU, SIGMA, n, *FIXED, b1))
    k2 = stats.kstest(y2, lambda y: sum_cdf(2, y, MU, SIGMA, n, *FIXED, b2))
    return {"ε": eps if eps else "no noise", "KS s₁": k1.statistic, "p s₁": k1.pvalue,
            "KS s₂": k2.statistic, "p s₂": k2.pvalue}


rng = np.random.default_rng([seed, 11])
approx = pd.DataFrame([approximation_check(e, NS[0], SIZES["ks_reps"], rng)
                       for e in (*EPS, None)]).set_index("ε")
show_table(approx)

# %% tags=["hide-input"]
worst = approx.drop(index="no noise")
for key, value in {
    "ks-worst": worst[["KS s₁", "KS s₂"]].max().max(),
    "p-worst": worst[["p s₁", "p s₂"]].min().min(), "ks-reps": SIZES["ks_reps"],
    "ks-no-noise": approx.at["no noise", "KS s₂"], "p-no-noise": approx.at["no noise", "p s₂"],
}.items():
    glue_number(key, value)

# %% [markdown]
# With noise the largest KS statistic is {glue:text}`ks-worst:.3f` (smallest p-value
# {glue:text}`p-worst:.2g`, {glue:text}`ks-reps` simulated releases); without noise the
# sum of squares gives {glue:text}`ks-no-noise:.3f` (p = {glue:text}`p-no-noise:.2g`).
# The approximation breaks where the noise no longer hides the skew of the sum of
# squares: small n with little noise.

# %% [markdown]
# ## Posterior width against n
#
# Each replication draws $n_{\max}$ people from $\mathcal{N}(50, 10)$; for every $n$ each
# method sees the first $n$ of them.  The local methods run one stream of Algorithm 1
# and report the posterior after individual $n$; the curator releases the sums of the
# first $n$ (a separate release for each $n$).

# %% tags=["hide-input"]
def quartile_row(method, eps, n, rep, q):
    return {"method": method, "eps": eps, "n": n, "rep": rep,
            **{f"{p}_q{round(100 * lv)}": float(q[i, j]) for i, lv in enumerate(QS)
               for j, p in enumerate(("mu", "sigma"))}}


normal = get_family("normal")
rows, seconds = [], {}
warm_up(("smc-marginal",))
for eps in EPS:
    for rep in range(R):
        people = [seed, round(100 * eps), rep]
        t0 = time.process_time()
        for method, policy in (("local-adaptive", "adaptive"), ("local-fixed", FIXED)):
            run = streams.timed_run("smc-marginal", family_population(
                "normal", (MU, SIGMA), NS[-1], eps, seed=people), NS[-1], policy=policy,
                n_particles=N_PARTICLES, checkpoints=list(NS), seed=[*people, 1])
            for c in run.clock.itertuples():
                rows.append({"method": method, "eps": eps, "n": c.t, "rep": rep,
                             **{f"{p}_q{round(100 * lv)}": getattr(c, f"{p}_q{round(100 * lv)}")
                                for lv in QS for p in ("mu", "sigma")}})
        t1 = time.process_time()
        x = normal.sample(np.random.default_rng(np.random.SeedSequence(people).spawn(2)[0]),
                          MU, SIGMA, size=NS[-1])  # the same people, for the non-private one
        for n in NS:
            for method, where in (("central-fixed", dict(interval=FIXED)),
                                  ("central-private", dict(bounds=BOUNDS)),
                                  ("central-oracle", dict(interval=ORACLE))):
                rel = family_release("normal", (MU, SIGMA), n, eps, seed=people, **where)
                rows.append(quartile_row(method, eps, n, rep,
                                         central_posterior(rel).quantile(QS)))
            rows.append(quartile_row("non-private", eps, n, rep,
                                     naive_posterior(x[:n]).quantile(QS)))
        seconds[eps, rep] = (t1 - t0, time.process_time() - t1)
res = pd.DataFrame(rows)
for p, truth in (("mu", MU), ("sigma", SIGMA)):
    res[f"{p}_iqr"] = res[f"{p}_q75"] - res[f"{p}_q25"]
    res[f"{p}_err"] = res[f"{p}_q50"] - truth
cpu = np.array(list(seconds.values())).sum(axis=0)
for key, value in {"replications": len(EPS) * R, "per-eps": R, "n-top": NS[-1],
                   "cpu-local": cpu[0], "cpu-central": cpu[1]}.items():
    glue_number(key, value)

# %% [markdown]
# {glue:text}`replications` replications ({glue:text}`per-eps` per ε), n up to
# {glue:text}`n-top:,`: the local streams took {glue:text}`cpu-local:.0f` CPU-seconds,
# the central and non-private posteriors {glue:text}`cpu-central:.0f`.

# %% tags=["hide-input"] fig_caption="Posterior interquartile range of μ (top) and σ (bottom) against the number of people n, one column per ε, for the local methods (the paper's adaptive interval and the fixed one), the central release (fixed, privately chosen, and at the truth ± 2σ, which needs θ) and the non-private posterior." fig_alt="Six log-log panels of posterior width against n, one line per method: two local, three central and the non-private one, which is the lowest line in every panel."
long = pd.concat([res[["method", "eps", "n", "rep"]].assign(param=GREEK[p], iqr=res[f"{p}_iqr"])
                  for p in ("mu", "sigma")], ignore_index=True)
mean_iqr = long.groupby(["param", "eps", "method", "n"], as_index=False).iqr.mean()
g = sns.relplot(mean_iqr, kind="line", x="n", y="iqr", hue="method", row="param", col="eps",
                palette=COLOURS, marker="o", height=2.2, aspect=1.0,
                facet_kws=dict(sharey="row"))
g.set(xscale="log", yscale="log", ylabel="posterior IQR")
g.set_titles("{row_name}, ε = {col_name:g}")
save(g.figure, "width_vs_n", f"mean of {R} replications per point")

# %% tags=["hide-input"]
top = NS[-1]
w = res[res.n == top].groupby(["eps", "method"]).mu_iqr.mean()
glue_number("top", top)
glue_phrase("local-over-central", ", ".join(
    f"{w[e, 'local-adaptive'] / w[e, 'central-fixed']:.2g} times the central-fixed one at "
    f"ε = {e:g}" for e in EPS))
for key, (a, b) in {"central-over-np": ("central-fixed", "non-private"),
                    "oracle-over-np": ("central-oracle", "non-private"),
                    "fixed-over-adaptive": ("local-fixed", "local-adaptive")}.items():
    glue_phrase(key, ", ".join(f"{w[e, a] / w[e, b]:.2g}" for e in EPS))

# %% [markdown]
# At n = {glue:text}`top:,` the posterior IQR of μ of local-adaptive is
# {glue:md}`local-over-central`; the central-fixed one is {glue:md}`central-over-np`
# times the non-private one, central-oracle {glue:md}`oracle-over-np` times the
# non-private one, and local-fixed {glue:md}`fixed-over-adaptive` times local-adaptive
# (the same ε in the same order).

# %% [markdown]
# The table gives the same widths with the root mean square error of the posterior
# median, for $\mu$.

# %% caption="Mean posterior IQR and RMSE of the posterior median of μ, by ε, n and method." name="tbl-11-mu" tags=["hide-input"]
def by_method(p):
    agg = res.groupby(["eps", "n", "method"]).agg(
        iqr=(f"{p}_iqr", "mean"), rmse=(f"{p}_err", lambda e: float(np.sqrt(np.mean(e**2)))))
    table = agg.unstack("method")
    table.columns = [f"{m} {s}" for s, m in table.columns]
    order = [f"{m} {s}" for m in COLOURS for s in ("iqr", "rmse")]
    return table[order].rename_axis(index=["ε", "n"])


show_table(by_method("mu"))

# %% caption="Mean posterior IQR and RMSE of the posterior median of σ, by ε, n and method." name="tbl-11-sigma" tags=["hide-input"]
show_table(by_method("sigma"))

# %% [markdown]
# ## How many more people the local release needs
#
# For each $\epsilon$: the width of the central posterior (fixed interval) at
# $n = 100$, and the $n$ at which the paper's local-adaptive posterior reaches that
# width, interpolated on the log-log scale between the $n$ computed (if it does within
# them).

# %% tags=["hide-input"]
def crossing(curve, target):
    """The n (log-log interpolation) where a decreasing width curve first reaches target."""
    n, w = curve.index.to_numpy(float), curve.to_numpy()
    below = np.flatnonzero(w <= target)
    if below.size == 0:
        return None
    k = below[0]
    if k == 0:
        return n[0]
    t = (np.log(w[k - 1]) - np.log(target)) / (np.log(w[k - 1]) - np.log(w[k]))
    return float(np.exp(np.log(n[k - 1]) + t * (np.log(n[k]) - np.log(n[k - 1]))))


mu_iqr = res.groupby(["eps", "method", "n"]).mu_iqr.mean()
ref_n = 100 if 100 in NS else NS[len(NS) // 2]
lines = []
for eps in EPS:
    target = mu_iqr[eps, "central-fixed", ref_n]
    hit = crossing(mu_iqr[eps, "local-adaptive"], target)
    lines.append(f"* ε = {eps:g}: the central posterior of μ has IQR {target:.3g} at "
                 f"n = {ref_n}; " + (f"local-adaptive reaches it at n ≈ {hit:,.0f} "
                                     f"({hit / ref_n:.2g} times as many people)."
                                     if hit else f"local-adaptive does not reach it by "
                                     f"n = {NS[-1]:,} (its IQR there: "
                                     f"{mu_iqr[eps, 'local-adaptive', NS[-1]]:.3g})."))
glue_phrase("crossings", "\n".join(lines))

# %% [markdown]
# ```{glue:md} crossings
# :format: myst
# ```

# %% [markdown]
# ## Are the central posteriors calibrated?
#
# Chapter {ref}`ch-calibration`'s simulation-based calibration, unchanged, in its
# informative setting: $\theta$ drawn from $\mu \sim \mathcal{N}(0, 1)$,
# $\sigma^2 \sim \mathcal{IG}(1, 1)$, $n = 100$, the fixed interval $[-8, 8]$
# (`central-private` takes it as its public range).  `dpbook calibrate --method central`
# runs the same study from the command line.

# %% caption="Calibration of the central posteriors (narrow prior, n = 100): coverage of the 50% and 90% intervals, KS test, dispersion and the median posterior IQR over the prior's." name="tbl-11-calibration" tags=["hide-input"]
STORE = repo_root() / "results" / ("central-calibration" + ("" if mode == "full" else "-quick")
                                   + ("" if seed == 0 else f"-seed{seed}"))
narrow = {"loc_mean": 0.0, "loc_var": 1.0}
cal_runs = cal.run_calibration(
    tasks=cal.replications(["central", "central-naive", "central-private"], (0.1, 1.0), 100,
                           SIZES["cal_reps"]),
    out=STORE, seed=seed, interval=(-8.0, 8.0), prior=narrow, progress=False)
cal_summary = cal.calibration_summary(cal_runs, prior=narrow)
show_table(cal.coverage_table(cal_summary))

# %% tags=["hide-input"]
alpha, verdict = cal.calibration_verdict(cal_summary)
learned = cal_summary.set_index(["method", "eps", "param"]).mean_learned
glue_number("cal-reps", SIZES["cal_reps"])
glue_number("cal-alpha", alpha)
glue_phrase("cal-verdict", "\n".join(verdict))
glue_number("learned-central", learned["central", 1.0, "mu"])
glue_number("learned-private", learned["central-private", 1.0, "mu"])

# %% [markdown]
# With {glue:text}`cal-reps` replications per row (p-value bound
# {glue:text}`cal-alpha:.2g`):
#
# ```{glue:md} cal-verdict
# :format: myst
# ```
#
# The mean IQR of μ is {glue:text}`learned-central:.2f` of the prior's for `central` at
# ε = 1 and {glue:text}`learned-private:.2f` for `central-private`.

# %% tags=["hide-input"]
disp_p = 2 * stats.norm.sf(cal_summary.dispersion_z.abs())
flagged = cal_summary.assign(fails=(cal_summary.ks_p < alpha) | (disp_p < alpha))
private_fails = flagged[(flagged.method == "central-private") & flagged.fails]
naive_rows = flagged[flagged.method == "central-naive"]
glue_phrase("private-cost", "at these sizes the calibration study sees no cost of that."
            if private_fails.empty else "the calibration study flags it for "
            + ", ".join(f"{r.param} at ε = {r.eps:g}" for r in private_fails.itertuples())
            + ".")
for key, value in {"naive-fails": int(naive_rows.fails.sum()), "naive-rows": len(naive_rows),
                   "naive-z-min": naive_rows.dispersion_z.min(),
                   "naive-z-max": naive_rows.dispersion_z.max()}.items():
    glue_number(key, value)

# %% [markdown]
# `central-private` treats the privately chosen interval as if it were fixed, although it
# came from the same people; {glue:md}`private-cost`  The naive posterior, which takes
# the noisy sums for the true ones, fails in {glue:text}`naive-fails` of its
# {glue:text}`naive-rows` rows; its dispersion z is between
# {glue:text}`naive-z-min:.1f` and {glue:text}`naive-z-max:.1f` (above 0: too narrow).
