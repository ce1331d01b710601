"""Wall time of one full SMC run of Section 6 (n = N = 1000), per policy, eps, threads.

Usage:  python benchmarks/bench_smc.py [--n 1000] [--particles 1000] [--reps 1]

Every configuration runs in a fresh subprocess (numba's on-disk cache makes that cheap)
so that its peak resident memory is its own.  Inside it a short warm-up run loads the
compiled kernels, then the timed run is Algorithm 1 as in the paper: population
N(50, 10), run_online with N = 1000 particles, the MH move on every x_k at every t.

"ns/update" is the whole run's wall time divided by the number of x_k updates,
N * n (n - 1) / 2 (so it includes resampling, the Gibbs step, the policy and Python
overhead); "ratio" is the wall time over the 2.5 s target; "cpu s" is the process CPU
time (all threads), which shows when other jobs competed for the cores.

Where the time goes: "sweep s" is the compiled kernel (Algorithm 2 steps 2-4: the MH
move of every x_k, the Gibbs move, propagation and weighting; numba's dispatch
included), "resmp s" the systematic resampling, and "python s" the rest of Algorithm 1
in Python (the policy's Thompson draw, the population's release, the checks, the weights'
normalisation and the recorded history).  They are measured by timing each call of the
two compiled functions.  The table is printed and written to
benchmarks/results/smc.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 2.5
HERE = Path(__file__).resolve().parent


def _policy(name, eps):
    from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy

    if name == "fixed":
        return FixedPolicy(50 - 10 * 10**0.5, 50 + 10 * 10**0.5)
    ab = {1: 0.06, 2: 0.12, 5: 0.54, 10: 0.96}[int(eps)]  # Section 6
    return AdaptivePolicy(-ab, ab)


def _time_split():
    """Time every call of the SMC's two compiled functions (module globals that
    SMC.update looks up at each call); returns the dict that accumulates the seconds."""
    import dpbook.smc.paper_kernel as smc

    acc = {"sweep": 0.0, "resample": 0.0}

    def timed(fn, key):
        def call(*args):
            t0 = time.perf_counter()
            fn(*args)
            acc[key] += time.perf_counter() - t0
        return call

    smc.move_propagate_weight = timed(smc.move_propagate_weight, "sweep")
    smc.systematic_keyed = timed(smc.systematic_keyed, "resample")
    return acc


def one(eps, policy, threads, n, n_particles, reps):
    """Run one configuration in this process; return a dict of measurements."""
    import numba

    from dpbook.online import run_online
    from dpbook.privacy.population import normal_population

    numba.set_num_threads(threads)
    split = _time_split()
    # warm-up: load (or compile) the kernels
    run_online(normal_population(20, 50, 10**0.5, eps, seed=1), _policy(policy, eps), 20,
               n_particles=50, seed=2)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times, cpus, splits = [], [], []
    for _ in range(reps):
        pop = normal_population(n, 50, 10**0.5, eps, seed=1)
        split.update(sweep=0.0, resample=0.0)
        t0, c0 = time.perf_counter(), time.process_time()
        run = run_online(pop, _policy(policy, eps), n, n_particles=n_particles, seed=2)
        times.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
        splits.append(dict(split))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    updates = n_particles * n * (n - 1) / 2
    s = min(times)
    sp = splits[times.index(s)]
    h = run.smc.history
    return {"eps": eps, "policy": policy, "threads": threads, "n": n, "N": n_particles,
            "seconds": s, "all_seconds": times, "cpu_seconds": cpus[times.index(s)],
            "sweep_seconds": sp["sweep"], "resample_seconds": sp["resample"],
            "python_seconds": s - sp["sweep"] - sp["resample"],
            "ns_per_update": s / updates * 1e9,
            "ratio_to_target": s / TARGET_S, "peak_MB": peak, "peak_MB_after_warmup": rss0,
            "final_mean_mu": h.mean_mu[-1], "final_mean_sigma": h.mean_sigma[-1],
            "mean_acceptance": sum(h.acceptance[1:]) / max(len(h.acceptance) - 1, 1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--particles", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--eps", type=float, nargs="*", default=[1.0, 10.0])
    ap.add_argument("--policies", nargs="*", default=["fixed", "adaptive"])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--one", nargs=3, metavar=("EPS", "POLICY", "THREADS"), help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(HERE / "results" / "smc.json"))
    a = ap.parse_args(argv)
    if a.one:
        res = one(float(a.one[0]), a.one[1], int(a.one[2]), a.n, a.particles, a.reps)
        print(json.dumps(res))
        return 0
    rows = []
    hdr = (f"{'eps':>4} {'policy':>8} {'thr':>3} {'s/run':>7} {'cpu s':>7} {'ns/upd':>7} "
           f"{'ratio':>6} {'sweep s':>7} {'resmp s':>7} {'python s':>8} {'peak MB':>8} "
           f"{'acc':>5} {'mean mu':>8} {'mean sig':>8}")
    print(hdr)
    print("-" * len(hdr))
    for eps in a.eps:
        for pol in a.policies:
            for th in a.threads:
                cmd = [sys.executable, __file__, "--one", str(eps), pol, str(th), "--n",
                       str(a.n), "--particles", str(a.particles), "--reps", str(a.reps)]
                out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                rows.append(r)
                print(f"{eps:>4g} {pol:>8} {th:>3} {r['seconds']:>7.3f} {r['cpu_seconds']:>7.2f} "
                      f"{r['ns_per_update']:>7.2f} {r['ratio_to_target']:>6.2f} "
                      f"{r['sweep_seconds']:>7.3f} {r['resample_seconds']:>7.3f} "
                      f"{r['python_seconds']:>8.3f} {r['peak_MB']:>8.1f} "
                      f"{r['mean_acceptance']:>5.3f} "
                      f"{r['final_mean_mu']:>8.3f} {r['final_mean_sigma']:>8.3f}", flush=True)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    import numba

    meta = {"target_seconds": TARGET_S, "python": platform.python_version(),
            "numba": numba.__version__, "machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count()}
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
