"""The golden cases: every versioned algorithm (``dpbook.versions``) on small fixed
inputs, through the entry points the stores use, as flat {name: array} outputs.

Each case names the algorithms it uses; when its outputs change, one of their versions
must be bumped (``tests/test_golden.py`` says which case, ``update.py`` records the new
outputs).  Sizes are small but reach the rare paths: the SMC kernel's case makes about
10^8 MH decisions, so the ziggurat's slow path (about 1.2% of the normal draws) runs
about a million times, and its seed is one of those (8 of 60 tried) where the decision
taken again with ``math.exp`` after the fast exponential changes a decision (about one
in 10^9; ``test_smc_kernel_case_reaches_the_exact_redecision`` checks it); subset moves,
the marginal SMC's delayed acceptance and plain walk, and the Poisson family's interval
table have cases of their own.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np

from dpbook.model.families.base import LocationScaleFamily
from dpbook.versions import CENTRAL, CORE, GENERIC_MODEL, LONG_STREAM

EXPERIMENT = (*CORE, "experiment")
CASES = {}  # name -> (algorithms used, function returning {key: array})


def case(*uses):
    def register(fn):
        CASES[fn.__name__.replace("_", "-")] = (tuple(uses), fn)
        return fn
    return register


def _put(out, prefix, value):
    """Flatten dicts, rows and arrays into out[prefix/...] (strings kept as arrays)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k != "seconds":  # the clock is not an output
                _put(out, f"{prefix}/{k}", v)
    elif value is None:
        out[prefix] = np.array("None")
    else:
        out[prefix] = np.asarray(value)


def _tasks(config, family_obj=None, methods=None):
    import numba

    from dpbook.experiment.config import config_tasks
    from dpbook.experiment.runner import _best_intervals
    from dpbook.experiment.tasks import run_task, task_spec

    intervals = _best_intervals(config, None, family_obj)
    out = {}
    threads = numba.get_num_threads()  # run_task sets the process's threads: restore them
    for e, iv in intervals.items():
        _put(out, f"interval/{e}", iv)
    for task in config_tasks(config):
        if methods is not None and task.method not in methods:
            continue
        res = run_task(task_spec(config, intervals, task, 1, family_obj))
        numba.set_num_threads(threads)
        _put(out, task.name, {"row": res["row"], **res["arrays"]})
    return out


@case(*EXPERIMENT)
def experiment_paper():
    """Section 6's three methods through the experiment's tasks (exact intervals)."""
    from dpbook.experiment import make_config

    return _tasks(make_config(eps=(1.0, 5.0), runs=1, n=120, particles=128,
                              mhaar_iters=3000, interval_grid=12))


@case(*EXPERIMENT)
def experiment_intervals_mc():
    """eq. (13) with Algorithm 4 / eq. (8) (interval_method 'mc')."""
    from dpbook.experiment import make_config

    return _tasks(make_config(eps=(2.0,), runs=1, n=20, particles=16, interval_method="mc",
                              interval_grid=8, interval_M=300, interval_K=3000,
                              methods=["smc-adaptive"]))


@case(*EXPERIMENT)
def experiment_original_code():
    """The authors' noise scale at release, the paper's in the analysis (every method)."""
    from dpbook.experiment import make_config

    return _tasks(make_config(eps=(5.0,), runs=1, n=60, particles=64, mhaar_iters=500,
                              interval_grid=8, original_code=True))


@case(*EXPERIMENT, *LONG_STREAM)
def experiment_long_streams():
    """The long-stream methods (marginal SMC, online gradient, subset rejuvenation)."""
    from dpbook.experiment import make_config
    from dpbook.experiment.config import LONG_STREAM_METHODS

    return _tasks(make_config(eps=(5.0,), runs=1, n=400, particles=128, subset=25,
                              methods=list(LONG_STREAM_METHODS), interval_grid=12))


@case(*EXPERIMENT, *GENERIC_MODEL)
def experiment_generic():
    """Another location-scale family and the Gaussian mechanism (the generic paths)."""
    from dpbook.experiment import make_config

    return _tasks(make_config(eps=(2.0,), runs=1, n=30, particles=48, mhaar_iters=400,
                              interval_grid=6, family="student_t", mechanism="gaussian"))


@case(*EXPERIMENT, *GENERIC_MODEL)
def experiment_poisson():
    """A family that is not location-scale: the interval table of Section 5.2."""
    from dpbook.experiment import make_config
    from dpbook.model.families import get_family

    return _tasks(make_config(eps=(2.0,), runs=1, n=25, particles=48, mhaar_iters=300,
                              interval_grid=6, family=get_family("poisson"), theta=(10.0,),
                              methods=["smc-adaptive", "mhaar"]))


def _normal_releases(n, eps, l, r, seed=7):
    from dpbook.privacy.population import normal_population

    pop = normal_population(n, 50.0, 10 ** 0.5, eps, seed=seed)
    y = np.array([pop.release(l, r) for _ in range(n)])
    return y, np.full(n, float(l)), np.full(n, float(r))


@case("rng", "population", "smc")
def smc_kernel():
    """Algorithms 2-3, the compiled kernel, about 10^8 MH decisions; seed 3 reaches the
    exact re-decision (module docstring)."""
    from dpbook.smc import smc_posterior

    y, l, r = _normal_releases(1000, 5.0, 40.0, 60.0)
    smc = smc_posterior(y, l, r, 5.0, n_particles=200, seed=3)
    h = smc.history
    return {"theta": smc.theta, "w": smc.w, "mean_mu": h.mean_mu, "mean_sigma": h.mean_sigma,
            "ess": h.ess, "acceptance": h.acceptance}


@case("rng", "population", "smc")
def smc_subset():
    """Subset rejuvenation (Section 4), m = 30 latent values moved per step."""
    from dpbook.smc import smc_posterior

    y, l, r = _normal_releases(300, 2.0, 35.0, 65.0)
    smc = smc_posterior(y, l, r, 2.0, n_particles=130, seed=3, subset=30)
    return {"theta": smc.theta, "w": smc.w, "mean_mu": smc.history.mean_mu}


def _generic_models():
    """(name, family, mechanism, generic=) of the generic-path cases: the normal family
    forced onto that path, another family with the Gaussian mechanism, a heavy tail."""
    from dpbook.model.families import get_family

    return (("normal", "normal", "laplace", True), ("laplace", "laplace", "gaussian", False),
            ("student_t", get_family("student_t", df=3.0), "laplace", False))


@case("rng", "population", "smc", *GENERIC_MODEL)
def smc_generic():
    """The latent SMC for other models (and the normal one forced onto that path)."""
    from dpbook.smc import smc_posterior

    y, l, r = _normal_releases(60, 2.0, 35.0, 65.0)
    out = {}
    for name, fam, mech, _ in _generic_models():
        smc = smc_posterior(y, l, r, 2.0, family=fam, mechanism=mech, n_particles=64,
                            seed=5, generic=True)
        _put(out, name, {"theta": smc.theta, "w": smc.w})
    return out


class Logistic(LocationScaleFamily):
    """A family as a user writes it (chapter 7), compiled by the engine."""

    name = "logistic"

    def base_logpdf(self, z):
        return -z - 2.0 * np.log1p(np.exp(-z))

    def base_dlogpdf(self, z):
        return -1.0 + 2.0 / (1.0 + np.exp(z))

    def base_ppf(self, q):
        return np.log(q) - np.log1p(-q)


@case("rng", "population", "smc", *GENERIC_MODEL)
def smc_engine():
    """The compiled engine of the latent SMC (dpbook.smc.compiled_smc): a user's family and
    shipped ones (the Student-t's keyed draw, the normal family's compiled Gibbs move),
    both mechanisms, all x_k moved and subset rejuvenation."""
    from dpbook.model.families import get_family
    from dpbook.smc import smc_posterior

    y, l, r = _normal_releases(60, 2.0, 35.0, 65.0)
    out = {}
    student_t = get_family("student_t", df=3.0)  # its keyed draw, base_draw
    for name, fam, mech, subset in (("logistic", Logistic(), "laplace", None),
                                    ("laplace", get_family("laplace"), "gaussian", None),
                                    ("logistic-subset", Logistic(), "gaussian", 9),
                                    ("student_t", student_t, "laplace", None),
                                    ("student_t-subset", student_t, "gaussian", 9),
                                    # the compiled conjugate move, engine_gibbs
                                    ("normal-gibbs", get_family("normal"), "gaussian", None)):
        smc = smc_posterior(y, l, r, 2.0, family=fam, mechanism=mech, n_particles=64,
                            seed=5, subset=subset)
        assert type(smc).__name__ == "CompiledSMC"
        _put(out, name, {"theta": smc.theta, "w": smc.w, "x": smc.paths()})
    return out


@case("rng", "population", "mhaar")
def mhaar_kernel():
    """MHAAR, the compiled backend (serial and parallel modes)."""
    from dpbook.mhaar import mhaar

    y, l, r = _normal_releases(200, 1.0, 18.4, 81.6)
    out = {}
    for parallel in (False, True):
        res = mhaar(y, l, r, 1.0, n_iter=4000, seed=2, parallel=parallel)
        _put(out, f"parallel={parallel}", {"samples": res.samples,
                                           "acceptance": res.acceptance,
                                           "steps": np.asarray(res.final_steps)})
    return out


@case("rng", "population", "mhaar", *GENERIC_MODEL)
def mhaar_generic():
    """MHAAR's engine: compiled (the normal family by generic=True, Laplace with the
    Gaussian mechanism, a user's logistic) and one iteration at a time (Student-t)."""
    from dpbook.mhaar import mhaar

    y, l, r = _normal_releases(40, 2.0, 35.0, 65.0)
    out = {}
    for name, fam, mech, generic in (("normal", "normal", "laplace", True),
                                     ("laplace", "laplace", "gaussian", False),
                                     ("logistic", Logistic(), "laplace", False),
                                     ("student_t", "student_t", "laplace", False)):
        res = mhaar(y, l, r, 2.0, family=fam, mechanism=mech, n_iter=400, n_aux=5, seed=4,
                    generic=generic)
        _put(out, name, {"samples": res.samples, "acceptance": res.acceptance})
    return out


@case("rng", "population", "posterior")
def posterior_exact():
    """The exact grid posterior (closed form for the paper's model): grid, density and
    quantiles, as ``dpbook posterior --method exact`` prints them."""
    from dpbook.posterior import exact_posterior

    y, l, r = _normal_releases(80, 1.0, 30.0, 70.0)
    post = exact_posterior(y, l, r, 1.0, grid=(41, 41))
    return {"log_post": post.log_post[::9, ::9], "mu_axis": post.axes[0],
            "sigma_axis": post.axes[1], "quantile": post.quantile([0.05, 0.25, 0.5, 0.75, 0.95]),
            "cdf": post.cdf((50.0, 3.0)), "mean": post.mean()}


@case("rng", "population", "posterior", *GENERIC_MODEL)
def posterior_generic():
    from dpbook.posterior import exact_posterior

    y, l, r = _normal_releases(40, 2.0, 35.0, 65.0)
    out = {}
    for name, fam, mech, generic in _generic_models():
        post = exact_posterior(y, l, r, 2.0, family=fam, mechanism=mech, grid=(21, 21),
                               generic=generic)
        _put(out, name, {"quantile": post.quantile([0.05, 0.5, 0.95]),
                         "mean": post.mean()})
    return out


@case("intervals")
def fisher_paper():
    """eq. (7) and eq. (8) with Algorithm 4 for the paper's model, eq. (13) on a grid:
    ``dpbook fisher`` and ``dpbook best-interval``."""
    from dpbook.fisher import best_interval, fisher_exact, fisher_mc

    out = {"exact": fisher_exact(np.array([-1.0, -3.0, 0.5]), np.array([1.0, 0.5, 2.0]),
                                 2.0),
           "exact_theta": fisher_exact(40.0, 60.0, 5.0, theta=(50.0, 3.0))}
    mc = fisher_mc(-1.0, 1.0, 2.0, M=500, K=5000, rng=np.random.default_rng(1))
    _put(out, "mc", {"F": mc.F, "se": mc.se, "se_trace": mc.se_trace})
    _put(out, "best_exact", best_interval(5.0, grid=15))
    _put(out, "best_mc", best_interval(5.0, method="mc", grid=8, M=300, K=3000, seed=2))
    return out


@case("intervals", *GENERIC_MODEL)
def fisher_generic():
    from dpbook.fisher import fisher_exact, fisher_mc
    from dpbook.model.families import get_family

    out = {}
    for name, fam, mech, theta, ab in (
            ("laplace", "laplace", "gaussian", None, (-1.0, 1.5)),
            ("student_t", get_family("student_t", df=3.0), "laplace", None, (-2.0, 1.0)),
            ("poisson", "poisson", "laplace", (10.0,), (7.0, 13.0)),
            ("normal_gauss", "normal", "gaussian", None, (-1.0, 1.0))):
        F = fisher_exact(*ab, 2.0, theta=theta, family=fam, mechanism=mech)
        mc = fisher_mc(*ab, 2.0, theta=theta, family=fam, mechanism=mech, M=200, K=2000,
                       rng=np.random.default_rng(3))
        _put(out, name, {"exact": F, "mc": mc.F, "mc_se": mc.se})
    return out


@case("rng", "population")
def population_paper():
    """The sensitive values and the Laplace noise of the paper's model."""
    from dpbook.privacy.population import normal_population

    pop = normal_population(300, 50.0, 10 ** 0.5, 2.0, seed=9)
    return {"y": [pop.release(40.0 + k % 7, 60.0 + k % 5) for k in range(300)]}


@case("rng", "population", *GENERIC_MODEL)
def population_generic():
    from dpbook.model.families import get_family
    from dpbook.privacy.population import family_population

    out = {}
    for fam, theta, mech in (("laplace", (1.0, 2.0), "laplace"),
                             (get_family("student_t", df=3.0), (1.0, 2.0), "gaussian"),
                             ("poisson", (10.0,), "laplace"), ("normal", (0.0, 1.0), "gaussian")):
        pop = family_population(fam, theta, 200, 1.5, seed=4, mechanism=mech)
        name = fam if isinstance(fam, str) else fam.name
        out[f"{name}-{mech}"] = np.array([pop.release(-3.0, 12.0) for _ in range(200)])
    return out


@case(*LONG_STREAM, "rng", "population")
def marginal_kernels():
    """The marginal SMC's two walks (delayed acceptance and plain) and its independent
    kernel; the online gradient's compiled score."""
    from dpbook.online import OnlineGradient, marginal_posterior

    y, l, r = _normal_releases(500, 5.0, 44.0, 56.0)
    out = {}
    for name, kw in (("delayed", {}), ("plain", dict(delayed=False)),
                     ("independent", dict(kernel="independent"))):
        smc = marginal_posterior(y, l, r, 5.0, n_particles=200, seed=8, **kw)
        _put(out, name, {"theta": smc.theta, "w": smc.w, "moves": smc.history.moves})
    g = OnlineGradient(5.0)
    path = []
    for t in range(len(y)):
        g.update(y[t], l[t], r[t])
        path.append(g.u.copy())
    out["gradient"] = np.array(path)
    return out


@case(*LONG_STREAM, "rng", "population", *GENERIC_MODEL)
def marginal_generic():
    """The marginal SMC of another family (the Laplace family, both mechanisms): its
    likelihood compiled by the exact posterior's engine."""
    from dpbook.online import marginal_posterior

    y, l, r = _normal_releases(120, 2.0, 47.0, 53.0)
    out = {}
    for mech in ("laplace", "gaussian"):
        smc = marginal_posterior(y - 50.0, l - 50.0, r - 50.0, 2.0, family="laplace",
                                 mechanism=mech, n_particles=100, seed=9)
        _put(out, mech, {"theta": smc.theta, "w": smc.w, "moves": smc.history.moves})
    return out


@case(*CORE, "calibration")
def calibration_replications():
    """One replication of every calibration method, Section 6's prior and the narrow one."""
    from dpbook.calibration.replication import METHODS, replicate
    from dpbook.model.families import get_family

    out = {}
    narrow = get_family("normal").with_prior(loc_mean=0.0, loc_var=1.0)
    for prior, fam, (l, r) in (("section6", "normal", (-300.0, 300.0)),
                               ("narrow", narrow, (-8.0, 8.0))):
        for m in METHODS:
            res = replicate(m, 1.0, 30, l, r, seed=np.random.SeedSequence(5), grid=(21, 21),
                            particles=64, mhaar_iters=2000, family=fam)
            _put(out, f"{prior}/{m}", res)
    return out


@case("rng", "population", "posterior", "calibration", *CENTRAL)
def calibration_central():
    """One replication of each central method (chapter 11), both priors: the curator's
    release (sums, noise, private quantiles) and the central grid posterior."""
    from dpbook.calibration.replication import CENTRAL_METHODS, replicate
    from dpbook.model.families import get_family

    out = {}
    narrow = get_family("normal").with_prior(loc_mean=0.0, loc_var=1.0)
    for prior, fam, (l, r) in (("section6", "normal", (-300.0, 300.0)),
                               ("narrow", narrow, (-8.0, 8.0))):
        for m in CENTRAL_METHODS:
            res = replicate(m, 1.0, 30, l, r, seed=np.random.SeedSequence(5), grid=(21, 21),
                            family=fam)
            _put(out, f"{prior}/{m}", res)
    return out


@case(*CORE, "calibration", *GENERIC_MODEL)
def calibration_generic():
    from dpbook.calibration.replication import replicate

    out = {}
    for m in ("exact", "smc-fixed", "mhaar"):
        res = replicate(m, 2.0, 20, -300.0, 300.0, seed=np.random.SeedSequence(6),
                        grid=(15, 15), particles=32, mhaar_iters=300, family="laplace")
        _put(out, m, res)
    return out


def run_case(name) -> dict:
    """{key: array} of a case, keys prefixed by nothing (the case name is added by the
    record)."""
    uses, fn = CASES[name]
    out = {}
    _put(out, "", fn())
    return {k.lstrip("/"): v for k, v in out.items()}


def math_signature() -> str:
    """A hash of the last bits of the floating-point functions the algorithms call
    (numpy's SIMD loops and reductions, BLAS, whose kernels are chosen by the CPU, libm
    through numba, scipy's special functions) on fixed arguments: equal on machines
    where the golden outputs can be compared bit for bit."""
    import numba
    import scipy.special as sc

    @numba.njit
    def libm(x):
        out = np.empty((7, x.size))
        for i in range(x.size):
            v = x[i]
            out[0, i] = math.exp(-abs(v))
            out[1, i] = math.log(abs(v) + 1e-300)
            out[2, i] = math.log1p(abs(v))
            out[3, i] = math.erfc(v)
            out[4, i] = math.lgamma(abs(v) + 0.5)
            out[5, i] = math.expm1(-abs(v))
            out[6, i] = math.sqrt(abs(v))
        return out

    x = np.random.default_rng(20261126).normal(0.0, 6.0, 4096)
    parts = [np.exp(-np.abs(x)), np.log(np.abs(x)), np.log1p(np.abs(x)), np.expm1(x / 9),
             np.sin(x), np.cos(x), np.tanh(x), np.power(np.abs(x), 0.3), sc.ndtr(x),
             sc.erfc(x), sc.gammaln(np.abs(x) + 0.5), sc.log_ndtr(x),
             sc.betainc(2.5, 1.5, 1 / (1 + x * x)), libm(x),
             # reductions: the SMC's weighted means and ESS (dot), covariances (matmul)
             [x @ x[::-1], x[:1001] @ x[1:1002], np.sum(x), np.sum(x[:999] ** 2)],
             x.reshape(64, 64) @ x.reshape(64, 64).T, x.reshape(64, 64) @ x[:64]]
    h = hashlib.sha256()
    for p in parts:
        h.update(np.ascontiguousarray(p, dtype=np.float64).tobytes())
    return h.hexdigest()[:16]
