"""``dpbook stream``: Algorithm 1 over a column of sensitive values."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from dpbook.cli.args import (
    JSON_HELP,
    UsageError,
    add_missing_argument,
    finite_float,
    integer,
    print_result,
    seed,
)
from dpbook.cli.args import eps as eps_arg
from dpbook.cli.family import (
    add_family_arguments,
    add_prior_arguments,
    family_from_args,
    prior_from_args,
)
from dpbook.cli.posterior import check_subset
from dpbook.cli.summary import (
    posterior_result,
    record,
    result_lines,
    stderr_is_terminal,
    warn_conflict,
)
from dpbook.online.methods import METHODS, get_method


def add_parser(subparsers):
    p = subparsers.add_parser(
        "stream", help="Algorithm 1 over a file of sensitive values: release each one "
                       "through an interval and update the posterior",
        description="Run Algorithm 1 over a column of a CSV file of sensitive values: "
                    "each value, in file order (or --shuffle), is clipped to the interval "
                    "the policy asks for and released with noise of scale (r - l)/eps; "
                    "the online posterior absorbs the release.  The prior must be stated "
                    "before any value is read (--range, or an explicit prior).  Prints the "
                    "final posterior; --released writes the releases (y, l, r), which "
                    "`dpbook posterior` reads back.  On a terminal, a run longer than 2 s "
                    "shows its progress on stderr (never when stderr is not a terminal).")
    p.add_argument("values", help="CSV file with a header")
    p.add_argument("--column", required=True, help="the column of sensitive values")
    p.add_argument("--eps", type=eps_arg, required=True, help="privacy parameter")
    add_family_arguments(p)
    p.add_argument("--method", choices=METHODS, default="smc-marginal",
                   help="online posterior: the latent SMC of Algorithms 2-3 (O(n^2 N)), "
                        "the same moving M latent values per step (smc-subset, with "
                        "--subset M), the marginal SMC on theta (default: O(n log n) for "
                        "long streams) or the online gradient estimate (a point estimate)")
    p.add_argument("--policy", choices=("adaptive",), default=None,
                   help="adaptive: Thompson sampling and eq. (13) (the default unless "
                        "--interval is given)")
    p.add_argument("--interval", type=finite_float, nargs=2, default=None,
                   metavar=("L", "R"), help="a fixed interval [L, R] for everyone")
    add_prior_arguments(p)
    p.add_argument("--particles", type=integer, default=None,
                   help="particles of the SMC methods (default 1000)")
    p.add_argument("--subset", type=integer, default=None, metavar="M",
                   help="smc-subset: latent values moved per step")
    p.add_argument("--shuffle", action="store_true",
                   help="release the values in a random order (from --seed)")
    p.add_argument("--batch", type=integer, default=1, metavar="B",
                   help="individuals per published interval: the curator updates its "
                        "posterior with a batch's B releases before publishing the next "
                        "interval (default 1: Algorithm 1 as written)")
    p.add_argument("--seed", type=seed, default=0,
                   help="seed of the order (--shuffle), the privacy noise and the "
                        "algorithm (default 0)")
    p.add_argument("--released", default=None, metavar="OUT.csv",
                   help="write the releases (y, l, r) here, in release order")
    p.add_argument("--deploy", action="store_true",
                   help="draw the privacy noise with OpenDP's floating-point-safe sampler "
                        "from the operating system's entropy, for releases to publish "
                        "(not reproducible: --seed then fixes only the order and the "
                        "algorithm); without it the noise is numpy's seeded sampler, for "
                        "simulation only")
    add_missing_argument(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help=JSON_HELP)
    p.set_defaults(func=cmd_stream)
    return p


def cmd_stream(args):
    from dpbook.data import read_csv_columns
    from dpbook.online.streams import run_stream
    from dpbook.validation import MAX_ABS, output_file

    t0 = time.perf_counter()
    family, mechanism = family_from_args(args)
    if args.policy is not None and args.interval is not None:
        raise UsageError("give --policy adaptive or --interval L R, not both")
    check_subset(args)
    if args.particles is not None and not get_method(args.method).particles:
        raise UsageError(f"--particles does not apply to --method {args.method} (it "
                         f"has no particles)")
    if args.released is not None and not args.released.strip():
        raise UsageError("--released needs a file name")
    if args.released is not None:
        output_file(args.released, [args.values])
    # the prior is fixed here, from what the user states, before any value is read
    family = prior_from_args(family, args, unstated="refuse")
    cols, skipped = read_csv_columns(args.values, (args.column,), missing=args.missing)
    values = cols[args.column]
    bad = ~(np.abs(values) <= MAX_ABS)  # inf, or beyond the supported range
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{args.values}: value {i + 1} of column {args.column} is "
                         f"{float(values[i])!r}, outside the supported range [-{MAX_ABS:g}, "
                         f"{MAX_ABS:g}] (rescale the data)")
    policy = "adaptive" if args.interval is None else tuple(args.interval)
    run, res = run_stream(values, args.eps, method=args.method, policy=policy,
                          family=family, mechanism=mechanism,
                          n_particles=1000 if args.particles is None else args.particles,
                          subset=args.subset, seed=args.seed, shuffle=args.shuffle,
                          deploy=args.deploy, batch=args.batch,
                          progress=not args.no_progress and stderr_is_terminal())
    point = get_method(args.method).point_estimate
    out = record(family, mechanism, res["eps"], res["n"], args.method, args.seed,
                 skipped=skipped, policy=res["policy"], batch=res["batch"],
                 noise=res["noise"], **{k: res[k] for k in ("interval",) if k in res},
                 **posterior_result(run.smc, family))
    if args.released is not None:
        from dpbook.experiment.store import atomic_write_bytes

        text = "y,l,r\n" + "".join(f"{a!r},{b!r},{c!r}\n" for a, b, c in
                                    zip(run.y.tolist(), run.l.tolist(), run.r.tolist()))
        atomic_write_bytes(Path(args.released), lambda f: f.write(text.encode()))
        out["released"] = args.released
    out["seconds"] = time.perf_counter() - t0
    lines = [f"{'estimate' if point else 'posterior'} ({args.method}, {res['policy']} "
             f"interval, n = {res['n']}, eps = {args.eps}):"]
    lines += result_lines(out)
    if skipped:
        lines.append(f"  {skipped} row{'s' * (skipped != 1)} with an empty cell skipped")
    if args.released is not None:
        lines.append(f"  releases written to {args.released}")
    lines.append(f"  {out['seconds']:.2f} s")
    print_result(out, args.json, lines)
    sys.stdout.flush()
    warn_conflict(family, mechanism, run.y, run.l, run.r, args.eps,
                  None if point else {p: s["median"] for p, s in out["posterior"].items()})
