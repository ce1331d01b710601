"""A calibration study run through the experiment's machinery: resumable, stored as each
replication finishes, on this process, a local pool or a Dask cluster, with the same
numbers on every executor.

A store (default ``results/calibration``) is keyed by the settings that change one
replication's result (particles, exact-posterior grid, MHAAR iterations, the fixed
interval, root seed, family, its prior, mechanism, and the versions of the algorithms
it runs: :mod:`dpbook.versions`); it holds any set of
replications (method, eps, n, rep), so a study with more replications, eps values or
stream lengths reuses what is there.  Replication ``rep`` at (eps, n) has the seed
``SeedSequence(seed, spawn_key=(6, E, n, rep))`` (E the bit pattern of eps, as in the
experiment): every method sees the same theta and the same sensitive data at the same
(eps, n, rep).
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

from dpbook.calibration.replication import (
    ALL_METHODS,
    check_study_model,
    replicate,
    summarize_pit,
)
from dpbook.diagnostics import quiet_diagnostics
from dpbook.experiment.config import TASK_BYTES, config_algorithms, eps_code
from dpbook.experiment.results import note_store_read
from dpbook.experiment.runner import run_tasks, set_aside_if_stale
from dpbook.experiment.store import StoreWarning, family_change, valid_tasks, write_estimates
from dpbook.experiment.tasks import set_threads
from dpbook.validation import (
    check_count,
    check_eps,
    check_interval,
    check_memory,
    check_store_path,
)
from dpbook.versions import fingerprint

CALIBRATION_CODE = 6  # spawn-key code of the replications' seeds
FORMAT = 1


@dataclass(frozen=True, order=True)
class Replication:
    """One replication of a calibration study (the fields are repeated in its row)."""
    method: str
    eps: float
    n: int
    rep: int

    @property
    def name(self) -> str:
        return f"{self.method}_eps{self.eps!r}_n{self.n}_rep{self.rep}"

    @property
    def filename(self) -> str:
        return self.name + ".npz"


def replication_seed(root: int, eps: float, n: int, rep: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(root, spawn_key=(CALIBRATION_CODE, eps_code(eps), n, rep))


def study_family(family="normal", prior=None):
    """The family of a study with its prior: ``prior`` (a LocationScalePrior, or a dict
    of its hyperparameters) replaces the family's own, which is Section 6's unless the
    family came from ``with_prior``."""
    from dpbook.model.families import as_family

    fam = as_family(family)
    check_study_model("exact", fam, "laplace")
    if prior is None:
        return fam
    return fam.with_prior(**prior) if isinstance(prior, dict) else fam.with_prior(prior)


def calibration_config(particles=500, grid=61, mhaar_iters=10_000, interval=(-300.0, 300.0),
                       seed=0, family="normal", mechanism="laplace", prior=None) -> dict:
    """The settings of one replication (see the module docstring), checked."""
    from dataclasses import astuple

    from dpbook.model.families import available, family_sha256
    from dpbook.model.mechanisms import check_mechanism

    fam = study_family(family, prior)  # a location-scale family (checked there)
    if fam.options:
        raise ValueError(f"the calibration study takes families without options; "
                         f"{fam.name} has {', '.join(fam.options)}")
    l, r = check_interval(*interval)
    config = {"study": "calibration", "format": FORMAT,
            "particles": check_count("particles", particles),
            "grid": check_count("grid", grid),
            "mhaar_iters": check_count("mhaar_iters", mhaar_iters),
            "interval": [float(l), float(r)], "seed": check_count("seed", seed, minimum=0),
            "family": fam.name, "prior": list(astuple(fam.prior)),
            "mechanism": check_mechanism(mechanism)}
    from dpbook.posterior.exact import check_grid

    check_grid((config["grid"],) * fam.dim, fam.params)
    config["algorithm"] = fingerprint(config_algorithms(config))
    if family_sha256(type(fam)) and fam.name not in available():  # from a file
        config["family_sha256"] = family_sha256(type(fam))
    return config


def run_replication(spec: dict) -> dict:
    """Run one replication from its plain-dict spec (in any process)."""
    from dpbook.model.prior import LocationScalePrior

    set_threads(spec.get("numba_threads"))
    t0 = time.perf_counter()
    seed = replication_seed(spec["seed"], spec["eps"], spec["n"], spec["rep"])
    if "family_pickle" in spec:  # a family from a file, shipped by value
        import cloudpickle

        spec = {**spec, "family": cloudpickle.loads(spec["family_pickle"])}
    family = study_family(spec["family"], LocationScalePrior(*spec["prior"]))
    with quiet_diagnostics():  # the study judges the replications together
        res = replicate(spec["method"], spec["eps"], spec["n"], *spec["interval"],
                        seed=seed, grid=(spec["grid"], spec["grid"]),
                        particles=spec["particles"], mhaar_iters=spec["mhaar_iters"],
                        family=family, mechanism=spec["mechanism"])
    row = {k: spec[k] for k in ("method", "eps", "n", "rep")}
    row.update(res, seconds=time.perf_counter() - t0)
    return {"row": row, "arrays": {}}


def _as_list(v) -> list:
    return [x.item() if isinstance(x, np.generic) else x for x in
            (v if isinstance(v, (list, tuple, np.ndarray)) else [v])]


def replications(methods, eps, n, reps) -> list[Replication]:
    """The replications of a study, checked, in submission order (replication by
    replication, so that a stopped study has every setting at about the same count)."""
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    for m in methods:
        if m not in ALL_METHODS:
            raise ValueError(f"unknown calibration method {m!r}; choose from "
                             f"{', '.join(ALL_METHODS)}")
    eps = [check_eps(e) for e in _as_list(eps)]
    ns = [check_count("n", v) for v in _as_list(n)]
    reps = check_count("reps", reps)
    if not methods:
        raise ValueError(f"no method given; choose from {', '.join(ALL_METHODS)}")
    count = reps * len(ns) * len(eps) * len(methods)
    check_memory(f"{count} replications", TASK_BYTES * count)
    # each replication's population and releases: a few arrays of n values
    check_memory(f"a replication of {max(ns)} individuals", 64 * max(ns))
    return [Replication(m, e, k, rep) for rep in range(reps) for k in ns for e in eps
            for m in methods]


def run_calibration(methods=None, eps=None, n=None, reps=None, out="results/calibration",
                    particles=500, grid=61, mhaar_iters=10_000, interval=(-300.0, 300.0),
                    seed=0, family="normal", mechanism="laplace", prior=None, scheduler=None,
                    workers=None, progress=True, tasks=None, family_changed_ok=False):
    """Run (or resume) a calibration study; one row per replication (a DataFrame:
    method, eps, n, rep, the PIT of each parameter, the true values, the posterior
    interquartile ranges, seconds).  ``prior``: a
    :class:`~dpbook.model.prior.LocationScalePrior` (or a dict of its hyperparameters)
    to draw theta from and infer with, instead of the family's (Section 6's).  The
    replications are every combination of
    ``methods``, ``eps``, ``n`` and ``range(reps)``, or the list ``tasks`` (for example
    the concatenation of several :func:`replications`; repeats are run once).  The
    replications already in ``out`` are reused; each new one is stored as it finishes
    (see :func:`dpbook.experiment.run_tasks`).
    A store made by other dpbook code is moved aside (with a warning) and recomputed;
    one made with other settings is an error naming them, and one made with another
    version of the family's file (its sha256) unless ``family_changed_ok``."""
    config = calibration_config(particles=particles, grid=grid, mhaar_iters=mhaar_iters,
                                interval=interval, seed=seed, family=family,
                                mechanism=mechanism, prior=prior)
    if tasks is None:
        tasks = replications(methods, eps, n, reps)
    elif not tasks or not all(isinstance(t, Replication) for t in tasks):
        raise ValueError("tasks must be a non-empty list of Replication "
                         "(see dpbook.calibration.replications)")
    tasks = list(dict.fromkeys(tasks))
    fam = study_family(family, prior)
    for m in {t.method for t in tasks}:
        check_study_model(m, fam, mechanism)
    out = check_store_path(out)
    config = family_change(out, config, family_changed_ok)
    shipped = {}
    if "family_sha256" in config:  # workers need not import the family's file
        import cloudpickle

        shipped["family_pickle"] = cloudpickle.dumps(fam)
    aside = set_aside_if_stale(out, config)
    if aside is not None:
        warnings.warn(f"{out} was made by other dpbook code; moved to {aside}, its "
                      f"replications will be recomputed", StoreWarning, stacklevel=2)

    def spec_of(task, threads):
        return {"method": task.method, "eps": task.eps, "n": task.n, "rep": task.rep,
                "numba_threads": threads, **shipped,
                **{k: config[k] for k in ("seed", "interval", "grid", "particles",
                                          "mhaar_iters", "family", "prior", "mechanism")}}

    def table():
        # this call's replications; the store's table keeps those of earlier calls too
        import pandas as pd

        rows = valid_tasks(out, config, tasks=tasks)
        df = pd.DataFrame([rows[t] for t in tasks if t in rows])
        path = out / "estimates.parquet"
        # (a table of no rows has no columns: the table of a run stopped before its first
        # replication finished)
        old = pd.read_parquet(path) if path.exists() else df.iloc[:0]
        if len(old) and len(df):
            keys = ["method", "eps", "n", "rep"]
            mine = pd.MultiIndex.from_frame(df[keys])
            old = old[~pd.MultiIndex.from_frame(old[keys]).isin(mine)]
        write_estimates(out, pd.concat([old, df], ignore_index=True) if len(old) else df)
        return df

    df = run_tasks(out, config, tasks, lambda manifest: ({}, spec_of), run_replication,
                   table, scheduler=scheduler, workers=workers, progress=progress,
                   desc="calibration")
    note_store_read(out)  # for the book's cached rebuild (book/tools/run_chapters.py)
    return df


def prior_iqr(prior=None, params=("mu", "sigma")) -> dict:
    """Interquartile ranges of the location and the scale under ``prior`` (default
    Section 6's; a LocationScalePrior or a dict of its hyperparameters), by parameter
    name (:meth:`~dpbook.model.prior.LocationScalePrior.iqr`)."""
    from dpbook.model.prior import SECTION6, LocationScalePrior

    p = prior if isinstance(prior, LocationScalePrior) else \
        LocationScalePrior(**prior) if prior else SECTION6
    return dict(zip(params, p.iqr()))


def calibration_summary(df, params=("mu", "sigma"), prior=None):
    """One row per (method, eps, n, parameter): :func:`summarize_pit` of the PIT values,
    the median posterior interquartile range, and ``learned``, that median divided by
    the prior's IQR (:func:`prior_iqr`; about 1: the posteriors learned nothing); the
    mean IQR and ``mean_learned``, the mean divided by the prior's IQR (a posterior that
    is its prior is calibrated too: the width says whether it learned)."""
    import pandas as pd

    rows = []
    iqr0 = prior_iqr(prior, params)
    for (method, eps, n), g in df.groupby(["method", "eps", "n"], sort=False):
        for p in params:
            med, mean = float(g[f"{p}_iqr"].median()), float(g[f"{p}_iqr"].mean())
            rows.append({"method": method, "eps": eps, "n": n, "param": p,
                         **summarize_pit(g[p].to_numpy()), "median_iqr": med,
                         "learned": med / iqr0[p], "mean_iqr": mean,
                         "mean_learned": mean / iqr0[p]})
    return pd.DataFrame(rows)


def coverage_table(summary):
    """The summary as a table to read: coverage of the 50% and 90% intervals with their
    binomial se, KS statistic and p-value, dispersion z, IQR / prior."""
    import pandas as pd

    t = summary.set_index(["method", "eps", "param"])
    cover = {f"{p}% covered": [f"{c:.2f} ± {se:.2f}" for c, se in
                               zip(t[f"coverage{p}"], t[f"coverage{p}_se"])] for p in (50, 90)}
    return pd.DataFrame(cover, index=t.index).assign(
        **{"KS": t.ks_stat, "KS p": t.ks_p, "disp. z": t.dispersion_z,
           "IQR / prior": t.learned}).round(3)


def calibration_verdict(summary, level=0.01):
    """Which posteriors fail, from the summary: a row fails when its KS p-value or the
    two-sided p-value of its dispersion z is below ``level`` / (2 x rows) (Bonferroni: a
    set of calibrated posteriors fails somewhere with probability at most ``level``).
    A posterior whose IQR is 0.8 to 1.25 times the prior's learned little.  Returns
    (the p-value bound, one Markdown line per method)."""
    from scipy import stats

    alpha = level / (2 * len(summary))
    disp_p = 2 * stats.norm.sf(summary.dispersion_z.abs())
    lines = []
    for method, g in summary.assign(dispersion_p=disp_p).groupby("method", sort=False):
        bad = g[(g.ks_p < alpha) | (g.dispersion_p < alpha)]
        flat = g[g.learned.between(0.8, 1.25)]
        fails = ", ".join(f"{r.param} at ε = {r.eps:g} (KS p = {r.ks_p:.1g}, dispersion "
                          f"z = {r.dispersion_z:.1f}, 90% interval covers "
                          f"{r.coverage90:.2f})" for r in bad.itertuples())
        text = f"* `{method}`: " + ("passes in every case" if bad.empty else "fails for " + fails)
        if not flat.empty:
            text += "; about as wide as the prior for " + ", ".join(
                f"{r.param} at ε = {r.eps:g}" for r in flat.itertuples())
        lines.append(text + ".")
    return alpha, lines


def pit_frame(df, params=("mu", "sigma")):
    """The PIT values of a study in long form: one row per replication and parameter
    (method, eps, n, rep, param, pit, iqr)."""
    import pandas as pd

    keys = ["method", "eps", "n", "rep"]
    return pd.concat([df[keys].assign(param=p, pit=df[p], iqr=df[f"{p}_iqr"])
                      for p in params], ignore_index=True)
