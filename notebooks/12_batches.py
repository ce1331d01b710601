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
# (ch-batches)=
# # One interval for a batch of devices
#
# Algorithm 1 asks each individual with an interval drawn after the previous release.
# A deployment cannot: devices fetch the current interval and report later, in batches.
# With `batch=B` ({func}`dpbook.online.algorithm1.run_online`, `dpbook stream --batch`,
# `dpbook experiment --batch`, `dpbook curator publish --k B`) the curator publishes one
# interval, from one Thompson draw, for the next $B$ individuals, and absorbs their $B$
# releases before drawing the next; $B = 1$ is Algorithm 1.
#
# This chapter measures what that costs on the paper's model, $X_t \sim
# \mathcal{N}(50, 10)$ with the Laplace mechanism, over long streams: the marginal SMC on
# $\theta$ of {ref}`ch-long-streams` with the adaptive policy for growing $B$, and with
# Section 6's fixed interval, over several independent streams per point.  Each stream
# is one task of an experiment store ({func}`dpbook.experiment.run_experiment` with a
# list of batch sizes, every task bit for bit the one of a store of its batch size
# alone), so the streams are computed once, resumed if interrupted, and read again when
# only this page changes.  The largest batch is a tenth of the stream.  After a coarse
# batch the sampler moves its particles late in the stream, and each move costs $N t$
# likelihood terms, so the full mode's streams have 20,000 individuals, not the $10^5$ of
# {ref}`ch-long-streams`: at $10^5$ this chapter took an hour of CPU, most of it at
# $B = 10^4$.

# %% tags=["parameters"]
mode = "quick"  # "quick": streams of 5,000 (about a minute); "full": 20,000 (about 10 CPU-minutes)
seed = 0  # root seed of the populations and the algorithms
scheduler = None  # a Dask scheduler's address (tcp://host:8786) to run the streams on

# %% tags=["hide-input"]
import pandas as pd
import seaborn as sns

from dpbook.experiment import ensure_results
from dpbook.figures import GREEK, figure_saver, glue_number, glue_phrase

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("12_batches", mode=mode, seed=seed)
N, EPS = 1000, (1.0, 10.0)  # particles, privacy levels
SIZES = {"quick": dict(n=5_000, streams=2, batches=[1, 10, 100, 1000]),
         "full": dict(n=20_000, streams=3, batches=[1, 10, 100, 1000, 2000])}[mode]
# the stream length in the stores' names: a store of other streams would be an error
tail = f"-{SIZES['n']}" + ("" if seed == 0 else f"-seed{seed}")
common = dict(eps=EPS, runs=SIZES["streams"], n=SIZES["n"], particles=N, seed=seed,
              keep_particles=0, quartiles=True, progress=False, scheduler=scheduler)
adaptive, _ = ensure_results(f"results/batches-{mode}{tail}", methods="smc-marginal-adaptive",
                             batch=SIZES["batches"], **common)
fixed, _ = ensure_results(f"results/batches-fixed-{mode}{tail}",
                          methods="smc-marginal-fixed", **common)


def iqr(df):
    return pd.concat([df.assign(param=GREEK[p], iqr=df[f"{p}_q75"] - df[f"{p}_q25"])
                      for p in ("mu", "sigma")], ignore_index=True)


batched, fixed_runs = iqr(adaptive), iqr(fixed)
fixed_iqr = fixed_runs.groupby(["param", "eps"]).iqr.median()
glue_number("batch-streams", SIZES["streams"])
glue_phrase("batch-n", f"{SIZES['n']:,}")
glue_number("batch-cpu-minutes", (adaptive.seconds.sum() + fixed.seconds.sum()) / 60)

# %% [markdown]
# {glue:text}`batch-streams` streams of {glue:md}`batch-n` individuals per point,
# {glue:text}`batch-cpu-minutes:.1f` minutes of compute in all.  The posterior's spread
# after the whole stream is its interquartile range (the posterior of the scale can have
# infinite variance under clipping); the figure gives the median over the streams with
# their range as the band, and the fixed interval's median as the dashed line.

# %% tags=["hide-input"] fig_caption="Posterior IQR of μ and σ after {n:,} individuals against the batch size B (one published interval per B individuals; B = 1 is Algorithm 1), marginal SMC, adaptive policy, ε = 1 and 10: the median over {streams} streams per point, the band their range; dashed: the fixed interval's median IQR." fig_alt="Two log-log panels, the IQR of mu and of sigma against the batch size, one line per epsilon with a shaded band; the IQR stays near the unbatched value for small batches and rises toward the dashed fixed-interval level as the batches grow."
colours = dict(zip(EPS, sns.color_palette("viridis", len(EPS))))
g = sns.relplot(batched, kind="line", x="batch", y="iqr", hue="eps", col="param",
                estimator="median", errorbar=("pi", 100), marker="o", palette=colours,
                height=2.6, aspect=1.3, facet_kws=dict(sharey=False))
g.set(xscale="log", yscale="log", xlabel="B (individuals per interval)", ylabel="")
g.axes[0, 0].set_ylabel("posterior IQR")
g.legend.set_title("ε")
for (param, eps), v in fixed_iqr.items():
    g.axes_dict[param].axhline(v, color=colours[eps], ls="--", lw=1)
g.set_titles("{col_name}")
save(g.figure, "batches", f"N = {N} particles; B = {', '.join(map(str, SIZES['batches']))}; "
     f"{SIZES['streams']} streams per point", n=SIZES["n"], streams=SIZES["streams"])

# %% tags=["hide-input"]
wide = batched.pivot_table(index=["param", "eps"], columns="batch", values="iqr",
                           aggfunc="median")
cost = wide.div(wide[1], axis=0)  # median IQR relative to Algorithm 1's
b_mid, b_max = 100, SIZES["batches"][-1]
cpu = batched[batched.param == "μ"].groupby(["eps", "batch"]).seconds.median()


def each_eps(values, fmt):
    return " and ".join(fmt.format(v) for v in values) + " (ε = " + " and ".join(
        f"{e:g}" for e in EPS) + ")"


glue_phrase("batch-mid-mu", each_eps(cost.loc["μ", b_mid], "{:.2f}"))
glue_phrase("batch-max-mu", each_eps(cost.loc["μ", b_max], "{:.2f}"))
glue_phrase("batch-fixed-mu", each_eps(
    [fixed_iqr["μ", e] / wide.loc[("μ", e), 1] for e in EPS], "{:.1f}"))
glue_phrase("batch-max", f"{b_max:,}")
glue_phrase("batch-cpu", each_eps([cpu[e, b_mid] / cpu[e, 1] for e in EPS], "{:.2f}"))

# %% [markdown]
# One interval per 100 individuals leaves the median posterior IQR of μ at
# {glue:md}`batch-mid-mu` times Algorithm 1's; one per {glue:md}`batch-max` at
# {glue:md}`batch-max-mu` times, against {glue:md}`batch-fixed-mu` times for the fixed
# interval.  The bands show how much one stream varies around the median: with a few
# streams per point, two neighbouring medians can still differ by that variation as
# well as by the batch.  The first batch's interval comes from the prior ($\mu \sim
# \mathcal{N}(0, 10^4)$), so a large first batch spends many individuals on an interval
# far from the data.  At B = 100 a stream took {glue:md}`batch-cpu` times the unbatched
# one's compute time (median over the streams).
