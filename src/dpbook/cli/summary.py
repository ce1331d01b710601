"""The one JSON shape of the command line's results (schema 2), the progress bar and the
prior-data conflict check.

Every result records ``schema_version``, ``family``, ``family_options`` (e.g. the
Student-t's df), ``mechanism``, ``prior``, ``eps``, ``n``, ``method`` and ``seed``.  A
posterior is ``"posterior": {param: {"mean", "sd",
"q05", "q25", "median", "q75", "q95"}}``; a point estimate (the online gradient's) is
``"estimate": {param: value}``.  ``sd`` (and ``mean``) are null where the posterior's
moment does not exist: under clipping the likelihood of a scale c tends to a positive
limit as c grows, so the posterior's tail is the prior's, c^2 ~ IG(shape, .), whose c
has a k-th moment only when 2 shape > k.  With Section 6's shape 1 (and --range's) the
scale's mean exists and its sd does not: ``sd`` is null for it.  The same holds for the
multivariate normal's mu_j and sigma_j under the normal-inverse-Wishart prior of
``--range`` per column (their tails those of a Student t, and of an IG, with nu0 - d + 1
= 2 degrees of freedom).  A sampler's or
estimator's result has ``"diagnostics": {name: {"value", "floor" or "ceiling",
"warning"}}`` (:func:`dpbook.diagnostics.check_reliability`; "warning" is the line
printed when the value is beyond its threshold, else null).
"""

from __future__ import annotations

import sys

import numpy as np

SCHEMA_VERSION = 2
QUANTILE_LEVELS = (0.05, 0.25, 0.5, 0.75, 0.95)
QUANTILE_NAMES = ("q05", "q25", "median", "q75", "q95")
PROGRESS_DELAY = 2.0  # seconds before a run shows its progress (on a terminal only)


def record(family, mechanism, eps, n, method, seed, **extra) -> dict:
    """The fields every JSON output carries."""
    from dpbook.cli.family import prior_record

    return {"schema_version": SCHEMA_VERSION, "family": family.name or family.describe(),
            "family_options": {k: getattr(family, k) for k in family.options},
            "mechanism": str(mechanism), "prior": prior_record(family), "eps": eps,
            "n": n, "method": method, "seed": seed, **extra}


def _moments_exist(family) -> tuple:
    """(mean exists, sd exists) per parameter (module docstring)."""
    shape = getattr(getattr(family, "prior", None), "scale2_shape", None)
    out = [(True, True)] * len(family.params)
    nu0 = getattr(getattr(family, "prior", None), "nu0", None)
    if nu0 is not None:  # normal-inverse-Wishart: mu_j ~ t_df, sigma_j^2 ~ IG(df/2, .)
        df = nu0 - family.d + 1
        out[:2 * family.d] = [(df > 1, df > 2)] * (2 * family.d)
    if family.location_scale and shape is not None:
        out[1] = (2 * shape > 1, 2 * shape > 2)
    return out


def posterior_summary(post, family) -> dict:
    """{param: {mean, sd, q05, q25, median, q75, q95}} of a posterior object."""
    s, qs = post.summary(), np.atleast_2d(post.quantile(QUANTILE_LEVELS))
    return {p: {"mean": float(s[p]["mean"]) if mean else None,
                "sd": float(s[p]["sd"]) if sd else None,
                **{name: float(qs[i, j]) for i, name in enumerate(QUANTILE_NAMES)}}
            for j, ((mean, sd), p) in enumerate(zip(_moments_exist(family), family.params))}


def posterior_result(post, family) -> dict:
    """{"posterior": :func:`posterior_summary`}, or {"estimate": {param: value}} for a
    point estimate (the online gradient's, which has no posterior); and the run's
    "diagnostics" (``post.reliability``, module docstring)."""
    out = {"diagnostics": getattr(post, "reliability", {})}
    if hasattr(post, "quantile"):
        return {"posterior": posterior_summary(post, family), **out}
    return {"estimate": {p: float(v) for p, v in zip(family.params, post.theta)}, **out}


def result_lines(out) -> list:
    """The lines of a result's posterior (:func:`summary_lines`) or point estimate."""
    if "posterior" in out:
        return summary_lines(out["posterior"])
    return [f"  {p} = {v:.4f}" for p, v in out["estimate"].items()]


def summary_lines(summ) -> list:
    w = max(len(p) for p in summ)
    fmt = lambda v: "undefined" if v is None else f"{v:.4f}"  # noqa: E731
    return [f"  {p:<{w}} = {s['median']:.4f} (90% interval [{s['q05']:.4f}, {s['q95']:.4f}]"
            f"; quartiles {s['q25']:.4f}, {s['q75']:.4f}; mean {fmt(s['mean'])}, "
            f"sd {fmt(s['sd'])})" for p, s in summ.items()]


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


def progress_bar(total, desc, **kw):
    """A tqdm bar on stderr, shown after PROGRESS_DELAY seconds and only on a terminal
    (never among output that is read, such as --json's; ``leave=False`` clears it)."""
    from tqdm import tqdm

    return tqdm(total=total, delay=PROGRESS_DELAY, leave=False, file=sys.stderr,
                disable=not stderr_is_terminal(), desc=desc, dynamic_ncols=True,
                smoothing=0.1, **kw)


def warn_conflict(family, mechanism, y, l, r, eps, medians=None):
    """The prior-data conflict check's warnings on stderr, one line each (the releases
    are public: it costs no privacy)."""
    from dpbook.diagnostics import prior_data_conflict

    for text in prior_data_conflict(family, y, l, r, eps, mechanism, medians=medians):
        print(f"dpbook: warning: {text}", file=sys.stderr)
