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

import numpy as np
from scipy import integrate, stats

from dpbook.model.families import as_family


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
