"""Issue 38's speed gate: the paper's model (normal family, Laplace mechanism) through
this checkout's SMC and MHAAR against another checkout's (``--base DIR``, e.g. the
starting commit's worktree), side by side in one run.

    .venv/bin/python benchmarks/bench_paper_kernels.py --base /tmp/base [--repeats 3]

Data as in Section 6 with the fixed interval: x_t ~ N(50, 10), clipped to
[mu - 10 sigma, mu + 10 sigma], Laplace noise of scale (r - l)/eps, eps = 5.  Timed:
``smc_posterior`` (Algorithms 2-3, N particles, every x_k moved at every t) and
``mhaar`` (10^5 iterations by default, as in the paper), warm (a short first call
compiles or loads the cache, timed apart), CPU seconds (``process_time``) on one numba
thread so that the other core's load moves both trees alike.  Each (tree, algorithm,
repeat) runs in a fresh process, alternating the trees, and the ratio this/base is the
median over repeats.  The gate: every ratio at most 1.2.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
GATE = 1.2


def _releases(n, eps, seed=0):
    rng = np.random.default_rng(seed)
    mu, sigma = 50.0, 10 ** 0.5
    lo, hi = mu - 10 * sigma, mu + 10 * sigma
    y = np.clip(rng.normal(mu, sigma, n), lo, hi) + rng.laplace(0, (hi - lo) / eps, n)
    return y, np.full(n, lo), np.full(n, hi)


def worker(algorithm, n, particles, iters, eps):
    y, l, r = _releases(n, eps)
    if algorithm == "smc":
        from dpbook.smc import smc_posterior

        def call(k, m):
            return smc_posterior(y[:k], l[:k], r[:k], eps, n_particles=m, seed=1)

        warm, timed = (lambda: call(20, 50)), (lambda: call(n, particles))
    else:
        from dpbook.mhaar import mhaar

        def call(k, its):
            return mhaar(y[:k], l[:k], r[:k], eps, n_iter=its, seed=1)

        warm, timed = (lambda: call(20, 50)), (lambda: call(n, iters))
    t0 = time.process_time()
    warm()
    t1 = time.process_time()
    timed()
    return {"warm-up": t1 - t0, "run": time.process_time() - t1}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=False, help="the other checkout (its src/ is run)")
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--particles", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=100_000)
    ap.add_argument("--eps", type=float, default=5.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--only", choices=("smc", "mhaar"), nargs="+", default=["smc", "mhaar"])
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.particles, args.iters, args.eps)))
        return 0
    trees = {"this": ROOT} | ({"base": Path(args.base).resolve()} if args.base else {})
    times = {}
    for algorithm in args.only:
        for rep in range(args.repeats):
            for label, tree in (trees.items() if rep % 2 == 0 else reversed(trees.items())):
                env = dict(os.environ, PYTHONPATH=str(tree / "src"), NUMBA_NUM_THREADS="1")
                cmd = [sys.executable, __file__, "--worker", algorithm, "--n", str(args.n),
                       "--particles", str(args.particles), "--iters", str(args.iters),
                       "--eps", str(args.eps)]
                out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
                res = json.loads(out.stdout.strip().splitlines()[-1])
                times.setdefault((algorithm, label), []).append(res["run"])
                print(f"{algorithm:6s} {label:5s} repeat {rep}: {res['run']:8.2f} s "
                      f"(warm-up {res['warm-up']:.1f} s)", flush=True)
    ok = True
    for algorithm in args.only:
        this = float(np.median(times[algorithm, "this"]))
        line = f"{algorithm}: this {this:.2f} s"
        if "base" in trees:
            base = float(np.median(times[algorithm, "base"]))
            ratio = this / base
            ok &= ratio <= GATE
            line += f", base {base:.2f} s, ratio {ratio:.3f} (gate {GATE})"
        print(line)
    if "base" in trees:
        print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
