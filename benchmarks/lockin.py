"""Where adaptive truncation loses (issue 53, item 5): lock-in with heavy tails.

The adaptive policy (Thompson sampling and eq. 13, Section 5) against the fixed interval
[m - 10c, m + 10c] of Section 6, on the same data seeds (the experiment's data seed of
(eps, run) does not depend on the method), for the Student-t with 1 (the Cauchy), 2 and
3 degrees of freedom at (m, c) = (50, 3), eps 1 and 5; and the same adaptive runs with
dpbook's guard (:class:`dpbook.privacy.policies.GuardedPolicy`, block of ``GUARD``
releases), whose draws are those of the unguarded run until its first widening.  On the
paper's normal model the guard is compared with no guard on paired runs.

Sizes: n = 150 individuals and N = 200 particles, chapter 7's quick mode, where the
issue saw the lock-in (a Cauchy run off by -117); a task takes about 0.25 s on one
thread, so the full measurement (100 runs: 1800 heavy-tailed tasks and 400 normal ones
at n = 300) is about 10 CPU-minutes.  Every configuration is an experiment store under
results/ (``ensure_results``): a rerun resumes or loads.  Chapter 7 calls :func:`measure`
and shows :func:`table`; run from the repository root,

    NUMBA_NUM_THREADS=1 python benchmarks/lockin.py [--mode full] [--workers 1]

prints the tables and writes benchmarks/results/lockin-<mode>.md.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from dpbook import ensure_results, get_family

ROOT = Path(__file__).resolve().parents[1]
THETA = (50.0, 3.0)
EPS = (1.0, 5.0)
GUARD = 10  # releases per block of the guard
SIZES = {"quick": dict(dfs=(1.0,), runs=10, normal_runs=10),
         "full": dict(dfs=(1.0, 2.0, 3.0), runs=100, normal_runs=100)}
HEAVY = dict(n=150, particles=200, interval_grid=30)
NORMAL = dict(n=300, particles=300)  # the paper's model, its compiled kernel
BOOT = 2000  # bootstrap resamples of the runs
FAR = 3.0  # a run "off": its location error beyond FAR true scales
LEVEL = 0.95


def store(name, mode, seed, guard=None, root=ROOT):
    tail = f"-guard{guard}" if guard else ""
    return root / "results" / f"ch07-lockin-{name}{tail}-{mode}-seed{seed}"


def measure(mode="quick", seed=7, root=ROOT, workers=None, scheduler=None):
    """Run or load every store of the measurement; the estimates of all of them, one row
    per (model, policy, eps, run), policy one of adaptive, fixed, guarded."""
    size = SIZES[mode]
    frames = []
    kw = dict(progress=False, workers=workers, scheduler=scheduler, seed=seed, eps=EPS)
    for df in size["dfs"]:
        fam = get_family("student_t", df=df)
        name = f"t{df:g}"
        common = dict(family=fam, theta=THETA, runs=size["runs"], **HEAVY, **kw)
        est, _ = ensure_results(store(name, mode, seed, root=root),
                                methods=["smc-adaptive", "smc-fixed"], **common)
        gest, _ = ensure_results(store(name, mode, seed, GUARD, root), guard=GUARD,
                                 methods=["smc-adaptive"], **common)
        frames += [est.assign(model=name), gest.assign(model=name, method="guarded")]
    common = dict(runs=size["normal_runs"], methods=["smc-adaptive"], **NORMAL, **kw)
    est, _ = ensure_results(store("normal", mode, seed, root=root), **common)
    gest, _ = ensure_results(store("normal", mode, seed, GUARD, root), guard=GUARD, **common)
    frames += [est.assign(model="normal"), gest.assign(model="normal", method="guarded")]
    out = pd.concat(frames, ignore_index=True)
    out["policy"] = out["method"].str.replace("smc-", "", regex=False)
    loc, true = np.where(out["model"] == "normal", out["mu_hat"], out["loc_hat"]), \
        np.where(out["model"] == "normal", out["mu_true"], out["loc_true"])
    out["error"] = loc - true
    return out


def paired_rmse_diff(a, b, seed=0, boot=BOOT, level=LEVEL):
    """RMSE(a) - RMSE(b) for errors of the same runs, and its paired percentile
    bootstrap interval (runs resampled together)."""
    a, b = np.asarray(a, float), np.asarray(b, float)
    idx = np.random.default_rng(seed).integers(0, len(a), (boot, len(a)))
    d = np.sqrt((a[idx] ** 2).mean(1)) - np.sqrt((b[idx] ** 2).mean(1))
    lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2])
    return np.sqrt((a ** 2).mean()) - np.sqrt((b ** 2).mean()), lo, hi


def table(est, seed=0):
    """One row per (model, eps): RMSE, bias, the worst run (signed error of the run
    farthest off) and the runs off by more than FAR true scales, of the location per
    policy, and the paired RMSE differences adaptive
    - fixed and guarded - adaptive with their paired bootstrap 95% intervals (lo, hi)."""
    rows = []
    for (model, eps), g in est.groupby(["model", "eps"], sort=False):
        err = {p: g[g.policy == p].sort_values("run")["error"].to_numpy()
               for p in g.policy.unique()}
        row = {"model": model, "eps": eps, "runs": len(err["adaptive"])}
        scale = g["sigma_true" if model == "normal" else "scale_true"].iloc[0]
        for p, e in err.items():
            row[f"{p} RMSE"] = np.sqrt((e ** 2).mean())
            row[f"{p} bias"] = e.mean()
            row[f"{p} worst"] = e[np.argmax(np.abs(e))]
            row[f"{p} off > {FAR:g}c"] = int((np.abs(e) > FAR * scale).sum())
        for a, b in (("adaptive", "fixed"), ("guarded", "adaptive")):
            if a in err and b in err:
                d, lo, hi = paired_rmse_diff(err[a], err[b], seed)
                row[f"{a} - {b}"], row[f"{a} - {b} lo"], row[f"{a} - {b} hi"] = d, lo, hi
        if "widenings" in g:
            row["guarded runs widened"] = int((g["widenings"] > 0).sum())
        rows.append(row)
    return pd.DataFrame(rows).set_index(["model", "eps"])


def worst_exact(est, mode="quick", seed=7, root=ROOT, grid=61, per_model=True):
    """The worst adaptive run of each heavy-tailed (model, eps) (``per_model=False``: of
    all of them) against the exact posterior of its releases (quadrature on a grid x
    grid of (m, c), ``exact_posterior``): the SMC's estimate of the location, the exact
    posterior's median and 90% interval, and whether that interval holds the truth."""
    from dpbook import exact_posterior
    from dpbook.experiment.config import Task

    heavy = est[(est.policy == "adaptive") & (est.model != "normal")]
    groups = heavy.groupby(["model", "eps"], sort=False) if per_model else [(None, heavy)]
    rows = []
    for _, g in groups:
        w = g.loc[g["error"].abs().idxmax()]
        task = Task("smc-adaptive", float(w["eps"]), int(w["run"]))
        z = np.load(store(w["model"], mode, seed, root=root) / "tasks" / task.filename)
        fam = get_family("student_t", df=float(w["model"][1:]))
        q = exact_posterior(z["y"], z["l"], z["r"], task.eps, family=fam,
                            grid=(grid, grid)).quantile([0.05, 0.5, 0.95])[:, 0]
        rows.append({"model": w["model"], "eps": task.eps, "run": task.run,
                     "SMC estimate": w["loc_hat"], "exact 5%": q[0], "exact median": q[1],
                     "exact 95%": q[2], "truth in 90%": bool(q[0] <= THETA[0] <= q[2]),
                     "SMC in 90%": bool(q[0] <= w["loc_hat"] <= q[2])})
    return pd.DataFrame(rows).set_index(["model", "eps"])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mode", choices=tuple(SIZES), default="full")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    est = measure(args.mode, args.seed, workers=args.workers)
    tab, exact = table(est), worst_exact(est, args.mode, args.seed)
    with pd.option_context("display.width", 200, "display.max_columns", 40,
                           "display.float_format", "{:.3g}".format):
        print(tab.T, exact, sep="\n\n")
    out = ROOT / "benchmarks" / "results" / f"lockin-{args.mode}.md"
    out.parent.mkdir(exist_ok=True)
    out.write_text(f"# benchmarks/lockin.py --mode {args.mode} --seed {args.seed}\n\n"
                   + tab.T.to_markdown(floatfmt=".3g") + "\n\n"
                   + exact.to_markdown(floatfmt=".3g") + "\n")
    print(f"written {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
