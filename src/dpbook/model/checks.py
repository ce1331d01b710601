"""Self-checks for a population family: run them on a new family before using it.

:func:`check_family` compares what a :class:`dpbook.model.families.Family` says about
itself with independent computations, the same checks the test suite makes for the
shipped families:

* sampler vs cdf: a Kolmogorov-Smirnov test (continuous) or a chi-square test on the
  counts (discrete) of ``n`` draws;
* latent parameterisation (used by MHAAR): ``from_latent(latent_sample)`` vs cdf, KS;
* score vs central finite differences of ``logpdf`` (the gradient Algorithm 4 uses);
* cdf_grad vs central finite differences of ``cdf`` (the clipped masses' score);
* logpdf vs cdf: the density integrates to the cdf's increments (quadrature), or the
  pmf sums to them (discrete);
* prior: ``sample_prior`` vs ``log_prior`` (KS test of each marginal against the
  numerically integrated density is costly, so only a finite, normalised log_prior at
  the draws is checked).

It returns a table (pandas DataFrame) with one row per check: the statistic, the
threshold and whether it passed.  Thresholds: p-values above 1e-3; finite-difference
errors below 1e-5 relative to the size of the derivative (central differences with a
relative step of 1e-5 are accurate to ~1e-9 for smooth functions).
"""

from __future__ import annotations

import contextlib
import signal
import threading

import numpy as np
from scipy import integrate, stats

from dpbook.model.families import LocationScaleFamily, as_family


def _fd(fun, theta, j, rel=1e-5):
    t = np.asarray(theta, float)
    h = rel * max(1.0, abs(t[j]))
    up, dn = t.copy(), t.copy()
    up[j] += h
    dn[j] -= h
    return (fun(*up) - fun(*dn)) / (2 * h)


def _rel_err(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b) / np.maximum(1.0, np.abs(b))))


def _gof(family, x, theta):
    """p-value of x ~ P_theta: KS for continuous, chi-square on cells for discrete."""
    if not family.discrete:
        return float(stats.kstest(x, lambda v: family.cdf(v, *theta)).pvalue)
    lo, hi = int(family.ppf(1e-4, *theta)), int(family.ppf(1 - 1e-4, *theta))
    edges = np.arange(lo, hi + 1)
    probs = np.diff(np.concatenate([[0.0], family.cdf(edges, *theta)]))
    probs = np.append(probs, family.sf(edges[-1], *theta))
    counts = np.array([np.sum(x <= lo)] + [np.sum(x == k) for k in edges[1:]]
                      + [np.sum(x > edges[-1])])
    keep = probs * len(x) >= 5  # pool sparse cells into their neighbour
    obs, exp = [], []
    acc_o = acc_e = 0.0
    for o, p, k in zip(counts, probs, keep):
        acc_o += o
        acc_e += p * len(x)
        if k:
            obs.append(acc_o)
            exp.append(acc_e)
            acc_o = acc_e = 0.0
    obs[-1] += acc_o
    exp[-1] += acc_e
    exp = np.asarray(exp) * (np.sum(obs) / np.sum(exp))
    return float(stats.chisquare(obs, exp).pvalue)


def check_family(family, theta=None, rng=None, n=20_000):
    """Run the self-checks of a family at theta; return a DataFrame of the results.

    ``family``: a Family object or name; ``theta``: parameter values (default the
    family's default_theta()); ``rng``: a numpy Generator or seed; ``n``: draws for the
    distribution tests.
    """
    import pandas as pd

    family = as_family(family)
    theta = family.check_theta(*(family.default_theta() if theta is None else theta))
    rng = np.random.default_rng(rng)
    rows = []

    def add(check, value, threshold, ok):
        rows.append({"check": check, "value": value, "threshold": threshold,
                     "passed": bool(ok)})

    x = np.asarray(family.sample(rng, *theta, size=n), float)
    p = _gof(family, x, theta)
    add("sample vs cdf (p-value)", p, 1e-3, p > 1e-3)
    xl = np.asarray(family.from_latent(family.latent_sample(rng, n), *theta), float)
    p = _gof(family, xl, theta)
    add("from_latent(latent_sample) vs cdf (p-value)", p, 1e-3, p > 1e-3)

    pts = np.quantile(x, [0.05, 0.25, 0.5, 0.75, 0.95])
    if family.discrete:
        pts = np.round(pts)
    sc = np.asarray(family.score(pts, *theta), float)
    fd = np.array([_fd(lambda *t: family.logpdf(pts, *t), theta, j)
                   for j in range(family.dim)])
    e = _rel_err(sc, fd)
    add("score vs finite differences of logpdf", e, 1e-5, e < 1e-5)
    cg = np.asarray(family.cdf_grad(pts + (0.5 if family.discrete else 0.0), *theta), float)
    fd = np.array([_fd(lambda *t: family.cdf(pts + (0.5 if family.discrete else 0.0), *t),
                       theta, j) for j in range(family.dim)])
    e = _rel_err(cg, fd)
    add("cdf_grad vs finite differences of cdf", e, 1e-5, e < 1e-5)

    a, b = np.quantile(x, [0.1, 0.9])
    if family.discrete:
        ks = np.arange(np.floor(a) + 1, np.floor(b) + 1)
        mass = float(np.exp(family.logpdf(ks, *theta)).sum())
    else:
        # the median as a break point: densities such as the Laplace have a kink there
        mass = integrate.quad(lambda v: float(np.exp(family.logpdf(v, *theta))), a, b,
                              points=[float(family.ppf(0.5, *theta))], epsabs=1e-12,
                              epsrel=1e-10, limit=200)[0]
    want = float(family.cdf(b, *theta) - family.cdf(a, *theta))
    e = abs(mass - want)
    add("logpdf integrates to cdf increments", e, 1e-7, e < 1e-7)

    th = np.asarray(family.sample_prior(rng, 1000), float)
    lp = np.asarray(family.log_prior(*th.T), float)
    ok = th.shape == (1000, family.dim) and bool(np.all(np.isfinite(lp)))
    add("prior draws have finite log_prior", float(np.mean(np.isfinite(lp))), 1.0, ok)
    return pd.DataFrame(rows)


class TimeLimitError(ValueError):
    """A user's code did not return within its time limit."""


class _TimeUp(BaseException):
    """Raised by SIGALRM in a family's method: a BaseException, so that the method's own
    ``except Exception`` does not swallow it."""


@contextlib.contextmanager
def time_limit(seconds, what):
    """ValueError '{what} did not return within {seconds} s' when the block runs longer
    (SIGALRM: in the main thread of a Unix process; elsewhere no limit).  The command
    line runs a user's family file and its probe under it: a method that loops forever
    hung dpbook."""
    if not seconds or not hasattr(signal, "SIGALRM") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum, frame):
        raise _TimeUp

    old = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _TimeUp:
        raise TimeLimitError(f"{what} did not return within {seconds:g} s") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


PROBE_Q = np.array([0.01, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99])


def probe_family(family, seconds=None):
    """A cheap check of a family before it is used (milliseconds): its quantile function,
    cdf and log density at seven quantiles of its default theta (the base distribution
    of a location-scale family) must return finite numbers of the input's shape, a
    non-decreasing ppf and cdf, and cdf(ppf(q)) = q (at least q for a discrete family);
    score and sample, where defined, finite numbers of the right shape.  ValueError (one
    line) naming the family's class, the method and what was wrong: NaN from a user's
    density otherwise surfaced as a numba type-inference trace, or as an answer computed
    from it.  ``seconds``: a time limit for each method (:func:`time_limit`)."""
    cls = type(family).__name__
    base = "base_" if isinstance(family, LocationScaleFamily) else ""

    def call(method, *args, shape=PROBE_Q.shape, optional=False, **kw):
        try:
            with time_limit(seconds, f"{cls}.{method}"):
                out = getattr(family, method)(*args, **kw)
        except NotImplementedError as e:
            if optional:
                return None
            raise ValueError(str(e)) from None
        except TimeLimitError:
            raise
        except Exception as e:  # noqa: BLE001 - whatever the user's code raises
            first = str(e).splitlines()[0] if str(e) else ""
            raise ValueError(f"{cls}.{method} raised {type(e).__name__}: {first}") from None
        try:
            outs = [np.asarray(o, dtype=float) for o in (out if method == "score" else [out])]
        except (TypeError, ValueError):
            raise ValueError(f"{cls}.{method} returned {out!r:.60}, not numbers") from None
        for a in outs:
            if a.shape != shape:
                raise ValueError(f"{cls}.{method} returned an array of shape {a.shape} for an "
                                 f"input of shape {shape}")
            if not np.all(np.isfinite(a)):
                raise ValueError(f"{cls}.{method} returned {a[~np.isfinite(a)][0]} at a "
                                 f"point of its default theta's bulk, not a finite number")
        return outs[0]

    theta = ()
    if not base:
        theta = call("default_theta", shape=(family.dim,))
        try:
            theta = family.check_theta(*theta)
        except ValueError as e:
            raise ValueError(f"{cls}.default_theta: {e}") from None
    x = call(base + "ppf", PROBE_Q, *theta)
    if np.any(np.diff(x) < 0):
        raise ValueError(f"{cls}.{base}ppf decreases: {x.round(4).tolist()} at q = "
                         f"{PROBE_Q.tolist()}")
    c = call(base + "cdf", x, *theta)
    if np.any(np.diff(c) < 0) or np.any((c < 0) | (c > 1)):
        raise ValueError(f"{cls}.{base}cdf is not a cdf (non-decreasing in [0, 1]): "
                         f"{c.round(4).tolist()} at its ppf's {x.round(4).tolist()}")
    off = (PROBE_Q - c) if family.discrete else np.abs(c - PROBE_Q)
    if np.any(off > 1e-3):
        i = int(np.argmax(off))
        raise ValueError(f"{cls}.{base}cdf({base}ppf(q)) is {c[i]:.4g} at q = {PROBE_Q[i]}: "
                         f"the ppf leaves the distribution's support, or the cdf is not its "
                         f"inverse")
    call(base + "logpdf", x, *theta)
    if base:
        call("base_dlogpdf", x, optional=True)
        call("base_sample", np.random.default_rng(0), 7, shape=(7,), optional=True)
    else:
        call("score", x, *theta, optional=True)
        call("sample", np.random.default_rng(0), *theta, size=7, shape=(7,), optional=True)
