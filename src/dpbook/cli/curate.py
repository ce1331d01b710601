"""``dpbook curator``: the curator's side of a deployment, kept in a state file."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from dpbook.cli.args import (
    JSON_HELP,
    Parser,
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
from dpbook.cli.summary import posterior_result, record, result_lines, warn_conflict
from dpbook.online.methods import ONLINE_METHODS, get_method

# the methods without latent values: no stream length to fix before the first release
_CURATOR_METHODS = tuple(m.name for m in ONLINE_METHODS.values() if not m.latent)


def add_parser(subparsers):
    p = subparsers.add_parser(
        "curator", help="the curator's side of a deployment, kept in a state file: "
                        "publish intervals, take releases back",
        description="The curator of a deployment (dpbook.privacy.curator), one state file "
                    "per stream: `init` makes it, `publish` gives the interval for the "
                    "next K individuals, `take` absorbs a CSV of releases (y,l,r) made "
                    "with published intervals, late or in any order, `withdraw` forgets "
                    "individuals who will not answer, `status` shows the posterior.  The "
                    "state is a SQLite file (dpbook.online.curator_state), locked while a "
                    "command runs, so a collection service may call these from several "
                    "processes.")
    sub = p.add_subparsers(dest="action", required=True, metavar="ACTION",
                           parser_class=Parser)
    init = sub.add_parser("init", help="make a curator and save it in STATE")
    init.add_argument("state", help="the curator's state file")
    init.add_argument("--eps", type=eps_arg, required=True, help="privacy parameter")
    add_family_arguments(init)
    init.add_argument("--method", choices=_CURATOR_METHODS, default="smc-marginal",
                      help="online posterior (default smc-marginal)")
    init.add_argument("--interval", type=finite_float, nargs=2, default=None,
                      metavar=("L", "R"), help="a fixed interval [L, R] for everyone "
                                               "(default: adaptive, eq. 13)")
    add_prior_arguments(init)
    init.add_argument("--particles", type=integer, default=None,
                      help="particles of smc-marginal (default 1000)")
    init.add_argument("--seed", type=seed, default=0,
                      help="seed of the posterior and the Thompson draws (default 0)")
    init.add_argument("--force", action="store_true", help="replace an existing STATE")
    pub = sub.add_parser("publish", help="the interval for the next K individuals")
    pub.add_argument("state")
    pub.add_argument("--k", type=integer, default=1, help="individuals (default 1)")
    take = sub.add_parser("take", help="absorb releases (CSV with header y,l,r)")
    take.add_argument("state")
    take.add_argument("releases", help="CSV file with header y,l,r")
    add_missing_argument(take)
    wd = sub.add_parser("withdraw", help="forget K expected releases of [L, R]")
    wd.add_argument("state")
    wd.add_argument("l", type=finite_float, metavar="L")
    wd.add_argument("r", type=finite_float, metavar="R")
    wd.add_argument("--k", type=integer, default=1, help="individuals (default 1)")
    st = sub.add_parser("status", help="releases taken, intervals out, the posterior")
    st.add_argument("state")
    for q in (pub, take, wd, st):
        q.add_argument("--json", action="store_true", help=JSON_HELP)
        q.add_argument("--family-changed-ok", action="store_true",
                       help="use the state's family file although it changed since the "
                            "state was made (its releases then rest on two models)")
    p.set_defaults(func=cmd_curator)
    return p


def curator_status(curator) -> dict:
    """The curator's releases, outstanding intervals and posterior in the one JSON shape
    (:mod:`dpbook.cli.summary`)."""
    post = curator.posterior
    # before the first release: no posterior yet (the particles are the prior's)
    if curator.n:  # its diagnostics (and a warning beyond their thresholds) as it is now
        from dpbook.diagnostics import check_reliability

        check_reliability(post, "the curator's posterior", stacklevel=1)
    result = posterior_result(post, post.family) if curator.n else {}
    method = "smc-marginal" if hasattr(post, "quantile") else "online-gradient"
    # the seed is spent into the curator's generator: the state file does not keep it
    return record(post.family, post.mechanism, post.eps, curator.n, method, None,
                  taken=curator.n,
                  outstanding=[{"l": l, "r": r, "k": k}
                               for (l, r), k in sorted(curator.outstanding.items())],
                  **result)


def _read_curator_releases(path, missing):
    """The releases of ``path`` (header y,l,r, read as ``dpbook posterior`` reads them),
    each checked as :meth:`Curator.take` checks one: ValueError naming the first bad row
    (1-based, after the header) and why."""
    from dpbook.data import read_csv_columns
    from dpbook.validation import check_finite_number, check_one_interval

    cols, skipped = read_csv_columns(path, ("y", "l", "r"), "header must be y,l,r", missing)
    y, l, r = cols["y"], cols["l"], cols["r"]
    for i, row in enumerate(zip(y.tolist(), l.tolist(), r.tolist())):
        try:
            check_finite_number("y", row[0])
            check_one_interval(row[1], row[2])
        except ValueError as e:
            raise ValueError(f"{_row(path, i)}: {e}") from None
    return y, l, r, skipped


def _row(path, i):
    return f"{path}, row {i + 1} (line {i + 2})"


def cmd_curator(args):
    try:
        out, lines, conflict = _curator(args)
    except OSError as e:  # the state file or its lock: permissions, a directory, a full disk
        where = e.filename or args.state
        raise ValueError(f"{where}: {e.strerror or e}") from None
    try:
        print_result(out, getattr(args, "json", False), lines)
        sys.stdout.flush()
    except OSError as e:  # stdout full: a change is said, on stderr (else main's); a
        # reader gone (a closed pipe) ends quietly with 141, as coreutils' commands do
        if args.action in ("init", "status") or isinstance(e, BrokenPipeError):
            raise
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # what stdout holds goes nowhere
        what = f"published [{out['l']!r}, {out['r']!r}] for k = {out['k']}" \
            if args.action == "publish" else lines[0]
        raise ValueError(f"cannot write the output ({e.strerror}), but {args.state} was "
                         f"changed: {what}") from None
    if conflict:  # a take: the prior-data check, as dpbook stream's, once the result is out
        warn_conflict(*conflict[:-1], medians=conflict[-1])


def _curator(args):
    from filelock import FileLock

    from dpbook.online.curator_state import load_curator, save_curator
    from dpbook.validation import output_file

    state = Path(args.state)
    # written and locked: the target of a link, never an input or a device
    target = output_file(state, [getattr(args, "releases", None)])
    if state.is_dir():
        raise ValueError(f"{state} is a directory, not a curator state file")
    if args.action != "init" and not state.is_file():
        raise ValueError(f"{state}: no such curator state file")
    if not state.parent.is_dir():
        raise ValueError(f"{state}: no such directory {state.parent}")
    if args.action == "take":  # read and checked before the lock: other calls need not wait
        y, l, r, skipped = _read_curator_releases(args.releases, args.missing)
    with FileLock(str(target) + ".lock"):  # status too: loading may migrate a pickle
        if args.action == "init":
            if state.exists() and not args.force:
                raise UsageError(f"{state} exists (--force replaces it)")
            from dpbook.online.streams import make_curator

            family, mechanism = family_from_args(args)
            family = prior_from_args(family, args, unstated="refuse")
            if args.particles is not None and not get_method(args.method).particles:
                raise UsageError(f"--particles does not apply to --method {args.method}")
            policy = "adaptive" if args.interval is None else tuple(args.interval)
            curator = make_curator(args.eps, args.method, policy, family, mechanism,
                                   n_particles=args.particles or 1000, seed=args.seed)
            save_curator(curator, state)
            return {}, [f"curator ({args.method}, eps = {args.eps}) saved in {state}"], None
        curator = load_curator(state, args.family_changed_ok)
        conflict = None
        if args.action == "status":
            out = curator_status(curator)
            lines = [f"{curator.n} releases taken, {sum(curator.outstanding.values())} "
                     "expected"]
            lines += [f"  [{o['l']!r}, {o['r']!r}]: {o['k']} expected"
                      for o in out["outstanding"]]
            lines += result_lines(out) if curator.n else []
        elif args.action == "publish":
            l, r = curator.publish(args.k)
            out, lines = {"l": l, "r": r, "k": args.k}, [f"{l!r} {r!r}"]
        elif args.action == "take":
            bad = curator.unexpected(l, r)
            if bad is not None:  # the file's row, not the API's release number
                raise ValueError(f"{_row(args.releases, bad[0])}: {bad[1]}; nothing taken")
            curator.take_many(y, l, r)  # all or nothing
            out = {"took": int(y.size), "skipped": skipped} | curator_status(curator)
            post = curator.posterior
            medians = {p: s["median"] for p, s in out.get("posterior", {}).items()} \
                if hasattr(post, "quantile") else None
            conflict = (post.family, post.mechanism, *curator.releases(), post.eps, medians)
            lines = [f"took {y.size} release{'s' * (y.size != 1)}"
                     + (f" ({skipped} rows with an empty cell skipped)" if skipped else "")
                     + f"; {curator.n} in all, {sum(curator.outstanding.values())} still "
                       f"expected"]
        else:
            curator.withdraw(args.l, args.r, args.k)
            out = curator_status(curator)
            lines = [f"withdrew {args.k}; {sum(curator.outstanding.values())} still expected"]
        if args.action != "status":
            save_curator(curator, state)  # one transaction: the releases and a snapshot
    return out, lines, conflict
