"""One task of the experiment: (method, eps, run) and, in a store of several batch sizes,
the online methods' batch size B; its spec and how it runs.

``task_spec`` turns the configuration into a plain, picklable dict; ``run_task`` runs it
in any process (the local pool, a Dask worker or this one) and returns the estimates row
and the trajectories.  The result depends only on the spec: the SMC (Algorithms 1-3) and
MHAAR kernels are bit-identical for any number of numba threads.
"""

from __future__ import annotations

import contextlib
import math
import os
import time

import numpy as np

from dpbook.experiment.config import (
    ADAPTIVE_METHODS,
    CHAIN_POINTS,
    Task,
    config_batches,
    config_theta,
    data_seed,
    family_of,
    seed_str,
    task_seed,
)

QUANTILES = (5, 25, 50, 75, 95)  # percent: the final posterior's, with quartiles=True


def task_spec(config: dict, intervals: dict, task: Task, threads,
              family_obj=None) -> dict:
    """The picklable spec of one task: what :func:`run_task` needs and nothing else
    (``intervals`` are the best intervals per eps, ``threads`` the numba threads)."""
    spec = {k: config[k] for k in ("n", "particles", "mhaar_iters", "mhaar_aux", "seed",
                                   "every")}
    for k in ("family", "family_options", "family_registered", "prior", "mechanism", "subset",
              "original_code", "batch", "algorithm_seed", "quartiles", "guard"):
        if k in config:
            spec[k] = config[k]
    if task.batch is not None:  # a store of several batch sizes: the task's own
        spec.update(batch=task.batch, batch_key=True)
    elif config_batches(config):  # MHAAR there: no batches
        del spec["batch"]
    theta = config_theta(config)
    if "fixed_half_width" in config:  # Section 6: [mu - 10 sigma, mu + 10 sigma]
        h = config["fixed_half_width"]
        fixed = (theta[0] - h * theta[1], theta[0] + h * theta[1])
    else:
        fixed = family_of(config, family_obj).fixed_interval(*theta)
    spec.update(method=task.method, eps=task.eps, run=task.run, theta=list(theta),
                fixed=[np.asarray(v, float).tolist() for v in fixed],
                keep=task.run < config["keep_particles"], numba_threads=threads)
    if family_obj is not None and not config.get("family_registered", True):
        # by value (cloudpickle), so that worker processes need not import its module
        import cloudpickle

        spec["family_pickle"] = cloudpickle.dumps(family_obj)
    if task.method in ADAPTIVE_METHODS:
        iv = intervals[repr(task.eps)]
        if "table" in iv:
            spec["table"] = iv["table"]
        else:
            spec.update(a=iv["a"], b=iv["b"])
    return spec


def set_threads(k):
    if k:
        import numba

        numba.set_num_threads(max(1, min(int(k), numba.config.NUMBA_NUM_THREADS)))


# glibc malloc settings: name -> (mallopt parameter number, value).  The mmap threshold
# is at most 32 MiB; the trim threshold keeps up to 1 GiB of freed memory.
_MALLOC = {"MMAP_THRESHOLD": (-3, 32 << 20), "TRIM_THRESHOLD": (-1, 1 << 30)}


def keep_freed_memory():
    """Let glibc keep freed memory for reuse instead of returning it to the system.

    The generic SMC (dpbook.smc.SMC) allocates and frees numpy arrays of about a
    megabyte at every step; with glibc's defaults each one comes back from the kernel
    as fresh pages, and page faults and zeroing take a fifth of a small run (see the
    reproduction notes).  The results do not change.  Called in the worker processes
    the experiment starts; for processes yet to start, see
    :func:`keep_freed_memory_env`.  Does nothing where the C library is not glibc.
    """
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6")
        for number, value in _MALLOC.values():
            libc.mallopt(number, value)


def keep_freed_memory_env() -> dict:
    """The settings of :func:`keep_freed_memory` as the environment variables glibc
    reads when a process starts (book/tools/run_chapters.py sets them for the chapters'
    kernels)."""
    return {f"MALLOC_{name}_": str(value) for name, (_, value) in _MALLOC.items()}


def init_worker():
    """Process-pool initializer: one numba thread per worker so tasks run side by side,
    freed memory kept for reuse (:func:`keep_freed_memory`), Ctrl-C (SIGINT, sent to
    the whole process group) left to the parent, which stops the pool, and the worker
    made to die with its parent (:func:`die_with_parent`)."""
    import signal

    set_threads(1)
    keep_freed_memory()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent()


def die_with_parent(every=0.25):
    """End this process within ``every`` seconds of its parent's death, however the
    parent died (SIGKILL included, which no handler of the parent sees): a daemon thread
    watches for the process being re-parented.  Without it the pool's workers, and the
    resource tracker they keep open, outlive a killed ``dpbook experiment``."""
    import multiprocessing
    import threading

    # the pid the pool gave at spawn: the parent may be dead before this runs
    origin = multiprocessing.parent_process()
    parent = origin.pid if origin is not None else os.getppid()

    def watch():
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def run_task(spec: dict) -> dict:
    """Run one (method, eps, run) task (of batch size B in a store of several; the row
    then has a ``batch`` entry); return {"row": {...}, "arrays": {...}}.

    ``spec`` is a plain dict (picklable for any executor).  The result depends only on
    the spec, not on the process, thread count or order in which tasks run.  The
    methods' diagnostics are not warned of task by task (the store's rows are judged
    together: :func:`dpbook.diagnostics.quiet_diagnostics`).
    """
    from dpbook.diagnostics import quiet_diagnostics

    with quiet_diagnostics():
        return _run_task(spec)


def _run_task(spec: dict) -> dict:
    set_threads(spec.get("numba_threads"))
    from dpbook.model.families import as_family
    from dpbook.online.methods import TASKS, warm_up
    from dpbook.privacy.policies import FixedPolicy
    from dpbook.privacy.population import family_population

    if "family_pickle" in spec:  # a family defined outside dpbook, shipped by value
        import cloudpickle

        family = cloudpickle.loads(spec["family_pickle"])
    else:
        family = family_of(spec)
    mechanism = spec.get("mechanism", "laplace")
    family = as_family(family)
    warm_up(spec["method"], family, mechanism)
    params = family.params
    method, eps, run, root = spec["method"], float(spec["eps"]), int(spec["run"]), spec["seed"]
    n, theta = spec["n"], tuple(spec["theta"])
    dss = data_seed(root, eps, run)
    ass = task_seed(spec.get("algorithm_seed", root), method, eps, run)
    row = {"method": method, "eps": eps, "run": run,
           **({"batch": int(spec["batch"])} if spec.get("batch_key") else {}),
           "seed": seed_str(ass),
           "data_seed": seed_str(dss), "n": n,
           **{f"{p}_true": float(v) for p, v in zip(params, theta)},
           "a": math.nan, "b": math.nan, "l_c": math.nan, "r_c": math.nan,
           "particles": math.nan, "iters": math.nan}
    arrays = {}
    lc, rc = spec["fixed"]
    t0 = time.perf_counter()
    # the normal/Laplace population is the paper's (bit-identical to earlier stores); the
    # authors' code released with noise of scale (r - l)/(eps sqrt 2), i.e. at level
    # eps sqrt 2, and analysed at eps (original_code: the same data and noise draws)
    eps_release = eps * math.sqrt(2.0) if spec.get("original_code") else eps
    pop = family_population(family, theta, n, eps_release, seed=dss, mechanism=mechanism)
    if method in TASKS:  # Algorithm 1 with an online posterior
        from dpbook.online.algorithm1 import run_online

        online, policy_name, _ = TASKS[method]
        posterior, online_seed = None, ass  # run_online builds the latent SMC
        if online.point_estimate:
            posterior = online.build(eps, family, mechanism)
        elif not online.latent:  # the marginal SMC: its own child of the task's seed
            post_ss, online_seed = ass.spawn(2)
            posterior = online.build(eps, family, mechanism, n_particles=spec["particles"],
                                     seed=post_ss)
        if policy_name == "fixed":
            policy = FixedPolicy(lc, rc)
            if np.ndim(lc) == 0:  # a box's ends are in the task's arrays (l, r)
                row.update(l_c=lc, r_c=rc)
        elif "table" in spec:  # a family that is not location-scale: eq. (9) on a grid
            from dpbook.fisher import ThetaGridIntervals
            from dpbook.privacy.policies import ThetaGridPolicy

            policy = ThetaGridPolicy(ThetaGridIntervals.from_table(family, spec["table"]))
        else:
            best = (spec["a"], spec["b"]) if "a" in spec else None
            policy = online.adaptive_policy(posterior, eps, family, mechanism, best=best)
            if np.ndim(policy.a) == 0:  # a box's: the configuration's intervals
                row.update(a=float(policy.a), b=float(policy.b))
            if spec.get("guard") and online.latent:  # dpbook's guard, not the paper's
                from dpbook.privacy.policies import GuardedPolicy

                policy = GuardedPolicy(policy, spec["guard"])
        subset = spec["subset"] if online.subset else None
        res = run_online(pop, policy, n, n_particles=spec["particles"], seed=online_seed,
                         every=spec["every"], family=family, posterior=posterior,
                         subset=subset, eps=eps, batch=spec.get("batch", 1))
        seconds = time.perf_counter() - t0
        s, h = res.smc.summary(), res.smc.history
        acc = np.asarray(h.acceptance[1:], dtype=float)
        acc = acc[np.isfinite(acc)]  # the marginal SMC moves at some steps only
        if spec.get("guard") and hasattr(policy, "widenings"):
            row["widenings"] = policy.widenings
        row.update(particles=spec["particles"], ess_final=float(h.ess[-1]),
                   acceptance=float(acc.mean()) if acc.size else math.nan)
        if spec.get("quartiles"):
            q = res.smc.quantile(np.divide(QUANTILES, 100)) if hasattr(res.smc, "quantile") \
                else np.full((len(QUANTILES), len(params)), math.nan)  # a point estimate
            row.update({f"{p}_q{k:02d}": float(q[i, j]) for j, p in enumerate(params)
                        for i, k in enumerate(QUANTILES)})
        arrays.update(y=res.y, l=res.l, r=res.r)
        keys = [f"{k}_{p}" for k in ("mean", "sd") for p in params] + ["ess", "acceptance"]
        for k in keys:
            arrays[k] = np.asarray(getattr(h, k), dtype=float)
        if spec["keep"] and h.snapshot_t:
            arrays["snapshot_t"] = np.asarray(h.snapshot_t, dtype=np.int64)
            for p in params:
                arrays[f"snapshot_{p}"] = np.asarray(getattr(h, f"snapshot_{p}"), dtype=float)
            arrays["snapshot_w"] = np.asarray(h.snapshot_w, dtype=float)
    elif method == "mhaar":
        from dpbook.mhaar import mhaar

        y = np.array([pop.release(lc, rc) for _ in range(n)])
        l, r = np.full(n, lc), np.full(n, rc)
        res = mhaar(y, l, r, eps, family=family, mechanism=mechanism,
                        n_iter=spec["mhaar_iters"], n_aux=spec["mhaar_aux"], seed=ass)
        s = res.summary()
        seconds = time.perf_counter() - t0
        row.update(l_c=lc, r_c=rc, iters=spec["mhaar_iters"])
        row["acceptance"] = res.acceptance
        for k, v in zip(res.step_coords, res.final_steps):
            row[f"mhaar_step_{k}"] = float(v)
        arrays.update(y=y, l=l, r=r)
        arrays.update(_mhaar_chain(res, params))
    else:  # pragma: no cover - validated before
        raise ValueError(f"unknown method {method!r}")
    for p in params:
        row[f"{p}_hat"] = float(s[p]["mean"])
        row[f"{p}_sd"] = float(s[p]["sd"])
    row["seconds"] = seconds
    return {"row": row, "arrays": arrays}


def _mhaar_chain(res, params=("mu", "sigma")) -> dict:
    """A thinned chain of theta from an MHAAR result: chain_<param>, chain_iter."""
    th = res.samples
    step = max(1, -(-th.shape[0] // CHAIN_POINTS))
    out = {f"chain_{p}": th[::step, j] for j, p in enumerate(params)}
    out["chain_iter"] = np.arange(0, th.shape[0], step, dtype=np.int64)
    return out
