"""A stream's final posterior against the exact posterior of its released file, with the
stream method's Monte Carlo error (issue 25's done-when).

For each online method M (default the marginal SMC and the latent SMC of Algorithms
2-3), ONE stream ``dpbook stream VALUES.csv --column C --eps E --method M --seed S``
(:func:`dpbook.online.streams.run_stream`, the function behind the command) fixes the
releases (y, l, r).  On that released file it computes

* the exact posterior (eq. 5 on a grid, ``dpbook posterior --method exact``) once;
* M again with K algorithm seeds 1..K (``dpbook posterior --method M --seed k``, the
  same Python calls): the method's Monte Carlo spread for these releases;

and reports, per quartile of each parameter, in units of the exact interquartile range,
the gap of the stream's own final posterior from the exact quantile, the mean gap over
the K seeds, their seed-to-seed sd, the standard error of the mean gap (sd / sqrt(K))
and z = mean gap / se.  |z| <= 3 says the method's bias is within its Monte Carlo error;
|stream gap| / sd <= 3 says the stream's own answer is (one run's error is the sd).

Why the released file and not K streams: the adaptive policy sets each interval from
the method's own posterior, so K streams with K algorithm seeds release K different
files, and their spread mixes the Monte Carlo error with the releases' randomness.  The
done-when compares two posteriors of ONE released file; given that file the stream's
final posterior is the method run over it with the stream's posterior seed (bit for bit:
the policy draws from its own generator), so the Monte Carlo error that matters is the
method's spread over algorithm seeds on that file.  (The stream's own run chose the
intervals from its particles, so it is not exactly a draw from that spread; the table
shows where it falls, and with several stream seeds, one released file each, a second
table pools where each stream's own run falls among the re-runs on its file.)

    python benchmarks/stream_vs_exact.py births.csv --column bwght --eps 1 \\
        --prior-loc 3300 250000 --prior-scale2 2 500000 --seed 3 --seeds 15
    python benchmarks/stream_vs_exact.py births.csv --column bwght --eps 1 \\
        --prior-loc 3300 250000 --prior-scale2 2 500000 --methods smc-marginal \\
        --seed 1 2 3 4 5 6 7 --seeds 4
    python benchmarks/stream_vs_exact.py census.csv --column lweekinc --eps 1 \\
        --subsample 1500 --seeds 10 --json
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import numpy as np

from dpbook.data import read_csv_columns
from dpbook.model.families import as_family
from dpbook.online.streams import QUARTILES, quartiles, run_stream
from dpbook.posterior import exact_posterior
from dpbook.validation import seed_sequence

Z_LIMIT = 3.0  # Monte Carlo standard errors


def rerun(method, y, l, r, eps, family, n_particles, seed):
    """The posterior of ``dpbook posterior --method M --seed SEED`` on (y, l, r) (the same
    calls as :func:`dpbook.cli.posterior.cmd_posterior`) and the warnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if method == "smc":
            from dpbook.smc import smc_posterior

            post = smc_posterior(y, l, r, eps, family=family, n_particles=n_particles,
                                 seed=seed)
        elif method == "smc-marginal":
            from dpbook.online.ibis import marginal_posterior

            post = marginal_posterior(y, l, r, eps, family=family, n_particles=n_particles,
                                      seed=seed)
        else:
            raise ValueError(f"method must be smc or smc-marginal, got {method!r}")
    return post, [str(w.message).splitlines()[0] for w in caught]


def iid_sd(exact, n, step=0.01):
    """The sd of each quartile of n independent draws from the exact posterior,
    sqrt(p (1 - p) / n) / f(q_p), with the marginal density f(q_p) from the exact
    quantiles at p -+ ``step``: what a perfect sampler of n points would spread by."""
    out = {}
    for level in QUARTILES:
        lo, hi = np.atleast_2d(exact.quantile([level - step, level + step]))
        for j, p in enumerate(exact.params):
            density = 2 * step / (hi[j] - lo[j])
            out[f"{p}_q{round(100 * level)}"] = math.sqrt(level * (1 - level) / n) / density
    return out


def compare(values, method, args, family, seed):
    """One stream of ``method`` with stream seed ``seed``, the exact posterior of its
    releases and the method's quartiles over ``args.seeds`` algorithm seeds on them: a
    dict with one row per (param, quartile)."""
    t0 = time.process_time()
    run, summary = run_stream(values, args.eps, method=method, family=family,
                              n_particles=args.particles, seed=seed, shuffle=args.shuffle)
    stream_cpu = time.process_time() - t0
    y, l, r = run.y, run.l, run.r
    # the stream's posterior is the method over its releases with this seed (run_stream
    # spawns order, noise, algorithm; the algorithm's first child seeds the posterior)
    stream_seed = seed_sequence(seed).spawn(3)[2].spawn(2)[0]
    again, _ = rerun(method, y, l, r, args.eps, family, args.particles, stream_seed)
    replayed = quartiles(again) == summary["quartiles"]
    t0 = time.process_time()
    exact = exact_posterior(y, l, r, args.eps, family=family)
    exact_cpu = time.process_time() - t0
    ex = quartiles(exact)
    iid = iid_sd(exact, args.particles)
    runs, notes, t0 = [], {}, time.process_time()
    for k in range(1, args.seeds + 1):
        post, caught = rerun(method, y, l, r, args.eps, family, args.particles, k)
        runs.append(quartiles(post))
        for w in caught:
            notes[w] = notes.get(w, 0) + 1
    rerun_cpu = time.process_time() - t0
    rows = []
    for p in family.params:
        iqr = ex[f"{p}_q75"] - ex[f"{p}_q25"]
        for level in QUARTILES:
            key = f"{p}_q{round(100 * level)}"
            gaps = np.array([q[key] - ex[key] for q in runs]) / iqr
            mean, sd = float(gaps.mean()), float(gaps.std(ddof=1))
            se = sd / math.sqrt(gaps.size)
            stream_gap = (summary["quartiles"][key] - ex[key]) / iqr
            rows.append({"param": p, "quartile": f"q{round(100 * level)}",
                         "exact": ex[key], "exact_iqr": iqr, "stream_gap": stream_gap,
                         "mean_gap": mean, "sd": sd, "se": se, "z": mean / se,
                         "iid_sd": iid[key] / iqr,
                         "stream_over_sd": stream_gap / sd,
                         "within": bool(abs(mean) <= Z_LIMIT * se),
                         "stream_within": bool(abs(stream_gap) <= Z_LIMIT * sd)})
    return {"method": method, "n": int(y.size), "eps": args.eps, "stream_seed": seed,
            "particles": args.particles, "seeds": list(range(1, args.seeds + 1)),
            "stream_replayed": replayed, "stream_quartiles": summary["quartiles"],
            "exact_quartiles": ex, "runs": runs, "rows": rows, "warnings": notes,
            "cpu_s": {"stream": stream_cpu, "exact": exact_cpu, "reruns": rerun_cpu}}


def pooled(results):
    """Over several streams of one method (one released file each): does the stream's
    own final posterior fall among the re-runs on its file?  Per (param, quartile), z_f =
    (stream gap - mean re-run gap) / (s sqrt(1 + 1/K_f)) for each file f, with s the
    re-runs' sd pooled over the files (within-file variances weighted by K_f - 1); a draw
    like the re-runs has z ~ N(0, 1).  Returns rows with the pooled sd, the z_f, ``shift``
    = mean z_f sqrt(F) (N(0, 1) without a systematic offset) and ``rms`` = the root mean
    square of the z_f (about 1 when the stream spreads as much as a re-run)."""
    rows = []
    for i, row in enumerate(results[0]["rows"]):
        ks = np.array([len(res["seeds"]) for res in results])
        sds = np.array([res["rows"][i]["sd"] for res in results])
        s = math.sqrt(float(((ks - 1) * sds**2).sum() / (ks - 1).sum()))
        d = np.array([res["rows"][i]["stream_gap"] - res["rows"][i]["mean_gap"]
                      for res in results])
        z = d / (s * np.sqrt(1 + 1 / ks))
        rows.append({"param": row["param"], "quartile": row["quartile"], "pooled_sd": s,
                     "z": z.tolist(), "shift": float(z.mean() * math.sqrt(z.size)),
                     "rms": float(np.sqrt((z**2).mean()))})
    return rows


def pooled_table(method, results, rows) -> str:
    lines = [f"{method}: the stream's own run against the re-runs on its file, over "
             f"{len(results)} streams (seeds "
             f"{', '.join(str(r['stream_seed']) for r in results)}; z per stream; shift = "
             f"mean z sqrt(F), rms = root mean square z, 1 for a draw like a re-run)",
             f"{'param':<6}{'q':<5}{'pooled sd':>10}{'shift':>7}{'rms':>6}  z per stream"]
    for row in rows:
        lines.append(f"{row['param']:<6}{row['quartile']:<5}{row['pooled_sd']:>10.3f}"
                     f"{row['shift']:>7.2f}{row['rms']:>6.2f}  "
                     + " ".join(f"{v:.2f}" for v in row["z"]))
    return "\n".join(lines)


def table(result) -> str:
    head = (f"{result['method']}: n = {result['n']}, eps = {result['eps']}, stream seed "
            f"{result['stream_seed']}, N = {result['particles']}, K = "
            f"{len(result['seeds'])} seeds (gaps in exact IQRs; the stream's posterior "
            f"replayed bit for bit: {result['stream_replayed']}; sd/iid: the seeds' sd over "
            f"that of the quartile of N independent draws)")
    cols = (f"{'param':<6}{'q':<5}{'exact':>11}{'IQR':>10}{'stream':>8}{'mean':>8}"
            f"{'sd':>7}{'se':>7}{'z':>7}  {'|z|<=3':<7}{'stream/sd':>9}{'sd/iid':>7}")
    lines = [head, cols]
    for row in result["rows"]:
        lines.append(f"{row['param']:<6}{row['quartile']:<5}{row['exact']:>11.4g}"
                     f"{row['exact_iqr']:>10.4g}{row['stream_gap']:>8.3f}"
                     f"{row['mean_gap']:>8.3f}{row['sd']:>7.3f}{row['se']:>7.3f}"
                     f"{row['z']:>7.2f}  {'yes' if row['within'] else 'NO':<7}"
                     f"{row['stream_over_sd']:>9.2f}{row['sd'] / row['iid_sd']:>7.1f}")
    for message, count in result["warnings"].items():
        lines.append(f"  warning in {count} of {len(result['seeds'])} runs: {message}")
    cpu = result["cpu_s"]
    lines.append(f"  CPU: stream {cpu['stream']:.1f} s, exact {cpu['exact']:.1f} s, "
                 f"{len(result['seeds'])} re-runs {cpu['reruns']:.1f} s")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("values", help="CSV file with a header")
    ap.add_argument("--column", required=True)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--methods", nargs="+", choices=("smc-marginal", "smc"),
                    default=["smc-marginal", "smc"])
    ap.add_argument("--prior-loc", type=float, nargs=2, default=None, metavar=("MEAN", "VAR"))
    ap.add_argument("--prior-scale2", type=float, nargs=2, default=None,
                    metavar=("SHAPE", "SCALE"))
    ap.add_argument("--seed", type=int, nargs="+", default=[3],
                    help="the stream's seed (default 3); several: one stream (released "
                         "file) each, and a table of where each stream's own run falls "
                         "among the re-runs on its file")
    ap.add_argument("--seeds", type=int, default=10,
                    help="K: algorithm seeds 1..K on the released file (default 10)")
    ap.add_argument("--particles", type=int, default=1000)
    ap.add_argument("--shuffle", action="store_true", help="stream in a random order")
    ap.add_argument("--subsample", type=int, default=None,
                    help="stream a random n of the values (in file order; seed 0)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of the table")
    ap.add_argument("--out", default=None, help="also write the JSON to this file")
    args = ap.parse_args(argv)
    if args.seeds < 2:
        ap.error("--seeds must be at least 2 (a standard deviation)")
    values = read_csv_columns(args.values, (args.column,))[0][args.column]
    if args.subsample is not None and args.subsample < values.size:
        pick = np.random.default_rng(0).permutation(values.size)[:args.subsample]
        values = values[np.sort(pick)]
    family = as_family(None)
    hyper = {}
    if args.prior_loc is not None:
        hyper.update(loc_mean=args.prior_loc[0], loc_var=args.prior_loc[1])
    if args.prior_scale2 is not None:
        hyper.update(scale2_shape=args.prior_scale2[0], scale2_scale=args.prior_scale2[1])
    if hyper:
        family = family.with_prior(**hyper)
    results = [compare(values, m, args, family, s) for m in args.methods for s in args.seed]
    by_method = {m: [r for r in results if r["method"] == m] for m in args.methods}
    pools = {m: pooled(rs) for m, rs in by_method.items() if len(rs) > 1}
    record = json.dumps({"values": args.values, "column": args.column, "prior": hyper,
                         "subsample": args.subsample, "shuffle": args.shuffle,
                         "results": results, "pooled": pools}, indent=1)
    if args.out is not None:
        Path(args.out).write_text(record + "\n")
    if args.json:
        print(record)
    else:
        print("\n\n".join([table(r) for r in results]
                           + [pooled_table(m, by_method[m], rows) for m, rows in pools.items()]))
    return results


if __name__ == "__main__":
    main()
