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
# (ch-new-family)=
# # Adapting to a new distribution
#
# Everything so far assumed the paper's model: a normal population released with the
# Laplace mechanism.  The method itself assumes neither.  The SMC of Section 4 needs a
# density $p_\theta$, a sampler and a prior; the interval rule of Section 5 needs the
# Fisher information of one release, which Algorithm 4 estimates from the score
# $\nabla_\theta \log p_\theta(x)$; for a location-scale family the best interval is
# found once (Theorem 3), and for any other family "the maximisation (9) needs to be
# performed afresh for each $\vartheta_t$" (Section 5.2).  Section 7 adds that another
# additive mechanism, such as the Gaussian one, changes only the conditional law of $Y_t$
# given $x_t$.
#
# In dpbook that is one object: a **family** (`dpbook.model.families.Family`) gives the log
# density, its score, a sampler, the distribution function, a prior and optionally a
# conjugate move; every algorithm of the previous chapters takes it as an argument,
# together with the mechanism.  This chapter defines a family that dpbook does not ship,
# the **Gumbel** distribution (skewed, light-tailed on the left and heavier on the
# right: maxima of many draws), and runs the whole pipeline on it: checks, Fisher
# information, the best interval, online estimation and a 30-run comparison of adaptive
# and fixed intervals.  **To run it on your own family** there is nothing to copy: name
# the class and its true parameter,
# `make chapter CH=07 MODE=quick ARGS="-p family path/to/file.py:Class -p truth '[50, 3]'"`
# (`-p family_options '{"shape": 2}'` for the class's options; a relative path is read from
# the repository root or the directory you run it in), then `make html`.
#
# ```{glue:md} ch07-built-with
# :format: myst
# ```

# %% tags=["parameters"]
mode = "quick"  # "quick": small samples and Monte Carlo sizes; "full": the paper's sizes
seed = 7  # seed of the populations, the noise and the samplers
scheduler = None  # a Dask scheduler's address (tcp://host:8786) to run the experiment on
family = None  # "path/to/file.py:Class" or "module:Class": a family to run (None: Gumbel)
family_options = {}  # the family's options, passed to its class, e.g. {"shape": 2}
truth = None  # the population's true theta, e.g. [50, 3] (None: (50, 3) or default_theta())

# %% [markdown]
# ## A family in a few lines
#
# The Gumbel family with location $m$ and scale $c$ has density
# $f(x; m, c) = g\big((x - m)/c\big)/c$ with base $g(z) = \exp(-z - e^{-z})$.  It is
# location-scale (Definition 2), so we subclass `LocationScaleFamily` and describe only
# the base distribution; shifting and scaling, the score with respect to $(m, c)$, the
# prior of Section 6 ($m \sim \mathcal N(0, 10^4)$, $c^2 \sim \mathcal{IG}(1, 1)$) and the
# random-walk move of $\theta$ given the latent $x_{1:t}$ are inherited.  A family that
# is not location-scale subclasses `Family` instead and writes `logpdf`, `score`,
# `sample`, `cdf`, `ppf`, `log_prior` and `sample_prior` directly
# (`src/dpbook/model/families/poisson.py` is an example in under 100 lines).
# `help(LocationScaleFamily.base_ppf)` (or any `base_*` method) says what each is for.

# %%
import numpy as np

from dpbook import LocationScaleFamily


class Gumbel(LocationScaleFamily):
    """Gumbel (maximum) distribution: g(z) = exp(-z - exp(-z))."""

    name = "gumbel"
    summary = "Gumbel(loc, scale), right-skewed"

    # exp(-z) is capped at exp(700): beyond, the density is 0 in
    # double precision anyway
    def base_logpdf(self, z):
        return -z - np.exp(-np.maximum(z, -700.0))

    def base_dlogpdf(self, z):  # d/dz log g(z)
        return -1.0 + np.exp(-np.maximum(z, -700.0))

    def base_cdf(self, z):
        return np.exp(-np.exp(-np.maximum(z, -700.0)))

    def base_sf(self, z):
        return -np.expm1(-np.exp(-np.maximum(z, -700.0)))

    def base_ppf(self, q):
        return -np.log(-np.log(q))

    def base_sample(self, rng, size=None):
        return rng.gumbel(0.0, 1.0, size)


GUMBEL_THETA = (50.0, 3.0)  # the true (m, c) of the simulated population
Gumbel()

# %% [markdown]
# The imports and this run's sizes (folded): $n$ individuals and $N$ particles per run,
# `runs` runs per ε, $M$ and $K$ of eq. (8) / Algorithm 4, `grid` intervals per axis of
# the $(a, b)$ search, `post_grid` nodes per axis of the exact posterior, `reruns` extra
# SMC runs on the same data.  The SMC's cost grows as $n^2 N$, so even the full mode
# stays below the paper's sizes.

# %% tags=["hide-input"]
import hashlib
import json
import os
import re
import sys
import textwrap
import time
import warnings
from pathlib import Path

import cloudpickle
import matplotlib.pyplot as plt
import numba
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display
from matplotlib.ticker import NullFormatter
from scipy import stats

from dpbook import (
    SMC,
    AdaptivePolicy,
    FixedPolicy,
    ThetaGridIntervals,
    best_interval,
    check_family,
    ensure_results,
    exact_posterior,
    family_population,
    fisher_exact,
    fisher_grid,
    fisher_mc,
    get_family,
    is_complete,
    normal_population,
    run_online,
    smc_posterior,
    summarize,
)
from dpbook.figures import (
    METHOD_COLOURS,
    figure_saver,
    glue_phrase,
    interval_heatmaps,
    paths_frame,
    posterior_paths,
    repo_root,
    show_table,
)
from dpbook.model.families import family_class

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
size = {"quick": dict(n=150, N=200, runs=30, M=1000, K=4000, grid=30, EPS=(1.0, 5.0),
                      post_grid=61, reruns=5),
        "full": dict(n=300, N=300, runs=30, M=1000, K=10_000, grid=50,
                     EPS=(1.0, 5.0, 10.0), post_grid=101, reruns=10)}[mode]
rng = np.random.default_rng(seed)
pd.set_option("display.float_format", "{:.4g}".format)
timings = {}
size

# %% [markdown]
# The family this page runs (folded): the Gumbel above, or the class that `-p family`
# names, with `-p family_options` and the true parameter `-p truth`.  Another family's
# figures and experiment store are kept apart from the Gumbel's, under a key made of
# the family's name and a hash of its spec, options and truth.

# %% tags=["hide-input"]
def family_file(spec):
    """A relative path/to/file.py:Class as found from the repository root, else from
    the directory run_chapters was started in (the kernel runs in the root)."""
    where, _, name = spec.rpartition(":")
    if not where.endswith(".py") or Path(where).is_absolute():
        return spec
    for base in (repo_root(), Path(os.environ.get("DPBOOK_CALLER_CWD", "."))):
        if (base / where).is_file():
            return f"{base / where}:{name}"
    return spec  # family_class names what is missing


if family is None:
    family_cls = Gumbel
else:
    try:
        family_cls = family_class(family_file(str(family)))
    except ValueError as e:
        raise ValueError(f"-p family {family}: {e}") from None
    if not family_cls.__module__.startswith("dpbook."):
        # the experiment's worker processes get the class by value, not by its file
        cloudpickle.register_pickle_by_value(sys.modules[family_cls.__module__])
if not issubclass(family_cls, LocationScaleFamily):
    raise ValueError(f"-p family {family}: {family_cls.__name__} is not a "
                     "LocationScaleFamily, whose best interval this chapter finds once")
if not isinstance(family_options, dict):
    raise ValueError(f"-p family_options takes a mapping such as '{{\"shape\": 2}}', "
                     f"not {family_options!r}")
unknown = sorted(set(family_options) - set(family_cls.options))
if unknown:
    raise ValueError(f"-p family_options: {family_cls.__name__} has no option "
                     f"{unknown[0]!r} (it takes: {', '.join(family_cls.options) or 'none'})")
options = {k: family_cls.options[k][0](v) for k, v in family_options.items()}
fam = family_cls(**options)
if truth is None:
    truth = GUMBEL_THETA if family_cls is Gumbel else fam.default_theta()
try:
    THETA = tuple(float(t) for t in truth)
    fam.check_theta_arrays(*THETA)
except (TypeError, ValueError) as e:
    raise ValueError(f"-p truth {truth!r}: give {len(fam.params)} numbers "
                     f"({', '.join(fam.params)}), e.g. '[50, 3]' ({e})") from None
label = family_cls.__name__  # in tables and captions
# the Gumbel at (50, 3) keeps the chapter's own names; any other run is keyed apart
key = "" if (family_cls is Gumbel and THETA == GUMBEL_THETA) else "-" + re.sub(
    r"[^A-Za-z0-9_.]+", "_", fam.name or label.lower()) + "-" + hashlib.sha256(
    json.dumps([family, options, THETA]).encode()).hexdigest()[:8]
origin = "defined in this chapter" if family is None else f"from `{family}`"
settings = ", ".join(f"{k} = {v}" for k, v in options.items()) or "no options"
glue_phrase("ch07-built-with", (
    f"**This page was built with** the family `{fam.name}` (class `{label}` {origin}, "
    f"{settings}) and the true θ = ("
    + ", ".join(f"{p} = {t:g}" for p, t in zip(fam.params, THETA)) + ")"
    + ("." if family_cls is Gumbel else ": every number and figure below is for it; the "
       "Gumbel class only shows how a family is written.")))
stamp = dict(mode=mode, seed=seed) if not key else \
    dict(mode=mode, seed=seed, family=family or label, **options, truth=list(THETA))
save = figure_saver("07_new_family" + key, **stamp)

# %% [markdown]
# ## Check the family before using it
#
# A mistake in a score or a sampler does not crash anything: it silently biases every
# later number.  `check_family` tests what the family says about itself against
# independent computations (the same checks the test suite runs on the shipped
# families): draws against the distribution function, the score against finite
# differences of the log density, the derivative of the distribution function (the score
# of a clipped release) against finite differences, the density against the distribution
# function, and the prior.

# %% caption="check_family on the {family} family: each check and its result." name="tbl-07-checks"
checks = check_family(fam, THETA, rng=rng)
assert checks["passed"].all(), checks[~checks["passed"]]
show_table(checks, family=label)

# %% [markdown]
# ## Compiled as written
#
# Nothing in the class above mentions speed, yet the SMC of this chapter runs compiled.
# `SMC(eps, fam)` (`fam` is the Gumbel unless `-p family` names another family) hands
# the class's own `base_logpdf` and `base_ppf` to numba
# (`dpbook.smc.compiled_smc`), with numpy's `exp` and `log` replaced by versions that the
# compiler turns into vector instructions (`dpbook.vmath`, within a few units in the last
# place of numpy's).  Below, the same releases go through the compiled engine (the first
# run includes compiling, which numba cannot cache for a class defined in a notebook:
# every kernel start and every worker process pays it once), through the numpy SMC that
# ran families like this one before (`generic=True`), and, for scale, the normal
# family's releases through the paper's own kernel.

# %% caption="The latent SMC on one stream of releases: the {family} on the compiled engine (CompiledSMC) and on the numpy SMC, the normal family on the paper's kernel; seconds of a first run (with compiling or loading compiled code) and of a second, one thread each." name="tbl-07-speed" tags=["hide-input"]
eps0, n0 = size["EPS"][-1], size["n"]
lo, hi = fam.fixed_interval(*THETA)
pop = family_population(fam, THETA, n0, eps0, seed=seed)
y0 = np.array([pop.release(lo, hi) for _ in range(n0)])
l0, r0 = np.full(n0, lo), np.full(n0, hi)
npop = normal_population(n0, 50.0, 3.0, eps0, seed=seed)
y1 = np.array([npop.release(20.0, 80.0) for _ in range(n0)])
l1, r1 = np.full(n0, 20.0), np.full(n0, 80.0)


def seconds(*args, **kw):
    """(SMC class, seconds of a first run, seconds of a second run)."""
    out = []
    for _ in range(2):
        t0 = time.perf_counter()
        smc = smc_posterior(*args, n_particles=size["N"], seed=seed, **kw)
        out.append(time.perf_counter() - t0)
    return type(smc).__name__, *out


threads = numba.get_num_threads()
numba.set_num_threads(1)  # one thread each: a fair race on a shared machine
speed = pd.DataFrame(
    [(label, *seconds(y0, l0, r0, eps0, fam)),
     (label, *seconds(y0, l0, r0, eps0, fam, generic=True)),
     ("normal", *seconds(y1, l1, r1, eps0))],
    columns=["family", "SMC", "first run", "again"],
)
numba.set_num_threads(threads)
speed["again / paper's kernel"] = speed["again"] / speed["again"].iloc[-1]
timings[f"compiling the {label}'s SMC"] = speed["first run"][0] - speed["again"][0]
show_table(speed.set_index(["family", "SMC"]), family=label)

# %% [markdown]
# What a family needs for that: `base_logpdf` and `base_ppf` written with numpy or
# `math` functions of one value, reading only numbers stored on `self`; a random-walk
# move of $\theta$ (a family with its own conjugate `gibbs` keeps the numpy SMC); the
# Laplace or Gaussian mechanism.  A family that numba cannot compile still runs, on the
# numpy SMC, and says once which of its functions kept it off the compiled path, as this
# copy of the Gumbel that asks `scipy.stats` for its density does:

# %%
class ScipyGumbel(Gumbel):
    def base_logpdf(self, z):
        return stats.gumbel_r.logpdf(z)


# the comparison needs the family's scipy twin: only the Gumbel has one here
if family_cls is Gumbel:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        smc = SMC(eps0, ScipyGumbel(), n_particles=10, n_max=1)
    print(type(smc).__name__)
    print(textwrap.fill(str(caught[0].message)[:300] + " ...", 79))
else:
    print(textwrap.fill(
        f"Skipped: this page runs {label}, which has no scipy-written copy "
        "here; the Gumbel's default build shows the numpy fallback.", 79))

# %% [markdown]
# ## The information in one release
#
# The Fisher information of one release $Y = T_l^r(X) + (r - l)V/\epsilon$ (eq. 7) is
# computed two ways: exactly, by quadrature of $p_{l,r}^\epsilon(y \mid \theta)$ and its
# score (`dpbook.likelihood.fisher_quadrature.fisher_exact`, which only needs the family's density,
# distribution function and score), and by the paper's Monte Carlo estimate (eq. 8 with
# Algorithm 4).  They must agree within the Monte Carlo error at the base $\theta=(0,1)$:

# %% caption="The {family}'s Fisher information at the base: exact (quadrature) against Monte Carlo." name="tbl-07-fisher"
rows = []
for eps in size["EPS"]:
    for a, b in [(-1.0, 1.0), (-0.5, 2.0)]:
        exact = fisher_exact(a, b, eps, (0.0, 1.0), fam)
        est = fisher_mc(
            a, b, eps, (0.0, 1.0), fam, M=size["M"], K=size["K"], rng=rng
        )
        z = (est.F[0, 0] - exact[0, 0]) / est.se[0, 0]
        rows.append(
            {
                "eps": eps,
                "[a, b]": f"[{a:g}, {b:g}]",
                "exact F_mm": exact[0, 0],
                "MC F_mm": est.F[0, 0],
                "MC se": est.se[0, 0],
                "(MC − exact)/se": z,
                "exact F_cc": exact[1, 1],
                "MC F_cc": est.F[1, 1],
            }
        )
fisher_check = pd.DataFrame(rows).set_index(["eps", "[a, b]"])
assert (fisher_check["(MC − exact)/se"].abs() < 4.5).all()
show_table(fisher_check, family=label)

# %% [markdown]
# ## The best interval, once for all
#
# Theorem 3 holds for every location-scale family: the interval
# $[m + a^* c,\ m + b^* c]$ with $(a^*, b^*)$ maximising the score of
# $F^\epsilon_{a,b}(0, 1)$ (eq. 13) is the best for every $(m, c)$.  We take the paper's
# score, the location entry $F_{mm}$, and search the grid of $[-3, 3]^2$ exactly.
# The Gumbel density is skewed, so nothing forces its best interval to be symmetric
# about the location as the normal's is ({ref}`ch-fisher-grid`); the line above the
# table says where the grid maximiser is asymmetric.

# %% caption="The best interval per ε for the {family} and for the normal." name="tbl-07-best"
t0 = time.perf_counter()
grids = {
    eps: fisher_grid(eps, fam, grid=size["grid"]) for eps in size["EPS"]
}
timings["exact Fisher grids"] = time.perf_counter() - t0
best = {}
for eps, g in grids.items():
    a, b, s, _ = g.best("mu")
    best[eps] = (a, b)
normal_best = {
    eps: best_interval(eps, "normal", grid=size["grid"]) for eps in size["EPS"]
}
step = 6.0 / (size["grid"] - 1)
lopsided = [e for e, (a, b) in best.items() if abs(a + b) > step / 2]
print(
    f"asymmetric {label} intervals (|a* + b*| above half a grid step) at eps = "
    + (", ".join(f"{e:g}" for e in lopsided) or "none")
)
show_table(
    pd.DataFrame(
        {
            f"{label} a*": {e: best[e][0] for e in best},
            f"{label} b*": {e: best[e][1] for e in best},
            "normal a*": {e: normal_best[e]["a"] for e in best},
            "normal b*": {e: normal_best[e]["b"] for e in best},
        }
    ).rename_axis("eps"),
    family=label,
)

# %% tags=["hide-input"] fig_caption="The location entry of the exact Fisher information of one release for the {family} base distribution over the intervals [a, b], one panel per ε (each scaled by its maximum), with the best interval (a*, b*) of eq. (13)." fig_alt="Heat maps over a and b, one per epsilon, each with a red star at its maximum, off-centre where the {family} distribution is skewed."
scaled = pd.concat(g.frame("mu").assign(scaled=lambda d: d.score / d.score.max())
                   for g in grids.values())
grid = interval_heatmaps(scaled, "scaled", col="eps", col_wrap=2, height=3.8,
                         label="$F_{mm}$ / its maximum at this ε")
for eps, ax in grid.axes_dict.items():
    ax.plot(best[eps][0], best[eps][1], "r*", ms=12, label="best (a*, b*)")
grid.axes.flat[0].legend(loc="lower right", fontsize=9)
grid.set_titles("ε = {col_name:g}")
fig = grid.figure
save(fig, "fisher_grid",
     f"exact F_mm of one release at the {label} base (0, 1), "
     f"{size['grid']} x {size['grid']} grid", family=label)

# %% [markdown]
# ## One online run
#
# Now the whole of Algorithm 1, at the largest ε of this run.  A population of $n$
# individuals from the family at the true $(m, c)$ (Gumbel$(50, 3)$ unless `-p family` or
# `-p truth` say otherwise) releases its values one by one; the adaptive policy
# draws $(m, c)$ from the SMC posterior and asks for $[m + a^* c, m + b^* c]$; the fixed
# policy always asks for $[m - 10c, m + 10c]$ at the true $(m, c)$ (Section 6's
# comparison).  The SMC is `dpbook.smc.SMC`: the same resample-move algorithm as
# {ref}`ch-smc`, with an independent Metropolis-Hastings move of every latent $x_k$
# proposed from the family and a random-walk move of $\theta$ (the normal family has a
# conjugate Gibbs move instead).
# Only the population sees the sensitive values.

# %% tags=["hide-input"] fig_caption="One online run for the {family} population with the adaptive and the fixed policy: the posterior mean of the location and the scale with ±2 posterior sd (dashed: the truth), and the width of the requested interval over time." fig_alt="Three panels against t: the location and scale estimates of both policies with bands and the true values in black, and the requested interval width on a log axis."
eps = size["EPS"][-1]
l_c, r_c = fam.fixed_interval(*THETA)
runs = {}
t0 = time.perf_counter()
for name, policy in [("adaptive", AdaptivePolicy(*best[eps])), ("fixed", FixedPolicy(l_c, r_c))]:
    pop = family_population(fam, THETA, size["n"], eps, seed=seed)
    runs[name] = run_online(pop, policy, size["n"], n_particles=size["N"], seed=seed,
                            family=fam)
timings["two online runs"] = time.perf_counter() - t0

paths = paths_frame(runs, fam.params)
widths = paths[paths.param == fam.params[0]].assign(param="width r − l",
                                                    mean=lambda d: d.r - d.l, sd=0.0)
grid = posterior_paths(pd.concat([paths, widths]), col="param", sharey=False, height=2.7,
                       aspect=0.95, truth=dict(zip(fam.params, THETA)))
grid.axes_dict[fam.params[0]].set_ylim(THETA[0] - 10, THETA[0] + 10)
grid.axes_dict[fam.params[1]].set_ylim(0, 3 * THETA[1])
grid.axes_dict["width r − l"].set_yscale("log")
grid.set_titles("{col_name}").add_legend()
fig = grid.figure
save(fig, "online_run",
     f"one run, ε = {eps:g}, n = {size['n']}, N = {size['N']} particles", family=label)

# %% [markdown]
# Is the SMC right?  For a given released data set the posterior of $\theta$ is a
# two-dimensional integral that quadrature computes exactly (`exact_posterior`).  We
# compare posterior quantiles rather than standard deviations: under the prior of
# Section 6 the scale has a tail like $c^{-3}$, so where the releases say little about
# large scales its posterior standard deviation is dominated by a tail that $N$
# particles cannot represent (it may not even be finite).  The SMC's weighted particle
# quantiles should match the exact ones up to the Monte Carlo error of $N$ particles,
# which we measure by running the SMC again on the same releases with other seeds.
# The check decides, it does not only report: with the sd estimated from `reruns` runs,
# each (SMC − exact)/sd is about Student-t with `reruns` − 1 degrees of freedom when the
# SMC is right, so the tolerance is the value that any of the quantiles exceeds with
# probability 1% (a t quantile with a Bonferroni correction, printed above the table),
# and a quantile beyond it is a warning on this page.

# %% caption="Posterior quantiles for the {family}: the exact grid against the SMC, with the SMC's spread over seeds." name="tbl-07-posterior"
Q = [0.1, 0.5, 0.9]
rows = []
t0 = time.perf_counter()
for name, res in runs.items():
    g = size["post_grid"]
    ref = exact_posterior(
        res.y, res.l, res.r, eps, family=fam, grid=(g, g)
    ).quantile(Q)
    again = np.array(
        [
            smc_posterior(
                res.y,
                res.l,
                res.r,
                eps,
                fam,
                n_particles=size["N"],
                seed=1000 + s,
            ).quantile(Q)
            for s in range(size["reruns"])
        ]
    )
    est_q = res.smc.quantile(Q)  # weighted particle quantiles
    for j, p in enumerate(fam.params):
        for k, q in enumerate(Q):
            rows.append(
                {
                    "policy": name,
                    "parameter": p,
                    "quantile": q,
                    "exact": ref[k, j],
                    "SMC": est_q[k, j],
                    "SMC sd over runs": again[:, k, j].std(ddof=1),
                }
            )
timings["posterior checks"] = time.perf_counter() - t0
posterior_check = pd.DataFrame(rows).set_index(
    ["policy", "parameter", "quantile"]
)
posterior_check["(SMC − exact)/sd"] = (
    posterior_check["SMC"] - posterior_check["exact"]
) / posterior_check["SMC sd over runs"]
z = posterior_check["(SMC − exact)/sd"].abs()
# P(any |t| > tolerance) = 1% for len(z) t variables, reruns - 1 degrees of
# freedom each
tolerance = stats.t.ppf(1 - 0.01 / (2 * len(z)), size["reruns"] - 1)
missed = z[~(z <= tolerance)]  # NaN (a zero sd) misses too
verdict = ("the SMC agrees with the exact posterior" if missed.empty
           else f"{len(missed)} quantile(s) beyond it")
print(f"largest |SMC − exact| = {z.max():.2f} SMC standard deviations over "
      f"{len(z)} quantiles\n(sd from {size['reruns']} reruns); tolerance "
      f"{tolerance:.2f}: {verdict}")
if not missed.empty:
    where = "; ".join(f"{p} {pa} q={q:g}: {v:.2f} sd"
                      for (p, pa, q), v in missed.items())
    display(Markdown(
        "```{warning}\nWARNING: the SMC's posterior misses the exact one "
        f"beyond the tolerance of {tolerance:.2f} SMC sd ({where}): more "
        "particles (a larger N), or a look at the family's sampler and "
        "density, before trusting the runs below.\n```"))
show_table(posterior_check, family=label)

# %% [markdown]
# ## Thirty runs: adaptive against fixed
#
# One run is an anecdote.  The experiment runner of {ref}`ch-boxplots` repeats the
# comparison for any family: every (policy, ε, run) is a task with its own seed, stored
# as it finishes, so an interrupted run resumes where it stopped, and a rerun of this
# chapter loads the store instead of recomputing it (`ensure_results`).  A family
# defined in a notebook is shipped to the worker processes by value, and a hash of its
# source is part of the store's configuration: edit the class and the store is redone.

# %% caption="Repeated runs for the {family}: bias and RMSE, adaptive against fixed." name="tbl-07-runs"
out = repo_root() / "results" / f"ch07{key}-{mode}-seed{seed}"
experiment = dict(
    family=fam,
    theta=THETA,
    eps=size["EPS"],
    runs=size["runs"],
    n=size["n"],
    particles=size["N"],
    seed=seed,
    interval_grid=size["grid"],
    methods=["smc-adaptive", "smc-fixed"],
)
read_only = is_complete(out, **experiment)
est, _ = ensure_results(out, progress=False, scheduler=scheduler, **experiment)
# the tasks' compute time as the store recorded it (now or before)
timings[
    f"{size['runs']}-run comparison ({len(est)} tasks; "
    + ("read from the store" if read_only else "computed now")
    + ")"
] = est["seconds"].sum()
summary = summarize(est).set_index(["eps", "method"])
show_table(summary, family=label)

# %% tags=["hide-input"] fig_caption="The error of the posterior means of the location (left) and the scale (right) over repeated runs, for the adaptive and the fixed policy at each ε." fig_alt="Box plots of the estimation errors of the location (left) and the scale (right), one box per policy at each epsilon, with a line at zero."
errors = (est.assign(**{p: est[f"{p}_hat"] - t for p, t in zip(fam.params, THETA)})
          .melt(id_vars=["method", "eps"], value_vars=list(fam.params),
                var_name="parameter", value_name="estimate − truth"))
grid = sns.catplot(errors, kind="box", x="eps", y="estimate − truth", hue="method",
                   col="parameter", palette=METHOD_COLOURS, sharey=False, height=3.6,
                   aspect=1.05, legend_out=False)
for ax in grid.axes.flat:
    ax.axhline(0, color="k", lw=0.8)
grid.set_titles("{col_name}")
grid.set_xlabels("ε")
fig = grid.figure
fig.tight_layout()
save(fig, "boxplots",
     f"{size['runs']} runs per ε and policy, n = {size['n']}, "
     f"N = {size['N']}")

# %% caption="RMSE of the location with the fixed interval over that with the adaptive one, per ε." name="tbl-07-ratio"
rmse = summary[f"{fam.params[0]}_rmse"].unstack("method")
ratio = (rmse["smc-fixed"] / rmse["smc-adaptive"]).rename(
    "RMSE(fixed) / RMSE(adaptive)"
)
display(show_table(ratio))
widths = {e: best[e][1] - best[e][0] for e in best}
print(
    f"adaptive RMSE of the location is smaller at {int((ratio > 1).sum())} of "
    f"{len(ratio)} eps values; interval widths in scales: fixed 20, adaptive "
    + ", ".join(f"{w:.2f} (ε={e:g})" for e, w in widths.items())
)

# %% [markdown]
# The ratio is the gain of adaptive truncation for this family: the fixed interval is 20
# scales wide, so its releases carry noise of scale $20c/\epsilon$, while the adaptive
# interval is $(b^* - a^*)$ scales wide and placed where the information is.  The gain
# needs time to appear: the first intervals come from the vague prior, and at small ε
# the best interval is so narrow that a release far from it says little more than "the
# value is above (or below) the interval".  With the quick mode's $n$ the adaptive runs
# at the smallest ε may still be looking for the population; a larger $n$ (300 in full
# mode, 1000 in the paper) gives them more time.

# %% [markdown]
# (ch07-lockin)=
# ## Where adaptive truncation loses: heavy tails
#
# The adaptive policy places a narrow interval where its posterior puts the population.
# With heavy tails the posterior can sit at a wrong location: the intervals follow it,
# every value lies beyond one end, and a release clipped at that end carries little to
# pull the posterior back.  We measure it where tails are heaviest: the Student-t with
# 1 (the Cauchy, `t1`), 2 and 3 degrees of freedom (`t2`, `t3`; in quick mode the Cauchy
# only), the adaptive policy against the fixed interval $[m - 10c, m + 10c]$ on the
# **same** data (the experiment's data seed of a run does not depend on the policy), with
# this chapter's quick sizes, where the effect was first seen, and more runs in full
# mode (the line above the first table gives the sizes and runs).  The
# differences of RMSE between two policies are paired: each bootstrap resample draws
# runs, not errors (`benchmarks/lockin.py` runs the same measurement from the command
# line; this section does not depend on `-p family` and runs with the chapter's own
# family only).
#
# dpbook adds one guard, an option that is **not** the paper's and is off by default
# (`GuardedPolicy`, `dpbook experiment --guard W`): after each block of W releases it
# counts those above their interval's midpoint; when the count is outside the two-sided
# 1% binomial bound of a fair coin, the next block's intervals are widened about their
# midpoints, twice as much for each further block piled up at the same end.  Until it
# first acts, the guarded run is the adaptive run bit for bit (same draws), so it is
# compared on the same runs too.  On the paper's normal model it must leave Section 6's
# estimates within their Monte Carlo error: the `normal` columns of the second table run
# the paper's model with and without it.

# %% tags=["hide-input"] caption="Location error over repeated runs, heavy tails: RMSE, bias, the worst run (signed error of the run farthest off) and the runs off by more than {far} true scales, of the adaptive and the fixed policy, and RMSE(adaptive) − RMSE(fixed) with its paired bootstrap 95% interval." name="tbl-07-lockin"
sys.path.insert(0, str(repo_root() / "benchmarks"))
import lockin  # noqa: E402

# with another family (-p family), a one-line table in place of each of the three
skipped = pd.DataFrame({"heavy tails": [
    f"Skipped: this page runs {label}; the heavy-tail measurement is the default "
    "build's (make chapter CH=07)"]})
if key:
    display(show_table(skipped, far=f"{lockin.FAR:g}"))
else:
    t0 = time.perf_counter()
    lock = lockin.measure(mode, seed, scheduler=scheduler)
    lock_table = lockin.table(lock)
    timings["heavy-tail lock-in runs (this execution)"] = time.perf_counter() - t0

    def interval(pair):  # the bootstrap interval of a paired difference, as text
        return lock_table[f"{pair} lo"].map("[{:.2g}, ".format) + \
            lock_table[f"{pair} hi"].map("{:.2g}]".format)

    def across(df):  # one column per (model, eps): the page is narrower than 12 columns
        return df.set_axis([f"{m}, ε = {e:g}" for m, e in df.index]).T.rename_axis("")

    print(textwrap.fill(
        f"heavy tails: θ = {lockin.THETA}, " + ", ".join(
            f"{k} = {v}" for k, v in {**lockin.SIZES[mode], **lockin.HEAVY}.items())
        + "; normal: " + ", ".join(f"{k} = {v}" for k, v in lockin.NORMAL.items()), 79))
    heavy = lock_table.drop("normal", level="model").assign(
        ci=interval("adaptive - fixed"))
    cols = {"adaptive RMSE": "RMSE adaptive", "fixed RMSE": "RMSE fixed",
            "adaptive - fixed": "difference", "ci": "95% interval",
            "adaptive bias": "bias adaptive", "fixed bias": "bias fixed",
            "adaptive worst": "worst adaptive", "fixed worst": "worst fixed",
            f"adaptive off > {lockin.FAR:g}c": f"off > {lockin.FAR:g}c adaptive",
            f"fixed off > {lockin.FAR:g}c": f"off > {lockin.FAR:g}c fixed"}
    loses = [f"{m} at ε = {e:g}" for (m, e), lo in heavy["adaptive - fixed lo"].items()
             if lo > 0]
    print(textwrap.fill("the adaptive policy's RMSE is above the fixed interval's beyond "
                        "the bootstrap interval for: " + (", ".join(loses) or "none"), 79))
    display(show_table(across(heavy[list(cols)].rename(columns=cols)),
                       far=f"{lockin.FAR:g}"))

# %% tags=["hide-input"] caption="The guard on the same runs: RMSE of the location with and without it, RMSE(guarded) − RMSE(adaptive) with its paired bootstrap 95% interval, the worst guarded run and the runs in which the guard acted; the normal columns are the paper's model." name="tbl-07-guard"
if key:
    display(show_table(skipped))
else:
    cols = {"adaptive RMSE": "RMSE adaptive", "guarded RMSE": "RMSE guarded",
            "guarded - adaptive": "difference", "ci": "95% interval",
            "guarded worst": "worst guarded", "guarded runs widened": "runs widened"}
    guarded = lock_table.assign(ci=interval("guarded - adaptive"))
    normal = lock_table.loc["normal"]
    within = [f"ε = {e:g}" for e, row in normal.iterrows()
              if row["guarded - adaptive lo"] <= 0 <= row["guarded - adaptive hi"]]
    print(textwrap.fill(
        "normal model: the 95% interval of RMSE(guarded) − RMSE(adaptive) holds 0 at "
        f"{len(within)} of {len(normal)} ε values ({', '.join(within) or 'none'})", 79))
    display(show_table(across(guarded[list(cols)].rename(columns=cols))))

# %% [markdown]
# Where the adaptive policy loses, is it the data or the estimate?  For the worst
# adaptive run of each heavy-tailed configuration (in quick mode: of all runs), the
# exact posterior of the same releases, by quadrature on a grid (`exact_posterior`, as
# above), says where the releases put the location.  When its 90% interval holds the
# truth while the SMC's estimate lies outside it, the releases were not the problem:
# the particles lost the posterior (their random-walk move of θ is scaled to their own
# spread and targets θ given their own latent values, so once they have collapsed at a
# wrong location they cannot walk back), and no choice of interval, the guard's
# included, brings them back.  When the exact interval itself misses the truth far off
# (a 90% interval misses it in one run of ten by chance alone, by a little), the
# releases lost it: the intervals were placed where the values told them little.

# %% tags=["hide-input"] caption="The worst adaptive runs against the exact posterior of their releases: the SMC's estimate of the location, the exact posterior's median and 90% interval, and whether that interval holds the truth and the SMC's estimate." name="tbl-07-lockin-exact"
if key:
    display(show_table(skipped))
else:
    t0 = time.perf_counter()
    worst = lockin.worst_exact(lock, mode, seed, per_model=mode == "full")
    timings["exact posteriors of the worst runs"] = time.perf_counter() - t0
    lost = worst["truth in 90%"] & ~worst["SMC in 90%"]
    print(textwrap.fill(
        f"{int(lost.sum())} of {len(worst)} worst runs: the exact posterior's 90% interval "
        "holds the truth and the SMC's estimate is outside it; in "
        f"{int((~worst['truth in 90%']).sum())} the exact interval misses the truth",
        79))
    display(show_table(worst))

# %% [markdown]
# ## Families that are not location-scale, and other mechanisms
#
# For a family without a location and a scale, the best interval depends on $\theta$ in
# a way no shift or scale captures, so eq. (9) must be solved for every drawn
# $\vartheta_t$.  dpbook solves it once on a grid of $\theta$ and interpolates
# (`ThetaGridIntervals`); the shipped Poisson family shows what that costs and gives.

# %% tags=["hide-input"] fig_caption="Poisson, a family without location and scale: the best interval [l, r] of eq. (9) at ε = 1, solved on a grid of λ (ThetaGridIntervals), against λ." fig_alt="Two increasing curves, the best left and right ends, on either side of the dotted line l equals lambda, against lambda on a log axis."
poisson = get_family("poisson")
tg = ThetaGridIntervals(poisson, 1.0, centre=(10.0,), span=4.0, points=13,
                        grid=size["grid"])
fig, ax = plt.subplots(figsize=(6.5, 3.8))
ax.plot(tg.axes[0], tg.l, "o-", ms=3, label="best l")
ax.plot(tg.axes[0], tg.r, "o-", ms=3, label="best r")
ax.plot(tg.axes[0], tg.axes[0], "k:", lw=0.8, label="λ")
ax.set(xscale="log", xlabel="λ", ylabel="interval end", title="Poisson(λ), ε = 1")
ticks = [v for v in (2, 3, 5, 10, 20, 30, 50) if tg.axes[0][0] <= v <= tg.axes[0][-1]]
ax.set_xticks(ticks, [f"{v:g}" for v in ticks])  # no overlapping minor labels
ax.xaxis.set_minor_formatter(NullFormatter())
ax.legend()
fig.tight_layout()
save(fig, "poisson_intervals",
     f"exact eq. (9) on {tg.axes[0].size} values of λ, "
     f"{size['grid']} x {size['grid']} grid each")
print(f"{tg.evaluations} Fisher matrices in {tg.seconds:.1f} s, once; each Thompson draw "
      "then costs one interpolation")

# %% [markdown]
# The mechanism is one argument.  With Gaussian noise of standard deviation
# $(r - l)/\epsilon$ instead of Laplace noise of that scale, the best Gumbel interval is:

# %% caption="The best {family} interval per ε with the Laplace and with the Gaussian mechanism." name="tbl-07-mechanisms"
show_table(
    pd.DataFrame(
        {
            m: {
                eps: tuple(
                    round(
                        best_interval(
                            eps, fam, mechanism=m, grid=size["grid"]
                        )[k],
                        3,
                    )
                    for k in ("a", "b")
                )
                for eps in size["EPS"]
            }
            for m in ("laplace", "gaussian")
        }
    ).rename_axis("eps"),
    family=label,
)

# %% [markdown]
# ## Timings
#
# Wall-clock seconds of this execution, except the repeated-runs comparison: its line is
# the sum of the tasks' compute times as the store recorded them when they ran (the
# table says whether that was now or in an earlier execution).

# %% caption="Wall-clock seconds of this chapter's heavy steps." name="tbl-07-timings" tags=["hide-input"]
show_table(pd.Series(timings, name="seconds").to_frame())
