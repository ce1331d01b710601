"""Wall and CPU time of one MHAAR run at the Section 6 size (n = 1000, 10^5 iterations,
N = 20 auxiliary draws per observation), on 1 and 2 numba threads.

Usage:  python benchmarks/bench_mhaar.py [--n 1000] [--iters 100000] [--aux 20]
                                         [--eps 1.0] [--seed 0] [--repeats 1]

Data as in Section 6: x_t ~ N(50, 10), clipped to [mu - 10 sigma, mu + 10 sigma] and
released with Laplace noise of scale (r - l)/eps.  One run is n * iters * aux = 2e9
auxiliary draws (1.9e9 fresh normals, 4e9 Laplace weights) at the default size.  Timed
configurations: 1 thread (serial), 2 threads with the blocks of observations in
parallel, and 2 threads in the default "auto" mode (which times both modes now and
then and keeps the faster; see dpbook.mhaar.paper_chain).  All runs must give the same
chain (checked).  Compilation / cache loading is timed separately in a warm-up.  The
1-minute load average is recorded before and after each run: on a shared machine other
processes take CPU time and the parallel mode, which synchronises its threads at every
iteration, suffers most.  Everything is printed and written to
benchmarks/results/mhaar.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numba
import numpy as np

from dpbook.mhaar import mhaar
from dpbook.model.mechanisms import release

HERE = Path(__file__).resolve().parent
TARGET_S = 10.0


def _data(n, eps, seed):
    mu, sigma = 50.0, 10 ** 0.5
    rng = np.random.default_rng(seed)
    x = rng.normal(mu, sigma, n)
    l, r = np.full(n, mu - 10 * sigma), np.full(n, mu + 10 * sigma)
    return release(x, l, r, eps, rng), l, r


def _timed(y, l, r, eps, iters, aux, seed, threads, parallel):
    numba.set_num_threads(threads)
    load0 = os.getloadavg()[0]
    w, c = time.perf_counter(), time.process_time()
    res = mhaar(y, l, r, eps, n_iter=iters, n_aux=aux, seed=seed, parallel=parallel)
    w, c = time.perf_counter() - w, time.process_time() - c
    return res, {"threads": threads, "mode": {None: "auto", True: "parallel",
                                              False: "serial"}[parallel],
                 "wall_s": w, "cpu_s": c, "load_before": load0,
                 "load_after": os.getloadavg()[0], "parallel_iters": res.n_parallel}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--iters", type=int, default=100_000)
    ap.add_argument("--aux", type=int, default=20)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=1)
    a = ap.parse_args()
    y, l, r = _data(a.n, a.eps, a.seed)
    max_threads = numba.config.NUMBA_NUM_THREADS
    t0 = time.perf_counter()
    mhaar(y, l, r, a.eps, n_iter=5, n_aux=a.aux, parallel=True)
    mhaar(y, l, r, a.eps, n_iter=5, n_aux=a.aux, parallel=False)
    warm = time.perf_counter() - t0
    draws = a.n * a.iters * a.aux
    configs = [(1, False), (min(2, max_threads), True), (min(2, max_threads), None)]
    rows, ref = [], None
    for rep in range(a.repeats):
        for threads, parallel in configs:
            res, row = _timed(y, l, r, a.eps, a.iters, a.aux, a.seed, threads, parallel)
            if ref is None:
                ref = res
            else:
                assert np.array_equal(ref.samples, res.samples), "chains differ"
            row.update(repeat=rep, ns_per_draw_wall=row["wall_s"] / draws * 1e9,
                       ns_per_draw_cpu=row["cpu_s"] / draws * 1e9)
            rows.append(row)
    numba.set_num_threads(max_threads)
    s = ref.summary()
    print(f"MHAAR, n = {a.n}, {a.iters} iterations, N = {a.aux} ({draws:.2g} draws), "
          f"eps = {a.eps}; warm-up (compile or cache load) {warm:.1f} s; "
          f"{os.cpu_count()} CPUs, threading layer {numba.threading_layer()}")
    print(f"{'threads':>7} {'mode':>8} {'wall s':>8} {'cpu s':>8} {'ns/draw':>8} "
          f"{'par. it':>8} {'load':>10}")
    for row in rows:
        print(f"{row['threads']:>7} {row['mode']:>8} {row['wall_s']:>8.2f} "
              f"{row['cpu_s']:>8.2f} {row['ns_per_draw_wall']:>8.2f} "
              f"{row['parallel_iters']:>8} {row['load_before']:>4.1f}->{row['load_after']:<4.1f}")
    best = min(row["wall_s"] for row in rows)
    print(f"best wall {best:.2f} s (target {TARGET_S:.0f} s); estimate: mu {s['mu']['mean']:.3f} "
          f"(sd {s['mu']['sd']:.3f}), sigma {s['sigma']['mean']:.3f} "
          f"(sd {s['sigma']['sd']:.3f}); acceptance {ref.acceptance:.3f}, "
          f"steps {ref.final_steps[0]:.3g} / {ref.final_steps[1]:.3g}")
    out = {
        "settings": vars(a) | {"draws": draws},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "processor": platform.processor(), "numba": numba.__version__,
                    "threading_layer": numba.threading_layer()},
        "warm_up_s": warm,
        "runs": rows,
        "best_wall_s": best,
        "target_s": TARGET_S,
        "estimate": s,
        "acceptance": ref.acceptance,
        "step_mu": float(ref.final_steps[0]),
        "step_var": float(ref.final_steps[1]),
    }
    (HERE / "results").mkdir(exist_ok=True)
    with open(HERE / "results" / "mhaar.json", "w") as f:
        json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
