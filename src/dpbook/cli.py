"""The ``dpbook`` command line.

Sub-commands: ``fisher``, ``best-interval``, ``posterior``, ``experiment``, ``calibrate``,
``families``, ``stream``, ``curator``.
Every computing sub-command takes ``--family NAME`` (with the family's options, such
as ``--df``) and ``--mechanism laplace|gaussian``; the defaults are the paper's normal
family and Laplace mechanism, which use the compiled kernels.
Bad input gives one line ``dpbook: error: <what is wrong>`` and exit status 2.
"""

from __future__ import annotations

import os
import signal
import sys

# A signal that arrives while the command line starts (numpy and the rest are imported
# before main() installs its handlers) is held and answered by main() as any other:
# one line and exit 143 (SIGTERM) or 130 (Ctrl-C).  SIGTERM's default action ended the
# process then without a word, Ctrl-C's was a traceback from inside an import.  Only
# when this module runs the command (``python -m dpbook.cli``, the ``dpbook`` script):
# importing it from Python changes no handler.
_EARLY_SIGNALS: list = []


def _hold_early_signal(signum, frame):
    _EARLY_SIGNALS.append(signum)


if __name__ == "__main__" or os.path.basename(sys.argv[0] if sys.argv else "") == "dpbook":
    try:
        for _s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(_s, _hold_early_signal)
    except ValueError:  # not the main thread
        pass

import argparse  # noqa: E402
import contextlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from dpbook.online.methods import (  # noqa: E402
    METHODS,
    NAMES,
    ONLINE_METHODS,
    TASKS,
    get_method,
)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "-1e308" is a number, not an option (argparse knows only "-1" and "-1.5")
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

    def error(self, message):  # one line, no usage dump
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _ascii(text):
    """Python's float() and int() read the digits of every script ('\u0665' as 5); dpbook
    reads ASCII numerals only, as its CSV reader does (see the README)."""
    if not text.isascii():
        raise argparse.ArgumentTypeError(f"{text!r} is not written with ASCII digits "
                                         f"(dpbook reads ASCII numerals only)")


def _finite_float(text):
    v = _any_float(text)
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return v


def _any_float(text):
    _ascii(text)
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _int(text):
    _ascii(text)
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _seed(text):
    v = _int(text)
    if v < 0:
        raise argparse.ArgumentTypeError(f"a seed must be an integer >= 0, got {text!r}")
    return v


def add_family_arguments(p):
    """--family, the families' options (e.g. --df) and --mechanism on a sub-command."""
    from dpbook.model.families import available
    from dpbook.model.mechanisms import available_mechanisms

    fams = available()
    p.add_argument("--family", default="normal", metavar="NAME",
                   help=f"population family: {', '.join(fams)} (default normal)")
    seen = set()
    for cls in fams.values():
        for opt, (typ, default, text) in cls.options.items():
            if opt not in seen:
                seen.add(opt)
                p.add_argument(f"--{opt.replace('_', '-')}", dest=f"family_opt_{opt}",
                               type=_finite_float if typ is float else
                               _int if typ is int else typ, default=None,
                               help=f"{text} (default {default})")
    p.add_argument("--mechanism", choices=available_mechanisms(), default="laplace",
                   help="privacy mechanism (default laplace)")


def family_from_args(args):
    """The Family object and mechanism name chosen on the command line."""
    from dpbook.model.families import get_family

    opts = {k[len("family_opt_"):]: v for k, v in vars(args).items()
            if k.startswith("family_opt_") and v is not None}
    return get_family(args.family, **opts), args.mechanism


def _is_paper_model(family, mechanism) -> bool:
    """The paper's model (Section 6), which the output describes in the paper's words."""
    return family.name == "normal" and mechanism == "laplace"


def _nonfinite(value, path=""):
    """The first non-finite number in a (nested) result, as 'name', or None."""
    if isinstance(value, dict):
        for k, v in value.items():
            bad = _nonfinite(v, f"{path}.{k}" if path else str(k))
            if bad:
                return bad
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            bad = _nonfinite(v, f"{path}[{i}]")
            if bad:
                return bad
    elif isinstance(value, float) and not math.isfinite(value):
        return path or "a value"
    return None


def _print(result: dict, as_json: bool, lines):
    bad = _nonfinite(result)
    if bad:  # a last safety net: dpbook never prints NaN or inf
        raise ValueError(f"the result {bad} is not finite: this input is outside what "
                         f"dpbook computes reliably (see the supported ranges in the "
                         f"error messages of nearby inputs)")
    if as_json:
        print(json.dumps(result))
    else:
        print("\n".join(lines))


def _theta_from_args(args, family):
    """--theta values (checked), or the family's default point for the sub-command."""
    if getattr(args, "theta", None) is not None:
        return family.check_theta(*args.theta)
    return (0.0, 1.0) if family.location_scale else tuple(family.default_theta())


def _only_where_used(args, what, options):
    """Options that change nothing for this run must not pass without a word: each of
    ``options``, {dest: (default, used, users)}, left unset takes its default; given on
    the command line where ``used`` is False, it is a one-line error naming the option,
    ``what`` it does not apply to (e.g. '--method exact') and ``users``, what it is
    for.  (The parser's defaults are None, so a value given equal to the default counts
    as given.)"""
    for dest, (default, used, users) in options.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
        elif not used:
            raise _UsageError(f"--{dest.replace('_', '-')} does not apply to {what} "
                              f"(it is for {users})")


def _matrix_lines(F, params):
    w = max(len(p) for p in params)
    return [f"  F[{p:<{w}}, {q:<{w}}] = {F[i, j]:.6g}" for i, p in enumerate(params)
            for j, q in enumerate(params) if j >= i]


def _mc_options(args):
    """--M, --K and --seed are options of the Monte Carlo method only."""
    mc = args.method == "mc"
    _only_where_used(args, f"--method {args.method}", {
        "M": (1000, mc, "--method mc"), "K": (10000, mc, "--method mc"),
        "seed": (0, mc, "--method mc: the exact method draws no random numbers")})
    if mc:
        from dpbook.validation import check_mc_size

        check_mc_size("M", args.M)
        check_mc_size("K", args.K)


def cmd_fisher(args):
    from dpbook.validation import check_eps, check_interval

    family, mechanism = family_from_args(args)
    _mc_options(args)
    check_eps(args.eps)
    check_interval(args.a, args.b, name="interval [a, b]", ends=("a", "b"))
    theta = _theta_from_args(args, family)
    rng = np.random.default_rng(args.seed)
    from dpbook.fisher import fisher_information

    est = fisher_information(args.a, args.b, args.eps, theta, family, mechanism,
                             method=args.method, M=args.M, K=args.K, rng=rng)
    F = np.asarray(getattr(est, "F", est), dtype=float)
    se = getattr(est, "se", None)
    out = {"F": F.tolist(), "eps": args.eps, "a": args.a, "b": args.b, "method": args.method,
           "theta": list(theta), "family": family.name, "params": list(family.params),
           "mechanism": mechanism}
    if se is not None:
        out["se"] = np.asarray(se, dtype=float).tolist()
    if _is_paper_model(family, mechanism) and theta == (0.0, 1.0):
        lines = [f"Fisher information of Y = clip(X, {args.a}, {args.b}) + noise, "
                 f"X ~ N(0, 1), eps = {args.eps} ({args.method})",
                 f"  F_mumu    = {F[0, 0]:.6g}   F_musigma    = {F[0, 1]:.6g}",
                 f"  F_sigmamu = {F[1, 0]:.6g}   F_sigmasigma = {F[1, 1]:.6g}"]
    else:
        th = ", ".join(f"{p}={v:g}" for p, v in zip(family.params, theta))
        lines = [f"Fisher information of Y = clip(X, {args.a}, {args.b}) + {mechanism} noise, "
                 f"X ~ {family.describe()} at {th}, eps = {args.eps} ({args.method})",
                 *_matrix_lines(F, family.params)]
    _print(out, args.json, lines)


def cmd_best_interval(args):
    from dpbook.validation import check_count, check_eps, check_interval

    family, mechanism = family_from_args(args)
    _mc_options(args)
    if args.theta is not None and family.location_scale:
        raise _UsageError(f"--theta does not apply to the location-scale family "
                          f"{family.name}: its best interval is computed at theta = (0, 1) "
                          f"and moves with location and scale (--theta is for the "
                          f"families that are not location-scale)")
    check_eps(args.eps)
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
    kw = dict(method=args.method, grid=args.grid, lims=lims, score=args.score, M=args.M,
              K=args.K, seed=args.seed)
    from dpbook.fisher import best_interval

    res = best_interval(args.eps, family=family, mechanism=mechanism,
                        theta=None if family.location_scale else theta, **kw)
    a = res.get("a", res.get("l"))
    b = res.get("b", res.get("r"))
    out = {"a": float(a), "b": float(b), "score": float(res["score"]),
           "se": None if res.get("se") is None else float(res["se"])}
    out.update(eps=args.eps, method=args.method, score_name=args.score, family=family.name,
               mechanism=mechanism)
    if family.location_scale:
        head = (f"best interval for eps = {args.eps} ({args.method}, score "
                f"{_score_label(args.score, family)}, "
                f"{args.grid} x {args.grid} grid on [{lo:g}, {hi:g}]"
                + ("" if _is_paper_model(family, mechanism) else
                   f"; {family.describe()}, {mechanism} mechanism") + "):")
        lines = [head, f"  [a*, b*] = [{a:.4g}, {b:.4g}]   score = {out['score']:.6g}"]
    else:
        out["theta"] = list(theta)
        th = ", ".join(f"{p}={v:g}" for p, v in zip(family.params, theta))
        lines = [f"best interval for eps = {args.eps} at {th} ({family.describe()}, "
                 f"{mechanism} mechanism, {args.method}, {args.grid} x {args.grid} grid on "
                 f"[{lo:g}, {hi:g}]):",
                 f"  [l*, r*] = [{a:.4g}, {b:.4g}]   score = {out['score']:.6g}"]
    _print(out, args.json, lines)


def read_releases(path):
    """Read DATA.csv with header y,l,r (one release per row, time order)."""
    cols = read_csv_columns(path, ("y", "l", "r"), expected="header must be y,l,r")
    from dpbook.validation import check_observations

    return check_observations(cols["y"], cols["l"], cols["r"])


def read_csv_columns(path, columns, expected=None):
    """The named numeric columns of a CSV file with a header, as float arrays: the one
    reader of ``dpbook posterior`` (y, l, r) and ``dpbook stream`` (a column of values).
    ValueError naming the file, and the line and column of a bad cell: a file that is
    not UTF-8 CSV text, a missing column (the message lists the file's columns), a
    column named twice, no data rows, a cell that is not an ASCII number (empty, a
    boolean, other text)."""
    import pandas as pd

    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except FileNotFoundError:
        raise ValueError(f"no such file: {path}") from None
    except IsADirectoryError:
        raise ValueError(f"{path} is a directory, not a CSV file") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ValueError(f"{path} is UTF-16 text; save it as UTF-8 (or ASCII) CSV")
    if b"\x00" in head:
        raise ValueError(f"{path} is a binary file, not a CSV file")
    try:
        df = pd.read_csv(path, encoding="utf-8-sig")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path} is not UTF-8 text (byte 0x{e.object[e.start]:02x} at "
                         f"position {e.start})") from None
    except OSError as e:
        raise ValueError(f"cannot read {path}: {e.strerror or e}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path} is empty") from None
    except pd.errors.ParserError as e:
        raise ValueError(f"{path} is not a valid CSV file: {str(e).splitlines()[0]}") from None
    # the cells as written (pandas would read True as a boolean, 1 in a numeric column,
    # and an empty cell as NaN), and the header's names before pandas renames a
    # repeated one (y, y.1)
    raw = pd.read_csv(path, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    names = pd.read_csv(path, encoding="utf-8-sig", dtype=str, keep_default_na=False,
                        header=None, nrows=1).iloc[0].tolist() if len(raw.columns) else []
    twice = [c for c in columns if names.count(c) > 1]
    if twice:
        raise ValueError(f"{path}: column {twice[0]} appears {names.count(twice[0])} times "
                         f"in the header; which one holds the data is ambiguous")
    missing = [c for c in columns if c not in df.columns]
    if missing:
        there = ", ".join(str(c) for c in names) or "none"
        raise ValueError(f"{path} lacks column(s) {', '.join(missing)} "
                         f"({expected or 'its columns: ' + there})")
    if len(df) == 0:
        raise ValueError(f"{path} has no data rows")
    cols = {}
    for c in columns:
        _check_cells(path, c, raw[c])
        vals = pd.to_numeric(df[c], errors="coerce")
        bad = vals.isna() & df[c].notna() | df[c].isna()
        if bad.any():
            row = int(np.flatnonzero(bad.to_numpy())[0]) + 2
            raise ValueError(f"{path}, line {row}: column {c} holds a non-number "
                             f"{df[c].iloc[row - 2]!r}")
        cols[c] = vals.to_numpy(dtype=float)
    return cols


# an ASCII decimal number as CSV files and most tools write it (or inf: refused later,
# with the supported range); [0-9], as \d would match the digits of every script
_NUMBER = re.compile(r"[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|inf|infinity)",
                     re.IGNORECASE)


def _check_cells(path, column, cells):
    """ValueError naming the line and column of the first cell of ``column`` (strings as
    written in the file) that is not an ASCII number: an empty cell, a boolean, digits of
    another script (Python's float() reads them, pandas and most tools do not: dpbook
    reads ASCII numerals only) or other text."""
    text = cells.str.strip()
    ok = text.str.fullmatch(_NUMBER).to_numpy(dtype=bool)
    if ok.all():
        return
    i = int(np.flatnonzero(~ok)[0])
    cell, where = cells.iloc[i], f"{path}, line {i + 2}: column {column}"
    if not cell.strip():
        raise ValueError(f"{where} is empty")
    if cell.strip().lower() in ("true", "false"):
        raise ValueError(f"{where} holds the boolean {cell!r}, not a number")
    if not cell.isascii():
        raise ValueError(f"{where} holds {cell!r}: dpbook reads numbers written with ASCII "
                         f"digits only")
    raise ValueError(f"{where} holds a non-number {cell!r}")


QUANTILE_LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)
QUANTILE_NAMES = ("q05", "q25", "median", "q75", "q95")


def _score_label(score, family):
    """The score in the family's own parameter names: F[0, 0] is the information about
    the first parameter (mu, loc, lam), the trace sums over all of them."""
    return family.params[0] if score == "mu" else "trace"


def cmd_posterior(args):
    from dpbook.validation import check_count, check_eps

    family, mechanism = family_from_args(args)
    family = prior_from_args(family, args)
    m = args.method
    online = get_method(m) if m in NAMES else None
    smc = tuple(n for n in NAMES if get_method(n).particles)
    _only_where_used(args, f"--method {m}", {
        "particles": (1000, m in smc, "--method " + ", ".join(smc)),
        "iters": (100_000, m == "mhaar", "--method mhaar"),
        "seed": (0, m != "exact" and not (online and online.point_estimate),
                 "the methods that draw random numbers; exact and online-gradient draw "
                 "none")})
    _check_subset(args)
    check_eps(args.eps)
    check_count("particles", args.particles, 2)
    check_count("iters", args.iters)
    y, l, r = read_releases(args.data)
    t0 = time.perf_counter()
    if online is not None and online.latent:
        from dpbook.smc import smc_posterior

        if len(y) > LATENT_NOTE_N:
            print(f"dpbook: note: --method {m} keeps every individual's latent value and "
                  f"copies them at every step, O(n^2 N) work for n = {len(y)} releases and "
                  f"N = {args.particles} particles (10^5 releases: hours); --method "
                  f"smc-marginal computes the same posterior in O(n N) (chapter 9)",
                  file=sys.stderr)
        with _progress(len(y), m) as bar:
            post = smc_posterior(y, l, r, args.eps, family=family, mechanism=mechanism,
                                 n_particles=args.particles, seed=args.seed,
                                 subset=args.subset, progress=bar)
    elif online is not None and online.point_estimate:
        return _online_gradient(args, family, mechanism, y, l, r, t0)
    elif online is not None:
        from dpbook.online.ibis import marginal_posterior

        post = marginal_posterior(y, l, r, args.eps, family=family, mechanism=mechanism,
                                  n_particles=args.particles, seed=args.seed)
    elif args.method == "mhaar":
        from dpbook.mhaar import mhaar

        post = mhaar(y, l, r, args.eps, family=family, mechanism=mechanism,
                     n_iter=args.iters, seed=args.seed)
    else:
        from dpbook.posterior import exact_posterior

        post = exact_posterior(y, l, r, args.eps, family=family, mechanism=mechanism)
    # sd is not a safe summary (the posterior of a scale can have infinite variance
    # under clipping): quantiles too, and the text leads with them
    s, qs = post.summary(), np.atleast_2d(post.quantile(QUANTILE_LEVELS))
    out = {p: {"mean": float(s[p]["mean"]), "sd": float(s[p]["sd"]),
               **{name: float(qs[i, j]) for i, name in enumerate(QUANTILE_NAMES)}}
           for j, p in enumerate(family.params)}
    out.update(seconds=time.perf_counter() - t0, method=args.method, n=int(len(y)),
               eps=args.eps, family=family.name, mechanism=mechanism)
    w = max(len(p) for p in family.params)
    head = f"posterior ({args.method}, n = {len(y)}, eps = {args.eps}"
    if not _is_paper_model(family, mechanism):
        head += f", {family.describe()}, {mechanism} mechanism"
    lines = [head + "):"]
    lines += [f"  {p:<{w}} = {out[p]['median']:.4f} (90% interval [{out[p]['q05']:.4f}, "
              f"{out[p]['q95']:.4f}]; quartiles {out[p]['q25']:.4f}, {out[p]['q75']:.4f}; "
              f"mean {out[p]['mean']:.4f}, sd {out[p]['sd']:.4f})" for p in family.params]
    if args.subset is not None and args.subset >= len(y):
        lines.append(f"  --subset {args.subset} >= n = {len(y)}: every latent value was moved "
                     f"at every step, as --method smc does (the same numbers)")
    lines.append(f"  {out['seconds']:.2f} s")
    _print(out, args.json, lines)


LATENT_NOTE_N = 3000  # releases beyond which the latent SMC's note names smc-marginal
PROGRESS_DELAY = 3.0  # seconds before a posterior run shows its progress


def _stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


class _Progress:
    """The progress of the latent SMC on stderr, shown after PROGRESS_DELAY seconds and
    only on a terminal (never among output that is read, such as --json's; tqdm with
    ``leave=False`` clears its line at the end).  Step t of the latent SMC costs O(t),
    so the bar counts work, sum of t, and its time left is right for the O(n^2) run;
    the text says how many releases are done."""

    def __init__(self, n, method):
        from tqdm import tqdm

        self.n, self.t, self.method = n, 0, method
        self.bar = tqdm(total=n * (n + 1) // 2, delay=PROGRESS_DELAY, leave=False,
                        file=sys.stderr, disable=not _stderr_is_terminal(),
                        desc=f"{method}: 0/{n} releases", dynamic_ncols=True,
                        smoothing=0.1, bar_format="{desc} {percentage:3.0f}%|{bar}| "
                                                  "[{elapsed}<{remaining}]")

    def update(self, k=1):
        for _ in range(k):
            self.t += 1
            self.bar.set_description_str(f"{self.method}: {self.t}/{self.n} releases",
                                         refresh=False)
            self.bar.update(self.t)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.bar.close()


def _progress(n, method):
    return _Progress(n, method)


def _check_subset(args):
    """--subset goes with --method smc-subset, and that method needs it."""
    subset = [mth.name for mth in ONLINE_METHODS.values() if mth.subset]
    if args.subset is not None and args.method not in subset:
        raise _UsageError(f"--subset does not apply to --method {args.method} (it is for "
                          f"--method {', '.join(subset)})")
    if args.method in subset and args.subset is None:
        raise _UsageError(f"--method {args.method} needs --subset M (latent values moved "
                          f"per step)")


def _online_gradient(args, family, mechanism, y, l, r, t0):
    """``dpbook posterior --method online-gradient``: the Section 7 estimate after the
    releases in file order; a point estimate, without a posterior.  The releases are all
    at hand, so it starts where the data are (the family's moment guess): from the
    prior's median, releases clipped at one end of intervals far from it carry no score
    and the estimate would stay at its start (issue 29)."""
    from dpbook.online.gradient import OnlineGradient

    start = family.guess(y, l, r, args.eps, mechanism)
    est = OnlineGradient(args.eps, family=family, mechanism=mechanism, theta0=start)
    for t in range(len(y)):
        est.update(y[t], l[t], r[t])
    warn_if_stalled(est)
    out = {p: {"estimate": float(v)} for p, v in zip(family.params, est.theta)}
    out["start"] = [float(v) for v in start]
    out.update(seconds=time.perf_counter() - t0, method=args.method, n=int(len(y)),
               eps=args.eps, family=family.name, mechanism=mechanism)
    lines = [f"estimate (online-gradient, n = {len(y)}, eps = {args.eps}): "
             + ", ".join(f"{p} = {out[p]['estimate']:.4f}" for p in family.params),
             "  a point estimate: no posterior and no credible interval; started at "
             "the releases' moment guess "
             + ", ".join(f"{p} = {v:.4f}" for p, v in zip(family.params, start)),
             f"  {out['seconds']:.2f} s"]
    _print(out, args.json, lines)


def warn_if_stalled(estimator):
    """A ReliabilityWarning (one line on the command line) when the online gradient
    never left its start: its estimate is then the start, not an answer."""
    if estimator.stalled:
        from dpbook.validation import ReliabilityWarning

        start = ", ".join(f"{v:.4g}" for v in (estimator.u0[0], math.exp(estimator.u0[1])))
        warnings.warn(f"the online gradient never moved from its start ({start}): the "
                      f"releases carried no information at that estimate (all clipped at "
                      f"one end of intervals far from it); its output is the start, not an "
                      f"estimate: use a posterior method (smc-marginal)",
                      ReliabilityWarning, stacklevel=2)


def cmd_families(args):
    from dpbook.model.families import available

    rows = []
    for name, cls in available().items():
        fam = cls()
        rows.append({"name": name, "params": list(fam.params),
                     "location_scale": bool(fam.location_scale),
                     "discrete": bool(fam.discrete),
                     "options": {k: {"default": d, "help": h}
                                 for k, (_, d, h) in cls.options.items()},
                     "summary": cls.summary})
    lines = ["families (--family NAME):"]
    for row in rows:
        opts = "".join(f" --{k} (default {v['default']:g})" for k, v in row["options"].items())
        kind = "location-scale" if row["location_scale"] else "not location-scale"
        lines.append(f"  {row['name']:<10} ({', '.join(row['params'])}; {kind}){opts}")
        lines.append(f"  {'':<10} {row['summary']}")
    from dpbook.model.mechanisms import available_mechanisms

    mechs = list(available_mechanisms())
    lines.append(f"mechanisms (--mechanism): {', '.join(mechs)} (default laplace); noise "
                 f"scale (r - l)/eps")
    _print({"families": rows, "mechanisms": mechs}, args.json, lines)


_METHOD_HELP = ("Fisher information by quadrature (exact) or by the paper's Monte Carlo, "
                "eq. (8) with Algorithm 4 (mc) (default exact)")
_M_HELP = "mc: releases y per Fisher estimate, eq. (8) (default 1000)"
_K_HELP = "mc: samples per gradient, Algorithm 4 (default 10000)"
_SEED_HELP = "mc: seed of the Monte Carlo (default 0)"
_JSON_HELP = "print the result as JSON"


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dpbook", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    f = sub.add_parser("fisher", help="Fisher information of one release for [a, b]")
    f.add_argument("--eps", type=_any_float, required=True, help="privacy parameter")
    f.add_argument("--theta", type=_finite_float, nargs="+", action="extend", default=None,
                   help="parameter values (default: (0, 1) for a location-scale family, "
                        "else the family's default)")
    add_family_arguments(f)
    f.add_argument("--a", type=_finite_float, required=True, help="lower end of the interval")
    f.add_argument("--b", type=_finite_float, required=True, help="upper end of the interval")
    f.add_argument("--method", choices=("exact", "mc"), default="exact", help=_METHOD_HELP)
    f.add_argument("--M", type=_int, default=None, help=_M_HELP)
    f.add_argument("--K", type=_int, default=None, help=_K_HELP)
    f.add_argument("--seed", type=_seed, default=None, help=_SEED_HELP)
    f.add_argument("--json", action="store_true", help=_JSON_HELP)
    f.set_defaults(func=cmd_fisher)

    b = sub.add_parser("best-interval", help="grid search of eq. (13) for (a*, b*)")
    b.add_argument("--eps", type=_any_float, required=True, help="privacy parameter")
    b.add_argument("--method", choices=("exact", "mc"), default="exact", help=_METHOD_HELP)
    b.add_argument("--grid", type=_int, default=50,
                   help="grid points per axis (default 50, Section 6)")
    b.add_argument("--lims", type=_finite_float, nargs=2, action="extend", default=None,
                   help="grid range (default -3 3, or the family's range at theta)")
    b.add_argument("--theta", type=_finite_float, nargs="+", action="extend", default=None,
                   help="theta at which eq. (9) is solved (families that are not "
                        "location-scale)")
    add_family_arguments(b)
    b.add_argument("--score", choices=("mu", "trace"), default="mu",
                   help="score of the Fisher matrix: its first entry (Section 6) or its "
                        "trace (default mu)")
    b.add_argument("--M", type=_int, default=None, help=_M_HELP)
    b.add_argument("--K", type=_int, default=None, help=_K_HELP)
    b.add_argument("--seed", type=_seed, default=None, help=_SEED_HELP)
    b.add_argument("--json", action="store_true", help=_JSON_HELP)
    b.set_defaults(func=cmd_best_interval)

    q = sub.add_parser("posterior", help="posterior of theta from released data")
    add_family_arguments(q)
    q.add_argument("--method", choices=(*NAMES, "mhaar", "exact"),
                   required=True,
                   help="SMC (Algorithms 2-3), the SMC moving a subset of M latent values "
                        "per step (smc-subset, with --subset M), the marginal SMC on theta "
                        "for long streams (smc-marginal, also called ibis), the online "
                        "gradient estimate of Section 7 (a point estimate; its steps are "
                        "efficient for intervals it asked for itself), the MHAAR baseline "
                        "or the exact posterior on a grid")
    q.add_argument("--eps", type=_any_float, required=True, help="privacy parameter")
    q.add_argument("--particles", type=_int, default=None,
                   help="particles N of smc, smc-subset, smc-marginal, ibis (default 1000)")
    q.add_argument("--iters", type=_int, default=None,
                   help="MHAAR iterations (default 100000)")
    q.add_argument("--subset", type=_int, default=None, metavar="M",
                   help="smc-subset: latent values x_k moved per step (Section 4's subset "
                        "rejuvenation: O(N M) MH moves per step instead of O(N t)); at a "
                        "step t <= M every x_k is moved, so M >= n is --method smc, bit "
                        "for bit")
    q.add_argument("--seed", type=_seed, default=None,
                   help="seed of the methods that draw random numbers (default 0)")
    q.add_argument("--json", action="store_true", help=_JSON_HELP)
    q.add_argument("data", help="CSV file with header y,l,r")
    q.set_defaults(func=cmd_posterior)

    fl = sub.add_parser("families", help="list the population families and mechanisms")
    fl.add_argument("--json", action="store_true", help=_JSON_HELP)
    fl.set_defaults(func=cmd_families)

    add_prior_arguments(q)
    add_experiment_parser(sub)
    add_calibrate_parser(sub)
    add_stream_parser(sub)
    add_curator_parser(sub)
    return p


def add_prior_arguments(p):
    p.add_argument("--prior-loc", type=_finite_float, nargs=2, default=None,
                   metavar=("MEAN", "VAR"), help="prior of the location: N(MEAN, VAR) "
                   "(default Section 6's, 0 10000)")
    p.add_argument("--prior-scale2", type=_finite_float, nargs=2, default=None,
                   metavar=("SHAPE", "SCALE"), help="prior of the squared scale: "
                   "IG(SHAPE, SCALE) (default Section 6's, 1 1)")


def prior_hyperparameters(args) -> dict:
    """The prior's hyperparameters that --prior-loc / --prior-scale2 set (by name, as
    LocationScalePrior takes them); empty when neither is given."""
    hyper = {}
    if getattr(args, "prior_loc", None) is not None:
        hyper.update(loc_mean=args.prior_loc[0], loc_var=args.prior_loc[1])
    if getattr(args, "prior_scale2", None) is not None:
        hyper.update(scale2_shape=args.prior_scale2[0], scale2_scale=args.prior_scale2[1])
    return hyper


def prior_from_args(family, args):
    """The family with the prior of --prior-loc / --prior-scale2 (location-scale
    families), or the family itself when neither is given."""
    hyper = prior_hyperparameters(args)
    if not hyper:
        return family
    if not family.location_scale:
        raise _UsageError(f"--prior-loc and --prior-scale2 set the prior of a "
                          f"location-scale family, not of {family.name}")
    return family.with_prior(**hyper)


# ----------------------------------------------------------------------- stream
def add_stream_parser(subparsers):
    p = subparsers.add_parser(
        "stream", help="Algorithm 1 over a file of sensitive values: release each one "
                       "through an interval and update the posterior",
        description="Run Algorithm 1 over a column of a CSV file of sensitive values: "
                    "each value, in file order (or --shuffle), is clipped to the interval "
                    "the policy asks for and released with noise of scale (r - l)/eps; "
                    "the online posterior absorbs the release.  Prints the final "
                    "posterior's quartiles; --released writes the releases (y, l, r), "
                    "which `dpbook posterior` reads back.")
    p.add_argument("values", help="CSV file with a header")
    p.add_argument("--column", required=True, help="the column of sensitive values")
    p.add_argument("--eps", type=_any_float, required=True, help="privacy parameter")
    add_family_arguments(p)
    p.add_argument("--method", choices=METHODS, default="smc-marginal",
                   help="online posterior: the latent SMC of Algorithms 2-3 (O(n^2 N)), "
                        "the same moving M latent values per step (smc-subset, with "
                        "--subset M), the marginal SMC on theta (default: O(n log n) for "
                        "long streams) or the online gradient estimate (a point estimate)")
    p.add_argument("--policy", choices=("adaptive",), default=None,
                   help="adaptive: Thompson sampling and eq. (13) (the default unless "
                        "--interval is given)")
    p.add_argument("--interval", type=_finite_float, nargs=2, default=None,
                   metavar=("L", "R"), help="a fixed interval [L, R] for everyone")
    add_prior_arguments(p)
    p.add_argument("--particles", type=_int, default=None,
                   help="particles of the SMC methods (default 1000)")
    p.add_argument("--subset", type=_int, default=None, metavar="M",
                   help="smc-subset: latent values moved per step")
    p.add_argument("--shuffle", action="store_true",
                   help="release the values in a random order (from --seed)")
    p.add_argument("--batch", type=_int, default=1, metavar="B",
                   help="individuals per published interval: the curator updates its "
                        "posterior with a batch's B releases before publishing the next "
                        "interval (default 1: Algorithm 1 as written)")
    p.add_argument("--seed", type=_seed, default=0,
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
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    p.set_defaults(func=cmd_stream)
    return p


def cmd_stream(args):
    from dpbook.online.streams import run_stream

    t0 = time.perf_counter()
    family, mechanism = family_from_args(args)
    family = prior_from_args(family, args)
    if args.policy is not None and args.interval is not None:
        raise _UsageError("give --policy adaptive or --interval L R, not both")
    _check_subset(args)
    if args.particles is not None and not get_method(args.method).particles:
        raise _UsageError(f"--particles does not apply to --method {args.method} (it "
                          f"has no particles)")
    if args.released is not None and not args.released.strip():
        raise _UsageError("--released needs a file name")
    values = read_csv_columns(args.values, (args.column,))[args.column]
    from dpbook.validation import MAX_ABS

    bad = ~(np.abs(values) <= MAX_ABS)  # inf, or beyond the supported range
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{args.values}, line {i + 2}: column {args.column} holds "
                         f"{float(values[i])!r}, outside the supported range [-{MAX_ABS:g}, "
                         f"{MAX_ABS:g}] (rescale the data)")
    policy = "adaptive" if args.interval is None else tuple(args.interval)
    run, out = run_stream(values, args.eps, method=args.method, policy=policy,
                          family=family, mechanism=mechanism,
                          n_particles=1000 if args.particles is None else args.particles,
                          subset=args.subset, seed=args.seed, shuffle=args.shuffle,
                          deploy=args.deploy, progress=not args.no_progress and sys.stderr.isatty()
                          and len(values) > 2000, batch=args.batch)
    if get_method(args.method).point_estimate:
        warn_if_stalled(run.smc)
    if args.released is not None:
        from dpbook.experiment.store import atomic_write_bytes

        text = "y,l,r\n" + "".join(f"{a!r},{b!r},{c!r}\n" for a, b, c in
                                    zip(run.y.tolist(), run.l.tolist(), run.r.tolist()))
        atomic_write_bytes(Path(args.released), lambda f: f.write(text.encode()))
        out["released"] = args.released
    out["seconds"] = time.perf_counter() - t0
    q = out["quartiles"]
    point = get_method(args.method).point_estimate
    head = (f"{'estimate' if point else 'posterior'} "
            f"({args.method}, {out['policy']} interval, n = {out['n']}, eps = {args.eps})")
    lines = [head + ":"]
    lines += [f"  {p:<6} quartiles {q[p + '_q25']:.4f}, {q[p + '_q50']:.4f}, "
              f"{q[p + '_q75']:.4f}" for p in family.params]
    if args.released is not None:
        lines.append(f"  releases written to {args.released}")
    lines.append(f"  {out['seconds']:.2f} s")
    _print(out, args.json, lines)


# ----------------------------------------------------------------------- curator
# the methods without latent values: no stream length to fix before the first release
_CURATOR_METHODS = tuple(m.name for m in ONLINE_METHODS.values() if not m.latent)


def add_curator_parser(subparsers):
    p = subparsers.add_parser(
        "curator", help="the curator's side of a deployment, kept in a state file: "
                        "publish intervals, take releases back",
        description="The curator of a deployment (dpbook.privacy.curator), one state file "
                    "per stream: `init` makes it, `publish` gives the interval for the "
                    "next K individuals, `take` absorbs a CSV of releases (y,l,r) made "
                    "with published intervals, late or in any order, `withdraw` forgets "
                    "individuals who will not answer, `status` shows the posterior.  The "
                    "file is locked while a command changes it, so a collection service "
                    "may call these from several processes.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION",
                           parser_class=_Parser)
    init = sub.add_parser("init", help="make a curator and save it in STATE")
    init.add_argument("state", help="the curator's state file")
    init.add_argument("--eps", type=_any_float, required=True, help="privacy parameter")
    add_family_arguments(init)
    init.add_argument("--method", choices=_CURATOR_METHODS, default="smc-marginal",
                      help="online posterior (default smc-marginal)")
    init.add_argument("--interval", type=_finite_float, nargs=2, default=None,
                      metavar=("L", "R"), help="a fixed interval [L, R] for everyone "
                                               "(default: adaptive, eq. 13)")
    add_prior_arguments(init)
    init.add_argument("--particles", type=_int, default=None,
                      help="particles of smc-marginal (default 1000)")
    init.add_argument("--seed", type=_seed, default=0,
                      help="seed of the posterior and the Thompson draws (default 0)")
    init.add_argument("--force", action="store_true", help="replace an existing STATE")
    pub = sub.add_parser("publish", help="the interval for the next K individuals")
    pub.add_argument("state")
    pub.add_argument("--k", type=_int, default=1, help="individuals (default 1)")
    take = sub.add_parser("take", help="absorb releases (CSV with header y,l,r)")
    take.add_argument("state")
    take.add_argument("releases", help="CSV file with header y,l,r")
    wd = sub.add_parser("withdraw", help="forget K expected releases of [L, R]")
    wd.add_argument("state")
    wd.add_argument("l", type=_finite_float, metavar="L")
    wd.add_argument("r", type=_finite_float, metavar="R")
    wd.add_argument("--k", type=_int, default=1, help="individuals (default 1)")
    st = sub.add_parser("status", help="releases taken, intervals out, the posterior")
    st.add_argument("state")
    for q in (pub, take, wd, st):
        q.add_argument("--json", action="store_true", help=_JSON_HELP)
    p.set_defaults(func=cmd_curator)
    return p


def _curator_status(curator) -> dict:
    from dpbook.online.streams import quartiles

    return {"taken": curator.n,
            "outstanding": [{"l": l, "r": r, "k": k}
                            for (l, r), k in sorted(curator.outstanding.items())],
            "quartiles": quartiles(curator.posterior)}


def _read_curator_releases(path):
    """The releases of ``path`` (header y,l,r, read as ``dpbook posterior`` reads them),
    each checked as :meth:`Curator.take` checks one: ValueError naming the first bad row
    (1-based, after the header) and why."""
    from dpbook.validation import check_finite_number, check_one_interval

    cols = read_csv_columns(path, ("y", "l", "r"), expected="header must be y,l,r")
    y, l, r = cols["y"], cols["l"], cols["r"]
    for i, row in enumerate(zip(y.tolist(), l.tolist(), r.tolist())):
        try:
            check_finite_number("y", row[0])
            check_one_interval(row[1], row[2])
        except ValueError as e:
            raise ValueError(f"{_row(path, i)}: {e}") from None
    return y, l, r


def _row(path, i):
    return f"{path}, row {i + 1} (line {i + 2})"


def cmd_curator(args):
    try:
        _curator(args)
    except OSError as e:  # the state file or its lock: permissions, a directory, a full disk
        where = e.filename or args.state
        raise ValueError(f"{where}: {e.strerror or e}") from None


def _curator(args):
    from filelock import FileLock

    from dpbook.privacy.curator import Curator

    state = Path(args.state)
    if state.is_dir():
        raise ValueError(f"{state} is a directory, not a curator state file")
    if args.action != "init" and not state.is_file():
        raise ValueError(f"{state}: no such curator state file")
    if not state.parent.is_dir():
        raise ValueError(f"{state}: no such directory {state.parent}")
    if args.action == "status":  # a save replaces the file at once: no lock to read
        curator = Curator.load(state)
        out = _curator_status(curator)
        q = out["quartiles"]
        lines = [f"{curator.n} releases taken, {sum(curator.outstanding.values())} expected"]
        lines += [f"  [{o['l']!r}, {o['r']!r}]: {o['k']} expected" for o in out["outstanding"]]
        lines += [f"  {p:<6} quartiles {q[p + '_q25']:.4f}, {q[p + '_q50']:.4f}, "
                  f"{q[p + '_q75']:.4f}" for p in curator.posterior.params]
        _print(out, args.json, lines)
        return
    if args.action == "take":  # read and checked before the lock: other calls need not wait
        y, l, r = _read_curator_releases(args.releases)
    with FileLock(str(state) + ".lock"):
        if args.action == "init":
            if state.exists() and not args.force:
                raise _UsageError(f"{state} exists (--force replaces it)")
            from dpbook.online.streams import make_curator

            family, mechanism = family_from_args(args)
            family = prior_from_args(family, args)
            if args.particles is not None and not get_method(args.method).particles:
                raise _UsageError(f"--particles does not apply to --method {args.method}")
            policy = "adaptive" if args.interval is None else tuple(args.interval)
            curator = make_curator(args.eps, args.method, policy, family, mechanism,
                                   n_particles=args.particles or 1000, seed=args.seed)
            curator.save(state)
            print(f"curator ({args.method}, eps = {args.eps}) saved in {state}")
            return
        curator = Curator.load(state)
        if args.action == "publish":
            l, r = curator.publish(args.k)
            out, lines = {"l": l, "r": r, "k": args.k}, [f"{l!r} {r!r}"]
        elif args.action == "take":
            bad = curator.unexpected(l, r)
            if bad is not None:  # the file's row, not the API's release number
                raise ValueError(f"{_row(args.releases, bad[0])}: {bad[1]}; nothing taken")
            curator.take_many(y, l, r)  # all or nothing
            out = {"took": int(y.size)} | _curator_status(curator)
            lines = [f"took {y.size} release{'s' * (y.size != 1)}; {curator.n} in all, "
                     f"{sum(curator.outstanding.values())} still expected"]
        else:
            curator.withdraw(args.l, args.r, args.k)
            out = _curator_status(curator)
            lines = [f"withdrew {args.k}; {sum(curator.outstanding.values())} still expected"]
        curator.save(state)
    _print(out, args.json, lines)


# ----------------------------------------------------------------------- experiment
def add_experiment_parser(subparsers):
    """Add the ``experiment`` sub-command to an argparse sub-parsers object."""
    p = subparsers.add_parser(
        "experiment", help="the paper's Section 6 experiment (resumable)",
        description="Run or resume the Section 6 experiment: SMC-adaptive, SMC-fixed and "
                    "MHAAR over eps values and independent runs.")
    from dpbook.experiment import ALL_METHODS, METHODS

    p.add_argument("--eps", type=_any_float, nargs="+", action="extend", default=None,
                   metavar="E", help="privacy parameters (default 1 2 5 10)")
    p.add_argument("--runs", type=_int, default=30,
                   help="independent runs per method and eps (default 30, Section 6)")
    p.add_argument("--n", type=_int, default=1000,
                   help="individuals per run (default 1000)")
    p.add_argument("--particles", type=_int, default=None,
                   help="SMC particles N (default 1000)")
    p.add_argument("--mhaar-iters", type=_int, default=None,
                   help="MHAAR iterations (default 100000; 20 auxiliary draws each)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated methods (default: the paper's " + ",".join(METHODS)
                        + "; also, for long streams: " + ",".join(ALL_METHODS[len(METHODS):])
                        + ")")
    p.add_argument("--seed", type=_seed, default=0,
                   help="root seed; every task's seed is derived from it (default 0)")
    p.add_argument("--out", default="results/paper", metavar="DIR",
                   help="result store; finished tasks there are skipped (default "
                        "results/paper)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--workers", type=_int, default=None,
                   help="local worker processes (default: every core)")
    p.add_argument("--interval-method", choices=("exact", "mc"), default=None,
                   help="Fisher information for the best intervals (eq. 13): exact "
                        "quadrature or the paper's Monte Carlo (default exact)")
    p.add_argument("--theta", type=_any_float, nargs="+", action="extend", default=None,
                   metavar="V",
                   help="true parameter values (default: the paper's mu = 50, "
                        "sigma^2 = 10 for the normal, else the family's default)")
    add_family_arguments(p)
    p.add_argument("--keep-particles", type=_int, default=1,
                   help="store particles for the first K runs (default 1)")
    p.add_argument("--subset", type=_int, default=None, metavar="M",
                   help="latent values moved per step by the smc-subset methods (Section "
                        "4's subset rejuvenation; required with them); at a step t <= M "
                        "every latent value is moved, so M >= n is the plain SMC")
    p.add_argument("--original-code", action="store_true",
                   help="release with the authors' code's noise scale, (r - l)/(eps "
                        "sqrt 2), while analysing with (r - l)/eps (reproduction notes, "
                        "item 1; a store of its own)")
    p.add_argument("--batch", type=_int, nargs="+", action="extend", default=None,
                   metavar="B",
                   help="individuals per published interval in the online methods "
                        "(default 1: Algorithm 1 as written); several values make one "
                        "store with a task per batch size (e.g. --batch 1 10 100)")
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
    _only_where_used(args, what, {
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
                        **({} if args.subset is None else {"subset": args.subset}))
    out = Path(args.out)
    summ = summarize(df)
    manifest = read_manifest(out) or {}
    records = summ.to_dict(orient="records")
    for r in records:  # MHAAR's batch (a store of several batch sizes): JSON null
        if "batch" in r:
            r["batch"] = None if pd.isna(r["batch"]) else int(r["batch"])
    result = {
        "summary": records,
        "intervals": manifest.get("intervals", {}),
        "tasks": int(len(df)),
        "complete": bool(manifest.get("complete")),
        "seconds": time.perf_counter() - t0,
        "paths": {"out": str(out), "estimates": str(out / "estimates.parquet"),
                  "manifest": str(out / "manifest.json"), "tasks": str(out / "tasks")},
    }
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


# ----------------------------------------------------------------------- calibrate
def add_calibrate_parser(subparsers):
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
    p.add_argument("--eps", type=_any_float, required=True, help="privacy parameter")
    p.add_argument("--n", type=_int, default=200, help="individuals per replication "
                   "(default 200)")
    p.add_argument("--reps", type=_int, default=100, help="replications (default 100)")
    p.add_argument("--particles", type=_int, default=500, help="SMC particles (default 500)")
    p.add_argument("--grid", type=_int, default=61,
                   help="exact posterior grid points per axis (default 61)")
    p.add_argument("--mhaar-iters", type=_int, default=10_000,
                   help="MHAAR iterations, the last 20%% kept (default 10000)")
    p.add_argument("--interval", type=_finite_float, nargs=2, default=(-300.0, 300.0),
                   metavar=("L", "R"), help="the fixed interval of every method but "
                   "smc-adaptive (central-private: the public range it chooses its interval "
                   "in); it must not depend on theta (default -300 300)")
    add_family_arguments(p)
    add_prior_arguments(p)
    p.add_argument("--seed", type=_seed, default=0, help="root seed (default 0)")
    p.add_argument("--out", default="results/calibration", metavar="DIR",
                   help="store; replications there are reused (default results/calibration)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="address of a Dask scheduler, e.g. tcp://host:8786")
    p.add_argument("--workers", type=_int, default=None,
                   help="local worker processes (default: every core)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help=_JSON_HELP)
    p.set_defaults(func=cmd_calibrate)
    return p


def cmd_calibrate(args):
    from dataclasses import asdict

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
                         progress=not args.no_progress)
    summ = calibration_summary(df, family.params, family.prior)
    iqr0 = prior_iqr(family.prior, family.params)
    keys = ("ks_stat", "ks_p", "coverage50", "coverage50_se", "coverage90",
            "coverage90_se", "dispersion_z", "median_iqr", "learned", "mean_iqr",
            "mean_learned")
    result = {"method": args.method, "eps": float(args.eps), "n": args.n,
              "reps": int(len(df)), "family": family.name, "mechanism": mechanism,
              "prior": asdict(family.prior),
              **{r["param"]: {**{k: float(r[k]) for k in keys},
                              "prior_iqr": float(iqr0[r["param"]])}
                 for r in summ.to_dict("records")},
              "seconds": time.perf_counter() - t0, "out": str(args.out)}
    lines = [f"{args.method}, eps {args.eps:g}, n {args.n}: {len(df)} replications",
             f"{'param':<6} {'KS':>6} {'KS p':>8} {'cover50':>14} {'cover90':>14} "
             f"{'disp z':>7} {'median IQR':>11} {'mean IQR/prior':>15}"]
    for p in family.params:
        r = result[p]
        lines.append(f"{p:<6} {r['ks_stat']:>6.3f} {r['ks_p']:>8.3g} "
                     f"{r['coverage50']:>6.3f} +- {r['coverage50_se']:.3f} "
                     f"{r['coverage90']:>6.3f} +- {r['coverage90_se']:.3f} "
                     f"{r['dispersion_z']:>7.2f} {r['median_iqr']:>11.4g} "
                     f"{r['mean_learned']:>15.3g}")
    lines.append(f"store: {args.out}")
    _print(result, args.json, lines)
    return result


def _one_line(message, category) -> str:
    text = str(message).splitlines()[0] if str(message) else category.__name__
    return f"dpbook: warning: {text}"


class _Warnings:
    """How the command line shows warnings: one line each.  dpbook's own warnings (a
    result that may be poor, a store file set aside) are shown as they come; numpy's and
    scipy's numeric warnings (overflow, invalid value) are held back and shown once each
    at the end of a command that succeeds: a command that ends in an error prints only
    its one line, since the error says what is wrong."""

    def __init__(self):
        self.held = []

    def show(self, message, category, filename, lineno, file=None, line=None):
        text = _one_line(message, category)
        if issubclass(category, RuntimeWarning) and not category.__module__.startswith(
                "dpbook"):
            if text not in self.held:
                self.held.append(text)
        else:
            print(text, file=sys.stderr)

    def flush(self):
        for text in self.held:
            print(text, file=sys.stderr)
        self.held.clear()


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised like Ctrl-C so that the same clean-up runs (pool workers stopped,
    finished tasks kept)."""


@contextlib.contextmanager
def _signals():
    """SIGINT raises KeyboardInterrupt and SIGTERM :class:`_Terminated`, once: a repeat
    while the command cleans up is ignored (``timeout`` delivers SIGINT twice, to the
    process and to its group; a second KeyboardInterrupt inside the clean-up was a
    39-line 'release unlocked lock' traceback).  SIGTERM's default action would end the
    process at once and leave the pool's workers and resource tracker running."""
    got = []

    def handler(signum, frame):
        if got:
            return
        got.append(signum)
        raise _Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    try:
        old = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    except ValueError:  # not the main thread: leave the signals alone
        old = {}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


def _interrupted(args, e) -> str:
    what = "terminated" if isinstance(e, _Terminated) else "interrupted"
    out = getattr(args, "out", None) if args is not None else None
    if out is None:
        return f"dpbook: {what}"
    return (f"dpbook: {what}; the results stored so far are kept in {out}, and the same "
            f"command resumes from them")


def main(argv=None) -> int:
    shown, args = _Warnings(), None
    with warnings.catch_warnings(), _signals():
        warnings.showwarning = shown.show  # a user sees one line, not a stack
        try:
            if _EARLY_SIGNALS:  # a signal held while the command line started
                raise _Terminated() if signal.SIGTERM in _EARLY_SIGNALS else \
                    KeyboardInterrupt()
            args = build_parser().parse_args(argv)
            args.func(args)
        except (_UsageError, ValueError) as e:
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            print(f"dpbook: error: {msg}", file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:
            print(_interrupted(args, e), file=sys.stderr)
            return 143 if isinstance(e, _Terminated) else 130
        shown.flush()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
