"""Section 6's MHAAR chains, array by array: save them, or compare with a saved set.

Usage:  NUMBA_NUM_THREADS=1 python benchmarks/section6_mhaar_chains.py save OUT.npz
            [--eps 1 10] [--runs 0 1]
        NUMBA_NUM_THREADS=1 python benchmarks/section6_mhaar_chains.py compare OLD.npz

Runs the experiment's MHAAR tasks (``dpbook.experiment.tasks.run_task`` with the paper's
configuration, ``make_config()``: n = 1000, 10^5 iterations, 20 auxiliary draws, the prior
mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1), the fixed interval [mu - 10 sigma, mu + 10 sigma],
the experiment's seeds) and keeps every array the task returns (y, l, r and the stored
chain) with the row's estimates, acceptance and final steps; it also reruns
:func:`dpbook.mhaar.mhaar` on the task's releases and keeps the full chain (samples,
accepted, steps).  ``compare`` recomputes the same tasks and requires every array and
number to be bit-identical (a change to the sampler must leave the paper's chains as
they are).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from dpbook.experiment.config import Task, make_config, task_seed
from dpbook.experiment.tasks import run_task, task_spec
from dpbook.mhaar import mhaar


def chains(eps_list, runs):
    config = make_config(eps=eps_list, runs=max(runs) + 1, methods=("mhaar",))
    out = {}
    for eps in eps_list:
        for run in runs:
            spec = task_spec(config, {}, Task("mhaar", float(eps), run), threads=1)
            res = run_task(spec)
            tag = f"eps{eps:g}_run{run}"
            for k, v in res["arrays"].items():
                out[f"{tag}/task_{k}"] = np.asarray(v)
            row = res["row"]
            for k in ("mu_hat", "sigma_hat", "mu_sd", "sigma_sd", "acceptance",
                      "mhaar_step_mu", "mhaar_step_var"):
                out[f"{tag}/row_{k}"] = np.asarray(row[k])
            a = res["arrays"]
            full = mhaar(a["y"], a["l"], a["r"], float(eps), n_iter=config["mhaar_iters"],
                         n_aux=config["mhaar_aux"],
                         seed=task_seed(config["seed"], "mhaar", float(eps), run))
            out[f"{tag}/samples"] = full.samples
            out[f"{tag}/accepted"] = full.accepted
            out[f"{tag}/steps"] = full.steps
            print(f"{tag}: mu_hat {row['mu_hat']!r} sigma_hat {row['sigma_hat']!r} "
                  f"acceptance {row['acceptance']!r} ({row['seconds']:.1f} s)", flush=True)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("save", "compare"))
    ap.add_argument("path")
    ap.add_argument("--eps", type=float, nargs="*", default=[1.0, 10.0])
    ap.add_argument("--runs", type=int, nargs="*", default=[0, 1])
    args = ap.parse_args(argv)
    if args.action == "save":
        out = chains(args.eps, args.runs)
        np.savez(args.path, **out)
        print(f"saved {len(out)} arrays to {args.path}")
        return 0
    old = np.load(args.path)
    tags = sorted({k.split("/")[0] for k in old.files})
    eps_list = sorted({float(t.split("_")[0][3:]) for t in tags})
    runs = sorted({int(t.split("_run")[1]) for t in tags})
    new = chains(eps_list, runs)
    bad = [k for k in old.files if k not in new or old[k].shape != new[k].shape
           or old[k].dtype != new[k].dtype
           or old[k].tobytes() != np.asarray(new[k]).tobytes()]
    print(f"{len(old.files)} arrays compared, {len(bad)} differ" + (": " + ", ".join(bad)
                                                                     if bad else
                                                                     " (bit-identical)"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
