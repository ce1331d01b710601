"""The experiment's store: one file per finished task, a manifest, a Parquet table.

Store layout (``out`` directory)::

    manifest.json          configuration, code and package versions, best intervals
    estimates.parquet      one row per task (rebuilt from the task files)
    tasks/<method>_eps<eps>_run<run>.npz   one file per finished task

Every task file holds the estimates row (as JSON) and the trajectories: for the SMC
methods the posterior means and sds, ESS, acceptance rate and intervals l_t, r_t of
every step and the released y; for the first ``keep_particles`` runs also the
particles and their normalised weights every ``every``-th step.  MHAAR files hold y,
l, r and a thinned chain.  Files are written to a temporary file and renamed
(``os.replace``) as each task finishes, so an interrupted experiment loses nothing that
had finished and a rerun skips it.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
from pathlib import Path

import numpy as np

from dpbook.experiment.config import METHOD_ORDER, Task, config_params, config_tasks


def atomic_write_bytes(path: Path, writer):
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


def write_json(path: Path, obj):
    atomic_write_bytes(path, lambda f: f.write(
        (json.dumps(obj, indent=2, sort_keys=False) + "\n").encode()))


def store_task(out: Path, task: Task, result: dict):
    arrays = dict(result["arrays"])
    arrays["row_json"] = np.array(json.dumps(result["row"]))
    atomic_write_bytes(out / "tasks" / task.filename,
                       lambda f: np.savez_compressed(f, **arrays))


def _read_row(path: Path) -> dict:
    with np.load(path, allow_pickle=False) as z:
        return json.loads(str(z["row_json"]))


def collect(out: Path, config: dict | None = None):
    """Estimates DataFrame from the finished task files (only those of ``config``)."""
    import pandas as pd

    tdir = out / "tasks"
    wanted = None if config is None else {t.filename for t in config_tasks(config)}
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
        df["_o"] = df["method"].map(METHOD_ORDER)
        df = df.sort_values(["_o", "eps", "run"], kind="mergesort").drop(columns="_o")
    extra = [c for c in df.columns if c not in cols]
    return df[cols + extra].reset_index(drop=True)


def write_estimates(out: Path, df):
    atomic_write_bytes(out / "estimates.parquet", lambda f: df.to_parquet(f, index=False))


def _git(*args) -> str | None:
    root = Path(__file__).resolve().parent
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


def check_same_config(out: Path, manifest: dict | None, config: dict):
    if manifest is None:
        return
    old = manifest.get("config", {})
    diff = sorted(k for k in set(old) | set(config) if old.get(k) != config.get(k))
    if diff:
        raise ValueError(f"{out} holds results of a different configuration "
                         f"(differing: {', '.join(diff)}); choose another output "
                         f"directory or remove it")


def finished_tasks(out: Path, config: dict) -> int:
    """Number of the configuration's tasks stored in ``out``."""
    return sum((out / "tasks" / t.filename).exists() for t in config_tasks(config))


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
    return (finished_tasks(out, config), len(config_tasks(config)),
            bool(manifest.get("complete")))
