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
# (ch-long-streams)=
# # Long streams
#
# The paper's SMC (Algorithms 2-3) carries the latent values $x_{1:t}$ in every particle
# and, at every step $t$, moves all of them: step $t$ costs $O(Nt)$ and a stream of $n$
# individuals $O(Nn^2)$ (Section 4: "the computational cost ... is $O(Nn^2)$ in
# general"; Section 7: a cost "that grows quadratically with data size can be
# concerning when $n$ is very large").  At $n = N = 1000$ that is seconds; a stream of
# $10^5$ individuals would take hours (extrapolated below).  The paper names ways out
# and leaves them untried.  This chapter runs them on the paper's model,
# $X_t \sim \mathcal{N}(50, 10)$ with the Laplace mechanism, and measures what each
# costs and what it gives up:
#
# * `smc`: Algorithms 2-3, the paper's SMC ({ref}`ch-smc`); cost $O(Nn^2)$.
# * `smc-subset`: the same, moving a random subset of $m$ of the $x_k$ at each step
#   (Section 4's suggestion; {class}`dpbook.smc.SMC` with `subset=m`); $O(Nnm)$ for the
#   moves, but still an $O(Nn^2)$ copy of the particles' paths after each resampling.
# * `smc-marginal`: a particle filter on $\theta$ alone, the $x_t$ integrated out of
#   each release's likelihood (iterated batch importance sampling,
#   {cite:t}`chopin2002sequential`; {mod}`dpbook.online.ibis`); about $O(Nn \log n)$.
# * `online-gradient`: a Robbins-Monro estimate of $\theta$ moved by the score of each
#   release (Section 7's alternative; {mod}`dpbook.online.gradient`); $O(n)$.
#
# **The marginal SMC** weights each particle $\theta_i$ by the density of release $t$,
# $p^{\epsilon}_{l_t, r_t}(y_t \mid \theta_i)$ (in closed form for this model; by
# quadrature for other families).  When the effective sample size falls below $N/2$ it
# resamples and moves the particles by five Metropolis-Hastings steps that target
# $p(\theta \mid y_{1:t})$ (eq. 5), a random walk scaled by the particles' covariance.
# A move costs $Nt$ density evaluations, but moves become rarer as the posterior
# concentrates.  Each step of the walk is first screened against the Gaussian fitted
# to the particles, which costs nothing, and only the proposals that pass meet the
# exact likelihood (delayed acceptance, {cite:t}`christen2005markov`): the kernel still
# leaves the posterior invariant, and most proposals never cost a likelihood sum (the
# table of where the time goes counts them).
#
# **The online gradient** keeps no posterior: a point estimate $\hat\theta_t$, moved
# after each release by a Fisher-scoring step of size $1/(t + 10)$, and the interval of
# the next individual placed at $\hat\theta_t$.  It cannot draw $\theta$ from a
# posterior, so it does not explore, and it reports no uncertainty.
#
# Every run below is one stream of Algorithm 1 with its clock: the seconds an online
# method has spent when individual $t$ has been processed are its cost for a stream of
# length $t$, so one run gives the whole cost curve ({func}`dpbook.online.streams.timed_run`).

# %% tags=["parameters"]
mode = "quick"  # "quick": streams of 5,000 (about a minute); "full": 10^5 (about 4 minutes)
seed = 0  # root seed of the populations and the algorithms

# %% tags=["hide-input"]
import numpy as np
import pandas as pd
import seaborn as sns

from dpbook.figures import (
    GREEK,
    METHOD_COLOURS,
    figure_saver,
    glue_number,
    glue_phrase,
    posterior_paths,
    show_table,
)
from dpbook.online import streams, warm_up
from dpbook.privacy.population import normal_population

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("09_long_streams", mode=mode, seed=seed)
SIZES = {"quick": dict(long=5_000, smc=1_000, subset=2_000, exact_at=(1_000,)),
         "full": dict(long=100_000, smc=5_000, subset=5_000, exact_at=(1_000, 10_000))}[mode]
N, M, EPS = 1000, 100, (1.0, 10.0)  # particles, subset size, privacy levels
MU, SIGMA = 50.0, 10**0.5  # the paper's population
FIXED = (MU - 10 * SIGMA, MU + 10 * SIGMA)  # Section 6's fixed interval
LENGTH = {"smc": SIZES["smc"], "smc-subset": SIZES["subset"],
          "smc-marginal": SIZES["long"], "online-gradient": SIZES["long"]}
checkpoints = sorted({*np.unique(np.geomspace(10, SIZES["long"], 60).astype(int)),
                      *SIZES["exact_at"]})

warm_up()  # compile outside the clocks
runs = {}
for eps in EPS:
    def population(n, eps=eps):  # the same individuals and noise for every method
        return normal_population(n, MU, SIGMA, eps, seed=[seed, round(100 * eps)])

    jobs = [(m, "adaptive") for m in LENGTH] + [("smc-marginal", FIXED)]
    for k, (method, policy) in enumerate(jobs):
        n = LENGTH[method]
        runs[method, "adaptive" if policy == "adaptive" else "fixed", eps] = streams.timed_run(
            method, population(n), n, policy=policy, n_particles=N,
            subset=M if method == "smc-subset" else None,
            checkpoints=[c for c in checkpoints if c < n] + [n], seed=[seed, round(100 * eps), k])
clock = pd.concat([run.clock.assign(policy=policy, eps=eps)
                   for (_, policy, eps), run in runs.items()], ignore_index=True)
total = clock.groupby(["method", "policy", "eps"]).cpu_s.max().sum()
glue_number("n-streams", len(runs))
glue_number("cpu-minutes", total / 60)

# %% [markdown]
# {glue:text}`n-streams` streams, {glue:text}`cpu-minutes:.1f` CPU-minutes in all.

# %% [markdown]
# ## Cost against n
#
# Wall-clock and CPU seconds against the stream's length, with the Thompson-sampling
# policy and the best interval of eq. (13).  The slopes in the legend are the exponents
# fitted on the log-log scale from $t = 1000$ on (from $n/10$ for the runs shorter than
# $10^4$), where start-up costs no longer dominate: a method whose cost is $O(n^k)$ has
# slope $k$.  The full build runs this chapter after the others, alone on the 2 cores
# (quick mode runs it beside another chapter, on one numba thread); the times depend on
# the machine, the slopes and the ratios between methods carry over.

# %% tags=["hide-input"] fig_caption="Seconds spent by each online method when individual n has been processed (its cost for a stream of length n), ε = 1 and 10, on log-log axes; the legend gives the fitted slope." fig_alt="Two log-log line plots, wall clock and CPU seconds against stream length, one line per method and epsilon: the latent SMC rises steeply and stops early, the subset SMC a little less steeply, the marginal SMC and the online gradient rise about linearly to the longest streams."
adaptive = clock[clock.policy == "adaptive"]
slopes = streams.cost_exponents(adaptive, by=("method", "eps"))
cpu_slopes = streams.cost_exponents(adaptive, by=("method", "eps"), column="cpu_s")
seconds = adaptive.melt(id_vars=["method", "eps", "t"], value_vars=["wall_s", "cpu_s"],
                        var_name="clock", value_name="seconds")
seconds["clock"] = seconds["clock"].map({"wall_s": "wall clock", "cpu_s": "CPU"})
label = {m: f"{m} (slope {g.slope.mean():.2f})" for m, g in slopes.groupby("method")}
g = sns.relplot(seconds[seconds.t >= 100].assign(method=lambda d: d.method.map(label)),
                kind="line", x="t", y="seconds", hue="method", style="eps", row="clock",
                palette={label[m]: METHOD_COLOURS[m] for m in label},
                marker="o", markersize=3, height=2.6, aspect=2.0,
                facet_kws=dict(sharey=False))
g.set(xscale="log", yscale="log", xlabel="n (stream length)")
g.set_titles("{row_name}")
save(g.figure, "cost", f"N = {N} particles, m = {M}; slopes averaged over ε")

# %% caption="The cost of each method: wall and CPU seconds at the longest n measured, and the fitted exponent." name="tbl-09-cost"
table = slopes.merge(
    cpu_slopes[["method", "eps", "slope", "at_n_max"]],
    on=["method", "eps"],
    suffixes=("_wall", "_cpu"),
)
for n in (10**5, 10**6):
    table[f"wall at n = {n:.0e}"] = streams.extrapolate(slopes, n)
show_table(
    table.rename(
        columns={
            "at_n_max_wall": "wall s",
            "at_n_max_cpu": "CPU s",
            "n_max": "measured to n",
        }
    )
)

# %% tags=["hide-input"]
ratio = {eps: (table.query("method == 'smc' and eps == @eps")["wall at n = 1e+05"].iat[0]
               / table.query("method == 'smc-marginal' and eps == @eps")
               ["wall at n = 1e+05"].iat[0]) for eps in EPS}
smc = table[table.method == "smc"]
glue_number("smc-slope", smc.slope_wall.mean())
glue_number("smc-hours", smc["wall at n = 1e+05"].mean() / 3600)
glue_number("smc-measured-to", smc.n_max.iat[0])
glue_phrase("smc-over-marginal", " and ".join(f"{ratio[e]:.0f}" for e in EPS))
glue_phrase("eps-list", " and ".join(f"{e:g}" for e in EPS))
glue_number("subset-slope", table[table.method == "smc-subset"].slope_wall.mean())
glue_number("gradient-slope", table[table.method == "online-gradient"].slope_wall.mean())

# %% [markdown]
# The latent SMC's time grows as $n$ to the power {glue:text}`smc-slope:.2f`; at that
# rate a stream of $10^5$ would take {glue:text}`smc-hours:.1f` hours on this machine
# (extrapolated from {glue:text}`smc-measured-to` individuals, not run), about
# {glue:md}`smc-over-marginal` times the marginal SMC's time at ε =
# {glue:md}`eps-list`.  The subset SMC saves the moves of the unmoved $x_k$ but still
# copies every particle's path after each resampling, so its exponent is
# {glue:text}`subset-slope:.2f`, not 1.

# %% [markdown]
# ### Where the marginal SMC's time goes
#
# Reweighting is one density evaluation per particle per release; a move step is one
# per particle per release seen so far, for the proposals that pass the screen.  The
# rest is Algorithm 1's own work (the Thompson draw and the interval) and bookkeeping.

# %% caption="Where the marginal SMC's time goes, per stream (seconds)." name="tbl-09-time-split"
def time_split(run):
    post = run.run.smc
    split = dict(post.timing)
    split["policy and bookkeeping"] = run.clock.wall_s.iat[-1] - sum(
        split.values()
    )
    return pd.Series(
        split
        | {
            "resample-moves": len(post.history.moves),
            "exact evaluations per move step": post.evaluations
            / max(1, post.moves * len(post.history.moves)),
        }
    )


show_table(
    pd.DataFrame(
        {
            f"{policy}, ε = {eps:g}": time_split(run)
            for (m, policy, eps), run in runs.items()
            if m == "smc-marginal"
        }
    )
)

# %% [markdown]
# ## Accuracy against the exact posterior
#
# Each run's posterior quartiles of $\mu$ and $\sigma$ at $t$ against those of the
# exact posterior (eq. 5, on a grid; {ref}`ch-smc`) of the same releases
# $y_{1:t}$, as errors in units of the exact posterior's interquartile range.  The
# Monte Carlo error of a quartile from $N$ independent draws is about $1/\sqrt{N}$ of
# the interquartile range (0.03 for $N = 1000$), more for correlated particles.  The
# online gradient's estimate is compared with each quartile, so its error at the median
# is that of a point estimate, and the two others say where it sits in the posterior.

# %% caption="Errors of each method's quartiles against the exact posterior, in exact IQRs." name="tbl-09-errors"
# a 61 x 61 grid: on these streams at t = 10^4 its quartiles are within 0.001
# interquartile ranges of a 201 x 201 grid's, at a third of the cost
accuracy = pd.concat(
    [
        streams.against_exact(
            run,
            [t for t in SIZES["exact_at"] if t <= LENGTH[m]],
            eps,
            grid=(61, 61),
        ).assign(policy=policy, eps=eps)
        for (m, policy, eps), run in runs.items()
    ],
    ignore_index=True,
)
errors = accuracy.assign(param=accuracy.param.map(GREEK)).pivot_table(
    index=["t", "method", "policy", "eps"],
    columns=["param", "quartile"],
    values="error",
)
show_table(errors)

# %% tags=["hide-input"]
posteriors = accuracy[accuracy.method != "online-gradient"]
worst = posteriors.groupby(["method", "t"]).error.apply(lambda e: e.abs().max())
glue_phrase("worst-errors", "; ".join(f"`{m}` at t = {t}: {v:.3f}"
                                 for (m, t), v in worst.items()))

# %% [markdown]
# Largest error over both parameters, the three quartiles and both ε, in exact
# interquartile ranges: {glue:md}`worst-errors`.

# %% [markdown]
# An error far beyond $1/\sqrt{N}$ is a sampler that has not found the posterior, or a
# Monte Carlo error much larger than that of independent draws.  To tell which, the
# releases $y_{1:1000}$ of the stream where the latent SMC erred most are analysed
# again, offline, by the latent SMC ({func}`dpbook.smc.smc_posterior`) and the
# marginal SMC ({func}`dpbook.online.ibis.marginal_posterior`) with other seeds, beside
# the quartiles of the online run that released them.

# %% caption="The hard stream analysed again with other seeds: quartiles per method and seed." name="tbl-09-again"
from dpbook.online import marginal_posterior  # noqa: E402
from dpbook.posterior import exact_posterior  # noqa: E402
from dpbook.smc import smc_posterior  # noqa: E402

t0, SEEDS = min(SIZES["exact_at"]), range(1, 4)
hard = accuracy[(accuracy.method == "smc") & (accuracy.t == t0)]
hard_eps = hard.loc[hard.error.abs().idxmax(), "eps"]
stream = runs["smc", "adaptive", hard_eps].run
y, l, r = stream.y[:t0], stream.l[:t0], stream.r[:t0]
online = [
    {
        "method": "smc",
        "seed": "online run",  # the run that released these y
        **runs["smc", "adaptive", hard_eps]
        .clock.set_index("t")
        .loc[t0]
        .filter(like="_q")
        .to_dict(),
    }
]
offline = [
    {
        "method": name,
        "seed": s,
        **streams.quartiles(fit(y, l, r, hard_eps, n_particles=N, seed=s)),
    }
    for name, fit in (
        ("smc", smc_posterior),
        ("smc-marginal", marginal_posterior),
    )
    for s in SEEDS
]
exact = exact_posterior(y, l, r, hard_eps)
again = pd.DataFrame(
    online
    + offline
    + [{"method": "exact", "seed": "", **streams.quartiles(exact)}]
)
show_table(again.set_index(["method", "seed"]))

# %% tags=["hide-input"]
iqr_sigma = float(np.diff(exact.quantile([0.25, 0.75])[:, 1])[0])
spread = again[again.method != "exact"].groupby("method")[["sigma_q50", "sigma_q75"]].agg(
    lambda v: (v.max() - v.min()) / iqr_sigma)
runs_of = again[again.method != "exact"].groupby("method").size()
# the mean range of k medians of N independent draws from a normal posterior, in IQRs
# (a median's standard error is 1.2533 sd / sqrt(N), and an IQR is 1.349 sd)
expected = {m: 1.2533 / 1.349 / np.sqrt(N) * np.ptp(np.random.default_rng(0)
            .standard_normal((100_000, k)), axis=1).mean() for m, k in runs_of.items()}
for key, value in {
    "hard-eps": hard_eps,
    "hard-width": np.median(r - l) / SIGMA,
    "spread-smc-q50": spread.at["smc", "sigma_q50"],
    "spread-marginal-q50": spread.at["smc-marginal", "sigma_q50"],
    "spread-smc-q75": spread.at["smc", "sigma_q75"],
    "spread-marginal-q75": spread.at["smc-marginal", "sigma_q75"],
    "particles": N,
    "runs-smc": runs_of["smc"],
    "runs-marginal": runs_of["smc-marginal"],
    "expected-smc": expected["smc"],
    "expected-marginal": expected["smc-marginal"],
    "excess-smc": spread.at["smc", "sigma_q50"] / expected["smc"],
    "excess-marginal": spread.at["smc-marginal", "sigma_q50"] / expected["smc-marginal"],
}.items():
    glue_number(key, value)
glue_phrase("exact-sigma-quartiles",
       ", ".join(f"{v:.2f}" for v in again.iloc[-1].filter(like="sigma_q")))

# %% [markdown]
# At ε = {glue:text}`hard-eps:g` the median interval asked was
# {glue:text}`hard-width:.2f` σ wide: the best interval of eq. (13) is chosen for μ, and
# so narrow an interval tells little about σ, whose posterior keeps a long upper tail
# (exact quartiles {glue:md}`exact-sigma-quartiles`).  Between the runs above the
# posterior median of σ spreads over {glue:text}`spread-smc-q50:.2f` exact interquartile
# ranges for the latent SMC and {glue:text}`spread-marginal-q50:.2f` for the marginal
# SMC, its upper quartile over {glue:text}`spread-smc-q75:.2f` and
# {glue:text}`spread-marginal-q75:.2f`.  The medians of {glue:text}`particles`
# independent draws from the posterior, as many of them as there are runs of each method
# ({glue:text}`runs-smc` and {glue:text}`runs-marginal`), would spread over about
# {glue:text}`expected-smc:.2f` and {glue:text}`expected-marginal:.2f`: the latent SMC's
# spread is {glue:text}`excess-smc:.0f` times that, the marginal SMC's
# {glue:text}`excess-marginal:.1f` times.  The latent SMC moves σ only through the
# latent $x_k$ (a Gibbs move given all of them), the well-known slow mixing of data
# augmentation when each latent value is weakly informed; the marginal SMC moves θ
# directly.

# %% [markdown]
# ## The longest stream
#
# The marginal SMC with the adaptive policy against the same with the paper's fixed
# interval $[\mu - 10\sigma, \mu + 10\sigma]$ (centred at the truth: an oracle's
# choice), and the online gradient, over the longest stream: posterior median (line)
# and quartiles (band) against $t$, the truth dashed.

# %% tags=["hide-input"] fig_caption="Posterior median and quartiles of μ and σ over a stream of {n:,} individuals: the marginal SMC with the adaptive and with the fixed interval, and the online gradient's estimate; ε = 1 and 10." fig_alt="Four panels, mu and sigma against the number of individuals on a log axis for two epsilons, one line with a band per run and the truth dashed."
LONG = {"adaptive": METHOD_COLOURS["smc-adaptive"], "fixed": METHOD_COLOURS["smc-fixed"],
        "online-gradient": METHOD_COLOURS["online-gradient"]}
paths = streams.quartile_paths(clock[clock.method.isin(["smc-marginal", "online-gradient"])])
paths = paths.assign(run=paths.method.where(paths.method != "smc-marginal", paths.policy),
                     param=paths.param.map(GREEK))
g = posterior_paths(paths, row="param", col="eps", hue="run", centre="q50",
                    band=("q25", "q75"), truth={"μ": MU, "σ": SIGMA}, palette=LONG,
                    sharey="row", height=2.4, aspect=1.5)
g.set(xscale="log")
for ax, (lo, hi) in zip(g.axes[:, 0], [(MU - 3 * SIGMA, MU + 3 * SIGMA), (0, 3 * SIGMA)]):
    ax.set_ylim(lo, hi)
g.set_titles("{row_name}, ε = {col_name:g}")
g.add_legend(title="")
save(g.figure, "long_stream",
     f"N = {N} particles; quartiles at {len(checkpoints)} checkpoints",
     n=SIZES["long"])

# %% [markdown]
# The intervals $[l_t, r_t]$ the individuals were asked to clip to, at the same
# checkpoints: their midpoint (the true $\mu$ dashed) and their width (the true
# $\sigma$ dashed).  The adaptive policy's first intervals follow draws from the prior,
# $\mu \sim \mathcal{N}(0, 10^4)$, far outside the plot.

# %% tags=["hide-input"] fig_caption="Midpoint and width of the interval [l, r] asked of individual t for the three runs of the figure above; ε = 1 and 10; dashed: the true μ (top) and σ (bottom)." fig_alt="Four panels against the number of individuals on a log axis: the fixed interval's midpoint and width are constant, the adaptive one's midpoint settles on the truth with a width far below the fixed one's, the online gradient's midpoint climbs from below to the truth."
asked = pd.concat([pd.DataFrame({"t": ts, "midpoint": (run.run.l + run.run.r)[ts - 1] / 2,
                                 "width": (run.run.r - run.run.l)[ts - 1]})
                   .assign(run=m if m == "online-gradient" else policy, eps=eps)
                   for (m, policy, eps), run in runs.items() if m in paths.method.values
                   for ts in [np.array([c for c in checkpoints if c <= len(run.run.y)])]])
g = sns.relplot(asked.melt(id_vars=["t", "run", "eps"], var_name="what"), kind="line",
                x="t", y="value", hue="run", row="what", col="eps", palette=LONG,
                height=2.2, aspect=1.6, facet_kws=dict(sharey="row"))
g.set(xscale="log", ylabel="", xlabel="t (individuals released)")
g.axes[0, 0].set_ylim(MU - 12 * SIGMA, MU + 12 * SIGMA)
g.axes[1, 0].set_yscale("log")
for (what, _), ax in g.axes_dict.items():
    ax.axhline(MU if what == "midpoint" else SIGMA, color="k", lw=1, ls="--")
g.set_titles("{row_name}, ε = {col_name:g}")
save(g.figure, "intervals", f"intervals at {len(checkpoints)} checkpoints")

# %% caption="The longest streams at t = n: the median, its error and the IQR, per ε and run." name="tbl-09-end"
end = paths[paths.t == paths.t.max()].assign(
    error=lambda d: d.q50 - d.param.map({"μ": MU, "σ": SIGMA}),
    iqr=lambda d: d.q75 - d.q25,
)
show_table(
    end.pivot_table(
        index=["eps", "run"], columns="param", values=["q50", "error", "iqr"]
    ),
    digits=4,
)

# %% tags=["hide-input"]
stat = end.pivot_table(index=["param", "eps"], columns="run", values=["iqr", "error"])
ratio = stat["iqr"].fixed / stat["iqr"].adaptive
gap = stat["error"]["online-gradient"].abs() / stat["iqr"].adaptive
ogd = paths[(paths.run == "online-gradient") & (paths.param == "μ")]
arrive = {e: d.t[(d.q50 - MU).abs() < SIGMA].min() for e, d in ogd.groupby("eps")}


def each_eps(values, fmt):
    return " and ".join(fmt.format(v) for v in values) + " (ε = " + " and ".join(
        f"{e:g}" for e in EPS) + ")"


glue_phrase("long-n", f"{SIZES['long']:,}")
glue_phrase("iqr-ratio-mu", each_eps(ratio["μ"], "{:.1f}"))
glue_phrase("worth-mu", each_eps(ratio["μ"] ** 2, "{:.0f}"))
glue_phrase("iqr-ratio-sigma", each_eps(ratio["σ"], "{:.2f}"))
glue_phrase("ogd-gap-mu", each_eps(gap["μ"], "{:.1f}"))
glue_phrase("ogd-gap-sigma", each_eps(gap["σ"], "{:.1f}"))
glue_phrase("ogd-arrives", each_eps([arrive[e] for e in EPS], "{:,}"))

# %% [markdown]
# After {glue:md}`long-n` individuals the fixed interval's posterior interquartile range
# of μ is {glue:md}`iqr-ratio-mu` times the adaptive one's.  A posterior's width falls as
# $1/\sqrt{n}$, so for μ the adaptive interval is worth {glue:md}`worth-mu` times as
# many individuals.  For σ the ratio is {glue:md}`iqr-ratio-sigma`: the interval of
# eq. (13) is chosen for μ (a ratio below 1 means the fixed interval learned σ better).
# The online gradient's final error in μ is {glue:md}`ogd-gap-mu` adaptive interquartile
# ranges, in σ {glue:md}`ogd-gap-sigma`.  It starts at the prior's median, 0, moves at
# most one scale per individual and first comes within one σ of μ after
# {glue:md}`ogd-arrives` individuals; its steps of size 1/t then average that start away
# only slowly, and it has no credible interval to say how far it still is.
#
# Publishing one interval for a batch of individuals, as a deployment must, and what
# larger batches cost: {ref}`ch-batches`.
