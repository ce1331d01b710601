"""Compile time of a user's family (issue 38 item 6): a family defined in a file (the
Gumbel of chapter 7, ``bench_chapter7.py``) through everything chapter 7 runs, each on a
tiny problem so that what is timed is compiling (or loading numba's cache), in a first
process and then in a second process that may find the first one's cache.

    .venv/bin/python benchmarks/bench_compile.py

The targets: at most 15 s in all in the first process, 5 s in the second.  CPU seconds
(``process_time``) per step: the latent SMC, MHAAR, the exact posterior, the Monte Carlo
Fisher information (Algorithm 4 in eq. 8) and the online gradient's score.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


def worker():
    from bench_chapter7 import Gumbel

    from dpbook.fisher import fisher_mc
    from dpbook.mhaar import mhaar
    from dpbook.online.gradient import OnlineGradient
    from dpbook.posterior import exact_posterior
    from dpbook.smc import smc_posterior

    fam, eps = Gumbel(), 5.0
    rng = np.random.default_rng(0)
    y = rng.gumbel(size=20) + rng.laplace(0, 8 / eps, 20)
    l, r = np.full(20, -4.0), np.full(20, 4.0)
    steps = {
        "latent SMC": lambda: smc_posterior(y, l, r, eps, family=fam, n_particles=20),
        "MHAAR": lambda: mhaar(y, l, r, eps, family=fam, n_iter=20),
        "exact posterior": lambda: exact_posterior(y, l, r, eps, family=fam, grid=(11, 11)),
        "Fisher (Algorithm 4, eq. 8)": lambda: fisher_mc(-1.0, 1.0, eps, (0.0, 1.0), fam,
                                                         M=10, K=10, rng=0),
        "online gradient": lambda: OnlineGradient(eps, family=fam).update(0.1, -1.0, 1.0),
    }
    out = {}
    for name, step in steps.items():
        t0 = time.process_time()
        step()
        out[name] = time.process_time() - t0
    return out


def main():
    if sys.argv[1:] == ["--worker"]:
        print(json.dumps(worker()))
        return
    # the caller's PYTHONPATH kept (another checkout's src, to compare side by side)
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    env = dict(os.environ, PYTHONPATH=path, NUMBA_NUM_THREADS="1")
    runs = []
    for _ in range(2):
        res = subprocess.run([sys.executable, __file__, "--worker"], env=env,
                             capture_output=True, text=True, check=True)
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
    print(f"{'step':30s} {'first process':>14s} {'second':>8s}")
    for name in runs[0]:
        print(f"{name:30s} {runs[0][name]:12.1f} s {runs[1][name]:6.1f} s")
    print(f"{'all (targets 15 s, 5 s)':30s} {sum(runs[0].values()):12.1f} s "
          f"{sum(runs[1].values()):6.1f} s")


if __name__ == "__main__":
    main()
