"""``dpbook posterior``: the posterior of theta from a file of releases (y, l, r), by the
online SMC methods, MHAAR or the exact grid, or the online gradient's point estimate."""

from __future__ import annotations

import sys
import time

from dpbook.cli.args import (
    JSON_HELP,
    UsageError,
    add_missing_argument,
    integer,
    only_where_used,
    print_result,
    seed,
)
from dpbook.cli.args import eps as eps_arg
from dpbook.cli.family import (
    add_family_arguments,
    add_prior_arguments,
    family_from_args,
    prior_from_args,
    warn_if_no_prior,
)
from dpbook.cli.summary import posterior_summary, progress_bar, record, summary_lines, warn_conflict
from dpbook.online.methods import NAMES, ONLINE_METHODS, get_method

LATENT_NOTE_N = 3000  # releases beyond which the latent SMC's note names smc-marginal


def add_parser(sub):
    q = sub.add_parser("posterior", help="posterior of theta from released data")
    add_family_arguments(q)
    q.add_argument("--method", choices=(*NAMES, "mhaar", "exact"), required=True,
                   help="SMC (Algorithms 2-3), the SMC moving a subset of M latent values "
                        "per step (smc-subset, with --subset M), the marginal SMC on theta "
                        "for long streams (smc-marginal, also called ibis), the online "
                        "gradient estimate of Section 7 (a point estimate; its steps are "
                        "efficient for intervals it asked for itself), the MHAAR baseline "
                        "or the exact posterior on a grid")
    q.add_argument("--eps", type=eps_arg, required=True, help="privacy parameter")
    q.add_argument("--particles", type=integer, default=None,
                   help="particles N of smc, smc-subset, smc-marginal, ibis (default 1000)")
    q.add_argument("--iters", type=integer, default=None,
                   help="MHAAR iterations (default 100000)")
    q.add_argument("--subset", type=integer, default=None, metavar="M",
                   help="smc-subset: latent values x_k moved per step (Section 4's subset "
                        "rejuvenation: O(N M) MH moves per step instead of O(N t)); at a "
                        "step t <= M every x_k is moved, so M >= n is --method smc, bit "
                        "for bit")
    q.add_argument("--seed", type=seed, default=None,
                   help="seed of the methods that draw random numbers (default 0)")
    add_missing_argument(q)
    q.add_argument("--json", action="store_true", help=JSON_HELP + " (the SMC methods "
                   "show their progress on stderr after 2 s, on a terminal only)")
    q.add_argument("data", help="CSV file with header y,l,r")
    add_prior_arguments(q)
    q.set_defaults(func=cmd_posterior)


def check_subset(args):
    """--subset goes with --method smc-subset, and that method needs it."""
    subset = [mth.name for mth in ONLINE_METHODS.values() if mth.subset]
    if args.subset is not None and args.method not in subset:
        raise UsageError(f"--subset does not apply to --method {args.method} (it is for "
                         f"--method {', '.join(subset)})")
    if args.method in subset and args.subset is None:
        raise UsageError(f"--method {args.method} needs --subset M (latent values moved "
                         f"per step)")


class _LatentProgress:
    """Step t of the latent SMC costs O(t), so the bar counts work, sum of t, and its
    time left is right for the O(n^2) run; the text says how many releases are done."""

    def __init__(self, n, method):
        self.n, self.t, self.method = n, 0, method
        self.bar = progress_bar(n * (n + 1) // 2, f"{method}: 0/{n} releases",
                                bar_format="{desc} {percentage:3.0f}%|{bar}| "
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


def cmd_posterior(args):
    from dpbook.data import read_releases
    from dpbook.validation import check_count

    family, mechanism = family_from_args(args)
    m = args.method
    online = get_method(m) if m in NAMES else None
    smc = tuple(n for n in NAMES if get_method(n).particles)
    only_where_used(args, f"--method {m}", {
        "particles": (1000, m in smc, "--method " + ", ".join(smc)),
        "iters": (100_000, m == "mhaar", "--method mhaar"),
        "seed": (0, m != "exact" and not (online and online.point_estimate),
                 "the methods that draw random numbers; exact and online-gradient draw "
                 "none")})
    check_subset(args)
    check_count("particles", args.particles, 2)
    check_count("iters", args.iters)
    family = prior_from_args(family, args)
    (y, l, r), skipped = read_releases(args.data, args.missing)
    t0 = time.perf_counter()
    if online is not None and online.latent:
        from dpbook.smc import smc_posterior

        if len(y) > LATENT_NOTE_N:
            print(f"dpbook: note: --method {m} keeps every individual's latent value and "
                  f"copies them at every step, O(n^2 N) work for n = {len(y)} releases and "
                  f"N = {args.particles} particles (10^5 releases: hours); --method "
                  f"smc-marginal computes the same posterior in O(n N) (chapter 9)",
                  file=sys.stderr)
        with _LatentProgress(len(y), m) as bar:
            post = smc_posterior(y, l, r, args.eps, family=family, mechanism=mechanism,
                                 n_particles=args.particles, seed=args.seed,
                                 subset=args.subset, progress=bar)
    elif online is not None and online.point_estimate:
        return _online_gradient(args, family, mechanism, y, l, r, t0, skipped)
    elif online is not None:
        from dpbook.online.ibis import marginal_posterior

        with progress_bar(len(y), m, unit="release") as bar:
            post = marginal_posterior(y, l, r, args.eps, family=family, mechanism=mechanism,
                                      n_particles=args.particles, seed=args.seed,
                                      progress=bar)
    elif args.method == "mhaar":
        from dpbook.mhaar import mhaar

        post = mhaar(y, l, r, args.eps, family=family, mechanism=mechanism,
                     n_iter=args.iters, seed=args.seed)
    else:
        from dpbook.posterior import exact_posterior

        post = exact_posterior(y, l, r, args.eps, family=family, mechanism=mechanism)
    summ = posterior_summary(post, family)
    out = record(family, mechanism, args.eps, int(len(y)), m,
                 None if m == "exact" else args.seed, skipped=skipped, posterior=summ,
                 diagnostics=getattr(post, "reliability", {}),
                 seconds=time.perf_counter() - t0)
    head = f"posterior ({m}, n = {len(y)}, eps = {args.eps}"
    if family.name != "normal" or mechanism != "laplace":
        head += f", {family.describe()}, {mechanism} mechanism"
    lines = [head + "):", *summary_lines(summ)]
    if skipped:
        lines.append(f"  {skipped} row{'s' * (skipped != 1)} with an empty cell skipped")
    if args.subset is not None and args.subset >= len(y):
        lines.append(f"  --subset {args.subset} >= n = {len(y)}: every latent value was moved "
                     f"at every step, as --method smc does (the same numbers)")
    lines.append(f"  {out['seconds']:.2f} s")
    print_result(out, args.json, lines)
    sys.stdout.flush()
    warn_if_no_prior(args)
    warn_conflict(family, mechanism, y, l, r, args.eps,
                  {p: s["median"] for p, s in summ.items()})


def _online_gradient(args, family, mechanism, y, l, r, t0, skipped):
    """``dpbook posterior --method online-gradient``: the Section 7 estimate after the
    releases in file order; a point estimate, without a posterior.  The releases are all
    at hand, so it starts where the data are (the family's moment guess): from the
    prior's median, releases clipped at one end of intervals far from it carry no score
    and the estimate would stay at its start (issue 29)."""
    from dpbook.diagnostics import check_reliability
    from dpbook.online.gradient import OnlineGradient

    start = family.guess(y, l, r, args.eps, mechanism)
    est = OnlineGradient(args.eps, family=family, mechanism=mechanism, theta0=start)
    for t in range(len(y)):
        est.update(y[t], l[t], r[t])
    check_reliability(est, "the online gradient")
    estimate = {p: float(v) for p, v in zip(family.params, est.theta)}
    out = record(family, mechanism, args.eps, int(len(y)), args.method, None,
                 skipped=skipped, estimate=estimate, diagnostics=est.reliability,
                 start={p: float(v) for p, v in zip(family.params, start)},
                 seconds=time.perf_counter() - t0)
    lines = [f"estimate (online-gradient, n = {len(y)}, eps = {args.eps}): "
             + ", ".join(f"{p} = {v:.4f}" for p, v in estimate.items()),
             "  a point estimate: no posterior and no credible interval; started at "
             "the releases' moment guess "
             + ", ".join(f"{p} = {v:.4f}" for p, v in zip(family.params, start)),
             f"  {out['seconds']:.2f} s"]
    print_result(out, args.json, lines)
    sys.stdout.flush()
    warn_if_no_prior(args)
    warn_conflict(family, mechanism, y, l, r, args.eps)

