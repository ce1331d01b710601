"""``dpbook experiment``: the Section 6 experiment (resumable store)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dpbook.cli.args import any_float, integer, only_where_used, seed
from dpbook.cli.args import eps as eps_arg
from dpbook.cli.family import add_family_arguments, family_from_args
from dpbook.cli.summary import record
from dpbook.online.methods import TASKS


def add_parser(subparsers):
    """Add the ``experiment`` sub-command to an argparse sub-parsers object."""
    p = subparsers.add_parser(
        "experiment", help="the paper's Section 6 experiment (resumable)",
        description="Run or resume the Section 6 experiment: SMC-adaptive, SMC-fixed and "
                    "MHAAR over eps values and independent runs.")
    from dpbook.experiment import ALL_METHODS, METHODS

    p.add_argument("--eps", type=eps_arg, nargs="+", action="extend", default=None,
                   metavar="E", help="privacy parameters (default 1 2 5 10)")
    p.add_argument("--runs", type=integer, default=30,
                   help="independent runs per method and eps (default 30, Section 6)")
    p.add_argument("--n", type=integer, default=1000,
                   help="individuals per run (default 1000)")
    p.add_argument("--particles", type=integer, default=None,
                   help="SMC particles N (default 1000)")
    p.add_argument("--mhaar-iters", type=integer, default=None,
                   help="MHAAR iterations (default 100000; 20 auxiliary draws each)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated methods (default: the paper's " + ",".join(METHODS)
                        + "; also, for long streams: " + ",".join(ALL_METHODS[len(METHODS):])
                        + ")")
    p.add_argument("--seed", type=seed, default=0,
                   help="root seed; every task's seed is derived from it (default 0)")
    p.add_argument("--out", default="results/paper", metavar="DIR",
                   help="result store; finished tasks there are skipped (default "
                        "results/paper)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--workers", type=integer, default=None,
                   help="local worker processes (default: every core)")
    p.add_argument("--interval-method", choices=("exact", "mc"), default=None,
                   help="Fisher information for the best intervals (eq. 13): exact "
                        "quadrature or the paper's Monte Carlo (default exact)")
    p.add_argument("--theta", type=any_float, nargs="+", action="extend", default=None,
                   metavar="V",
                   help="true parameter values (default: the paper's mu = 50, "
                        "sigma^2 = 10 for the normal, else the family's default)")
    add_family_arguments(p)
    p.add_argument("--keep-particles", type=integer, default=1,
                   help="store particles for the first K runs (default 1)")
    p.add_argument("--subset", type=integer, default=None, metavar="M",
                   help="latent values moved per step by the smc-subset methods (Section "
                        "4's subset rejuvenation; required with them); at a step t <= M "
                        "every latent value is moved, so M >= n is the plain SMC")
    p.add_argument("--original-code", action="store_true",
                   help="release with the authors' code's noise scale, (r - l)/(eps "
                        "sqrt 2), while analysing with (r - l)/eps (reproduction notes, "
                        "item 1; a store of its own)")
    p.add_argument("--batch", type=integer, nargs="+", action="extend", default=None,
                   metavar="B",
                   help="individuals per published interval in the online methods "
                        "(default 1: Algorithm 1 as written); several values make one "
                        "store with a task per batch size (e.g. --batch 1 10 100)")
    p.add_argument("--guard", type=integer, default=None, metavar="W",
                   help="widen smc-adaptive's interval when a block of W releases piles up "
                        "at one end (a guard against lock-in, not the paper's; W >= 10)")
    p.add_argument("--family-changed-ok", action="store_true",
                   help="add to a store made with another version of the --family file "
                        "(refused by default: its results would come from two models)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(func=cmd_experiment)
    return p


def cmd_experiment(args):
    import pandas as pd

    from dpbook.experiment import ALL_METHODS, PAPER, read_manifest, run_experiment, summarize
    from dpbook.validation import check_store_path

    t0 = time.perf_counter()
    family, mechanism = family_from_args(args)
    from dpbook.experiment.config import ADAPTIVE_METHODS

    methods = {m.strip() for m in args.methods.split(",")}
    what = f"--methods {','.join(sorted(methods))}"
    smc = sorted(m for m in ALL_METHODS if m in TASKS and TASKS[m][0].particles)
    only_where_used(args, what, {
        "particles": (1000, bool(methods & set(smc)), "the SMC methods, " + ", ".join(smc)),
        "mhaar_iters": (100_000, "mhaar" in methods, "the mhaar method"),
        "interval_method": ("exact", bool(methods & set(ADAPTIVE_METHODS)),
                            "the adaptive methods' best intervals, eq. (13): "
                            + ", ".join(ADAPTIVE_METHODS)),
        "batch": ([1], bool(methods & set(TASKS)),
                  "the online methods (Algorithm 1), "
                  + ", ".join(m for m in ALL_METHODS if m in TASKS))})
    check_store_path(args.out, "--out")
    if args.theta is None:
        extra = {}
    elif family.name == "normal":  # the paper's configuration keys
        family.check_theta(*args.theta)
        extra = {"mu": args.theta[0], "sigma": args.theta[1]}
    else:
        extra = {"theta": args.theta}
    eps = args.eps if args.eps is not None else list(PAPER["eps"])
    df = run_experiment(family=family, mechanism=mechanism, **extra,
                        eps=eps, runs=args.runs, n=args.n, particles=args.particles,
                        mhaar_iters=args.mhaar_iters, methods=args.methods, seed=args.seed,
                        out=args.out, scheduler=args.scheduler,
                        interval_method=args.interval_method,
                        progress=not args.no_progress, workers=getattr(args, "workers", None),
                        keep_particles=getattr(args, "keep_particles", 1),
                        original_code=args.original_code, batch=args.batch,
                        family_changed_ok=args.family_changed_ok, guard=args.guard,
                        **({} if args.subset is None else {"subset": args.subset}))
    out = Path(args.out)
    summ = summarize(df)
    manifest = read_manifest(out) or {}
    records = summ.to_dict(orient="records")
    for r in records:  # MHAAR's batch (a store of several batch sizes): JSON null
        if "batch" in r:
            r["batch"] = None if pd.isna(r["batch"]) else int(r["batch"])
    result = record(
        family, mechanism, eps, args.n, args.methods, args.seed, summary=records,
        intervals=manifest.get("intervals", {}), tasks=int(len(df)),
        complete=bool(manifest.get("complete")), seconds=time.perf_counter() - t0,
        paths={"out": str(out), "estimates": str(out / "estimates.parquet"),
               "manifest": str(out / "manifest.json"), "tasks": str(out / "tasks")})
    if args.json:
        print(json.dumps(result))
        return result
    batched = "batch" in summ.columns  # a store of several batch sizes: their column
    head = f"{'method':<21}" + (f" {'batch':>6}" if batched else "") + f" {'eps':>6} {'runs':>4}"
    for p in family.params:
        head += f"  {p + ' mean':>10} {'bias':>8} {'rmse':>8}"
    lines = [head + f"  {'s/task':>7}"]
    for r in result["summary"]:
        line = f"{r['method']:<21}"
        if batched:
            line += f" {'-' if r['batch'] is None else r['batch']:>6}"
        line += f" {r['eps']:>6g} {r['runs']:>4}"
        for p in family.params:
            line += f"  {r[p + '_mean']:>10.4f} {r[p + '_bias']:>8.4f} {r[p + '_rmse']:>8.4f}"
        lines.append(line + f"  {r['seconds']:>7.2f}")
    lines.append(f"results: {out / 'estimates.parquet'} (manifest {out / 'manifest.json'})")
    print("\n".join(lines))
    sys.stdout.flush()
    return result

