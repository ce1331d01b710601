"""The experiment's store (Section 6): one file per finished task, a manifest, a table.

Store layout (``out`` directory)::

    manifest.json          configuration, code and package versions, best intervals
    estimates.parquet      one row per task (rebuilt from the task files)
    tasks/<method>_eps<eps>_run<run>.npz   one file per finished task
                                           (..._run<run>_batch<B>.npz: an online
                                           method's task in a store of several B)

Every task file holds the estimates row (as JSON) and the trajectories: for the SMC
methods the posterior means and sds, ESS, acceptance rate and intervals l_t, r_t of
every step and the released y; for the first ``keep_particles`` runs also the
particles and their normalised weights every ``every``-th step.  MHAAR files hold y,
l, r and a thinned chain.  Files are written to a temporary file and renamed
(``os.replace``) as each task finishes, so an interrupted experiment loses nothing that
had finished and a rerun skips it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import platform
import subprocess
import time
import warnings
import zipfile
import zlib
from pathlib import Path

import numpy as np
from filelock import FileLock

from dpbook.experiment.config import (
    METHOD_ORDER,
    Task,
    accepted_hashes,
    config_batches,
    config_hash,
    config_params,
    config_tasks,
    migrate_config,
    task_config,
)
from dpbook.validation import check_json, output_file


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml above ``start`` (default: the working directory)."""
    start = Path.cwd() if start is None else Path(start)
    for p in (start, *start.parents):
        if (p / "pyproject.toml").exists():
            return p
    return start


def atomic_write_bytes(path: Path, writer):
    """Write ``path`` through a temporary file renamed over it (``os.replace``); a file
    that cannot be written or replaced (read-only or immutable, a directory in its
    place, a full disk) is a ValueError naming it, not a traceback."""
    path = output_file(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        with open(tmp, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        raise ValueError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


class StoreWarning(UserWarning):
    """A task file of a store was not used (and, when running, moved aside)."""


def store_task(out: Path, task: Task, result: dict, config: dict):
    """Write one finished task; the file carries the hash of its configuration
    (:func:`~dpbook.experiment.config.task_config`)."""
    arrays = dict(result["arrays"])
    arrays["row_json"] = np.array(json.dumps(result["row"]))
    arrays["config_sha"] = np.array(config_hash(task_config(config, task)))
    atomic_write_bytes(out / "tasks" / task.filename,
                       lambda f: np.savez_compressed(f, **arrays))


def read_task(path: Path, task: Task, sha, numbers=()) -> dict:
    """The estimates row of a task file, checked: ValueError naming the file and the
    problem if it is unreadable, is not a dpbook task file, was made by another
    configuration (``sha``: the hash, or the set of hashes, it may carry; see
    :func:`config_hash` and :func:`accepted_hashes`) or for another task, or its row
    lacks one of the ``numbers`` or holds something other than a number, a string or
    null.  Nothing is
    ever unpickled (a store may come from someone else).  Every array is read, so that
    the checksum each member of the zip archive carries (CRC-32) is verified: a file
    damaged anywhere is refused here, not half-used later."""
    shas = {sha} if isinstance(sha, str) else set(sha)
    try:
        if path.stat().st_size == 0:
            raise ValueError("the file is empty")
        with open(path, "rb") as f:
            magic = f.read(4)
        if magic[:1] == b"\x80":  # a pickle's protocol opcode
            raise ValueError("it is a pickle of Python objects, not a dpbook task file "
                             "(dpbook never loads pickles)")
        if magic != b"PK\x03\x04":  # np.savez_compressed writes a zip archive
            raise ValueError("it is not a dpbook task file (not a zip archive of arrays): "
                             "damaged, or written by something else")
        with np.load(path, allow_pickle=False) as z:
            if not {"row_json", "config_sha"} <= set(z.files):
                raise ValueError("it is not a dpbook task file of this version (keys "
                                 f"{', '.join(sorted(z.files)) or 'none'})")
            file_sha, row = str(z["config_sha"]), json.loads(str(z["row_json"]))
            for k in z.files:  # reading a member checks its CRC-32: damage anywhere
                z[k]
    except ValueError as e:
        msg = str(e)
        if "allow_pickle" in msg or "pickled" in msg:
            msg = "it holds pickled Python objects, which dpbook never loads"
        elif "cannot reshape" in msg or "NPY" in msg or "header" in msg:
            msg = "it is damaged (unreadable array)"
        raise ValueError(f"{path}: {msg}") from None
    except (OSError, EOFError, zipfile.BadZipFile, KeyError, zlib.error) as e:
        raise ValueError(f"{path}: unreadable ({type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else 'truncated'})") from None
    if file_sha not in shas:
        raise ValueError(f"{path}: made by another configuration (hash {file_sha}, "
                         f"this one {min(shas)})")
    check_json(row, f"{path}: its row", dict.fromkeys(numbers, (int, float)))
    check_json(row, f"{path}: its row", {}, dict.fromkeys(row, (str, int, float, type(None))))
    if any(row.get(f.name) != getattr(task, f.name) for f in dataclasses.fields(task)):
        raise ValueError(f"{path}: holds another task than its name says")
    return row


def valid_tasks(out: Path, config: dict, quarantine: bool = False, tasks=None) -> dict:
    """{task: estimates row} of the configuration's tasks (or of ``tasks``, dataclasses
    whose fields the rows repeat) stored in ``out``, every file checked by
    :func:`read_task`.  A file that fails is never used: it is reported (a
    :class:`StoreWarning`) and, with ``quarantine``, moved to ``out/quarantine/`` so that
    its task is recomputed."""
    rows = {}
    # an experiment's row: its estimates (a calibration's rows are checked by its study)
    numbers = [f"{p}_hat" for p in config_params(config)] if "methods" in config else ()
    for task in config_tasks(config) if tasks is None else tasks:
        path = out / "tasks" / task.filename
        if not path.exists():
            continue
        try:
            rows[task] = read_task(path, task, accepted_hashes(task_config(config, task)),
                                   numbers)
        except ValueError as e:
            if quarantine:
                qdir = out / "quarantine"
                qdir.mkdir(exist_ok=True)
                dest = qdir / f"{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}-{path.name}"
                try:
                    os.replace(path, dest)
                except FileNotFoundError:  # another process moved it first
                    continue
                warnings.warn(f"{e}; moved to {dest}, its task will be recomputed",
                              StoreWarning, stacklevel=2)
            else:
                warnings.warn(f"{e}; not used", StoreWarning, stacklevel=2)
    return rows


def collect(out: Path, config: dict, rows: dict | None = None):
    """Estimates DataFrame of the configuration's valid task files (``rows``, as
    :func:`valid_tasks` returns them, when already read)."""
    import pandas as pd

    rows = list((valid_tasks(out, config) if rows is None else rows).values())
    ps = config_params(config)
    # a store of several batch sizes has their column (empty for MHAAR, not batched)
    batch = ["batch"] if config_batches(config) else []
    cols = (["method", "eps", "run", *batch, "seed", "data_seed"]
            + [f"{p}_hat" for p in ps] + [f"{p}_sd" for p in ps]
            + ["seconds", "a", "b", "l_c", "r_c", "n", "particles", "iters",
               "ess_final", "acceptance", "mhaar_step_mu", "mhaar_step_var"]
            + [f"{p}_true" for p in ps])
    df = pd.DataFrame(rows)
    df = df.reindex(columns=cols + [c for c in df.columns if c not in cols])
    kinds = dict.fromkeys(("method", "seed", "data_seed"), "str") | \
        {"run": "int64", "n": "int64", "batch": "Int64"}
    # a fixed schema whatever subset of methods is present
    df = df.astype({c: kinds.get(c, "float64") for c in df.columns})
    if len(df):
        df["_o"] = df["method"].map(METHOD_ORDER)
        df = df.sort_values(["_o", *batch, "eps", "run"], kind="mergesort").drop(columns="_o")
    return df.reset_index(drop=True)


def write_estimates(out: Path, df):
    atomic_write_bytes(out / "estimates.parquet", lambda f: df.to_parquet(f, index=False))


def git_output(*args, cwd=None) -> str | None:
    """The output of ``git args`` in ``cwd`` (default: this package's folder), or None
    where git fails."""
    try:
        r = subprocess.run(["git", *args], cwd=cwd or Path(__file__).resolve().parent,
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def code_version() -> dict:
    """dpbook version, git commit and dirty flag (when run from a git checkout)."""
    from dpbook import __version__

    head = git_output("rev-parse", "HEAD")
    status = git_output("status", "--porcelain", "--untracked-files=no") if head else None
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
    """The store's manifest (None if there is none), its configuration in today's terms
    (:func:`~dpbook.experiment.config.migrate_config`: a store made before the algorithm
    versions, by code with today's numbers, reads as made by today's code)."""
    p = out / "manifest.json"
    if not p.exists():
        return None
    try:
        manifest = json.loads(p.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{p} is not a readable manifest: {e}") from None
    check_json(manifest, str(p), {"config": dict}, {
        "intervals": dict, "sessions": list, "tasks": int, "complete": bool, "format": int,
        "code": dict, "packages": dict})
    manifest["config"] = migrate_config(manifest["config"])
    return manifest


def family_change(out: Path, config: dict, ok=False) -> dict:
    """``config`` checked against the store's family file: a store made with a family
    file whose sha256 differs from today's is a ValueError naming both, unless ``ok``
    (then the store's values are kept, so that its tasks still count); a store made
    before the hash was recorded is compared as before, without it."""
    new = config.get("family_sha256")
    manifest = read_manifest(out) if new and out.is_dir() else None
    if manifest is None:
        return config
    then = manifest["config"].get("family_sha256")
    if then is None:
        return {k: v for k, v in config.items() if k != "family_sha256"}
    if then != new and not ok:
        raise ValueError(f"{out} holds results of the family {config.get('family')!r} from a "
                         f"file that has changed since (sha256 {then[:16]} then, {new[:16]} "
                         f"now): --family-changed-ok adds to it anyway, results of two "
                         f"models; or choose another output directory")
    return {**config, "family_sha256": then,  # and the experiment's hash of the class
            **{k: manifest["config"].get(k) for k in ("family_source",) if k in config}}


def check_same_config(out: Path, manifest: dict | None, config: dict):
    if manifest is None:
        return
    old = manifest.get("config", {})
    diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
    if diff:
        raise ValueError(f"{out} holds results of a different configuration "
                         f"(differing: {', '.join(diff)}); choose another output "
                         f"directory or remove it")


def prepare_store(out: Path):
    """Create the store's directories and check that they can be written, before any
    computing: ValueError naming the path otherwise.  Removes the temporary files of
    writers that no longer run."""
    try:
        if out.exists() and not out.is_dir():
            raise ValueError(f"{out} exists and is not a directory")
        (out / "tasks").mkdir(parents=True, exist_ok=True)
        probe = out / "tasks" / f".tmp-{os.getpid()}-write-probe"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"cannot write the store {out}: {e.strerror or e}") from None
    for p in (out / "tasks").glob(".tmp-*"):  # debris of a killed writer
        try:  # signal 0 only asks whether the writer's process exists
            os.kill(int(p.name.split("-")[1]), 0)
        except (ValueError, IndexError, ProcessLookupError):
            p.unlink(missing_ok=True)
        except PermissionError:  # a process of another user: it exists
            pass


def update_manifest(out: Path, change) -> dict:
    """Read, change and write the manifest atomically: ``change(old or None) -> new``
    runs under an exclusive lock on the store's manifest, so that processes sharing a
    store never lose each other's updates."""
    with FileLock(out / ".manifest.lock"):
        new = change(read_manifest(out))
        text = json.dumps(new, indent=2, sort_keys=False) + "\n"
        atomic_write_bytes(out / "manifest.json", lambda f: f.write(text.encode()))
    return new


def store_progress(out) -> tuple[int, int, bool] | None:
    """(tasks finished, tasks in all, complete) of the store in ``out`` (as far as it
    has got: it may be running), or None where there is no readable manifest.  For a
    store of another study than the experiment (no ``methods`` in its configuration),
    the task files present and the task count of its latest run."""
    out = Path(out)
    try:
        manifest = read_manifest(out)
    except ValueError:
        return None
    if manifest is None:
        return None
    config = manifest.get("config", {})
    if "methods" not in config:  # another study (calibration): its last run's tasks
        done = sum(1 for _ in (out / "tasks").glob("*.npz"))
        return done, max(done, int(manifest.get("tasks", 0))), bool(manifest.get("complete"))
    tasks = config_tasks(config)  # files present, not checked: a progress count
    return (sum((out / "tasks" / t.filename).exists() for t in tasks), len(tasks),
            bool(manifest.get("complete")))
