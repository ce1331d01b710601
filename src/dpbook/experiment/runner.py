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

Seeds are derived from identities, never from positions or completion order:

* data (sensitive values and privacy noise): ``SeedSequence(seed, spawn_key=(0, E, run))``
* algorithm: ``SeedSequence(seed, spawn_key=(code(method), E, run))``, code = 1, 2, 3
  for smc-adaptive, smc-fixed, mhaar,

where E is the IEEE-754 bit pattern of eps as an unsigned 64-bit integer.  As the SMC
and MHAAR kernels are bit-identical for any number of numba threads, the results do not
depend on the executor (serial, local process pool, Dask cluster), on the number of
workers or on the order in which tasks finish.  The three methods of one (eps, run)
see the same sensitive sample and, because the privacy noise of the population is a
stream of its own, smc-fixed and mhaar even see the same released values y (the
authors' MATLAB code drew fresh noise for MHAAR; the sample x is shared there too).

Store layout (``out`` directory)::

    manifest.json          configuration, code and package versions, best intervals
    estimates.parquet      one row per task (rebuilt from the task files)
    tasks/<method>_eps<eps>_run<run>.npz   one file per finished task

Every task file holds the estimates row (as JSON) and the trajectories: for the SMC
methods the posterior means and sds, ESS, acceptance rate and intervals l_t, r_t of
every step and the released y; for the first ``keep_particles`` runs also the
particles and their normalised weights every ``every``-th step.  MHAAR files hold y,
l, r and (when the sampler exposes it) a thinned chain.  Task files are written to a
temporary file and renamed (``os.replace``) as each task finishes, so an interrupted
experiment loses nothing that had finished and a rerun skips it.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import struct
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dpbook.validation import check_count, check_eps

METHODS = ("smc-adaptive", "smc-fixed", "mhaar")
_METHOD_CODE = {"smc-adaptive": 1, "smc-fixed": 2, "mhaar": 3}
_DATA_CODE = 0
_INTERVAL_CODE = 4
_RESAMPLE_CODE = 5
FORMAT = 1
FIXED_HALF_WIDTH = 10.0  # [l_c, r_c] = [mu - 10 sigma, mu + 10 sigma]
MHAAR_AUX = 20
EVERY = 20
CHAIN_POINTS = 1000  # at most this many thinned MHAAR chain points per task file

PAPER = dict(eps=(1.0, 2.0, 5.0, 10.0), runs=30, n=1000, particles=1000,
             mhaar_iters=100_000, mu=50.0, sigma=10 ** 0.5)


# ----------------------------------------------------------------------------- seeds
def eps_code(eps: float) -> int:
    """The IEEE-754 bit pattern of eps, an exact integer identity for a float."""
    return struct.unpack("<Q", struct.pack("<d", float(eps)))[0]


def data_seed(root: int, eps: float, run: int) -> np.random.SeedSequence:
    """Seed of the sensitive sample and the privacy noise of run ``run`` at ``eps``."""
    return np.random.SeedSequence(root, spawn_key=(_DATA_CODE, eps_code(eps), int(run)))


def task_seed(root: int, method: str, eps: float, run: int) -> np.random.SeedSequence:
    """Seed of the algorithm (SMC + Thompson draws, or MHAAR) of one task."""
    return np.random.SeedSequence(root, spawn_key=(_METHOD_CODE[method], eps_code(eps),
                                                   int(run)))


def _seed_str(ss: np.random.SeedSequence) -> str:
    return f"{ss.entropy}:{','.join(str(k) for k in ss.spawn_key)}"


@dataclass(frozen=True, order=True)
class Task:
    method: str
    eps: float
    run: int

    @property
    def name(self) -> str:
        return f"{self.method}_eps{self.eps!r}_run{self.run}"

    @property
    def filename(self) -> str:
        return self.name + ".npz"


# ----------------------------------------------------------------------- validation
def _count(name, value, minimum=1) -> int:
    return check_count(name, value, minimum)


def _eps_list(eps) -> list[float]:
    if isinstance(eps, str):
        eps = [e for e in eps.replace(",", " ").split()]
    try:
        items = list(eps)
    except TypeError:
        items = [eps]
    if not items:
        raise ValueError("eps must list at least one value")
    out = []
    for e in items:
        v = check_eps(e)
        if v not in out:
            out.append(v)
    return sorted(out)


def _method_list(methods) -> list[str]:
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    try:
        items = list(methods)
    except TypeError:
        raise ValueError(f"methods must be a list of names, got {methods!r}") from None
    if not items:
        raise ValueError(f"no method given; choose from {', '.join(METHODS)}")
    for m in items:
        if m not in METHODS:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(METHODS)}")
    return [m for m in METHODS if m in items]


def _family_config(family, mechanism, theta, mu, sigma) -> dict:
    """The population part of the configuration: family, its options, mechanism, theta.

    The normal family (the default) keeps the paper's ``mu``/``sigma`` keys; any other
    family gives its true theta as ``theta`` (default: the family's default_theta()).
    """
    from dpbook.model.families import as_family, available
    from dpbook.model.mechanisms import check_mechanism

    fam = as_family(family)
    mech = check_mechanism(mechanism)
    opts = {k: getattr(fam, k) for k in fam.options}
    out = {"family": fam.name, "family_options": opts, "mechanism": mech,
           "params": list(fam.params), "family_registered": fam.name in available()}
    if fam.name == "normal" and theta is None:
        theta = (mu, sigma)
    elif theta is None:
        theta = fam.default_theta()
    elif np.ndim(theta) == 0:
        theta = (theta,)
    out["theta"] = list(fam.check_theta(*theta))
    if not out["family_registered"]:
        out["family_source"] = _source_hash(type(fam))
    return out


def _source_hash(cls) -> str:
    """A hash of a class's source (results of an edited family are not reused)."""
    import hashlib
    import inspect

    try:
        text = inspect.getsource(cls)
    except (OSError, TypeError):  # no source available: fall back to the bytecode
        text = repr(sorted((k, v.__code__.co_code.hex() if hasattr(v, "__code__") else repr(v))
                           for k, v in vars(cls).items() if not k.startswith("__")))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _family_of(config, family_obj=None):
    """The Family object of a configuration (the object itself for an unregistered one)."""
    from dpbook.model.families import get_family

    if family_obj is not None:
        return family_obj
    if not config.get("family_registered", True):
        raise ValueError(f"family {config['family']!r} is not a shipped family: pass the "
                         f"Family object (family=...) to run its tasks")
    return get_family(config.get("family", "normal"), **config.get("family_options", {}))


def make_config(eps=PAPER["eps"], runs=30, n=1000, particles=1000, mhaar_iters=100_000,
                methods=METHODS, seed=0, interval_method="exact", mu=50.0,
                sigma=10 ** 0.5, keep_particles=1, interval_grid=50, interval_M=1000,
                interval_K=10000, family=None, mechanism="laplace", theta=None) -> dict:
    """Validate the arguments and return the configuration dict kept in the manifest.

    Everything that changes a result or the set of tasks is in the configuration;
    how the tasks are executed (workers, scheduler, progress) is not.  ``family``
    (name or Family object; default the normal), ``mechanism`` and the true ``theta``
    choose the population; for the normal family ``mu`` and ``sigma`` give theta.
    """
    pop = _family_config(family, mechanism, theta, mu, sigma)
    if pop["family"] != "normal":
        mu, sigma = 0.0, 1.0  # unused: theta is in pop
    try:
        mu_f = float(mu) if not isinstance(mu, bool) else float("nan")
    except (TypeError, ValueError):
        mu_f = float("nan")
    if not math.isfinite(mu_f):
        raise ValueError(f"mu must be a finite number, got {mu!r}")
    try:
        sig_f = float(sigma)
    except (TypeError, ValueError):
        sig_f = float("nan")
    if not (math.isfinite(sig_f) and sig_f > 0):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
    if interval_method not in ("exact", "mc"):
        raise ValueError(f"interval_method must be 'exact' or 'mc', got {interval_method!r}")
    config = {
        "format": FORMAT,
        "eps": _eps_list(eps),
        "runs": _count("runs", runs),
        "n": _count("n", n),
        "particles": _count("particles", particles, 2),
        "mhaar_iters": _count("mhaar_iters", mhaar_iters),
        "mhaar_aux": MHAAR_AUX,
        "methods": _method_list(methods),
        "seed": _count("seed", seed, 0),
        "interval_method": interval_method,
        "interval_grid": _count("interval_grid", interval_grid, 2),
        "interval_lims": [-3.0, 3.0],
        "interval_score": "mu",
        "interval_M": _count("interval_M", interval_M),
        "interval_K": _count("interval_K", interval_K),
        "fixed_half_width": FIXED_HALF_WIDTH,
        "mu": mu_f,
        "sigma": sig_f,
        "keep_particles": _count("keep_particles", keep_particles, 0),
        "every": EVERY,
        "algorithm": algorithm_fingerprint(),
    }
    if pop["family"] == "normal":
        del pop["theta"]  # it is (mu, sigma)
    else:
        del config["mu"], config["sigma"], config["fixed_half_width"]
    if pop["family"] != "normal" or pop["mechanism"] != "laplace":
        config.update(pop)  # the paper's configuration keeps its keys unchanged
    return config


def config_theta(config) -> tuple:
    """The true theta of a configuration."""
    return tuple(config["theta"]) if "theta" in config else (config["mu"], config["sigma"])


def config_params(config) -> tuple:
    return tuple(config.get("params", ("mu", "sigma")))


# The modules whose code decides the numbers in a store.  A store made by other code is
# stale: its results cannot be mixed with new ones (see ensure_results).
_ALGORITHM_MODULES = ("model", "privacy", "smc", "mhaar", "fisher", "likelihood",
                      "posterior", "rng", "validation", "backends")


def algorithm_fingerprint() -> str:
    """A short hash of the source of the modules that produce the estimates."""
    import hashlib

    h = hashlib.sha256()
    here = Path(__file__).parent.parent
    for name in _ALGORITHM_MODULES:
        paths = sorted((here / name).rglob("*.py")) if (here / name).is_dir() else \
            [here / f"{name}.py"]
        for path in paths:
            h.update(str(path.relative_to(here)).encode())
            h.update(path.read_bytes() if path.exists() else b"")
    return h.hexdigest()[:16]


def _tasks(config) -> list[Task]:
    return [Task(m, e, r) for m in config["methods"] for e in config["eps"]
            for r in range(config["runs"])]


# --------------------------------------------------------------------- one task
def _set_threads(k):
    if k:
        import numba

        numba.set_num_threads(max(1, min(int(k), numba.config.NUMBA_NUM_THREADS)))


# glibc malloc settings: name -> (mallopt parameter number, value).  The mmap threshold
# is at most 32 MiB; the trim threshold keeps up to 1 GiB of freed memory.
_MALLOC = {"MMAP_THRESHOLD": (-3, 32 << 20), "TRIM_THRESHOLD": (-1, 1 << 30)}


def keep_freed_memory():
    """Let glibc keep freed memory for reuse instead of returning it to the system.

    The generic SMC (dpbook.smc_family) allocates and frees numpy arrays of about a
    megabyte at every step; with glibc's defaults each one comes back from the kernel
    as fresh pages, and page faults and zeroing took 20% of a Gumbel run at n = N = 300
    (1.7-2.0 s of system time in 9 s; 0.15-0.25 s with this).  The results do not
    change.  Called in the worker processes the experiment starts; for processes yet to
    start, see :func:`keep_freed_memory_env`.  Does nothing where the C library is not
    glibc.
    """
    import ctypes

    try:
        libc = ctypes.CDLL("libc.so.6")
        for number, value in _MALLOC.values():
            libc.mallopt(number, value)
    except (OSError, AttributeError):
        pass


def keep_freed_memory_env() -> dict:
    """The settings of :func:`keep_freed_memory` as the environment variables glibc
    reads when a process starts (book/tools/run_chapters.py sets them for the chapters'
    kernels)."""
    return {f"MALLOC_{name}_": str(value) for name, (_, value) in _MALLOC.items()}


def _init_worker():
    """Process-pool initializer: one numba thread per worker so tasks run side by side,
    and freed memory kept for reuse (:func:`keep_freed_memory`)."""
    _set_threads(1)
    keep_freed_memory()


def run_task(spec: dict) -> dict:
    """Run one (method, eps, run) task; return {"row": {...}, "arrays": {...}}.

    ``spec`` is a plain dict (picklable for any executor).  The result depends only on
    the spec, not on the process, thread count or order in which tasks run.
    """
    _set_threads(spec.get("numba_threads"))
    from dpbook.model.families import as_family
    from dpbook.privacy.population import family_population

    if "family_pickle" in spec:  # a family defined outside dpbook, shipped by value
        import cloudpickle

        family = cloudpickle.loads(spec["family_pickle"])
    else:
        family = _family_of(spec)
    mechanism = spec.get("mechanism", "laplace")
    family = as_family(family)
    _warm_up(spec["method"], family, mechanism)
    params = family.params
    method, eps, run, root = spec["method"], float(spec["eps"]), int(spec["run"]), spec["seed"]
    n, theta = spec["n"], tuple(spec["theta"])
    dss, ass = data_seed(root, eps, run), task_seed(root, method, eps, run)
    row = {"method": method, "eps": eps, "run": run, "seed": _seed_str(ass),
           "data_seed": _seed_str(dss), "n": n,
           **{f"{p}_true": float(v) for p, v in zip(params, theta)},
           "a": math.nan, "b": math.nan, "l_c": math.nan, "r_c": math.nan,
           "particles": math.nan, "iters": math.nan}
    arrays = {}
    lc, rc = spec["fixed"]
    t0 = time.perf_counter()
    # the normal/Laplace population is the paper's (bit-identical to earlier stores)
    pop = family_population(family, theta, n, eps, seed=dss, mechanism=mechanism)
    if method in ("smc-adaptive", "smc-fixed"):
        from dpbook.privacy.online import run_online
        from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy

        if method == "smc-adaptive" and "table" in spec:
            from dpbook.fisher import ThetaGridIntervals
            from dpbook.privacy.policies import ThetaGridPolicy

            policy = ThetaGridPolicy(ThetaGridIntervals.from_table(family, spec["table"]))
        elif method == "smc-adaptive":
            policy = AdaptivePolicy(spec["a"], spec["b"])
            row.update(a=float(spec["a"]), b=float(spec["b"]))
        else:
            policy = FixedPolicy(lc, rc)
            row.update(l_c=lc, r_c=rc)
        res = run_online(pop, policy, n, n_particles=spec["particles"], seed=ass,
                         every=spec["every"], family=family)
        seconds = time.perf_counter() - t0
        s, h = res.smc.summary(), res.smc.history
        acc = np.asarray(h.acceptance[1:], dtype=float)
        row.update(particles=spec["particles"], ess_final=float(h.ess[-1]),
                   acceptance=float(acc.mean()) if acc.size else math.nan)
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


_WARM: set = set()


def _warm_up(method, family, mechanism):
    """Run each algorithm once on three individuals per process, so that ``seconds``
    measures the task and not numba's cache loading.  No random state is kept."""
    algorithm = "mhaar" if method == "mhaar" else "smc"
    key = (algorithm, family.describe(), str(mechanism))
    if key in _WARM:
        return
    from dpbook.privacy.population import family_population

    theta = (0.0, 1.0) if family.location_scale else family.default_theta()
    pop = family_population(family, theta, 3, 1.0, seed=0, mechanism=mechanism)
    lc, rc = family.fixed_interval(*theta)
    if algorithm == "smc":
        from dpbook.privacy.online import run_online
        from dpbook.privacy.policies import FixedPolicy

        run_online(pop, FixedPolicy(lc, rc), 3, n_particles=4, seed=0, family=family)
    else:
        from dpbook.mhaar import mhaar

        y = [pop.release(lc, rc) for _ in range(3)]
        mhaar(y, lc, rc, 1.0, family, mechanism, n_iter=4, n_aux=2, seed=0)
    _WARM.add(key)


def _mhaar_chain(res, params=("mu", "sigma")) -> dict:
    """A thinned chain of theta from an MHAAR result: chain_<param>, chain_iter."""
    th = res.samples
    step = max(1, -(-th.shape[0] // CHAIN_POINTS))
    out = {f"chain_{p}": th[::step, j] for j, p in enumerate(params)}
    out["chain_iter"] = np.arange(0, th.shape[0], step, dtype=np.int64)
    return out


# ------------------------------------------------------------------------ the store
def _atomic_write_bytes(path: Path, writer):
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        with open(tmp, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _write_json(path: Path, obj):
    _atomic_write_bytes(path, lambda f: f.write(
        (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()))


def _store_task(out: Path, task: Task, result: dict):
    arrays = dict(result["arrays"])
    arrays["row_json"] = np.array(json.dumps(result["row"]))
    _atomic_write_bytes(out / "tasks" / task.filename,
                        lambda f: np.savez_compressed(f, **arrays))


def _read_row(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["row_json"]))


_ORDER = {m: i for i, m in enumerate(METHODS)}


def _collect(out: Path, config: dict | None = None):
    """Estimates DataFrame from the finished task files (only those of ``config``)."""
    import pandas as pd

    tdir = out / "tasks"
    wanted = None if config is None else {t.filename for t in _tasks(config)}
    rows = []
    if tdir.is_dir():
        for p in sorted(tdir.glob("*.npz")):
            if p.name.startswith(".") or (wanted is not None and p.name not in wanted):
                continue
            rows.append(_read_row(p))
    ps = config_params(config) if config is not None else ("mu", "sigma")
    cols = (["method", "eps", "run", "seed", "data_seed"]
            + [f"{p}_hat" for p in ps] + [f"{p}_sd" for p in ps]
            + ["seconds", "a", "b", "l_c", "r_c", "n", "particles", "iters",
               "ess_final", "acceptance", "mhaar_step_mu", "mhaar_step_var"]
            + [f"{p}_true" for p in ps])
    df = pd.DataFrame(rows)
    for c in cols:
        if c not in df.columns:
            df[c] = np.nan
    for c in df.columns:  # a fixed schema whatever subset of methods is present
        if c in ("method", "seed", "data_seed"):
            df[c] = df[c].astype("str")
        elif c in ("run", "n"):
            df[c] = df[c].astype("int64")
        else:
            df[c] = df[c].astype("float64")
    if len(df):
        df["_o"] = df["method"].map(_ORDER)
        df = df.sort_values(["_o", "eps", "run"], kind="mergesort").drop(columns="_o")
    extra = [c for c in df.columns if c not in cols]
    return df[cols + extra].reset_index(drop=True)


def _write_estimates(out: Path, df):
    _atomic_write_bytes(out / "estimates.parquet", lambda f: df.to_parquet(f, index=False))


def _git(*args) -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        r = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                           timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def code_version() -> dict:
    """dpbook version, git commit and dirty flag (when run from a git checkout)."""
    from dpbook import __version__

    head = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no") if head else None
    return {"dpbook": __version__, "git": head,
            "dirty": None if status is None else bool(status)}


def package_versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for p in ("numpy", "scipy", "numba", "pandas", "pyarrow", "dask", "distributed", "tqdm"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    return out


def read_manifest(out: Path) -> dict | None:
    p = out / "manifest.json"
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{p} is not a readable manifest: {e}") from None


def _check_same_config(out: Path, manifest: dict | None, config: dict):
    if manifest is None:
        return
    old = manifest.get("config", {})
    diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
    if diff:
        raise ValueError(f"{out} holds results of a different configuration "
                         f"(differing: {', '.join(diff)}); choose another output "
                         f"directory or remove it")


def _best_intervals(config: dict, manifest: dict | None, family_obj=None) -> dict:
    """(a*, b*) per eps (eq. 13), reused from the manifest when it has them; for a family
    that is not location-scale, the table of best (l, r) over a theta grid (eq. 9)."""
    if "smc-adaptive" not in config["methods"]:
        return {}
    known = (manifest or {}).get("intervals", {})
    out = {}
    for e in config["eps"]:
        k = repr(e)
        if k in known:
            out[k] = known[k]
            continue
        iseed = int(np.random.SeedSequence(config["seed"], spawn_key=(
            _INTERVAL_CODE, eps_code(e))).generate_state(1)[0])
        t0 = time.perf_counter()
        kw = dict(method=config["interval_method"], grid=config["interval_grid"],
                  M=config["interval_M"], K=config["interval_K"], seed=iseed)
        fam = _family_of(config, family_obj)
        mech = config.get("mechanism", "laplace")
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


def _spec(config: dict, intervals: dict, task: Task, threads, family_obj=None) -> dict:
    spec = {k: config[k] for k in ("n", "particles", "mhaar_iters", "mhaar_aux", "seed",
                                   "every")}
    for k in ("family", "family_options", "family_registered", "mechanism"):
        if k in config:
            spec[k] = config[k]
    theta = config_theta(config)
    if "fixed_half_width" in config:  # Section 6: [mu - 10 sigma, mu + 10 sigma]
        h = config["fixed_half_width"]
        fixed = (theta[0] - h * theta[1], theta[0] + h * theta[1])
    else:
        fixed = _family_of(config, family_obj).fixed_interval(*theta)
    spec.update(method=task.method, eps=task.eps, run=task.run, theta=list(theta),
                fixed=[float(v) for v in fixed],
                keep=task.run < config["keep_particles"], numba_threads=threads)
    if family_obj is not None and not config.get("family_registered", True):
        # by value (cloudpickle), so that worker processes need not import its module
        import cloudpickle

        spec["family_pickle"] = cloudpickle.dumps(family_obj)
    if task.method == "smc-adaptive":
        iv = intervals[repr(task.eps)]
        if "table" in iv:
            spec["table"] = iv["table"]
        else:
            spec.update(a=iv["a"], b=iv["b"])
    return spec


# -------------------------------------------------------------------------- executors
def _connect(scheduler: str, timeout: float):
    try:
        from dask.distributed import Client
    except ImportError as e:  # pragma: no cover
        raise ValueError(f"dask.distributed is not available: {e}") from None
    _probe(scheduler, timeout)
    try:
        return Client(scheduler, timeout=timeout, set_as_default=False)
    except Exception as e:  # noqa: BLE001 - any failure means: not reachable
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {msg}") from None


def _probe(scheduler: str, timeout: float):
    """Fail fast (instead of retrying until the timeout) when nothing listens on a tcp
    address; other protocols are left to the Dask client."""
    import socket

    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port

    try:
        proto, loc = parse_address(scheduler, strict=False)
        if proto != "tcp":
            return
        host, port = parse_host_port(loc)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"bad Dask scheduler address {scheduler!r}: {msg}") from None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: "
                         f"{e.strerror or e}") from None


def _run_serial(specs, on_done):
    for task, spec in specs:
        on_done(task, run_task(spec))


def _run_pool(specs, workers, on_done):
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ex = ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn"),
                             initializer=_init_worker)
    try:
        futs = {ex.submit(run_task, spec): task for task, spec in specs}
        errors = []
        for f in as_completed(futs):
            try:
                res = f.result()
            except Exception as e:  # noqa: BLE001 - keep the others, report at the end
                errors.append((futs[f], e))
                continue
            on_done(futs[f], res)
        _raise_first(errors)
    except BaseException:
        ex.shutdown(wait=False, cancel_futures=True)
        raise
    ex.shutdown(wait=True)


def _versions() -> dict:
    """What decides the numbers a worker produces (run on the Dask workers)."""
    from importlib.metadata import version

    from dpbook import __version__

    return {"dpbook": __version__, "numpy": version("numpy"), "numba": version("numba"),
            "python": platform.python_version()}


def _check_workers(client) -> dict:
    import warnings

    try:
        remote = client.run(_versions)
    except Exception as e:  # noqa: BLE001 - informative only
        return {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    if not remote:
        warnings.warn("the Dask scheduler has no workers yet; tasks wait until some join",
                      stacklevel=3)
    here = _versions()
    for addr, v in remote.items():
        if v != here:
            warnings.warn(f"Dask worker {addr} runs {v}, this process {here}: results may "
                          f"differ from a local run", stacklevel=3)
    return remote


def _run_dask(client, specs, on_done):
    from dask.distributed import as_completed

    futs = {}
    for task, spec in specs:
        f = client.submit(run_task, spec, key=f"dpbook-experiment-{task.name}-{spec['seed']}",
                          pure=False, retries=0)
        futs[f] = task
    errors = []
    try:
        for f in as_completed(list(futs), loop=client.loop):
            try:
                res = f.result()
            except Exception as e:  # noqa: BLE001
                errors.append((futs[f], e))
                continue
            on_done(futs[f], res)
            f.release()
    except BaseException:
        client.cancel(list(futs))
        raise
    _raise_first(errors)


def _raise_first(errors):
    """Re-raise the first task error (after every other task has been stored)."""
    if errors:
        task, e = errors[0]
        e.add_note(f"in task {task.name} ({len(errors)} task(s) failed)")
        raise e


# --------------------------------------------------------------------------- the API
def run_experiment(eps=PAPER["eps"], runs=30, n=1000, particles=1000, mhaar_iters=100_000,
                   methods=METHODS, seed=0, out="results/paper", scheduler=None,
                   interval_method="exact", mu=50.0, sigma=10 ** 0.5, progress=True,
                   workers=None, keep_particles=1, interval_grid=50, interval_M=1000,
                   interval_K=10000, scheduler_timeout=10.0, family=None, mechanism="laplace",
                   theta=None):
    """Run (or resume) the Section 6 experiment; return the estimates DataFrame.

    ``family`` (a name from ``dpbook families`` or a Family object), ``mechanism`` and
    the true ``theta`` run the same comparison for another population (default: the
    paper's normal with the Laplace mechanism, theta = (mu, sigma)).  A Family object
    that is not a shipped family (say, defined in a notebook) is sent to the workers by
    value (cloudpickle), and a hash of its source is part of the configuration.

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
                         mechanism=mechanism, theta=theta)
    family_obj = None if config.get("family_registered", True) else family
    if workers is not None:
        workers = _count("workers", workers)
    if scheduler is not None and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be an address such as tcp://host:8786, "
                         f"got {scheduler!r}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"{out} exists and is not a directory")
    manifest = read_manifest(out)
    _check_same_config(out, manifest, config)

    client = _connect(scheduler, scheduler_timeout) if scheduler else None
    try:
        intervals = _best_intervals(config, manifest, family_obj)
        (out / "tasks").mkdir(parents=True, exist_ok=True)
        for p in (out / "tasks").glob(".tmp-*"):  # debris of a killed writer
            p.unlink(missing_ok=True)
        tasks = _tasks(config)
        # submitted run by run, the methods alternating, so that the pace is even and the
        # progress bar's ETA holds from the start (the results do not depend on the order)
        pending = sorted((t for t in tasks if not (out / "tasks" / t.filename).exists()),
                         key=lambda t: (t.run, t.eps, _ORDER[t.method]))
        if scheduler:
            executor, nw = "dask", None
        else:
            nw = min(workers or os.cpu_count() or 1, max(len(pending), 1))
            executor = "pool" if nw > 1 else "serial"
        session = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "code": code_version(),
                   "executor": executor, "workers": nw, "scheduler": scheduler,
                   "tasks_to_run": len(pending)}
        if client is not None:
            session["dask_workers"] = _check_workers(client)
            session["workers"] = len(session["dask_workers"])
        new = {"format": FORMAT, "config": config, "intervals": intervals,
               "code": (manifest or {}).get("code", session["code"]),
               "packages": (manifest or {}).get("packages", package_versions()),
               "created": (manifest or {}).get("created", session["started"]),
               "sessions": (manifest or {}).get("sessions", []) + [session],
               "tasks": len(tasks), "complete": False}
        if manifest and manifest.get("packages") != package_versions():
            session["packages"] = package_versions()
        _write_json(out / "manifest.json", new)

        threads = None if executor == "serial" else 1
        specs = [(t, _spec(config, intervals, t, threads, family_obj)) for t in pending]
        bar = _progress(len(tasks), len(tasks) - len(pending), progress)

        def on_done(task, result):
            _store_task(out, task, result)
            bar.update(1)
            bar.set_postfix_str(task.name, refresh=False)

        try:
            if executor == "dask":
                _run_dask(client, specs, on_done)
            elif executor == "pool":
                _run_pool(specs, nw, on_done)
            else:
                _run_serial(specs, on_done)
        finally:
            bar.close()
            df = _collect(out, config)
            _write_estimates(out, df)
            session["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            new["complete"] = len(df) == len(tasks)
            _write_json(out / "manifest.json", new)
    finally:
        if client is not None:
            client.close()
    return df


def _progress(total, initial, enabled):
    # plain text on stderr: notebooks executed by papermill must not get widgets
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, disable=not enabled, unit="task",
                desc="experiment", dynamic_ncols=True, smoothing=0.1)


def _finished(out: Path, config: dict) -> int:
    """Number of the configuration's tasks stored in ``out``."""
    return sum((out / "tasks" / t.filename).exists() for t in _tasks(config))


def store_progress(out) -> tuple[int, int, bool] | None:
    """(tasks finished, tasks in all, complete) of the store in ``out`` (as far as it
    has got: it may be running), or None where there is no readable manifest."""
    out = Path(out)
    try:
        manifest = read_manifest(out)
    except ValueError:
        return None
    if manifest is None:
        return None
    config = manifest["config"]
    return _finished(out, config), len(_tasks(config)), bool(manifest.get("complete"))


def is_complete(out, **kwargs) -> bool:
    """True if ``out`` holds every task of the configuration given by ``kwargs``."""
    out = Path(out)
    config = make_config(**kwargs)
    manifest = read_manifest(out)
    if manifest is None or manifest.get("config") != config:
        return False
    return _finished(out, config) == len(_tasks(config))


def ensure_results(out="results/paper", progress=True, workers=None, scheduler=None,
                   **kwargs):
    """Load the results in ``out`` if complete for this configuration, else run/resume.

    ``kwargs`` are the configuration arguments of :func:`run_experiment` (eps, runs, n,
    ...; the paper's values by default).  Returns ``(estimates, trajectories)`` as
    :func:`load_results`.

    Several processes (for example two chapters executed side by side) may call this for
    the same store: an exclusive lock on ``out/.lock`` makes the later ones wait and then
    load.  A store made by other algorithm code (see :func:`algorithm_fingerprint`, and
    the source of a family defined outside dpbook) with otherwise the same configuration
    is stale: it is moved aside to
    ``out.stale-<fingerprint>`` (nothing is deleted) and the experiment is rerun.  A store
    of another configuration is an error, as in :func:`run_experiment`.
    """
    import fcntl

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file is closed
        config = make_config(**kwargs)
        manifest = read_manifest(out)
        old = (manifest or {}).get("config", {})
        code = ("algorithm", "family_source")  # what changes with the code, not the setup
        if old and any(old.get(k) != config.get(k) for k in code) and \
                {k: v for k, v in old.items() if k not in code} == \
                {k: v for k, v in config.items() if k not in code}:
            aside = out.with_name(f"{out.name}.stale-{old.get('algorithm') or 'unknown'}")
            shutil.rmtree(aside, ignore_errors=True)
            aside.mkdir()
            for item in out.iterdir():
                if item.name != ".lock":
                    item.rename(aside / item.name)
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


def book_experiment(mode="quick", seed=0, root=None, progress=False):
    """The shared store of chapters 5 and 6: ``(estimates, trajectories, path, seconds)``.

    The store is ``results/paper`` for the full mode with seed 0 (what ``dpbook
    experiment`` writes with its defaults, so it can be computed ahead, e.g. on a Dask
    cluster), ``results/quick`` for the quick mode and ``results/<name>-seed<seed>``
    otherwise.  It is run (or resumed) only when incomplete; see :func:`ensure_results`.
    """
    from dpbook.figures import repo_root

    if mode not in BOOK_CONFIGS:
        raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
    name = ("paper" if mode == "full" else mode) + ("" if seed == 0 else f"-seed{seed}")
    path = (repo_root() if root is None else Path(root)) / "results" / name
    start = time.perf_counter()
    est, tr = ensure_results(out=path, progress=progress, seed=seed, **BOOK_CONFIGS[mode])
    return est, tr, path, time.perf_counter() - start


class Trajectories:
    """Lazy access to the per-task arrays of an experiment store.

    ``tr[method, eps, run]`` is a dict of arrays: for SMC tasks ``mean_mu``,
    ``mean_sigma``, ``sd_mu``, ``sd_sigma``, ``ess``, ``acceptance``, ``y``, ``l``, ``r``
    (one value per step t = 1..n) and, for the first ``keep_particles`` runs,
    ``snapshot_t``, ``snapshot_mu``, ``snapshot_sigma``, ``snapshot_w`` (shape
    [steps/every, N]); for MHAAR tasks ``y``, ``l``, ``r`` and possibly a thinned chain.
    """

    def __init__(self, out, manifest):
        self.out = Path(out)
        self.manifest = manifest
        self.config = manifest["config"]
        self._cache = {}

    def keys(self):
        return [(t.method, t.eps, t.run) for t in _tasks(self.config)
                if (self.out / "tasks" / t.filename).exists()]

    def __contains__(self, key):
        return key in self.keys()

    def __len__(self):
        return len(self.keys())

    def __getitem__(self, key):
        method, eps, run = key
        task = Task(method, float(eps), int(run))
        if task not in self._cache:
            path = self.out / "tasks" / task.filename
            if not path.exists():
                raise KeyError(key)
            with np.load(path, allow_pickle=False) as z:
                self._cache[task] = {k: z[k] for k in z.files if k != "row_json"}
        return self._cache[task]

    def get(self, method, eps, run):
        return self[method, eps, run]

    def particles(self, method, eps, run, resample=True):
        """(t, mu, sigma) at every ``every``-th step; mu, sigma have shape [len(t), N]
        (for another family: t and one array per parameter).

        With ``resample=True`` the particles are resampled (systematic resampling with a
        seed fixed by the task) to equal weights, as in the paper's Figure 2; otherwise
        the weights are returned too: (t, mu, sigma, w).
        """
        d = self[method, eps, run]
        if "snapshot_t" not in d:
            raise KeyError(f"no particles stored for {(method, eps, run)} "
                           f"(keep_particles={self.config['keep_particles']})")
        t, w = d["snapshot_t"], d["snapshot_w"]
        ths = [d[f"snapshot_{p}"] for p in config_params(self.config)]
        if not resample:
            return (t, *ths, w)
        rng = np.random.default_rng(np.random.SeedSequence(self.config["seed"], spawn_key=(
            _RESAMPLE_CODE, _METHOD_CODE[method], eps_code(eps), int(run))))
        N = w.shape[1]
        u = (rng.random(len(t))[:, None] + np.arange(N)) / N
        cw = np.cumsum(w, axis=1)
        cw[:, -1] = 1.0
        idx = np.stack([np.searchsorted(cw[k], u[k], side="right") for k in range(len(t))])
        idx = np.minimum(idx, N - 1)
        return (t, *(np.take_along_axis(a, idx, 1) for a in ths))

    def steps(self, methods=None, eps=None):
        """Long DataFrame of the per-step SMC trajectories (method, eps, run, t, ...)."""
        import pandas as pd

        frames = []
        for m, e, r in self.keys():
            if m == "mhaar" or (methods and m not in methods) or (eps and e not in eps):
                continue
            d = self[m, e, r]
            keys = [k for k in d if k.startswith(("mean_", "sd_"))]
            cols = {k: d[k] for k in keys + ["ess", "acceptance", "l", "r", "y"] if k in d}
            f = pd.DataFrame(cols)
            f.insert(0, "t", np.arange(1, len(f) + 1))
            f.insert(0, "run", r)
            f.insert(0, "eps", e)
            f.insert(0, "method", m)
            frames.append(f)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_results(out="results/paper"):
    """(estimates DataFrame, :class:`Trajectories`) of the experiment stored in ``out``."""
    import pandas as pd

    out = Path(out)
    manifest = read_manifest(out)
    if manifest is None:
        raise ValueError(f"{out} holds no experiment results (no manifest.json)")
    config = manifest["config"]
    done = _finished(out, config)
    p = out / "estimates.parquet"
    df = pd.read_parquet(p) if p.exists() else None
    if df is None or len(df) != done:
        df = _collect(out, config)
        try:
            _write_estimates(out, df)
        except OSError:
            pass
    return df, Trajectories(out, manifest)


def summarize(estimates, mu=None, sigma=None):
    """Per method and eps: runs, mean, bias and RMSE of every parameter's estimate
    (columns <param>_hat against <param>_true; mu/sigma override the truth)."""
    import pandas as pd

    rows = []
    if len(estimates) == 0:
        return pd.DataFrame(rows)
    params = [c[:-5] for c in estimates.columns if c.endswith("_true")]
    given = {"mu": mu, "sigma": sigma}
    for (m, e), g in estimates.groupby(["method", "eps"], sort=False):
        row = {"method": m, "eps": float(e), "runs": int(len(g))}
        for p in params:
            truth = float(g[f"{p}_true"].iloc[0]) if given.get(p) is None else given[p]
            v = g[f"{p}_hat"].to_numpy(float)
            row[f"{p}_mean"] = float(v.mean())
            row[f"{p}_bias"] = float(v.mean() - truth)
            row[f"{p}_rmse"] = float(np.sqrt(np.mean((v - truth) ** 2)))
        row["seconds"] = float(g["seconds"].mean())
        rows.append(row)
    return pd.DataFrame(rows)
