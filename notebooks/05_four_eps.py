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
# (ch-four-eps)=
# # Adaptive versus fixed truncation at four privacy levels
#
# This chapter reproduces Figure 2 of {cite:p}`yildirim2023adaptive`: one run of the
# online sampler for each privacy level $\epsilon \in \{1, 2, 5, 10\}$, once with the
# adaptive truncation of Section 5 and once with a fixed, wide interval.
#
# The set-up is that of Section 6 of the paper.
#
# * The sensitive values are $X_1, \dots, X_n \sim \mathcal{N}(\mu, \sigma^2)$ i.i.d.
#   with $\mu = 50$, $\sigma^2 = 10$, and $n = 1000$.
# * The priors are $\mu \sim \mathcal{N}(0, 10^4)$ and $\sigma^2 \sim \mathcal{IG}(1, 1)$.
# * Individual $t$ releases $Y_t = T_{l_t}^{r_t}(X_t) + (r_t - l_t)V_t$ with
#   $V_t \sim \mathrm{Laplace}(1/\epsilon)$.
# * The posterior of $\theta = (\mu, \sigma)$ given $Y_{1:t}$ is tracked by the
#   resample-move SMC sampler of {ref}`ch-smc` with $N = 1000$ particles.
#
# The two ways of choosing the interval $[l_t, r_t]$ are:
#
# **SMC-adaptive.** Draw $\vartheta_t = (m, c)$ from the particle approximation of the
# posterior (Thompson sampling) and set $l_{t+1} = m + a^* c$, $r_{t+1} = m + b^* c$.
# Here $(a^*, b^*)$ maximises the $\mu$-entry of the Fisher information for the base
# distribution $\mathcal{N}(0, 1)$ (eq. 13; {ref}`ch-fisher-grid`).
#
# **SMC-non-adaptive.** Use the same interval $[l_c, r_c] = [\mu - 10\sigma, \mu + 10\sigma]$
# for every individual.  It is centred at the *true* $\mu$, but it is wide: it stands for
# an analyst who knows only a safe range for the data.
#
# Both samplers see the same sensitive sample $X_{1:n}$ in a given run.  They do not see
# the same released values, because the intervals differ.
#
# The runs come from the experiment store shared with {ref}`ch-boxplots`.  The store holds
# every run of all three methods of Section 6.  This chapter uses run 0, the run for which
# the particles are kept, for the figure.  It uses all runs for the summary tables.  In
# `quick` mode the store is small (fewer individuals, particles and runs; see the table
# below), so only `full` mode should be compared with the paper's figure.  Departures
# from the paper and from the authors' code are listed in {ref}`reproduction-notes`.
# The chapter's parameters `eps` and `runs` choose other privacy levels and numbers of
# runs; those go to a store of their own (`results/quick-eps1-3`, say), never to the
# shared one.

# %% tags=["parameters"]
mode = "quick"  # "quick": a small experiment (well under a minute); "full": the paper size
seed = 0  # root seed of the experiment; 0 is the default of the dpbook experiment CLI
scheduler = None  # a Dask scheduler's address (tcp://host:8786) to run the experiment on
eps = [1, 2, 5, 10]  # privacy levels (the paper's); other eps or runs use a store of their own
runs = None  # runs per level and method; None: the mode's (5 quick, 30 full: the paper's)

# %% tags=["hide-input"]

import numpy as np
import pandas as pd

from dpbook.experiment import book_experiment, store_report
from dpbook.figures import figure_saver, glue_phrase, particle_clouds, show_table

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("05_four_eps", mode=mode, seed=seed)


estimates, trajectories, STORE, elapsed, computed = book_experiment(
    mode, seed, scheduler=scheduler, eps=eps, runs=runs)
config, manifest = trajectories.config, trajectories.manifest
print(store_report(estimates, STORE, elapsed, computed))

# %% [markdown]
# The table lists the configuration of the store and the optimal interval $(a^*, b^*)$
# for each $\epsilon$.  The interval was computed when the experiment ran (eq. 13, on
# the grid of {ref}`ch-fisher-grid`).  For $\theta$ at its true value, the adaptive
# interval has width $(b^* - a^*)\sigma$ and the fixed one $20\sigma$.  The Laplace noise
# scale is this width divided by $\epsilon$.

# %% caption="The experiment's configuration in this mode." name="tbl-05-config"
mu_true, sigma_true = config["mu"], config["sigma"]
l_c = mu_true - config["fixed_half_width"] * sigma_true
r_c = mu_true + config["fixed_half_width"] * sigma_true
EPS = config["eps"]
intervals = pd.DataFrame(
    [
        {
            "eps": e,
            "a*": iv["a"],
            "b*": iv["b"],
            "noise scale, adaptive at true theta": (iv["b"] - iv["a"])
            * sigma_true
            / e,
            "noise scale, fixed [l_c, r_c]": (r_c - l_c) / e,
        }
        for e, iv in ((e, manifest["intervals"][repr(e)]) for e in EPS)
    ]
).set_index("eps")
intervals["fixed / adaptive"] = (
    intervals["noise scale, fixed [l_c, r_c]"]
    / intervals["noise scale, adaptive at true theta"]
)
show_table(
    pd.Series(
        {
            k: config[k]
            for k in (
                "n",
                "particles",
                "runs",
                "mhaar_iters",
                "seed",
                "mu",
                "sigma",
                "every",
                "keep_particles",
            )
        },
        name="configuration",
        dtype=object,
    )
)

# %% caption="The adaptive interval (a*, b*) per ε, and the widths and noise scales of the adaptive and the fixed interval at the true θ." name="tbl-05-intervals"
show_table(intervals)

# %% [markdown]
# The adaptive interval is very narrow at $\epsilon = 1$, a small fraction of $\sigma$.
# At that privacy level the noise dominates everything else, so the Fisher information
# prefers to clip almost every value to a short interval.  The interval widens as
# $\epsilon$ grows.  The last column compares the noise scales: the fixed interval
# pays for its width with noise that is that many times larger.  The adaptive interval
# gets this gain only if it is placed where the data are, and at the start nothing is
# known about $\mu$.
#
# ## One run for each privacy level
#
# The paper's Figure 2 has one row per $\epsilon$; here each $\epsilon$ gets its own
# figure ({numref}`fig-05-four-eps-figure2-eps1` to {numref}`fig-05-four-eps-figure2-eps10`),
# so that the panels stay readable in the page.
#
# * The top row shows $\mu$, for the adaptive (left) and the non-adaptive sampler (right).
# * The bottom row shows $\sigma$ in the same order.  Its axis is logarithmic, as in
#   the authors' plots, because early particles of $\sigma$ span orders of magnitude.
#
# The blue dots are the particles at every 20th step, resampled to equal weights as in
# the paper.  The red line is the posterior mean at every step.  The black line is the
# true value.  In the $\mu$ panels the green lines are the truncation points $l_t$ and
# $r_t$.  Within a figure, the two $\mu$ panels share one vertical scale and the two
# $\sigma$ panels share another.  The scale is set by the particles after the first
# quarter of the run (their 1% to 99% quantiles, with a margin).  Some things lie off
# this scale: the first steps, where the posterior is still close to the very wide
# prior; the fixed interval $[l_c, r_c]$ in most figures; and, at large $\epsilon$, the
# ends of the adaptive intervals, which are then wider than the cloud of particles.

# %% tags=["hide-input"] fig_caption="Figure 2 of the paper at ε = {eps:g}: the particles of θ = (μ, σ) over time t (dots in the method's colour, after resampling), their mean (red) and the true value (black), for the adaptive interval (left, with its ends l_t, r_t in green) and the fixed interval (right)." fig_alt="Four panels for epsilon {eps:g}: particle clouds of mu (top) and sigma (bottom, log scale) against time, adaptive truncation on the left and fixed truncation on the right, each with the posterior mean and the true value."
METHODS = {"smc-adaptive": "SMC-adaptive", "smc-fixed": "SMC-non-adaptive"}
RUN = 0
for level in EPS:  # one figure per privacy level, so that each is readable in the page
    fig = particle_clouds(trajectories, level, RUN, METHODS)
    save(fig, f"figure2_eps{level:g}",
         f"ε = {level:g}, run {RUN}; n = {config['n']}, "
         f"N = {config['particles']} particles, "
         f"μ = {mu_true:g}, σ² = {sigma_true**2:g}; "
         f"particles every {config['every']}th "
         f"step; fixed interval [{l_c:.1f}, {r_c:.1f}]", eps=level)

# %% [markdown]
# ## How fast does the posterior concentrate?
#
# The figure shows a single run.  The store also holds the posterior mean and standard
# deviation at every step of every run, for both samplers.  A simple summary of
# "how quickly" is the **settling time**: the first $t$ after which the posterior
# standard deviation of $\mu$ stays below a level for the rest of the run.  The table
# uses the levels $\sigma/2$ and $\sigma/10$.  It reports the median over the runs, the
# number of runs that reach each level within $n$ steps, and the posterior mean and
# standard deviation of $\mu$ at $t = n$, averaged over the runs.

# %% caption="How soon the posterior of μ settles: median steps until it stays within σ/2 and σ/10, runs that get there, and the posterior of μ at t = n." name="tbl-05-settle" tags=["hide-input"]
steps = trajectories.steps(methods=tuple(METHODS))
LEVELS = {"σ/2": sigma_true / 2, "σ/10": sigma_true / 10}


def settling_time(sd, level):
    """First t (1-based) after which sd stays below level; NaN if it never settles."""
    above = np.flatnonzero(sd >= level)
    if above.size == 0:
        return 1.0
    return float(above[-1] + 2) if above[-1] + 1 < len(sd) else np.nan


rows = []
for (method, level, run), g in steps.groupby(["method", "eps", "run"], sort=False):
    row = {"method": METHODS[method], "eps": level, "run": run,
           "final mean of mu": g["mean_mu"].iat[-1], "final sd of mu": g["sd_mu"].iat[-1]}
    for name, level in LEVELS.items():
        row[f"t: sd(mu) < {name}"] = settling_time(g["sd_mu"].to_numpy(), level)
    rows.append(row)
per_run = pd.DataFrame(rows)
t_cols = [f"t: sd(mu) < {name}" for name in LEVELS]
settle = per_run.groupby(["eps", "method"]).agg(
    **{f"median {c}": (c, "median") for c in t_cols},
    **{f"runs settled < {name}": (c, "count") for name, c in zip(LEVELS, t_cols)},
    runs=("run", "count"),
    **{"final sd of mu": ("final sd of mu", "mean"),
       "|final mean - mu|": ("final mean of mu", lambda v: np.mean(np.abs(v - mu_true)))})
show_table(settle)

# %% [markdown]
# Where fewer runs than all settle within $n$ steps, the median is taken over the runs
# that do settle.  A missing value (NaN) means that no run settled.
#
# The realised adaptive intervals can be compared with the fixed one directly.  The
# table gives the median width $r_t - l_t$ in the first and the second half of each
# run, relative to $\sigma$.  It also gives the median distance of the interval's centre
# from the true $\mu$ in the second half, again relative to $\sigma$.  The centre is
# the Thompson draw $m$ (shifted by $(a^* + b^*)c/2$, which is zero for symmetric
# intervals), so this distance reflects the remaining posterior uncertainty about $\mu$.

# %% caption="Interval widths in the second half of the stream relative to σ, and the distance of the adaptive interval's centre from μ." name="tbl-05-widths" tags=["hide-input"]
half = config["n"] // 2
adaptive = steps[steps.method == "smc-adaptive"].assign(
    width=lambda f: (f["r"] - f["l"]) / sigma_true,
    offset=lambda f: ((f["l"] + f["r"]) / 2 - mu_true).abs() / sigma_true,
    second_half=lambda f: f["t"] > half)
widths = adaptive.groupby("eps").apply(lambda f: pd.Series({
    "(b*-a*)": intervals.loc[f.name, "b*"] - intervals.loc[f.name, "a*"],
    "median width/σ, t ≤ n/2": f.loc[~f.second_half, "width"].median(),
    "median width/σ, t > n/2": f.loc[f.second_half, "width"].median(),
    "fixed width/σ": (r_c - l_c) / sigma_true,
    "median |centre - μ|/σ, t > n/2": f.loc[f.second_half, "offset"].median()}),
    include_groups=False)
show_table(widths)

# %% [markdown]
# ## What the run shows
#
# The sentences below are generated from the tables above, so they describe the run in
# the current mode, not the paper's run.

# %% tags=["hide-input"]
med = settle[f"median {t_cols[0]}"].unstack("method")
count = settle[f"runs settled < {next(iter(LEVELS))}"].unstack("method")
fin = settle["final sd of mu"].unstack("method")
err = settle["|final mean - mu|"].unstack("method")
n_runs = config["runs"]


def when(method, level):
    k, t = count.loc[level, method], med.loc[level, method]
    if k == 0:
        return "in none of the runs", np.inf
    return f"at a median t = {t:.0f} ({k} of {n_runs} runs)", t


lines = []
for level in EPS:
    (a_text, a), (f_text, f) = (when(m, level) for m in ("SMC-adaptive", "SMC-non-adaptive"))
    faster = "sooner" if a < f else "later" if a > f else "no sooner"
    lines.append(
        f"* **ε = {level:g}.** The posterior sd of μ settles below σ/2 {a_text} with "
        f"adaptive truncation and {f_text} without, {faster} for the adaptive sampler.  "
        f"At t = n the sd is {fin.loc[level, 'SMC-adaptive']:#.3g} versus "
        f"{fin.loc[level, 'SMC-non-adaptive']:#.3g}.  The mean absolute error of the "
        f"posterior mean is {err.loc[level, 'SMC-adaptive']:#.3g} versus "
        f"{err.loc[level, 'SMC-non-adaptive']:#.3g}.")
ratio = fin["SMC-non-adaptive"] / fin["SMC-adaptive"]
lines.append(
    f"\nThe ratio of the final posterior sd of μ, non-adaptive over adaptive, ranges "
    f"from {ratio.min():.2g} (ε = {ratio.idxmin():g}) to {ratio.max():.2g} "
    f"(ε = {ratio.idxmax():g}).  It is above 1, i.e. the adaptive posterior is narrower, "
    f"for {int((ratio > 1).sum())} of the {len(ratio)} privacy levels ({n_runs} runs, "
    f"n = {config['n']}, N = {config['particles']}).")
glue_phrase("findings", "\n".join(lines))

# %% [markdown]
# ```{glue:md} findings
# :format: myst
# ```

# %% [markdown]
# Three mechanisms are at work in the figure.  The tables above show how strongly each
# one acts in the current mode.
#
# * **Exploration, then exploitation.**  The first intervals are drawn with the prior
#   of $\mu$, so they land far from the data, and the green lines start off scale.  As
#   the posterior concentrates, the Thompson draws concentrate with it.  The interval
#   then moves towards $\mu$ with a width close to $(b^* - a^*)\sigma$; compare the
#   width columns with $(b^* - a^*)$.  Nothing in the algorithm forces this: the
#   shrinking posterior reduces the exploration by itself.  Where the centre's distance
#   from $\mu$ (the last column) is many times the width, as it can be at
#   $\epsilon = 1$, most values are clipped to one end.  Each release then says little
#   more than whether $X_t$ lies above or below the interval.
# * **Less noise, faster learning.**  A release through an interval that is already in
#   place is much less noisy than one through $[l_c, r_c]$, whose noise scale is
#   $20\sigma/\epsilon$.  Whether this makes the adaptive particles contract sooner
#   is what the settling times measure.
# * **σ is the harder parameter.**  The score used to pick $(a^*, b^*)$ is the
#   $\mu$-entry of the Fisher information, and the narrow intervals clip most values,
#   which then carry little information about the spread.  The table below compares
#   the posterior mean of $\sigma$ at $t = n$ with the truth and with the prior median
#   of $\sigma$ under $\sigma^2 \sim \mathcal{IG}(1, 1)$.  Where the data are weak,
#   the estimate stays between the two.

# %% caption="The posterior mean of σ at t = n against the truth and the prior median of σ." name="tbl-05-sigma"
prior_median_sigma = float(
    np.sqrt(1 / np.log(2))
)  # median of IG(1, 1) is 1/log 2
sigma_final = (
    steps.groupby(["eps", "method", "run"])["mean_sigma"]
    .last()
    .groupby(["eps", "method"])
    .mean()
    .unstack("method")
    .rename(columns=METHODS)
)
sigma_final["true σ"] = sigma_true
sigma_final["prior median of σ"] = prior_median_sigma
show_table(sigma_final)

# %% [markdown]
# How the estimates at $t = n$ vary over repeated runs, and how they compare with the
# batch MHAAR sampler, is the subject of {ref}`ch-boxplots`.
