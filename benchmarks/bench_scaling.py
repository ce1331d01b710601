"""Cost against n of the online posteriors for long streams (issue #16, chapter 9).

One adaptive run (Algorithm 1 with Thompson sampling and the eq. 13 interval) of the
paper's model, normal N(50, 10) with the Laplace mechanism, eps = 5, N particles, for
each n and method: the latent SMC of Algorithms 2-3 (``smc``), the same moving only
``--subset M`` latent values per step (``smc-subset``) and the marginal SMC on theta
(``ibis``, :mod:`dpbook.online.ibis`).  Prints a table and writes JSON: wall and CPU
seconds, peak memory of the process, the fitted exponent of time against n, where the
marginal SMC's time goes (reweighting, resampling, moves) and the posterior quartiles.
Each run is in a fresh process so that the peak memory is its own.

    python benchmarks/bench_scaling.py --n 1000 10000 100000 --methods ibis
    python benchmarks/bench_scaling.py --n 1000 3000 --methods smc ibis --out scaling.json
    python benchmarks/bench_scaling.py --n 1000 3000 --methods smc smc-subset --subset 100
    python benchmarks/bench_scaling.py --n 1000 --methods smc ibis --exact
    python benchmarks/bench_scaling.py --n 10000 1000000 --methods ibis --batch 100
    python benchmarks/bench_scaling.py --n 1000000 --methods ibis --fixed --exact
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing as mp
import resource
import time


def one_run(method, n, particles, eps, seed, kernel="rw", moves=5, subset=None,
            delayed=True, exact=False, batch=1, fixed=False):
    import numpy as np

    from dpbook.fisher import best_interval
    from dpbook.online import MarginalSMC, run_online
    from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy
    from dpbook.privacy.population import normal_population

    best = best_interval(eps, method="exact")
    policy = AdaptivePolicy(best["a"], best["b"])
    if fixed:  # Section 6's [mu - 10 sigma, mu + 10 sigma]
        policy = FixedPolicy(50.0 - 10 * 10**0.5, 50.0 + 10 * 10**0.5)
    more = {"batch": batch} if batch > 1 else {}  # (the option is newer than the script)
    # compile (or load from numba's cache) outside the timed region
    warm = normal_population(20, 50.0, 10**0.5, eps, seed=0)
    run_online(warm, policy, 20, n_particles=16, seed=0,
               posterior=MarginalSMC(eps, n_particles=16, seed=0) if method == "ibis" else None)
    pop = normal_population(n, 50.0, 10**0.5, eps, seed=seed)
    post = MarginalSMC(eps, n_particles=particles, seed=seed, kernel=kernel,
                       moves=moves, delayed=delayed) if method == "ibis" else None
    wall, cpu = time.perf_counter(), time.process_time()
    res = run_online(pop, policy, n, n_particles=particles, seed=seed, posterior=post,
                     every=max(n, 1), subset=subset if method == "smc-subset" else None,
                     **more)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    out = {"method": method, "n": n, "batch": batch, "fixed": fixed, "particles": particles,
           "eps": eps, "wall_s": wall,
           "cpu_s": cpu, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "quartiles": np.asarray(res.smc.quantile([0.25, 0.5, 0.75])).tolist()}
    if exact:  # the exact posterior of the same releases, after the clock stopped
        from dpbook.posterior import exact_posterior

        q = exact_posterior(res.y, res.l, res.r, eps, grid=(61, 61)).quantile([0.25, 0.5, 0.75])
        err = (np.asarray(out["quartiles"]) - q) / (q[2] - q[0])
        out.update(exact_quartiles=q.tolist(), max_error_iqr=float(np.abs(err).max()))
    if method == "smc-subset":
        out.update(subset=subset,
                   acceptance=float(np.nanmean(res.smc.history.acceptance[1:])))
    if method == "ibis":
        out.update(kernel=kernel, delayed=delayed, evaluations=post.evaluations,
                   moves_per_resample=moves, timing=post.timing,
                   moves=len(post.history.moves),
                   acceptance=float(np.nanmean(post.history.theta_acceptance)))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, nargs="+", default=[1000, 10000])
    p.add_argument("--methods", nargs="+", choices=("smc", "smc-subset", "ibis"),
                   default=["smc", "ibis"])
    p.add_argument("--subset", type=int, default=100,
                   help="latent values moved per step by smc-subset (default 100)")
    p.add_argument("--particles", type=int, default=1000)
    p.add_argument("--eps", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--kernel", choices=("rw", "independent"), default="rw",
                   help="the marginal SMC's MH proposal (default rw)")
    p.add_argument("--moves", type=int, default=5, help="MH steps per resampling (default 5)")
    p.add_argument("--no-delayed", dest="delayed", action="store_false",
                   help="the marginal SMC's random walk without delayed acceptance")
    p.add_argument("--exact", action="store_true",
                   help="also the exact posterior of each run's releases (minutes at 10^6): the "
                        "largest quartile error in exact interquartile ranges")
    p.add_argument("--batch", type=int, default=1,
                   help="individuals per published interval (default 1: Algorithm 1)")
    p.add_argument("--fixed", action="store_true",
                   help="Section 6's fixed interval [mu - 10 sigma, mu + 10 sigma] instead "
                        "of the adaptive policy")
    p.add_argument("--out", default=None, help="JSON file for the results")
    args = p.parse_args(argv)
    ctx = mp.get_context("spawn")
    rows = []
    for method in args.methods:
        for n in args.n:
            with ctx.Pool(1) as pool:
                row = pool.apply(one_run, (method, n, args.particles, args.eps, args.seed,
                                           args.kernel, args.moves, args.subset,
                                           args.delayed, args.exact, args.batch,
                                           args.fixed))
            rows.append(row)
            extra = ""
            if "timing" in row:
                extra = "  " + ", ".join(f"{k} {v:.1f} s" for k, v in row["timing"].items())
                extra += f", {row['moves']} moves, acceptance {row['acceptance']:.2f}"
            q = row["quartiles"][1]
            print(f"{method:<10} n={n:<7} wall {row['wall_s']:8.1f} s  cpu {row['cpu_s']:8.1f} s"
                  f"  peak {row['peak_mb']:6.0f} MB  median mu {q[0]:.3f} sigma {q[1]:.3f}"
                  + extra + (f", quartiles within {row['max_error_iqr']:.3f} exact IQR"
                             if "max_error_iqr" in row else ""), flush=True)
    for method in args.methods:
        pts = [(r["n"], r["wall_s"]) for r in rows if r["method"] == method]
        if len(pts) > 1:
            (n0, t0), (n1, t1) = pts[0], pts[-1]
            print(f"{method}: time grows as n^{math.log(t1 / t0) / math.log(n1 / n0):.2f} "
                  f"between n = {n0} and {n1}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
