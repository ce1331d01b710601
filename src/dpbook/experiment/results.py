"""Reading a store of the Section 6 experiment (Figures 2 and 3): the estimates table,
the per-task trajectories (lazily) and per-(method, eps) summaries (bias, RMSE)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import numpy as np

from dpbook.experiment.config import (
    FORMAT,
    METHOD_CODE,
    RESAMPLE_CODE,
    Task,
    config_batches,
    config_params,
    config_tasks,
    eps_code,
)
from dpbook.experiment.store import collect, read_manifest, valid_tasks, write_estimates
from dpbook.validation import check_json


class Trajectories:
    """Lazy access to the per-task arrays of an experiment store.

    ``tr[method, eps, run]`` is a dict of arrays: for SMC tasks ``mean_mu``,
    ``mean_sigma``, ``sd_mu``, ``sd_sigma``, ``ess``, ``acceptance``, ``y``, ``l``, ``r``
    (one value per step t = 1..n) and, for the first ``keep_particles`` runs,
    ``snapshot_t``, ``snapshot_mu``, ``snapshot_sigma``, ``snapshot_w`` (shape
    [steps/every, N]); for MHAAR tasks ``y``, ``l``, ``r`` and possibly a thinned chain.
    In a store of several batch sizes the keys are ``(method, eps, run, batch)``, batch
    None for MHAAR (``tr[method, eps, run]`` is then MHAAR's task only).
    """

    def __init__(self, out, manifest, tasks=None):
        self.out = Path(out)
        self.manifest = manifest
        self.config = manifest["config"]
        self._tasks = tasks  # the checked task files (None: every file present)
        self._cache = {}

    def keys(self):
        batched = config_batches(self.config) is not None
        return [(t.method, t.eps, t.run, *((t.batch,) if batched else ()))
                for t in config_tasks(self.config)
                if (t in self._tasks if self._tasks is not None
                    else (self.out / "tasks" / t.filename).exists())]

    def __contains__(self, key):
        if config_batches(self.config) is not None and len(key) == 3:
            key = (*key, None)  # tr[method, eps, run]: an unbatched task (MHAAR)
        return key in self.keys()

    def __len__(self):
        return len(self.keys())

    def __getitem__(self, key):
        method, eps, run, *batch = key
        if len(batch) > 1:
            raise KeyError(key)
        batch = batch[0] if batch else None
        task = Task(method, float(eps), int(run), None if batch is None else int(batch))
        if task not in self._cache:
            path = self.out / "tasks" / task.filename
            if not path.exists() or (self._tasks is not None and task not in self._tasks):
                raise KeyError(key)
            with np.load(path, allow_pickle=False) as z:
                self._cache[task] = {k: z[k] for k in z.files
                                     if k not in ("row_json", "config_sha")}
        return self._cache[task]

    def get(self, method, eps, run, batch=None):
        return self[method, eps, run, batch]

    def particles(self, method, eps, run, resample=True, batch=None):
        """(t, mu, sigma) at every ``every``-th step; mu, sigma have shape [len(t), N]
        (for another family: t and one array per parameter).

        With ``resample=True`` the particles are resampled (systematic resampling with a
        seed fixed by the task) to equal weights, as in the paper's Figure 2; otherwise
        the weights are returned too: (t, mu, sigma, w).  ``batch``: the task's batch
        size in a store of several (the resampling seed is that of (method, eps, run)).
        """
        key = (method, eps, run) + (() if batch is None else (batch,))
        d = self[key]
        if "snapshot_t" not in d:
            raise KeyError(f"no particles stored for {key} "
                           f"(keep_particles={self.config['keep_particles']})")
        t, w = d["snapshot_t"], d["snapshot_w"]
        ths = [d[f"snapshot_{p}"] for p in config_params(self.config)]
        if not resample:
            return (t, *ths, w)
        rng = np.random.default_rng(np.random.SeedSequence(self.config["seed"], spawn_key=(
            RESAMPLE_CODE, METHOD_CODE[method], eps_code(eps), int(run))))
        N = w.shape[1]
        u = (rng.random(len(t))[:, None] + np.arange(N)) / N
        cw = np.cumsum(w, axis=1)
        cw[:, -1] = 1.0
        idx = np.stack([np.searchsorted(cw[k], u[k], side="right") for k in range(len(t))])
        idx = np.minimum(idx, N - 1)
        return (t, *(np.take_along_axis(a, idx, 1) for a in ths))

    def steps(self, methods=None, eps=None):
        """Long DataFrame of the per-step SMC trajectories (method, eps, run, t, ...; in a
        store of several batch sizes method, eps, run, batch, t, ...)."""
        import pandas as pd

        frames = []
        for key in self.keys():
            m, e, r = key[:3]
            if m == "mhaar" or (methods and m not in methods) or (eps and e not in eps):
                continue
            d = self[key]
            keys = [k for k in d if k.startswith(("mean_", "sd_"))]
            cols = {k: d[k] for k in keys + ["ess", "acceptance", "l", "r", "y"] if k in d}
            batch = {"batch": key[3]} if len(key) == 4 else {}
            frames.append(pd.DataFrame({"method": m, "eps": e, "run": r, **batch,
                                        "t": np.arange(1, len(d["y"]) + 1), **cols}))
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def load_results(out="results/paper"):
    """(estimates DataFrame, :class:`Trajectories`) of the experiment stored in ``out``.

    Only task files that pass :func:`~dpbook.experiment.store.read_task` are used (the
    others are reported); ``estimates.parquet`` is rewritten when it does not hold them.
    """
    out = Path(out)
    manifest = read_manifest(out)
    if manifest is None:
        raise ValueError(f"{out} holds no experiment results (no manifest.json)")
    note_store_read(out)
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{out} was written in store format {manifest.get('format')}, this "
                         f"dpbook reads format {FORMAT}: rerun the experiment into it")
    config = check_json(manifest["config"], f"{out / 'manifest.json'}: its config",
                        {"methods": list, "eps": list, "runs": int})
    rows = valid_tasks(out, config)
    df = collect(out, config, rows)
    p = out / "estimates.parquet"
    if not p.exists() or _parquet_rows(p) != len(df):
        with contextlib.suppress(OSError):  # a read-only store is still readable
            write_estimates(out, df)
    return df, Trajectories(out, manifest, set(rows))


# The book's cached rebuild (book/tools/run_chapters.py) sets this to a file per chapter,
# so that a chapter is re-executed when a store it read changes.
STORE_LOG = "DPBOOK_STORE_LOG"


def note_store_read(out):
    """Append the store folder ``out`` to the file named by ``$DPBOOK_STORE_LOG``, if set."""
    log = os.environ.get(STORE_LOG)
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(f"{Path(out).resolve()}\n")


def _parquet_rows(path) -> int | None:
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(path).metadata.num_rows
    except Exception:  # noqa: BLE001 - any damage means: rewrite it
        return None


def summarize(estimates, mu=None, sigma=None):
    """Per method and eps (and batch size, in a store of several: ``batch``, None for
    MHAAR): runs, mean, bias and RMSE of every parameter's estimate (columns
    <param>_hat against <param>_true; mu/sigma override the truth)."""
    import pandas as pd

    if len(estimates) == 0:
        return pd.DataFrame()
    rows = []
    params = [c[:-5] for c in estimates.columns if c.endswith("_true")]
    given = {"mu": mu, "sigma": sigma}
    keys = ["method", "batch", "eps"] if "batch" in estimates.columns else ["method", "eps"]
    for key, g in estimates.groupby(keys, sort=False, dropna=False):
        m, e = key[0], key[-1]
        row = {"method": m, "eps": float(e)}
        if len(key) == 3:
            row["batch"] = None if pd.isna(key[1]) else int(key[1])
        row["runs"] = int(len(g))
        for p in params:
            truth = float(g[f"{p}_true"].iloc[0]) if given.get(p) is None else given[p]
            v = g[f"{p}_hat"].to_numpy(float)
            row[f"{p}_mean"] = float(v.mean())
            row[f"{p}_bias"] = float(v.mean() - truth)
            row[f"{p}_rmse"] = float(np.sqrt(np.mean((v - truth) ** 2)))
        row["seconds"] = float(g["seconds"].mean())
        rows.append(row)
    out = pd.DataFrame(rows)
    if "batch" in out.columns:
        out["batch"] = out["batch"].astype("Int64")  # <NA> for MHAAR
    return out


def verdict_category(ratio, q05, q95) -> str:
    """Chapter 6's reading of one RMSE ratio (adaptive over another method) and its
    bootstrap interval: "better" or "worse" when the interval excludes 1, else "better,
    tie" or "no better, tie" by the ratio itself."""
    if q95 < 1:
        return "better"
    if q05 > 1:
        return "worse"
    return "better, tie" if ratio < 1 else "no better, tie"


def rmse_ratios(estimates, method="smc-adaptive", others=("smc-fixed", "mhaar"), B=2000,
                rng=None, params=("mu", "sigma")):
    """RMSE of ``method`` over that of each of ``others``, per eps and parameter, with a
    paired bootstrap: the runs are resampled B times, the same runs for every method
    (their errors share the population of the run).  Long form: eps, param, other,
    ratio, q05 and q95 (the bootstrap's 5% and 95% quantiles of the ratio), and
    ``lowest``, the method with the lowest RMSE at that (eps, param).  Estimates of
    several batch sizes (a ``batch`` column) give these per batch size, the unbatched
    MHAAR's rows taking part at each, with the column ``batch`` first."""
    import pandas as pd

    rng = np.random.default_rng(rng)
    if "batch" in estimates.columns:
        frames = []
        unbatched = estimates["batch"].isna()
        for b in sorted(estimates.loc[~unbatched, "batch"].unique()):
            at_b = estimates[unbatched | (estimates["batch"] == b)].drop(columns="batch")
            f = rmse_ratios(at_b, method, others, B, rng, params)
            f.insert(0, "batch", int(b))
            frames.append(f)
        return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    rows = []
    for eps in sorted(estimates.eps.unique()):
        at_eps = estimates[estimates.eps == eps]
        for p in params:
            err = at_eps.pivot(index="run", columns="method", values=f"{p}_hat") \
                - at_eps[f"{p}_true"].iloc[0]
            sq = (err**2).to_numpy()  # runs x methods, paired by run
            idx = rng.integers(0, len(sq), size=(B, len(sq)))
            boot = np.sqrt(sq[idx].mean(axis=1))  # B x methods
            rmse = np.sqrt(sq.mean(axis=0))
            col = list(err.columns).index
            for other in others:
                ratio = boot[:, col(method)] / boot[:, col(other)]
                rows.append({"eps": eps, "param": p, "other": other,
                             "ratio": rmse[col(method)] / rmse[col(other)],
                             "q05": np.quantile(ratio, 0.05), "q95": np.quantile(ratio, 0.95),
                             "lowest": err.columns[int(np.argmin(rmse))]})
    return pd.DataFrame(rows)
