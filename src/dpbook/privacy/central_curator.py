"""The central model's curator: the one place outside the population that sees sensitive
values, here all n of them at once (chapter 11).

The curator clips the values to an interval, releases their centred sums with Laplace
noise (:mod:`dpbook.model.central_release` states the sensitivities and the eps split), and
forgets them.  The interval is public and fixed, or chosen from the same values by two
private quantiles (Smith 2011, "PrivateQuantile", which Bernstein and Sheldon 2018,
Section 3.3, name for choosing truncation bounds privately) that spend a share of eps.

Unlike the local mechanism of eq. (10), the curator sees every x_i: central privacy
protects the people from what is published, not from the curator.
"""

from __future__ import annotations

import numpy as np

from dpbook.model.central_release import CentralRelease, check_share, noise_scales
from dpbook.model.mechanisms import clip
from dpbook.validation import (
    as_generator,
    check_count,
    check_eps,
    check_finite,
    check_interval,
    seed_sequence,
    unspawned,
)


def quantile_gap_weights(values, q, eps, lo, hi):
    """The exponential mechanism of :func:`private_quantile` as (edges, log weights):
    the values clipped to [lo, hi] and sorted split [lo, hi] into n + 1 gaps; gap k
    (between the k-th and (k+1)-th order statistics) holds the points with k values
    below them, utility -|k - q n|, and has log weight log(length) - eps |k - q n| / 2.
    (Exposed for the tests, which check the eps-DP ratio on neighbouring data sets.)"""
    x = np.sort(clip(check_finite("values", values).ravel(), lo, hi))
    n = x.size
    edges = np.concatenate([[lo], x, [hi]])
    k = np.arange(n + 1)
    with np.errstate(divide="ignore"):
        logw = np.log(np.diff(edges)) - 0.5 * eps * np.abs(k - q * n)
    return edges, logw


def private_quantile(values, q, eps, lo, hi, rng):
    """An eps-DP q-quantile of ``values`` in the public range [lo, hi] (Smith 2011): the
    exponential mechanism with utility u(v) = -|#{i: x_i < v} - q n| on [lo, hi] with
    Lebesgue base measure.  Substituting one person changes the count below any v by at
    most 1, so u has sensitivity 1 and the density exp(eps u(v) / 2) is eps-DP.  A gap
    is drawn with probability proportional to its weight (:func:`quantile_gap_weights`),
    then a point uniformly inside it."""
    eps = check_eps(eps)
    lo, hi = (float(v) for v in check_interval(lo, hi, "bounds"))
    if not 0.0 <= float(q) <= 1.0:
        raise ValueError(f"quantile level q must be in [0, 1], got {q!r}")
    rng = as_generator(rng)
    edges, logw = quantile_gap_weights(values, float(q), eps, lo, hi)
    p = np.exp(logw - np.max(logw))
    k = int(rng.choice(p.size, p=p / p.sum()))
    return float(edges[k] + rng.uniform() * (edges[k + 1] - edges[k]))


def release_sums(values, l, r, eps_sums, rng, sum_share=0.5):
    """(y_1, y_2, b_1, b_2): the centred clipped sums of :mod:`dpbook.model.central_release`
    with Laplace noise of scales b_1 = (r - l)/eps_1, b_2 = (r - l)^2/(4 eps_2)."""
    l, r = (float(v) for v in check_interval(l, r))
    b1, b2 = noise_scales(l, r, eps_sums, sum_share)
    z = clip(check_finite("values", values).ravel(), l, r) - 0.5 * (l + r)
    rng = as_generator(rng)
    noise = rng.laplace(0.0, 1.0, size=2)
    return float(z.sum() + b1 * noise[0]), float((z * z).sum() + b2 * noise[1]), b1, b2


def release_central(values, eps, rng, interval=None, bounds=None, quantiles=(0.05, 0.95),
                    interval_share=0.25, sum_share=0.5) -> CentralRelease:
    """The curator's eps-DP release of ``values`` (n public) as a :class:`CentralRelease`.

    ``interval=(l, r)``: a public interval, and the whole eps goes to the sums.
    ``interval=None``: [l, r] are the private ``quantiles`` of the values in the public
    range ``bounds`` (:func:`private_quantile`, eps_q = interval_share * eps / 2 each),
    sorted if the noise crossed them, and the sums get (1 - interval_share) * eps.  By
    sequential composition the release is eps-DP.  ``sum_share`` splits the sums' budget
    between s_1 and s_2 (:func:`dpbook.model.central_release.noise_scales`)."""
    eps = check_eps(eps)
    x = check_finite("values", values).ravel()
    n = check_count("number of values", x.size)
    rng = as_generator(rng)
    if interval is not None:
        if bounds is not None:
            raise ValueError("give a public interval or the bounds of a private one, not both")
        l, r = (float(v) for v in check_interval(*interval))
        eps_interval = 0.0
    else:
        if bounds is None:
            raise ValueError("a private interval needs public bounds (lo, hi) for the "
                             "quantiles' range")
        lo, hi = (float(v) for v in check_interval(*bounds, "bounds"))
        share = check_share("interval_share", interval_share)
        q_lo, q_hi = (float(v) for v in quantiles)
        if not 0.0 <= q_lo < q_hi <= 1.0:
            raise ValueError(f"quantiles must satisfy 0 <= q_lo < q_hi <= 1, got {quantiles!r}")
        eps_interval = share * eps
        l, r = sorted(private_quantile(x, q, eps_interval / 2, lo, hi, rng)
                      for q in (q_lo, q_hi))
        if not r - l > 1e-9 * max(1.0, abs(l), abs(r)):  # both in one tiny gap
            half = 0.5e-6 * (hi - lo)
            l, r = max(lo, l - half), min(hi, r + half)
    y1, y2, b1, b2 = release_sums(x, l, r, eps - eps_interval, rng, sum_share)
    return CentralRelease(y1=y1, y2=y2, n=n, l=l, r=r, b1=b1, b2=b2, eps=eps,
                          eps_interval=eps_interval)


def family_release(family, theta, n, eps, seed=None, **kw) -> CentralRelease:
    """n individuals x_i ~ P_theta released centrally (:func:`release_central`, ``kw``).

    The values are the same people as
    :func:`dpbook.privacy.population.family_population` with the same ``seed`` (its
    first child stream), so the local and the central release of one seed can be put
    side by side; the curator's noise comes from the second child stream.  A
    SeedSequence is not advanced: its first two children are taken as a fresh one's
    ``spawn(2)`` gives them, whatever was spawned from it before (a population made
    from it first advanced its counter, and ``spawn`` would give other people)."""
    from dpbook.model.families import as_family

    fam = as_family(family)
    theta = fam.check_theta(*((theta,) if np.ndim(theta) == 0 else tuple(theta)))
    n = check_count("n", n)
    data_ss, noise_ss = unspawned(seed_sequence(seed)).spawn(2)
    x = np.asarray(fam.sample(np.random.default_rng(data_ss), *theta, size=n), float)
    return release_central(x, eps, np.random.default_rng(noise_ss), **kw)
