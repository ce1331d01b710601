"""MHAAR against the exact posterior of the same releases, replication by replication
(issue 24, item 7): chapter 8's narrow-prior study, MHAAR at eps = 1.

Usage:  NUMBA_NUM_THREADS=1 python benchmarks/mhaar_vs_exact.py [--reps 100] [--n 200]
            [--eps 1] [--iters 10000 100000] [--seed 0] [--prior-loc 0 1]
            [--interval -8 8] [--out benchmarks/results/mhaar_vs_exact.json]
            [--generic-iters 10000 ...] [--walks default var log_var]

Replication ``rep`` is chapter 8's (``dpbook.calibration.replicate('mhaar', ...)``
with the store's seed ``replication_seed(seed, eps, n, rep)``): theta from the prior,
the releases through the fixed interval, the sampler's seed.  On the SAME releases it
computes

* the exact grid posterior (``exact_posterior``, grid (61, 61), tol 1e-3, as the
  study's ``exact`` method): its PIT of the truth and its quantiles;
* MHAAR with each number of iterations in ``--iters`` (the compiled backend, as the
  study runs it; ``--walks`` runs it with each ``walk`` setting, ``default`` being the
  sampler's own choice for the prior, ``var`` the paper's (mu, sigma^2) walk;
  ``--generic-iters`` also runs the generic numpy sampler, which moves (mu, log sigma)),
  with the study's sampler seed: its PIT, its quantiles (5/25/50/75/95%), the exact
  posterior's cdf at those quantiles (the per-replication discrepancy: 0.05, 0.25, ...
  for a perfect chain), the acceptance rate, the effective sample size of sigma over
  the kept samples (``dpbook.mhaar.effective_sample_size``, Geyer's initial monotone
  sequence), the kept samples' share above the prior's 95% point of sigma against the
  exact posterior's, and the largest sigma of the kept chain.

The coverage of the central 90% interval of sigma (|PIT - 1/2| <= 0.45) is reported per
method with its binomial standard error sqrt(p (1 - p) / R), and the paired difference
of MHAAR's and the exact posterior's coverage with its standard error.  Everything is
printed and written as JSON (one record per replication, plus the summary).
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import numpy as np

from dpbook.calibration import replication_seed, sample_cdf, study_family
from dpbook.calibration.replication import draw_theta
from dpbook.mhaar import effective_sample_size as ess
from dpbook.mhaar import mhaar
from dpbook.posterior import exact_posterior
from dpbook.privacy.population import family_population

HERE = Path(__file__).resolve().parent
LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)


def releases(rep, args, fam):
    """theta, (y, l, r) and the sampler's seed of replication ``rep`` (as replicate())."""
    ss = replication_seed(args.seed, args.eps, args.n, rep)
    theta_seed, data_seed, algo_seed = ss.spawn(3)
    mu, sigma = (float(v) for v in draw_theta(np.random.default_rng(theta_seed),
                                              prior=fam.prior))
    population = family_population(fam, (mu, sigma), args.n, args.eps, seed=data_seed)
    l, r = args.interval
    y = np.array([population.release(l, r) for _ in range(len(population))])
    return (mu, sigma), y, algo_seed


def chain_record(res, truth, post, sig95):
    kept = res.kept()
    q = np.quantile(kept, LEVELS, axis=0)  # (5, 2)
    return {
        "pit": [sample_cdf(kept[:, j], v) for j, v in enumerate(truth)],
        "q_sigma": q[:, 1].tolist(), "q_mu": q[:, 0].tolist(),
        # the exact posterior's cdf at MHAAR's quantiles of sigma and mu
        "F_exact_at_q_sigma": [float(post.cdf((truth[0], s))[1]) for s in q[:, 1]],
        "F_exact_at_q_mu": [float(post.cdf((m, truth[1]))[0]) for m in q[:, 0]],
        "acceptance": res.acceptance, "acceptance_kept": res.acceptance_kept,
        "ess_sigma": ess(kept[:, 1]), "ess_mu": ess(kept[:, 0]), "n_kept": res.n_kept,
        "tail_share": float(np.mean(kept[:, 1] > sig95)),
        "max_sigma": float(kept[:, 1].max()),
        "final_steps": res.final_steps.tolist(), "step_coords": list(res.step_coords),
        "seconds": res.seconds,
    }


def coverage(pits, level=0.90):
    inside = np.abs(np.asarray(pits) - 0.5) <= level / 2
    p = float(inside.mean())
    return p, math.sqrt(p * (1 - p) / inside.size), inside


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--first", type=int, default=0, help="first replication")
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--iters", type=int, nargs="*", default=[10_000, 100_000])
    ap.add_argument("--generic-iters", type=int, nargs="*", default=[])
    ap.add_argument("--walks", nargs="*", default=["default"],
                    choices=["default", "var", "log_var"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--prior-loc", type=float, nargs=2, default=[0.0, 1.0])
    ap.add_argument("--interval", type=float, nargs=2, default=[-8.0, 8.0])
    ap.add_argument("--out", default=str(HERE / "results" / "mhaar_vs_exact.json"))
    args = ap.parse_args(argv)
    fam = study_family("normal", dict(loc_mean=args.prior_loc[0], loc_var=args.prior_loc[1]))
    pr = fam.prior
    sig95 = math.sqrt(pr.scale2_scale / float(np.quantile(  # prior 95% point of sigma
        np.random.default_rng(0).gamma(pr.scale2_shape, 1.0, 10**6), 0.05)))
    runs = [("compiled" if w == "default" else f"compiled_{w}", it) for w in args.walks
            for it in args.iters] + [("generic", it) for it in args.generic_iters]
    records = []
    t0 = time.time()
    for rep in range(args.first, args.first + args.reps):
        truth, y, algo_seed = releases(rep, args, fam)
        post = exact_posterior(y, *args.interval, args.eps, family=fam, grid=(61, 61),
                               tol=1e-3)
        qe = post.quantile(LEVELS)
        mass_tail = 1.0 - float(post.cdf((truth[0], sig95))[1])
        rec = {"rep": rep, "mu": truth[0], "sigma": truth[1],
               "exact": {"pit": post.cdf(truth).tolist(), "q_sigma": qe[:, 1].tolist(),
                         "q_mu": qe[:, 0].tolist(), "tail_share": mass_tail}}
        for kind, it in runs:
            kw = dict(walk=kind[len("compiled_"):]) if kind.startswith("compiled_") else {}
            res = mhaar(y, *args.interval, args.eps, family=fam, n_iter=it, seed=algo_seed,
                        generic=(kind == "generic"), **kw)
            rec[f"{kind}_{it}"] = chain_record(res, truth, post, sig95)
        records.append(rec)
        print(f"rep {rep:3d} sigma {truth[1]:6.3f}  exact PIT {rec['exact']['pit'][1]:.3f}  "
              + "  ".join(f"{k}_{it}: PIT {rec[f'{k}_{it}']['pit'][1]:.3f} "
                          f"F(q05,q95) {rec[f'{k}_{it}']['F_exact_at_q_sigma'][0]:.3f},"
                          f"{rec[f'{k}_{it}']['F_exact_at_q_sigma'][-1]:.3f} "
                          f"ESS {rec[f'{k}_{it}']['ess_sigma']:.0f}"
                          for k, it in runs)
              + f"  [{time.time() - t0:.0f} s]", flush=True)
    summary = summarize(records, runs)
    print(json.dumps(summary, indent=1))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "sigma_prior_95": sig95,
                               "summary": summary, "records": records}, indent=1))
    print(f"written {out}")


def summarize(records, runs):
    s = {}
    cov_e, se_e, in_e = coverage([r["exact"]["pit"][1] for r in records])
    s["exact"] = {"coverage90_sigma": cov_e, "se": se_e,
                  "coverage90_mu": coverage([r["exact"]["pit"][0] for r in records])[0],
                  "tail_share_mean": float(np.mean([r["exact"]["tail_share"]
                                                    for r in records]))}
    for kind, it in runs:
        key = f"{kind}_{it}"
        rs = [r[key] for r in records]
        cov, se, inside = coverage([x["pit"][1] for x in rs])
        d = inside.astype(float) - in_e.astype(float)  # paired difference to exact
        F = np.array([x["F_exact_at_q_sigma"] for x in rs])  # (R, 5)
        s[key] = {
            "coverage90_sigma": cov, "se": se,
            "coverage90_mu": coverage([x["pit"][0] for x in rs])[0],
            "paired_diff_vs_exact": float(d.mean()),
            "paired_diff_se": float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0,
            "F_exact_at_q_sigma_median": np.median(F, axis=0).tolist(),
            "F_exact_at_q_sigma_mean": F.mean(axis=0).tolist(),
            "F_exact_at_q_sigma_p10": np.quantile(F, 0.1, axis=0).tolist(),
            "F_exact_at_q_sigma_p90": np.quantile(F, 0.9, axis=0).tolist(),
            "max_abs_dev_q05_q95_median": float(np.median(
                np.maximum(np.abs(F[:, 0] - 0.05), np.abs(F[:, -1] - 0.95)))),
            "acceptance_median": float(np.median([x["acceptance"] for x in rs])),
            "ess_sigma_median": float(np.median([x["ess_sigma"] for x in rs])),
            "ess_sigma_p10": float(np.quantile([x["ess_sigma"] for x in rs], 0.1)),
            "ess_mu_median": float(np.median([x["ess_mu"] for x in rs])),
            "tail_share_mean": float(np.mean([x["tail_share"] for x in rs])),
            "max_sigma_median": float(np.median([x["max_sigma"] for x in rs])),
            "seconds_mean": float(np.mean([x["seconds"] for x in rs])),
        }
    return s


if __name__ == "__main__":
    main()
