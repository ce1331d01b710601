"""The paper-scale experiment of Section 6, resumable and executor-independent.

For every eps in {1, 2, 5, 10} and every run r = 0, ..., 29 the sensitive sample
X_1..X_n ~ N(mu, sigma^2) (n = 1000, mu = 50, sigma^2 = 10) is drawn once and shown to
three methods:

* ``smc-adaptive`` -- Algorithm 1 with SMC (Algorithm 2, N = 1000 particles) and the
  Thompson-sampling interval policy of Section 5 with (a*, b*) = best_interval(eps)
  (eq. 13; computed once per eps and recorded in the manifest);
* ``smc-fixed`` -- the same SMC with the constant interval [l_c, r_c] =
  [mu - 10 sigma, mu + 10 sigma] ("SMC-non-adaptive");
* ``mhaar`` -- the batch MHAAR sampler (10^5 iterations, 20 auxiliary draws) on the
  data released with the same [l_c, r_c].

The pieces are in their own modules: the configuration and seeds in
:mod:`~dpbook.experiment.config`, one task in :mod:`~dpbook.experiment.tasks`, the store
in :mod:`~dpbook.experiment.store`, the executors (this process, a local pool, Dask) in
:mod:`~dpbook.experiment.executors` and the reading of results in
:mod:`~dpbook.experiment.results`.  This module puts them together.

As the SMC and MHAAR kernels are bit-identical for any number of numba threads, and the
seeds come from the tasks' identities (see :mod:`~dpbook.experiment.config`), the
results do not depend on the executor, on the number of workers or on the order in which
tasks finish.  The three methods of one (eps, run) see the same sensitive sample and,
because the privacy noise of the population is a stream of its own, smc-fixed and mhaar
even see the same released values y (the authors' MATLAB code drew fresh noise for
MHAAR; the sample x is shared there too).
"""

from __future__ import annotations

import os
import platform
import shutil
import time
import warnings
from pathlib import Path

import numpy as np

from dpbook.experiment.config import (
    ADAPTIVE_METHODS,
    FORMAT,
    INTERVAL_CODE,
    METHOD_ORDER,
    METHODS,
    PAPER,
    config_tasks,
    config_theta,
    eps_code,
    family_of,
    make_config,
)
from dpbook.experiment.executors import check_workers, connect, run_dask, run_pool, run_serial
from dpbook.experiment.results import load_results
from dpbook.experiment.store import (
    StoreWarning,
    check_same_config,
    code_version,
    collect,
    family_change,
    package_versions,
    prepare_store,
    read_manifest,
    repo_root,
    store_task,
    update_manifest,
    valid_tasks,
    write_estimates,
)
from dpbook.experiment.tasks import run_task, task_spec
from dpbook.validation import check_count, check_memory, check_store_path


def _best_intervals(config: dict, manifest: dict | None, family_obj=None) -> dict:
    """(a*, b*) per eps (eq. 13), reused from the manifest when it has them; for a family
    that is not location-scale, the table of best (l, r) over a theta grid (eq. 9)."""
    if not set(ADAPTIVE_METHODS) & set(config["methods"]):
        return {}
    known = (manifest or {}).get("intervals", {})
    out = {}
    for e in config["eps"]:
        k = repr(e)
        if k in known:
            out[k] = known[k]
            continue
        iseed = int(np.random.SeedSequence(config["seed"], spawn_key=(
            INTERVAL_CODE, eps_code(e))).generate_state(1)[0])
        t0 = time.perf_counter()
        kw = dict(method=config["interval_method"], grid=config["interval_grid"],
                  M=config["interval_M"], K=config["interval_K"], seed=iseed)
        fam = family_of(config, family_obj)
        mech = config.get("mechanism", "laplace")
        if getattr(fam, "event_shape", ()):  # a vector's standard box (dpbook.multivariate)
            from dpbook.online.methods import standard_box

            a, b = standard_box(e, fam, mech)
            out[k] = {"a": a.tolist(), "b": b.tolist(), "seconds": time.perf_counter() - t0}
            continue
        if not fam.location_scale:
            # eq. (9) depends on theta: best intervals on a theta grid, interpolated
            from dpbook.fisher import ThetaGridIntervals

            tg = ThetaGridIntervals(fam, e, mechanism=mech, center=config_theta(config),
                                    **kw)
            out[k] = {"table": tg.table(), "seed": iseed,
                      "seconds": time.perf_counter() - t0}
            continue
        from dpbook.fisher import best_interval

        res = best_interval(e, family=fam, mechanism=mech, lims=tuple(config["interval_lims"]),
                            score=config["interval_score"], **kw)
        out[k] = {"a": float(res["a"]), "b": float(res["b"]),
                  "score": None if res.get("score") is None else float(res["score"]),
                  "se": None if res.get("se") is None else float(res["se"]),
                  "seed": iseed, "seconds": time.perf_counter() - t0}
    return out


def run_experiment(eps=PAPER["eps"], runs=30, n=1000, particles=1000, mhaar_iters=100_000,
                   methods=METHODS, seed=0, out="results/paper", scheduler=None,
                   interval_method="exact", mu=50.0, sigma=10 ** 0.5, progress=True,
                   workers=None, keep_particles=1, interval_grid=50, interval_M=1000,
                   interval_K=10000, scheduler_timeout=10.0, family=None, mechanism="laplace",
                   theta=None, subset=None, original_code=False, batch=1, algorithm_seed=None,
                   quartiles=False, family_changed_ok=False, guard=None):
    """Run (or resume) the Section 6 experiment; return the estimates DataFrame.

    ``family`` (a name from ``dpbook families`` or a Family object), ``mechanism`` and
    the true ``theta`` run the same comparison for another population (default: the
    paper's normal with the Laplace mechanism, theta = (mu, sigma)).  A Family object
    that is not a shipped family (say, defined in a notebook) is sent to the workers by
    value (cloudpickle), and a hash of its source is part of the configuration, with
    that of its file's bytes for a family from a file or module: a store made with
    another version of that file is refused unless ``family_changed_ok``.
    ``subset`` is the number of latent values moved per step by the smc-subset methods;
    ``original_code=True`` releases with the authors' code's noise scale and ``batch``
    publishes one interval per ``batch`` individuals; a list of batch sizes (``batch=[1,
    10, 100]``) runs the online methods once per batch size in one store, each task as
    in the store of its batch size alone; ``algorithm_seed`` reseeds the algorithms
    and not the data; ``quartiles=True`` keeps the final posterior's quartiles of each
    online task in its row; ``guard`` widens the latent SMC's adaptive intervals where
    the releases pile up at one end (not the paper's; see :func:`make_config`).

    Tasks already stored in ``out`` for the same configuration are skipped.  With
    ``scheduler="tcp://host:port"`` the tasks run on that Dask cluster; otherwise on a
    local process pool of ``workers`` processes (default: every core) with one numba
    thread each, or in this process with all threads when there is one worker or one
    task left.  The results are the same in every case.

    The local pool starts its workers with the ``spawn`` method (forking a process whose
    OpenMP threads are running is unsafe), so a script that calls this function with
    more than one worker must do it under ``if __name__ == "__main__":``.
    """
    config = make_config(eps=eps, runs=runs, n=n, particles=particles,
                         mhaar_iters=mhaar_iters, methods=methods, seed=seed,
                         interval_method=interval_method, mu=mu, sigma=sigma,
                         keep_particles=keep_particles, interval_grid=interval_grid,
                         interval_M=interval_M, interval_K=interval_K, family=family,
                         mechanism=mechanism, theta=theta, subset=subset,
                         original_code=original_code, batch=batch,
                         algorithm_seed=algorithm_seed, quartiles=quartiles, guard=guard)
    family_obj = None if config.get("family_registered", True) else family
    out = check_store_path(out)
    config = family_change(out, config, family_changed_ok)
    tasks = sorted(config_tasks(config),
                   key=lambda t: (t.run, t.eps, METHOD_ORDER[t.method], t.batch or 0))

    def prepare(manifest):
        intervals = _best_intervals(config, manifest, family_obj)
        return ({"intervals": intervals},
                lambda task, threads: task_spec(config, intervals, task, threads, family_obj))

    def table():
        df = collect(out, config)
        write_estimates(out, df)
        return df

    return run_tasks(out, config, tasks, prepare, run_task, table,
                     scheduler=scheduler, workers=workers, progress=progress,
                     timeout=scheduler_timeout, desc="experiment")


def run_tasks(out, config, tasks, prepare, fn, table, *, scheduler=None, workers=None,
              progress=True, timeout=10.0, desc="tasks"):
    """Run the ``tasks`` of a study that are not yet stored in ``out``, storing each as it
    finishes, and return ``table()``, called at the end even if a task failed (a
    DataFrame of the results; it also writes the store's ``estimates.parquet``).

    This is the machinery of every dpbook study (the Section 6 experiment, the
    calibration study): ``config`` is the plain dict of everything that changes a result
    (kept in the manifest, its hash in every task file); ``tasks`` are frozen dataclasses
    with ``name`` and ``filename`` whose fields the stored rows repeat, in the order they
    are submitted; ``prepare(manifest)`` returns (extra manifest entries, ``spec_of(task,
    threads)``), the picklable spec ``fn`` runs in any process.  With ``scheduler`` the
    tasks run on that Dask cluster, else on a local pool of ``workers`` processes (default:
    every core) or in this process; the results are the same in every case.
    """
    if workers is not None:
        workers = check_count("workers", workers)
        nw = min(workers, len(tasks))  # a spawned worker holds Python, numpy and numba
        check_memory(f"{nw} worker processes", WORKER_BYTES * nw)
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be an address such as tcp://host:8786, "
                         f"got {scheduler!r}")
    out = Path(out)
    if out.exists():
        check_same_config(out, read_manifest(out), config)
    client = connect(scheduler, timeout) if scheduler else None
    try:
        prepare_store(out)  # fails before any computing if the store cannot be written
        manifest = read_manifest(out)
        check_same_config(out, manifest, config)
        extra, spec_of = prepare(manifest)
        done = valid_tasks(out, config, quarantine=True, tasks=tasks)
        pending = [t for t in tasks if t not in done]
        if scheduler:
            executor, nw = "dask", None
        else:
            nw = min(workers or os.cpu_count() or 1, max(len(pending), 1))
            executor = "pool" if nw > 1 else "serial"
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        session = {"id": f"{platform.node()}:{os.getpid()}:{time.time_ns()}",
                   "started": started, "code": code_version(), "executor": executor,
                   "workers": nw, "scheduler": scheduler, "tasks_to_run": len(pending)}
        if client is not None:
            session["dask_workers"] = check_workers(client)
            session["workers"] = len(session["dask_workers"])
        if manifest and manifest.get("packages") != package_versions():
            session["packages"] = package_versions()

        def begin(old):
            # another process may have written the manifest since it was read above
            check_same_config(out, old, config)
            old = old or {}
            return {"format": FORMAT, "config": config,
                    **{k: {**old.get(k, {}), **v} for k, v in extra.items()},
                    "code": old.get("code", session["code"]),
                    "packages": old.get("packages", package_versions()),
                    "created": old.get("created", started),
                    "sessions": old.get("sessions", []) + [session],
                    "tasks": len(tasks), "complete": False}

        update_manifest(out, begin)
        threads = None if executor == "serial" else 1
        specs = [(t, spec_of(t, threads)) for t in pending]
        from tqdm import tqdm  # plain text on stderr: papermill's notebooks get no widgets

        bar = tqdm(total=len(tasks), initial=len(tasks) - len(pending), disable=not progress,
                   unit="task", desc=desc, dynamic_ncols=True, smoothing=0.1)

        def on_done(task, result):
            store_task(out, task, result, config)
            bar.update(1)
            bar.set_postfix_str(task.name, refresh=False)

        try:
            if executor == "dask":
                run_dask(fn, client, specs, on_done)
            elif executor == "pool":
                run_pool(fn, specs, nw, on_done)
            else:
                run_serial(fn, specs, on_done)
        finally:
            bar.close()
            df = table()

            def finish(old):
                new = old if old is not None else begin(None)
                for s in new["sessions"]:
                    if s.get("id") == session["id"]:
                        s["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
                new["complete"] = len(df) == len(tasks)
                return new

            update_manifest(out, finish)
    finally:
        if client is not None:
            client.close()
    return df


def is_complete(out, **kwargs) -> bool:
    """True if ``out`` holds every task of the configuration given by ``kwargs``."""
    out = Path(out)
    config = make_config(**kwargs)
    manifest = read_manifest(out)
    if manifest is None or manifest.get("config") != config:
        return False
    with warnings.catch_warnings():  # reported (once) by the run that follows
        warnings.simplefilter("ignore", StoreWarning)
        return len(valid_tasks(out, config)) == len(config_tasks(config))


# the configuration entries that change with the code, not with the setup
WORKER_BYTES = 2 ** 27  # a spawned worker: 230 MiB measured after its imports; half that
CODE_KEYS = ("algorithm", "family_source", "format", "calibration_code")


def set_aside_if_stale(out: Path, config: dict) -> Path | None:
    """Move the store ``out`` to ``out.stale-<fingerprint>`` (nothing is deleted) when it
    was made by other code (:data:`CODE_KEYS`) with otherwise the same configuration
    (settings that only one of the two versions records, such as one added by the newer
    code, are not compared); return where it went, or None."""
    old = ((read_manifest(out) if out.exists() else None) or {}).get("config", {})
    shared = (set(old) & set(config)) - set(CODE_KEYS)
    if not old or all(old.get(k) == config.get(k) for k in CODE_KEYS) or \
            any(old[k] != config[k] for k in shared):
        return None
    aside = out.with_name(f"{out.name}.stale-{old.get('algorithm') or 'unknown'}")
    shutil.rmtree(aside, ignore_errors=True)
    aside.mkdir()
    for item in out.iterdir():
        if item.name not in (".lock", ".manifest.lock"):
            item.rename(aside / item.name)
    return aside


def ensure_results(out="results/paper", progress=True, workers=None, scheduler=None,
                   **kwargs):
    """Load the results in ``out`` if complete for this configuration, else run/resume.

    ``kwargs`` are the configuration arguments of :func:`run_experiment` (eps, runs, n,
    ...; the paper's values by default).  Returns ``(estimates, trajectories)`` as
    :func:`load_results`.

    Several processes (for example two chapters executed side by side) may call this for
    the same store: an exclusive lock on ``out/.lock`` makes the later ones wait and then
    load.  A store made by other versions of the algorithms (:mod:`dpbook.versions`, and
    the source of a family defined outside dpbook) with otherwise the same configuration
    is stale: it is moved aside to
    ``out.stale-<fingerprint>`` (nothing is deleted) and the experiment is rerun.  A store
    of another configuration is an error, as in :func:`run_experiment`.
    """
    from filelock import FileLock

    out = Path(out)
    prepare_store(out)
    with FileLock(out / ".lock"):
        config = make_config(**kwargs)
        set_aside_if_stale(out, config)
        if not is_complete(out, **kwargs):
            run_experiment(out=out, progress=progress, workers=workers, scheduler=scheduler,
                           **kwargs)
        return load_results(out)


# The experiment of chapters 5 and 6 in each book mode: "full" is Section 6 of the paper
# (the defaults of make_config and of `dpbook experiment`), "quick" a small version.
BOOK_CONFIGS = {
    "quick": dict(eps=(1, 2, 5, 10), runs=5, n=200, particles=200, mhaar_iters=5_000),
    "full": dict(eps=(1, 2, 5, 10), runs=30, n=1000, particles=1000, mhaar_iters=100_000),
}
# The same experiment as the authors' code would have run it (original_code: releases
# with noise of scale (r - l)/(eps sqrt 2)), for chapter 6: the two SMC methods, and in
# full mode 10 runs (80 tasks, about 9 CPU-minutes, instead of 240).
ORIGINAL_CODE = {"quick": dict(methods=("smc-adaptive", "smc-fixed"), original_code=True),
                 "full": dict(methods=("smc-adaptive", "smc-fixed"), runs=10,
                              original_code=True)}


def book_experiment(mode="quick", seed=0, root=None, progress=False, scheduler=None,
                    original_code=False, eps=None, runs=None):
    """The shared store of chapters 5 and 6:
    ``(estimates, trajectories, path, seconds, computed)``.

    The store is ``results/paper`` for the full mode with seed 0 (what ``dpbook
    experiment`` writes with its defaults, so it can be computed ahead, e.g. on a Dask
    cluster), ``results/quick`` for the quick mode and ``results/<name>-seed<seed>``
    otherwise.  ``eps`` and ``runs`` other than the mode's (:data:`BOOK_CONFIGS`) give a
    store of their own, ``results/<name>-eps1-3-runs2``, so that they never replace the
    store that the other chapters read.  It is run (or resumed) only when incomplete, on
    the Dask cluster at ``scheduler`` if given (same numbers); see :func:`ensure_results`.
    ``original_code=True`` gives the store of :data:`ORIGINAL_CODE` instead
    (``results/<name>-original-code``).  ``seconds`` is
    the time this call took and ``computed`` says whether it ran tasks (False: the
    store was complete and was only read; the tasks' own compute times are in the
    ``seconds`` column of the estimates).
    """
    if mode not in BOOK_CONFIGS:
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    config = {**BOOK_CONFIGS[mode], **(ORIGINAL_CODE[mode] if original_code else {})}
    asked = {k: v for k, v in (("eps", eps), ("runs", runs)) if v is not None}
    mine, book = make_config(**{**config, **asked}), make_config(**config)  # ValueError
    own = "".join(f"-{k}{'-'.join(f'{v:g}' for v in np.atleast_1d(mine[k]))}"
                  for k in asked if mine[k] != book[k])
    config.update(asked)
    name = ("paper" if mode == "full" else mode) + ("" if seed == 0 else f"-seed{seed}") \
        + own + ("-original-code" if original_code else "")
    path = (repo_root() if root is None else Path(root)) / "results" / name
    start = time.perf_counter()
    computed = not is_complete(path, seed=seed, **config)
    est, tr = ensure_results(out=path, progress=progress, seed=seed, scheduler=scheduler,
                             **config)
    return est, tr, path, time.perf_counter() - start, computed


def store_report(estimates, path, seconds, computed) -> str:
    """One line on where a chapter's results came from (:func:`book_experiment`'s
    outputs): the store, the number of tasks, whether they were computed now or read,
    and their own compute time recorded in the store."""
    try:
        where = Path(path).resolve().relative_to(repo_root())
    except ValueError:
        where = path
    how = f"computed now in {seconds:.0f} s" if computed else \
        f"complete already: read in {seconds:.1f} s"
    return (f"store {where}: {len(estimates)} tasks, {how}; the tasks' own compute time, "
            f"recorded in the store: {estimates['seconds'].sum():.0f} s")
