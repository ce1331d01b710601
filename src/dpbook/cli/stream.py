"""``dpbook stream``: Algorithm 1 over a column of sensitive values, or over rows of a few
columns released through a box (``--columns``, the multivariate normal of issue 54)."""

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
    prior_hyperparameters,
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

# seconds per particle and squared row of --columns' latent SMC: n = 500 rows at N = 1000
# took 9.7 s (2 cores, 2026-12-07), n = 1000 took 29 s
LATENT_SECONDS = 3.5e-8


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
                    "`dpbook posterior` reads back.  With --columns A,B each row's pair "
                    "is released through a box and the bivariate normal's mu, sigma and "
                    "rho are estimated (the latent SMC).  On a terminal, a run longer than 2 s "
                    "shows its progress on stderr (never when stderr is not a terminal).")
    p.add_argument("values", help="CSV file with a header")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--column", help="the column of sensitive values")
    which.add_argument("--columns", metavar="A,B",
                       help="two (or more) columns, one vector per row, each released "
                            "through a box (clip per component, Laplace noise of scale "
                            "sum_j (r_j - l_j)/eps on each): the multivariate normal's "
                            "mu, sigma and correlations rho by the latent SMC (--method "
                            "smc), with one --range per column for the prior")
    p.add_argument("--eps", type=eps_arg, required=True, help="privacy parameter")
    add_family_arguments(p)
    p.add_argument("--method", choices=METHODS, default=None,
                   help="online posterior: the latent SMC of Algorithms 2-3 (O(n^2 N)), "
                        "the same moving M latent values per step (smc-subset, with "
                        "--subset M), the marginal SMC on theta (default: O(n log n) for "
                        "long streams) or the online gradient estimate (a point estimate); "
                        "with --columns only smc (its default)")
    p.add_argument("--policy", choices=("adaptive",), default=None,
                   help="adaptive: Thompson sampling and eq. (13) (the default unless "
                        "--interval is given)")
    p.add_argument("--interval", type=finite_float, nargs=2, default=None, action="append",
                   metavar=("L", "R"), help="a fixed interval [L, R] for everyone (with "
                   "--columns: one per column, the box's sides)")
    add_prior_arguments(p, per_column=True)
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
                   help="write the releases (y, l, r) here, in release order (with "
                        "--columns: y1,y2,l1,l2,r1,r2, component j of the release and "
                        "its box)")
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
    from dpbook.online.streams import run_stream
    from dpbook.validation import output_file

    t0 = time.perf_counter()
    names = [args.column] if args.columns is None else [c.strip() for c in
                                                         args.columns.split(",")]
    pair = args.columns is not None
    if pair and (len(names) < 2 or len(set(names)) < len(names) or not all(names)):
        raise UsageError(f"--columns takes two or more different column names, A,B, got "
                         f"{args.columns!r}")
    for opt in ("range", "interval"):  # one per column
        given = getattr(args, opt)
        if given is not None and len(given) != len(names):
            raise UsageError(f"give one --{opt} per column: {len(names)} for "
                             f"{', '.join(names)}, got {len(given)}")
    if args.policy is not None and args.interval is not None:
        raise UsageError("give --policy adaptive or --interval L R, not both")
    if pair:
        family, mechanism, policy = _vector_model(args, names)
    else:
        args.method = args.method or "smc-marginal"
        args.range, args.interval = (v and v[0] for v in (args.range, args.interval))
        family, mechanism = family_from_args(args)
        policy = "adaptive" if args.interval is None else tuple(args.interval)
    check_subset(args)
    if args.particles is not None and not get_method(args.method).particles:
        raise UsageError(f"--particles does not apply to --method {args.method} (it "
                         f"has no particles)")
    if args.released is not None and not args.released.strip():
        raise UsageError("--released needs a file name")
    if args.released is not None:
        output_file(args.released, [args.values])
    if not pair:  # the prior is fixed here, from what the user states, before any value is read
        family = prior_from_args(family, args, unstated="refuse")
    values, skipped = _read_values(args.values, names, args.missing)
    particles = 1000 if args.particles is None else args.particles
    minutes = LATENT_SECONDS * particles * len(values) ** 2 / 60
    if pair and minutes > 1:
        print(f"dpbook: note: the latent SMC's time grows as N n^2: {len(values)} rows at "
              f"{particles} particles take about {minutes:.0f} min on a 2-core machine "
              f"(fewer --particles are faster)", file=sys.stderr)
    run, res = run_stream(values, args.eps, method=args.method, policy=policy,
                          family=family, mechanism=mechanism,
                          n_particles=particles,
                          subset=args.subset, seed=args.seed, shuffle=args.shuffle,
                          deploy=args.deploy, batch=args.batch,
                          progress=not args.no_progress and stderr_is_terminal())
    point = get_method(args.method).point_estimate
    out = record(family, mechanism, res["eps"], res["n"], args.method, args.seed,
                 skipped=skipped, policy=res["policy"], batch=res["batch"],
                 noise=res["noise"], **{k: res[k] for k in ("interval",) if k in res},
                 **posterior_result(run.smc, family))
    if pair:
        rho, cov = _medians_matrices(out["posterior"], family)
        out.update(columns=names, rho=rho.tolist(), covariance=cov.tolist())
    if args.released is not None:
        from dpbook.experiment.store import atomic_write_bytes

        d = len(names)
        header = ",".join(f"{v}{j + 1}" if pair else v for v in "ylr" for j in range(d))
        rows = np.column_stack([run.y, run.l, run.r]).tolist()
        text = header + "\n" + "".join(",".join(map(repr, row)) + "\n" for row in rows)
        atomic_write_bytes(Path(args.released), lambda f: f.write(text.encode()))
        out["released"] = args.released
    out["seconds"] = time.perf_counter() - t0
    lines = [f"{'estimate' if point else 'posterior'} ({args.method}, {res['policy']} "
             f"{'box' if pair else 'interval'}, n = {res['n']}, eps = {args.eps}"
             + (f", columns {', '.join(names)}" if pair else "") + "):"]
    lines += result_lines(out)
    if pair:
        lines.append(f"  covariance (of the posterior medians) = {_matrix(cov)}")
    if skipped:
        lines.append(f"  {skipped} row{'s' * (skipped != 1)} with an empty cell skipped")
    if args.released is not None:
        lines.append(f"  releases written to {args.released}")
    lines.append(f"  {out['seconds']:.2f} s")
    print_result(out, args.json, lines)
    sys.stdout.flush()
    if not pair:
        warn_conflict(family, mechanism, run.y, run.l, run.r, args.eps,
                      None if point else {p: s["median"] for p, s in out["posterior"].items()})


def _vector_model(args, names):
    """--columns: the multivariate normal with the prior of the --range's (stated, not
    from the data) and the policy; a one-line UsageError for what does not apply."""
    from dpbook.multivariate.mvnormal import MultivariateNormal, niw_from_ranges

    args.method = args.method or "smc"
    options = any(v is not None for k, v in vars(args).items() if k.startswith("family_opt_"))
    for opt, used in ((f"--method {args.method}", args.method != "smc"),
                      ("--family (or its options)", args.family != "normal" or options),
                      (f"--batch {args.batch}", args.batch != 1),
                      ("--prior", args.prior is not None),
                      ("--prior-loc/--prior-scale2", bool(prior_hyperparameters(args)))):
        if used:
            raise UsageError(f"{opt} does not apply to --columns: it runs the multivariate "
                             f"normal by the latent SMC (--method smc), one release per "
                             f"row, its prior from one --range per column")
    if args.range is None:
        raise UsageError(f"--columns needs one --range LO HI per column ({len(names)}): the "
                         f"plausible ranges, public information (never computed from the "
                         f"data), set the prior")
    try:
        family = MultivariateNormal(len(names), prior=niw_from_ranges(args.range))
    except ValueError as e:
        raise UsageError(f"--range: {e}") from None
    if args.interval is None:
        return family, args.mechanism, "adaptive"
    for name, (lo, hi) in zip(names, args.interval):
        if not lo < hi:
            raise UsageError(f"--interval for column {name}: L must be below R, got "
                             f"[{lo:g}, {hi:g}]")
    return family, args.mechanism, tuple(zip(*args.interval))


def _read_values(path, names, missing):
    """The columns ``names`` of the file (one value per row, or (n, d) rows of vectors)
    and the rows skipped; ValueError for a value beyond the supported range."""
    from dpbook.data import read_csv_columns
    from dpbook.validation import MAX_ABS

    cols, skipped = read_csv_columns(path, names, missing=missing)
    values = np.column_stack([cols[c] for c in names])
    bad = ~(np.abs(values) <= MAX_ABS)  # inf, or beyond the supported range
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise ValueError(f"{path}: value {i + 1} of column {names[j]} is "
                         f"{float(values[i, j])!r}, outside the supported range "
                         f"[-{MAX_ABS:g}, {MAX_ABS:g}] (rescale the data)")
    return (values if len(names) > 1 else values[:, 0]), skipped


def _medians_matrices(posterior, family):
    """The correlation matrix of the posterior medians of the rho_ij and the covariance
    sigma_i sigma_j rho_ij of the medians of the sigma_j (diagonal: the median of
    sigma_j^2, exactly)."""
    d = family.d
    med = [posterior[p]["median"] for p in family.params]
    rho = np.eye(d)
    for k, (i, j) in enumerate(family.pairs):
        rho[i, j] = rho[j, i] = med[2 * d + k]
    sd = np.array(med[d:2 * d])
    return rho, rho * np.outer(sd, sd)


def _matrix(m):
    return "[" + ", ".join("[" + ", ".join(f"{v:.4f}" for v in row) + "]" for row in m) + "]"
