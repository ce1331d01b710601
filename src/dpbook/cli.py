"""The ``dpbook`` command line.

Sub-commands: ``fisher``, ``best-interval``, ``posterior``, ``experiment``.
Bad input gives one line ``dpbook: error: <what is wrong>`` and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, no usage dump
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _finite_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return v


def _any_float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _print(result: dict, as_json: bool, lines):
    if as_json:
        print(json.dumps(result))
    else:
        print("\n".join(lines))


def cmd_fisher(args):
    from .fisher import fisher_information
    from .validation import check_count, check_eps, check_interval

    check_eps(args.eps)
    check_interval(args.a, args.b, name="interval [a, b]")
    check_count("M", args.M)
    check_count("K", args.K)
    rng = np.random.default_rng(args.seed)
    est = fisher_information(args.a, args.b, args.eps, 0.0, 1.0, method=args.method,
                             M=args.M, K=args.K, rng=rng)
    F = np.asarray(getattr(est, "F", est), dtype=float)
    se = getattr(est, "se", None)
    out = {"F": F.tolist(), "eps": args.eps, "a": args.a, "b": args.b, "method": args.method,
           "theta": [0.0, 1.0]}
    if se is not None:
        out["se"] = np.asarray(se, dtype=float).tolist()
    lines = [f"Fisher information of Y = clip(X, {args.a}, {args.b}) + noise, X ~ N(0, 1), "
             f"eps = {args.eps} ({args.method})",
             f"  F_mumu    = {F[0, 0]:.6g}   F_musigma    = {F[0, 1]:.6g}",
             f"  F_sigmamu = {F[1, 0]:.6g}   F_sigmasigma = {F[1, 1]:.6g}"]
    _print(out, args.json, lines)


def cmd_best_interval(args):
    from .fisher import best_interval
    from .validation import check_count, check_eps, check_interval

    check_eps(args.eps)
    check_interval(*args.lims, name="--lims")
    check_count("grid", args.grid, 2)
    lo, hi = args.lims
    res = best_interval(args.eps, method=args.method, grid=args.grid, lims=(lo, hi),
                        score=args.score, M=args.M, K=args.K, seed=args.seed)
    out = {k: (None if v is None else float(v)) for k, v in res.items()}
    out.update(eps=args.eps, method=args.method, score_name=args.score)
    lines = [f"best interval for eps = {args.eps} ({args.method}, score {args.score}, "
             f"{args.grid} x {args.grid} grid on [{lo}, {hi}]):",
             f"  [a*, b*] = [{out['a']:.4g}, {out['b']:.4g}]   score = {out['score']:.6g}"]
    _print(out, args.json, lines)


def read_releases(path):
    """Read DATA.csv with header y,l,r (one release per row, time order)."""
    import pandas as pd

    try:
        df = pd.read_csv(path)
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty") from None
    except pd.errors.ParserError as e:
        raise ValueError(f"{path} is not a valid CSV file: {str(e).splitlines()[0]}") from None
    missing = [c for c in ("y", "l", "r") if c not in df.columns]
    if missing:
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)} (header must be y,l,r)")
    if len(df) == 0:
        raise ValueError(f"{path} has no data rows")
    cols = {}
    for c in ("y", "l", "r"):
        vals = pd.to_numeric(df[c], errors="coerce")
        bad = vals.isna() & df[c].notna() | df[c].isna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise ValueError(f"{path}, line {row}: column {c} holds a non-number "
                             f"{df[c].iloc[row - 2]!r}")
        cols[c] = vals.to_numpy(dtype=float)
    from .validation import check_observations

    return check_observations(cols["y"], cols["l"], cols["r"])


def cmd_posterior(args):
    from .validation import check_eps

    check_eps(args.eps)
    y, l, r = read_releases(args.data)
    t0 = time.perf_counter()
    if args.method == "smc":
        from .smc import smc_posterior

        s = smc_posterior(y, l, r, args.eps, n_particles=args.particles, seed=args.seed).summary()
    elif args.method == "mhaar":
        from .mhaar import mhaar

        s = mhaar(y, l, r, args.eps, n_iter=args.iters, seed=args.seed).summary()
    else:
        from .exact import exact_posterior

        s = exact_posterior(y, l, r, args.eps).summary()
    out = {"mu": {k: float(v) for k, v in s["mu"].items()},
           "sigma": {k: float(v) for k, v in s["sigma"].items()},
           "seconds": time.perf_counter() - t0, "method": args.method, "n": int(len(y)),
           "eps": args.eps}
    lines = [f"posterior ({args.method}, n = {len(y)}, eps = {args.eps}):",
             f"  mu    = {out['mu']['mean']:.4f} (sd {out['mu']['sd']:.4f})",
             f"  sigma = {out['sigma']['mean']:.4f} (sd {out['sigma']['sd']:.4f})",
             f"  {out['seconds']:.2f} s"]
    _print(out, args.json, lines)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dpbook", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    f = sub.add_parser("fisher", help="Fisher information at theta = (0, 1) for [a, b]")
    f.add_argument("--eps", type=_any_float, required=True)
    f.add_argument("--a", type=_finite_float, required=True)
    f.add_argument("--b", type=_finite_float, required=True)
    f.add_argument("--method", choices=("exact", "mc"), default="exact")
    f.add_argument("--M", type=int, default=1000)
    f.add_argument("--K", type=int, default=10000)
    f.add_argument("--seed", type=int, default=0)
    f.add_argument("--json", action="store_true")
    f.set_defaults(func=cmd_fisher)

    b = sub.add_parser("best-interval", help="grid search of eq. (13) for (a*, b*)")
    b.add_argument("--eps", type=_any_float, required=True)
    b.add_argument("--method", choices=("exact", "mc"), default="exact")
    b.add_argument("--grid", type=int, default=50)
    b.add_argument("--lims", type=_finite_float, nargs=2, default=(-3.0, 3.0))
    b.add_argument("--score", choices=("mu", "trace"), default="mu")
    b.add_argument("--M", type=int, default=1000)
    b.add_argument("--K", type=int, default=10000)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.set_defaults(func=cmd_best_interval)

    q = sub.add_parser("posterior", help="posterior of (mu, sigma) from released data")
    q.add_argument("--method", choices=("smc", "mhaar", "exact"), required=True)
    q.add_argument("--eps", type=_any_float, required=True)
    q.add_argument("--particles", type=int, default=1000)
    q.add_argument("--iters", type=int, default=100_000)
    q.add_argument("--seed", type=int, default=0)
    q.add_argument("--json", action="store_true")
    q.add_argument("data", help="CSV file with header y,l,r")
    q.set_defaults(func=cmd_posterior)

    try:
        from .experiment import add_experiment_parser
    except ImportError:  # pragma: no cover - during development only
        pass
    else:
        add_experiment_parser(sub)
    return p


def main(argv=None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        args.func(args)
    except (_UsageError, ValueError) as e:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        print(f"dpbook: error: {msg}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
