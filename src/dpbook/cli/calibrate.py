"""``dpbook calibrate``: simulation-based calibration of a posterior (chapter 8)."""

from __future__ import annotations

import time

from dpbook.cli.args import JSON_HELP, finite_float, integer, print_result, seed
from dpbook.cli.args import eps as eps_arg
from dpbook.cli.family import (
    add_family_arguments,
    add_prior_arguments,
    family_from_args,
    prior_hyperparameters,
)
from dpbook.cli.summary import record


def add_parser(subparsers):
    """Add the ``calibrate`` sub-command (simulation-based calibration, chapter 8)."""
    from dpbook.calibration import ALL_METHODS

    p = subparsers.add_parser(
        "calibrate", help="simulation-based calibration of a posterior (resumable)",
        description="Repeat: draw theta from the prior (Section 6's unless --prior-loc or "
                    "--prior-scale2 say otherwise), release n values, compute "
                    "the posterior, record the posterior cdf at the truth (PIT). Prints the "
                    "KS test of the PITs against the uniform and the coverage of central "
                    "50%% and 90%% credible intervals.")
    p.add_argument("--method", choices=ALL_METHODS, required=True,
                   help="posterior to check: the online SMC with the adaptive or the fixed "
                        "interval, MHAAR, the exact grid posterior, the naive one (y taken "
                        "for x), the exact one with the original code's noise scale, or "
                        "the central release's posterior (noise-aware, noise-naive, or with "
                        "a privately chosen interval; chapter 11)")
    p.add_argument("--eps", type=eps_arg, required=True, help="privacy parameter")
    p.add_argument("--n", type=integer, default=200, help="individuals per replication "
                   "(default 200)")
    p.add_argument("--reps", type=integer, default=100, help="replications (default 100)")
    p.add_argument("--particles", type=integer, default=500, help="SMC particles (default 500)")
    p.add_argument("--grid", type=integer, default=61,
                   help="exact posterior grid points per axis (default 61)")
    p.add_argument("--mhaar-iters", type=integer, default=10_000,
                   help="MHAAR iterations, the last 20%% kept (default 10000)")
    p.add_argument("--interval", type=finite_float, nargs=2, default=(-300.0, 300.0),
                   metavar=("L", "R"), help="the fixed interval of every method but "
                   "smc-adaptive (central-private: the public range it chooses its interval "
                   "in); it must not depend on theta (default -300 300)")
    add_family_arguments(p)
    add_prior_arguments(p, with_range=False)
    p.add_argument("--seed", type=seed, default=0, help="root seed (default 0)")
    p.add_argument("--out", default="results/calibration", metavar="DIR",
                   help="store; replications there are reused (default results/calibration)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--workers", type=integer, default=None,
                   help="local worker processes (default: every core)")
    p.add_argument("--family-changed-ok", action="store_true",
                   help="add to a store made with a family file that has changed since "
                        "(its replications then rest on two models)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_calibrate)
    return p


def cmd_calibrate(args):
    from dpbook.calibration import calibration_summary, prior_iqr, run_calibration, study_family
    from dpbook.validation import check_store_path

    t0 = time.perf_counter()
    family, mechanism = family_from_args(args)
    check_store_path(args.out, "--out")
    family = study_family(family, prior_hyperparameters(args) or None)
    df = run_calibration(args.method, args.eps, args.n, args.reps, out=args.out,
                         particles=args.particles, grid=args.grid,
                         mhaar_iters=args.mhaar_iters, interval=tuple(args.interval),
                         seed=args.seed, family=family, mechanism=mechanism,
                         scheduler=args.scheduler, workers=args.workers,
                         progress=not args.no_progress,
                         family_changed_ok=args.family_changed_ok)
    summ = calibration_summary(df, family.params, family.prior)
    iqr0 = prior_iqr(family.prior, family.params)
    keys = ("ks_stat", "ks_p", "coverage50", "coverage50_se", "coverage90",
            "coverage90_se", "dispersion_z", "median_iqr", "learned", "mean_iqr",
            "mean_learned")
    calib = {r["param"]: {**{k: float(r[k]) for k in keys}, "prior_iqr": float(iqr0[r["param"]])}
             for r in summ.to_dict("records")}
    result = record(family, mechanism, float(args.eps), args.n, args.method, args.seed,
                    reps=int(len(df)), calibration=calib,
                    seconds=time.perf_counter() - t0, out=str(args.out))
    lines = [f"{args.method}, eps {args.eps:g}, n {args.n}: {len(df)} replications",
             f"{'param':<6} {'KS':>6} {'KS p':>8} {'cover50':>14} {'cover90':>14} "
             f"{'disp z':>7} {'median IQR':>11} {'mean IQR/prior':>15}"]
    for p in family.params:
        r = calib[p]
        lines.append(f"{p:<6} {r['ks_stat']:>6.3f} {r['ks_p']:>8.3g} "
                     f"{r['coverage50']:>6.3f} +- {r['coverage50_se']:.3f} "
                     f"{r['coverage90']:>6.3f} +- {r['coverage90_se']:.3f} "
                     f"{r['dispersion_z']:>7.2f} {r['median_iqr']:>11.4g} "
                     f"{r['mean_learned']:>15.3g}")
    lines.append(f"store: {args.out}")
    print_result(result, args.json, lines)
    return result

