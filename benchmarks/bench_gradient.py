"""The online gradient (Section 7) of the paper's model (its closed-form score) and of
other families (the engine's compiled score, or numpy quadrature before it): n updates
release by release at eps = 1, the interval at the current estimate, warm (the first,
compiling update timed apart); and a block of k releases through one interval by
``update_many`` against ``update`` in turn.  Each family runs in a process of its own
(its compile time is then its own), one after the other, so the ratios are measured
side by side; ``--base DIR`` runs another checkout's code (``DIR/src``) beside this one.

    .venv/bin/python benchmarks/bench_gradient.py [--n 2000 20000] [--k 100] [--base DIR]

CPU seconds (process_time), one numba thread.  Families: normal (the paper's model),
the shipped Laplace, and a logistic written as a user writes one (bench_engine.py).
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
FAMILIES = ("normal", "laplace", "logistic")


def _family(name):
    from bench_engine import Logistic

    return Logistic() if name == "logistic" else name


def _draws(n, seed):
    rng = np.random.default_rng(seed)
    return rng.normal(size=n), rng.laplace(size=n)


def _interval(g):
    m, c = g.theta
    return m + g.a * c, m + g.b * c


def _stream(g, n):
    x, v = _draws(n, 1)
    t0 = time.process_time()
    for i in range(n):
        l, r = _interval(g)
        g.update(float(np.clip(x[i], l, r) + v[i] * (r - l) / g.eps), l, r)
    return time.process_time() - t0


def _blocks(g, n, k, many):
    x, v = _draws(n, 2)
    t0 = time.process_time()
    for j in range(0, n, k):
        l, r = _interval(g)
        y = np.clip(x[j:j + k], l, r) + v[j:j + k] * (r - l) / g.eps
        if many:
            g.update_many(y, np.full(len(y), l), np.full(len(y), r))
        else:
            for t in range(len(y)):
                g.update(float(y[t]), l, r)
    return time.process_time() - t0


def worker(name, ns, k):
    from dpbook.online.gradient import OnlineGradient

    def new():
        return OnlineGradient(1.0, family=_family(name))

    g = new()
    t0 = time.process_time()
    g.update(0.1, g.a, g.b)
    out = {"first update (compiling)": time.process_time() - t0}
    for n in ns:
        out[f"{n} updates"] = _stream(new(), n)
    if hasattr(g, "update_many"):
        g.update_many(np.array([0.1]), np.array([g.a]), np.array([g.b]))  # compile
        n = max(ns)
        out[f"{n} in blocks of {k}: update in turn"] = _blocks(new(), n, k, False)
        out[f"{n} in blocks of {k}: update_many"] = _blocks(new(), n, k, True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[2000, 20000])
    ap.add_argument("--k", type=int, default=100)
    ap.add_argument("--base", help="another checkout, run beside this one")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.n, args.k)))
        return
    trees = {"this": ROOT} | ({"base": Path(args.base).resolve()} if args.base else {})
    for name in FAMILIES:
        for label, tree in trees.items():
            env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{ROOT / 'benchmarks'}",
                       NUMBA_NUM_THREADS="1")
            run = subprocess.run([sys.executable, __file__, "--worker", name, "--k",
                                  str(args.k), "--n", *map(str, args.n)], env=env,
                                 capture_output=True, text=True, check=True)
            res = json.loads(run.stdout.strip().splitlines()[-1])
            for what, sec in res.items():
                print(f"{name:9s} {label:5s} {what:40s} {sec:8.3f} s")


if __name__ == "__main__":
    main()
