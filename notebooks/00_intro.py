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
# (ch-intro)=
# # dpbook: a reproducible companion
#
# This book re-derives, re-implements and re-runs the paper *Differentially private
# online Bayesian estimation with adaptive truncation* by Sinan Yıldırım
# {cite:p}`yildirim2023adaptive`.  The code is the Python package `dpbook` (in
# `src/dpbook`), and every number and figure in the book is computed from it when the
# book is built, this page's too.
#
# ## The finding
#
# Each individual releases a value clipped to an interval and noised in proportion to
# the interval's width.  A wide fixed interval clips little but drowns the value in
# noise; the paper chooses each next interval from the current posterior instead.

# %% tags=["parameters"]
mode = "quick"  # "quick": the quick experiment of chapters 5-6; "full": the paper's size
seed = 0  # root seed of the experiment (that of chapters 5 and 6)
scheduler = None  # a Dask scheduler's address, to run the experiment there

# %% tags=["hide-input"] fig_caption="The paper's finding in this build's runs: the root mean squared error of the posterior means of μ and σ against ε, for the adaptive interval and for the fixed interval (online SMC and batch MHAAR); both axes logarithmic." fig_alt="Two line plots, RMSE of mu (left) and sigma (right) against epsilon on log axes, one line per method: adaptive SMC, fixed-interval SMC and MHAAR."
import matplotlib.pyplot as plt
from matplotlib.ticker import NullLocator

from dpbook.experiment import book_experiment, summarize
from dpbook.figures import METHOD_COLOURS, figure_saver, glue_phrase

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("00_intro", mode=mode, seed=seed)

# the store of chapters 5 and 6 (computed there, or here if this page runs first)
estimates, trajectories, STORE, elapsed, computed = book_experiment(mode, seed,
                                                                    scheduler=scheduler)
config = trajectories.config
rmse = summarize(estimates).set_index(["method", "eps"])
NAMES = {"smc-adaptive": "adaptive interval (SMC)", "smc-fixed": "fixed interval (SMC)",
         "mhaar": "fixed interval (MHAAR, batch)"}
SYMBOL = {"mu": "μ", "sigma": "σ"}

fig, axes = plt.subplots(1, 2, figsize=(8.0, 3.2))
for ax, p in zip(axes, ("mu", "sigma")):
    for m, label in NAMES.items():
        r = rmse.loc[m]
        ax.plot(r.index, r[f"{p}_rmse"], "o-", color=METHOD_COLOURS[m], label=label)
    ax.set(xscale="log", yscale="log", xlabel="ε", ylabel=f"RMSE of {SYMBOL[p]}",
           xticks=config["eps"], xticklabels=[f"{e:g}" for e in config["eps"]])
    ax.xaxis.set_minor_locator(NullLocator())  # only the four eps on the x axis
fig.tight_layout(rect=(0, 0, 1, 0.9))
fig.legend(*axes[0].get_legend_handles_labels(), loc="upper center", ncol=3,
           fontsize="small", frameon=False)
save(fig, "finding",
     f"{config['runs']} runs per ε; n = {config['n']}, "
     f"N = {config['particles']}; "
     f"truth μ = {config['mu']:g}, σ = {config['sigma']:.3g}")

# the sentence: the adaptive RMSE over the fixed interval's (SMC), per parameter
parts = []
for p in ("mu", "sigma"):
    ratio = (rmse.loc["smc-adaptive", f"{p}_rmse"] / rmse.loc["smc-fixed", f"{p}_rmse"])
    wins = int((ratio < 1).sum())
    where = f"at all {wins} ε" if wins == len(ratio) else f"at {wins} of the {len(ratio)} ε"
    parts.append(f"{ratio.min():.2g} to {ratio.max():.2g} times the fixed interval's for "
                 f"{SYMBOL[p]} (smaller {where})")
size = ("the paper's sizes" if mode == "full" else
        "the quick sizes, too few runs to rank the methods with confidence")
glue_phrase("finding",
            f"Over {config['runs']} runs of n = {config['n']} individuals per ε "
            f"({size}), the root mean squared error of the adaptive interval's posterior "
            f"means is {parts[0]} and {parts[1]}.")

# the ledger of the paper's claims (run just before this page): its counts
import json  # noqa: E402
import sys  # noqa: E402

from dpbook.figures import repo_root  # noqa: E402

sys.path.insert(0, str(repo_root() / "book"))
import ledger as claims_ledger  # noqa: E402 - the book's own code (book/ledger.py)

try:
    built = json.loads((repo_root() / "build" / "claims.json").read_text())
    glue_phrase("ledger", claims_ledger.tally(built) + ": see {ref}`ch-claims`.")
except (OSError, ValueError, KeyError):
    glue_phrase("ledger", "The ledger of the paper's claims ({ref}`ch-claims`) was not "
                "built with this page.")

# %% [markdown]
# {glue:md}`finding` {ref}`ch-four-eps` and {ref}`ch-boxplots` show the runs behind
# these numbers, and the paper's Figures 2 and 3.
#
# ```{glue:md} ledger
# :format: myst
# ```
#
# ## What the paper does
#
# Individuals arrive one at a time.  Individual $t$ holds a sensitive value $X_t$ drawn
# from a population $\mathcal{P}_\theta$ and shares only a privatised version: the value
# is clipped to an interval $[l_t, r_t]$ and Laplace noise proportional to $r_t - l_t$ is
# added, which is ε-differentially private
# {cite:p}`dwork2006differential,dwork2013algorithmic`.  The analyst wants to learn
# $\theta$ *online* from these noisy releases.  The paper
#
# * tracks the posterior of $\theta$ with a resample-move sequential Monte Carlo sampler
#   {cite:p}`gilks2001following,chopin2002sequential` whose likelihood accounts for the
#   clipping and the noise exactly (Section 4);
# * chooses the interval for the next individual *adaptively*: it draws a parameter
#   value from the current posterior (Thompson sampling, {cite:p}`russo2018tutorial`)
#   and takes the interval that maximises the Fisher information of the next release
#   {cite:p}`alparslan2022statistic` (Section 5);
# * shows that for location-scale families the best interval needs to be found only
#   once, for the base distribution (Theorem 3);
# * compares, for a normal population and ε = 1, 2, 5, 10, the adaptive sampler with a
#   non-adaptive one using a wide fixed interval and with a batch MCMC sampler, MHAAR
#   {cite:p}`andrieu2020mhaar` (Section 6).
#
# Because every adaptive choice is computed from released values only, the whole scheme
# is ε-DP for each individual (Proposition 1); {ref}`ch-dp-basics` explains and checks
# this.
#
# ## The chapters
#
# 1. {ref}`ch-dp-basics`: the Laplace mechanism, the sensitivity of a clipped value,
#    post-processing, why the adaptive scheme is ε-DP, and the truncation-versus-noise
#    trade-off.
# 2. {ref}`ch-smc`: sequential Monte Carlo for the posterior given privatised data.
# 3. {ref}`ch-fisher-grid`: the Fisher information of a clipped and noised value, and
#    the grid search for the best interval.
# 4. {ref}`ch-location-scale`: location-scale families and Theorem 3.
# 5. {ref}`ch-four-eps`: one run of adaptive and non-adaptive SMC for four privacy
#    levels (the paper's Figure 2).
# 6. {ref}`ch-boxplots`: repeated runs of the three methods (the paper's Figure 3).
# 7. {ref}`ch-new-family`: adapting everything to a new distribution (a family defined
#    in the notebook, compiled as it is written), to families that are not
#    location-scale and to the Gaussian mechanism; the chapter to copy for your own
#    data.
# 8. {ref}`ch-calibration`: are the credible intervals right?  Simulation-based
#    calibration of every posterior in the book, of one that ignores the mechanism and
#    of the authors' noise-scale slip, under the paper's prior and under a narrower one
#    where the data inform σ.
# 9. {ref}`ch-long-streams`: streams of $10^5$ individuals and more.  The paper's SMC
#    costs $O(Nn^2)$; the ways out that Sections 4 and 7 name (subset rejuvenation, a
#    particle filter on θ alone, an online gradient estimate), their cost against $n$
#    and their accuracy against the exact posterior.
# 10. {ref}`ch-real-stream`: the scheme on real values (census incomes, birth weights)
#     with `dpbook stream`, and the curator's side of a deployment.
# 11. {ref}`ch-local-vs-central`: what local privacy costs against a trusted curator who
#     adds noise once, on the same people at the same ε.
# 12. {ref}`ch-batches`: one published interval for a batch of devices, as a deployment
#     needs, and what larger batches cost.
#
# {ref}`ch-claims` is the ledger: each statement of the paper, the numbers this build
# computes for it, the rule that decides it and the verdict.
#
# Beyond the paper, {ref}`ch-two-dimensions` takes two numbers per person, the extension
# the paper names as its first open question: a box release, the same SMC, and when a
# joint release beats two one-dimensional ones.
#
# Where this book departs from the paper or from the authors' code, and why, is
# recorded in {ref}`reproduction-notes`.
#
# ## How to use the book
#
# **Read it.**  The HTML pages show the code, its output and the figures.  Each figure
# is stamped with the parameters and the mode it was made with, and is also saved as
# PNG and SVG under `build/figures/<chapter>/`.
#
# **Re-execute it.**  Every chapter, this page included, is a plain Python script in
# `notebooks/` (jupytext percent format) with a cell tagged `parameters`.
# `mode = "quick"` uses small Monte Carlo sizes and runs in seconds to minutes;
# `mode = "full"` uses large ones (in the chapters that re-run the paper's experiments,
# the paper's own sizes).  From the repository root of a fresh clone (the `make`
# targets install the environment in `.venv` the first time):
#
# ```bash
# make book MODE=quick   # every chapter with small settings, then the HTML
# make book              # the same in full mode (the paper's sizes)
# make chapter CH=03 MODE=quick ARGS="-p seed 7" && make html   # one chapter
# make test              # lint, unit tests, quick chapters, strict build, browser check
# ```
#
# `make book` re-executes only the chapters whose inputs changed since they were last
# executed (their source, their parameters, the `dpbook` package, the pinned
# environment, or an experiment store they read); `make book FORCE=1` re-executes them
# all, and `make book SCHEDULER=tcp://host:8786` runs the experiments of chapters 5-7 on
# an existing Dask cluster (same numbers).  `make chapter` sets any variable of a
# chapter's `parameters` cell with `-p NAME VALUE`; `make html` then rebuilds the pages
# without executing anything.  The box at the end of every chapter says how the page
# was made and gives the command that re-executes it, with links to download the
# executed notebook and its source.
#
# **Adapt it.**  The algorithms live in the `dpbook` package and the chapters only call
# them, so a chapter is a short recipe: copy it, change the population, ε or the
# interval rule, and run it the same way.
