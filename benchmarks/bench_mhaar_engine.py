"""MHAAR (Algorithm 8, the Section 6 baseline), 10^5 iterations, side by side in one run:
the paper's normal/Laplace kernel, the engine (dpbook.mhaar.compiled_chain) for the normal family
(random walk in (mu, log sigma), ``generic=True``) and for a logistic family defined
here as a user defines one, and the numpy sampler dpbook shipped before the engine
(tests/mhaar_oracle.py, timed on fewer iterations and scaled to 10^5).

    NUMBA_NUM_THREADS=1 PYTHONPATH=src:tests python benchmarks/bench_mhaar_engine.py \
        [--n 1000] [--iters 100000] [--eps 5] [--numpy-iters 1000] [--repeats 2]

One thread (set before numba loads) so that a loaded machine treats every sampler
alike; the same releases (normal, Section 6's mu = 50, sigma^2 = 10, n = 1000, through
[mu - 10 sigma, mu + 10 sigma], Laplace noise at eps = 5) for every sampler.  Times are
warm (the best of ``--repeats`` runs) and the sampler's own (``MHAARResult.seconds``);
the whole ``mhaar()`` call adds its check that the chain found the posterior
(:mod:`dpbook.diagnostics`, a few seconds for a family without a closed-form density)
and is shown beside.  The compile time (first call of 5 iterations in this process
minus a warm one) is reported separately: numba caches the paper's kernel on disk, not
the engine's chain for a family class (compiled once per process).
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

import numpy as np  # noqa: E402
from bench_engine import Logistic  # noqa: E402
from mhaar_oracle import mhaar_numpy  # noqa: E402

from dpbook.mhaar import mhaar  # noqa: E402
from dpbook.model.mechanisms import release  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=100_000)
    ap.add_argument("--eps", type=float, default=5.0)
    ap.add_argument("--numpy-iters", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None, help="write the numbers as JSON here")
    a = ap.parse_args()
    rng = np.random.default_rng(1)
    mu, sigma = 50.0, 10 ** 0.5
    l, r = mu - 10 * sigma, mu + 10 * sigma
    y = release(rng.normal(mu, sigma, a.n), l, r, a.eps, rng)
    runs = {
        "paper kernel (normal/Laplace)": lambda it: mhaar(y, l, r, a.eps, n_iter=it,
                                                          parallel=False),
        "engine, normal (random walk)": lambda it: mhaar(y, l, r, a.eps, n_iter=it,
                                                         generic=True),
        "engine, logistic": lambda it: mhaar(y, l, r, a.eps, family=Logistic(), n_iter=it),
    }
    out = {"n": a.n, "iters": a.iters, "eps": a.eps, "threads": os.environ["NUMBA_NUM_THREADS"],
           "seconds": {}, "compile_seconds": {}}
    for name, run in runs.items():
        t = time.perf_counter()
        run(5)
        first = time.perf_counter() - t
        t = time.perf_counter()
        run(5)
        out["compile_seconds"][name] = first - (time.perf_counter() - t)
    out["call_seconds"] = {}
    for _ in range(a.repeats):  # interleaved: a change of the machine's load hits all
        for name, run in runs.items():
            t = time.perf_counter()
            res = run(a.iters)
            wall = time.perf_counter() - t
            out["seconds"][name] = min(res.seconds, out["seconds"].get(name, np.inf))
            out["call_seconds"][name] = min(wall, out["call_seconds"].get(name, np.inf))
    for name, fam in (("numpy sampler, normal", "normal"), ("numpy sampler, logistic",
                                                            Logistic())):
        mhaar_numpy(y, l, r, a.eps, family=fam, n_iter=20)
        t = time.perf_counter()
        mhaar_numpy(y, l, r, a.eps, family=fam, n_iter=a.numpy_iters)
        out["seconds"][name] = (time.perf_counter() - t) * a.iters / a.numpy_iters
    s = out["seconds"]
    out["ratios"] = {
        "logistic / normal, same engine": s["engine, logistic"]
        / s["engine, normal (random walk)"],
        "logistic engine / paper kernel": s["engine, logistic"]
        / s["paper kernel (normal/Laplace)"],
        "numpy logistic / logistic engine": s["numpy sampler, logistic"]
        / s["engine, logistic"]}
    print(f"MHAAR, n = {a.n}, N = 20, eps = {a.eps:g}, {a.iters} iterations, "
          f"{out['threads']} thread(s); warm seconds of the sampler (numpy: scaled from "
          f"{a.numpy_iters} iterations)")
    for name, sec in s.items():
        comp = out["compile_seconds"].get(name)
        extra = (f"   (mhaar() call {out['call_seconds'][name]:6.1f} s, compile {comp:5.1f} s)"
                 if comp is not None else "")
        print(f"  {name:32s} {sec:8.1f} s{extra}")
    for name, v in out["ratios"].items():
        print(f"  {name:32s} {v:8.2f}x")
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
