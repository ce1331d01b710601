"""Algorithm 4 / eq. (8) on one engine: a user's family against the paper's normal,
the code before the engine against the engine, side by side in one run.

Usage:  python benchmarks/bench_fisher_engine.py [--before REV] [--repeats 5] [--quick]

The user's family is a logistic, defined below as chapter 7 defines a family (numpy
only: base_logpdf = -z - 2 log1p(exp(-z)), base_dlogpdf, base_cdf, base_ppf,
base_sample).  "before" is the Fisher code of git revision REV (default 1d9ba12, the
last with fisher/normal_mc.py beside the generic fisher/mc.py), loaded from git into
this process: the normal family ran its compiled kernel there, every other family the
generic code (numpy draws and scores feeding the same cell kernel; numpy exp for the
Gaussian mechanism).  "engine" is dpbook.fisher as installed.

Timed, single-threaded (one grid worker, one numba thread), warm (the fastest of
--repeats rounds of at least 0.25 s each, interleaved, after one untimed call), for the normal
and the logistic family:

* fisher_mc at the paper's sizes (M = 1000, K = 10000), Laplace mechanism;
* fisher_mc, Gaussian mechanism (the dense cell, O(M K));
* fisher_mc with fresh samples (literal Algorithm 4; M = 1000, K = 2000);
* fisher_grid, method 'mc', a 20 x 20 grid (190 cells) at the paper's sizes, Laplace.

Compile time: the first call of the engine for the logistic (numba compiles its
base_ppf and base_dlogpdf kernels; a class defined in a notebook cannot be cached, so
every kernel start pays it), reported separately.  Results print and go to
benchmarks/results/fisher_engine.json.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
from bench_engine import Logistic

from dpbook.fisher import fisher_grid, fisher_mc
from dpbook.model.families import get_family

HERE = Path(__file__).resolve().parent


def load_before(rev):
    """fisher/normal_mc.py and fisher/mc.py of ``rev`` as modules of this process
    (written to a temporary directory, so that numba caches their kernels)."""
    import importlib
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="fisher_before_"))
    for name in ("normal_mc", "mc"):
        src = subprocess.run(["git", "-C", str(HERE.parent), "show",
                              f"{rev}:src/dpbook/fisher/{name}.py"],
                             capture_output=True, text=True, check=True).stdout
        src = src.replace("from dpbook.fisher.normal_mc import",
                          "from fisher_before_normal_mc import")
        (tmp / f"fisher_before_{name}.py").write_text(src)
    sys.path.insert(0, str(tmp))
    return (importlib.import_module("fisher_before_normal_mc"),
            importlib.import_module("fisher_before_mc"))


def timed(fns, repeats, floor=0.25):
    """Seconds per call of each of ``fns`` (a dict): the fastest of ``repeats`` rounds,
    each calling the function enough times to last ``floor`` seconds, the functions'
    rounds interleaved (so that other processes on a shared machine disturb them
    alike); after one untimed call each (compiled, caches filled)."""
    calls = {}
    for k, fn in fns.items():
        t0 = time.perf_counter()
        fn()
        calls[k] = max(1, int(floor / max(time.perf_counter() - t0, 1e-6)))
    best = dict.fromkeys(fns, math.inf)
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(calls[k]):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t0) / calls[k])
    return best


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--before", default="1d9ba12")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="a 10 x 10 grid, M = 300")
    args = p.parse_args(argv)
    numba.set_num_threads(1)
    M, K, G = (300, 10000, 10) if args.quick else (1000, 10000, 20)
    Kf = 2000
    old_normal, old_mc = load_before(args.before)
    logistic = Logistic()
    normal = get_family("normal")

    t0 = time.perf_counter()
    fisher_mc(-1.0, 2.0, 3.0, None, logistic, M=50, K=100, rng=0)
    compile_s = time.perf_counter() - t0

    def grid_axes():
        vals = np.linspace(-3.0, 3.0, G)
        ia, ib = np.nonzero(vals[:, None] < vals[None, :])
        return vals[ia], vals[ib]

    A, B = grid_axes()
    cases = {}

    def before(fam, kind):
        mech = "gaussian" if kind == "gaussian" else "laplace"
        if fam is normal and kind in ("laplace", "fresh"):  # the paper's own kernel
            share = kind != "fresh"
            return lambda: old_normal.fisher_mc(-1.0, 1.5, 2.0, M=M, K=K if share else Kf,
                                                rng=1, share_samples=share)
        if kind == "grid":
            if fam is normal:
                return lambda: old_normal.fisher_grid(2.0, "mc", grid=G, M=M, K=K, seed=1,
                                                      workers=1)
            fm, mm, th = old_mc.mc_setup(fam, "laplace", None)
            return lambda: old_mc.fisher_mc_pairs(A, B, 2.0, fm, mm, th, M, K, 1, 1, "auto")
        share = kind != "fresh"
        return lambda: old_mc._fisher_mc_generic(-1.0, 1.5, 2.0, None, fam, mech, M=M,
                                                 K=K if share else Kf, rng=1,
                                                 share_samples=share)

    def engine(fam, kind):
        if kind == "grid":
            return lambda: fisher_grid(2.0, fam, "laplace", method="mc", grid=G, M=M, K=K,
                                       seed=1, workers=1)
        mech = "gaussian" if kind == "gaussian" else "laplace"
        share = kind != "fresh"
        return lambda: fisher_mc(-1.0, 1.5, 2.0, None, fam, mech, M=M, K=K if share else Kf,
                                 rng=1, share_samples=share)

    for kind in ("laplace", "gaussian", "fresh", "grid"):
        row = timed({f"{fname}/{code}": make(fam, kind)
                     for fname, fam in (("normal", normal), ("logistic", logistic))
                     for code, make in (("before", before), ("engine", engine))},
                    args.repeats)
        cases[kind] = row
        print(f"{kind:9s}", "  ".join(f"{k} {v:7.3f} s" for k, v in row.items()),
              f"| logistic/normal engine {row['logistic/engine'] / row['normal/engine']:.2f}x,"
              f" logistic before/engine {row['logistic/before'] / row['logistic/engine']:.2f}x",
              flush=True)
    print(f"first call of the engine for the logistic (numba compile): {compile_s:.2f} s")
    out = {"machine": platform.processor() or platform.machine(), "threads": 1,
           "sizes": {"M": M, "K": K, "K_fresh": Kf, "grid": G}, "before": args.before,
           "repeats": args.repeats, "seconds": cases, "compile_s": compile_s}
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "fisher_engine.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
