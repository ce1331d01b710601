"""``dpbook fisher``, ``best-interval`` and ``families``: the Fisher information of one
release (eq. 8-9), the best interval (eq. 13), and the families on offer."""

from __future__ import annotations

import math

import numpy as np

from dpbook.cli.args import (
    JSON_HELP,
    UsageError,
    finite_float,
    integer,
    only_where_used,
    print_result,
    seed,
)
from dpbook.cli.args import eps as eps_arg
from dpbook.cli.family import add_family_arguments, family_from_args

_METHOD_HELP = ("Fisher information by quadrature (exact) or by the paper's Monte Carlo, "
                "eq. (8) with Algorithm 4 (mc) (default exact)")


def is_paper_model(family, mechanism) -> bool:
    """The paper's model (Section 6), which the output describes in the paper's words."""
    return family.name == "normal" and mechanism == "laplace"


def _theta_from_args(args, family):
    """--theta values (checked), or the family's default point for the sub-command."""
    if getattr(args, "theta", None) is not None:
        return family.check_theta(*args.theta)
    return (0.0, 1.0) if family.location_scale else tuple(family.default_theta())


def _mc_options(args):
    """--M, --K and --seed are options of the Monte Carlo method only."""
    mc = args.method == "mc"
    only_where_used(args, f"--method {args.method}", {
        "M": (1000, mc, "--method mc"), "K": (10000, mc, "--method mc"),
        "seed": (0, mc, "--method mc: the exact method draws no random numbers")})
    if mc:
        from dpbook.validation import check_mc_size

        check_mc_size("M", args.M)
        check_mc_size("K", args.K)


def _common(p):
    p.add_argument("--eps", type=eps_arg, required=True, help="privacy parameter")
    p.add_argument("--method", choices=("exact", "mc"), default="exact", help=_METHOD_HELP)
    add_family_arguments(p)
    p.add_argument("--M", type=integer, default=None,
                   help="mc: releases y per Fisher estimate, eq. (8) (default 1000)")
    p.add_argument("--K", type=integer, default=None,
                   help="mc: samples per gradient, Algorithm 4 (default 10000)")
    p.add_argument("--seed", type=seed, default=None,
                   help="mc: seed of the Monte Carlo (default 0)")
    p.add_argument("--json", action="store_true", help=JSON_HELP)


def add_parsers(sub):
    f = sub.add_parser("fisher", help="Fisher information of one release for [a, b]")
    _common(f)
    f.add_argument("--theta", type=finite_float, nargs="+", action="extend", default=None,
                   help="parameter values (default: (0, 1) for a location-scale family, "
                        "else the family's default)")
    f.add_argument("--a", type=finite_float, required=True, help="lower end of the interval")
    f.add_argument("--b", type=finite_float, required=True, help="upper end of the interval")
    f.set_defaults(func=cmd_fisher)

    b = sub.add_parser("best-interval", help="grid search of eq. (13) for (a*, b*)")
    _common(b)
    b.add_argument("--grid", type=integer, default=50,
                   help="grid points per axis (default 50, Section 6)")
    b.add_argument("--lims", type=finite_float, nargs=2, action="extend", default=None,
                   help="grid range (default -3 3, or the family's range at theta)")
    b.add_argument("--theta", type=finite_float, nargs="+", action="extend", default=None,
                   help="theta at which eq. (9) is solved (families that are not "
                        "location-scale)")
    b.add_argument("--score", choices=("mu", "trace"), default="mu",
                   help="score of the Fisher matrix: its first entry (Section 6) or its "
                        "trace (default mu)")
    b.set_defaults(func=cmd_best_interval)

    fl = sub.add_parser("families", help="list the population families and mechanisms")
    fl.add_argument("--json", action="store_true", help=JSON_HELP)
    fl.set_defaults(func=cmd_families)


def cmd_fisher(args):
    from dpbook.fisher import fisher_information
    from dpbook.validation import check_interval

    family, mechanism = family_from_args(args)
    _mc_options(args)
    check_interval(args.a, args.b, name="interval [a, b]", ends=("a", "b"))
    theta = _theta_from_args(args, family)
    est = fisher_information(args.a, args.b, args.eps, theta, family, mechanism,
                             method=args.method, M=args.M, K=args.K,
                             rng=np.random.default_rng(args.seed))
    F = np.asarray(getattr(est, "F", est), dtype=float)
    se = getattr(est, "se", None)
    out = {"F": F.tolist(), "eps": args.eps, "a": args.a, "b": args.b, "method": args.method,
           "theta": list(theta), "family": family.name,
           "family_options": {k: getattr(family, k) for k in family.options},
           "params": list(family.params), "mechanism": mechanism}
    if se is not None:
        out["se"] = np.asarray(se, dtype=float).tolist()
    if is_paper_model(family, mechanism) and theta == (0.0, 1.0):
        lines = [f"Fisher information of Y = clip(X, {args.a}, {args.b}) + noise, "
                 f"X ~ N(0, 1), eps = {args.eps} ({args.method})",
                 f"  F_mumu    = {F[0, 0]:.6g}   F_musigma    = {F[0, 1]:.6g}",
                 f"  F_sigmamu = {F[1, 0]:.6g}   F_sigmasigma = {F[1, 1]:.6g}"]
    else:
        th = ", ".join(f"{p}={v:g}" for p, v in zip(family.params, theta))
        w = max(len(p) for p in family.params)
        lines = [f"Fisher information of Y = clip(X, {args.a}, {args.b}) + {mechanism} noise, "
                 f"X ~ {family.describe()} at {th}, eps = {args.eps} ({args.method})",
                 *(f"  F[{p:<{w}}, {q:<{w}}] = {F[i, j]:.6g}"
                   for i, p in enumerate(family.params)
                   for j, q in enumerate(family.params) if j >= i)]
    print_result(out, args.json, lines)


def cmd_best_interval(args):
    from dpbook.fisher import best_interval
    from dpbook.validation import check_count, check_interval

    family, mechanism = family_from_args(args)
    _mc_options(args)
    if args.theta is not None and family.location_scale:
        raise UsageError(f"--theta does not apply to the location-scale family "
                         f"{family.name}: its best interval is computed at theta = (0, 1) "
                         f"and moves with location and scale (--theta is for the "
                         f"families that are not location-scale)")
    check_count("grid", args.grid, 2)
    theta = _theta_from_args(args, family)
    if args.lims is not None:
        if len(args.lims) != 2:
            raise ValueError(f"--lims takes one pair lo hi, got {len(args.lims)} numbers")
        check_interval(*args.lims, name="--lims")
        lims = tuple(args.lims)
    else:
        lims = (-3.0, 3.0) if family.location_scale else family.interval_lims(*theta)
        if not all(math.isfinite(v) for v in lims):
            from dpbook.likelihood.fisher_quadrature import unlocated_message

            raise ValueError(unlocated_message(family, theta))
    lo, hi = lims
    res = best_interval(args.eps, family=family, mechanism=mechanism,
                        theta=None if family.location_scale else theta, method=args.method,
                        grid=args.grid, lims=lims, score=args.score, M=args.M, K=args.K,
                        seed=args.seed)
    a, b = res.get("a", res.get("l")), res.get("b", res.get("r"))
    out = {"a": float(a), "b": float(b), "score": float(res["score"]),
           "se": None if res.get("se") is None else float(res["se"]), "eps": args.eps,
           "method": args.method, "score_name": args.score, "family": family.name,
           "mechanism": mechanism}
    grid = f"{args.grid} x {args.grid} grid on [{lo:g}, {hi:g}]"
    if family.location_scale:
        label = family.params[0] if args.score == "mu" else "trace"
        lines = [f"best interval for eps = {args.eps} ({args.method}, score {label}, {grid}"
                 + ("" if is_paper_model(family, mechanism) else
                    f"; {family.describe()}, {mechanism} mechanism") + "):",
                 f"  [a*, b*] = [{a:.4g}, {b:.4g}]   score = {out['score']:.6g}"]
    else:
        out["theta"] = list(theta)
        th = ", ".join(f"{p}={v:g}" for p, v in zip(family.params, theta))
        lines = [f"best interval for eps = {args.eps} at {th} ({family.describe()}, "
                 f"{mechanism} mechanism, {args.method}, {grid}):",
                 f"  [l*, r*] = [{a:.4g}, {b:.4g}]   score = {out['score']:.6g}"]
    print_result(out, args.json, lines)


def cmd_families(args):
    from dpbook.model.families import available
    from dpbook.model.mechanisms import available_mechanisms

    rows = []
    for name, cls in available().items():
        fam = cls()
        rows.append({"name": name, "params": list(fam.params),
                     "location_scale": bool(fam.location_scale),
                     "discrete": bool(fam.discrete),
                     "options": {k: {"default": d, "help": h}
                                 for k, (_, d, h) in cls.options.items()},
                     "summary": cls.summary})
    lines = ["families (--family NAME, or module:Class / path/to/file.py:Class):"]
    for row in rows:
        opts = "".join(f" --{k} (default {v['default']:g})" for k, v in row["options"].items())
        kind = "location-scale" if row["location_scale"] else "not location-scale"
        lines.append(f"  {row['name']:<10} ({', '.join(row['params'])}; {kind}){opts}")
        lines.append(f"  {'':<10} {row['summary']}")
    mechs = list(available_mechanisms())
    lines.append(f"mechanisms (--mechanism): {', '.join(mechs)} (default laplace); noise "
                 f"scale (r - l)/eps")
    print_result({"families": rows, "mechanisms": mechs}, args.json, lines)
