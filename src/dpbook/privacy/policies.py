"""Interval policies: how the next truncation interval [l_{t+1}, r_{t+1}] is chosen.

* :class:`AdaptivePolicy` -- Section 5.1 with the location-scale shortcut of
  Section 5.2: Thompson sampling draws theta_t = (m, c) from the particle
  approximation (6) (Step 1) and sets l = m + a* c, r = m + b* c (eq. 11), where
  (a*, b*) maximise the Fisher score for the base distribution (eq. 13, Theorem 3).
* :class:`ThetaGridPolicy` -- Section 5.1 for a family that is not location-scale: eq. (9)
  solved on a grid of theta once (:class:`dpbook.fisher.ThetaGridIntervals`) and
  interpolated at the Thompson draw;
* :class:`FixedPolicy` -- the paper's non-adaptive comparison: the same [l_c, r_c]
  for every t (Section 6 uses [mu - 10 sigma, mu + 10 sigma]);
* :class:`GuardedPolicy` -- dpbook's own option, not the paper's (off by default): the
  adaptive policy with a guard against locking onto a wrong location (issue 53).

:func:`dpbook.online.methods.adaptive_policy` builds the adaptive policy of a family,
whichever of the first two it needs, from the Fisher information.

A policy sees only the estimator's posterior approximation, never the population.
"""

from __future__ import annotations

import numpy as np

from dpbook.validation import check_interval, missing_method


class Policy:
    """The interface of an interval policy: ``next_interval(posterior, rng) -> (l, r)``.

    ``posterior`` is the estimator's current approximation (an :class:`dpbook.smc.SMC`);
    a policy sees nothing else, never the population.  ``rng`` is the policy's own
    Generator (the Thompson draws).
    """

    name = ""
    static = False  # True: the same interval whatever the posterior and the draws

    def next_interval(self, posterior, rng: np.random.Generator):
        raise missing_method(self, "next_interval")


class FixedPolicy(Policy):
    """s_t = T_{l_c}^{r_c} for all t."""

    name = "fixed"
    static = True

    def __init__(self, l, r):
        if np.ndim(l):  # a box (dpbook.multivariate)
            from dpbook.multivariate.release import check_box

            self.l, self.r = check_box(l, r)
            return
        l, r = check_interval(l, r)
        self.l, self.r = float(l), float(r)

    def next_interval(self, posterior, rng: np.random.Generator):
        return self.l, self.r


class AdaptivePolicy(Policy):
    """Thompson sampling + eq. (11): l = m + a c, r = m + b c with (m, c) ~ posterior.

    ``posterior`` must provide ``thompson_draw(rng) -> (m, c)`` (Step 1 of Section
    5.1: theta^(i) with probability w^(i)).  Before any data the draw comes from the
    prior, which is how Algorithm 1 initialises s_1.
    """

    name = "adaptive"

    def __init__(self, a, b):
        a, b = check_interval(a, b, name="(a, b)")
        self.a, self.b = float(a), float(b)

    def next_interval(self, posterior, rng: np.random.Generator):
        draw = posterior.thompson_draw(rng)
        if len(draw) != 2:
            raise ValueError("AdaptivePolicy needs a location-scale family, theta = (m, c); "
                             f"the posterior has {len(draw)} parameter(s)")
        m, c = draw
        return m + self.a * c, m + self.b * c


class ThetaGridPolicy(Policy):
    """Thompson sampling with eq. (9) re-optimised for the drawn theta (Section 5.1).

    Step 1: theta = posterior.thompson_draw(rng) (a tuple, theta^(i) with probability
    w^(i)); Step 2: (l, r) = intervals.interval(*theta), the interpolated maximiser of
    (9) from a :class:`ThetaGridIntervals`.
    """

    name = "theta_grid"

    def __init__(self, intervals):
        if not callable(getattr(intervals, "interval", None)):
            raise ValueError("ThetaGridPolicy needs a ThetaGridIntervals (an object with "
                             "interval(*theta) -> (l, r))")
        self.intervals = intervals

    def next_interval(self, posterior, rng: np.random.Generator):
        theta = np.atleast_1d(posterior.thompson_draw(rng))
        return self.intervals.interval(*theta)



GUARD_Z = 2.5758293035489  # the guard's two-sided 1% normal quantile
GUARD_MAX = 6  # the guard widens an interval at most 2**GUARD_MAX times


def check_guard(window) -> int:
    """The guard's block of releases: an integer >= 10 (fewer can never show a pile-up
    at the 1% level of :class:`GuardedPolicy`)."""
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 10:
        raise ValueError(f"guard must be an integer number of releases >= 10, got {window!r}")
    return int(window)


class GuardedPolicy(Policy):
    """The adaptive policy (Section 5.1, eq. 11) with a guard against lock-in; not in
    the paper.

    With heavy tails the Thompson draws can settle on a wrong location: narrow intervals
    there, every value beyond one end, and releases that carry too little to pull the
    posterior back.  After each block of ``window`` releases the guard looks at the
    block: the fraction u of releases above their interval's midpoint is about 1/2 for
    intervals placed where the values are (a symmetric base, as eq. 13 gives the normal,
    Theorem 3) and tends to 1 - exp(-eps/2)/2 (or its mirror) when every value lies
    beyond one end.  When |u - 1/2| exceeds the two-sided 1% binomial bound
    ``GUARD_Z / (2 sqrt(window))``, the Thompson intervals of the next block are widened
    about their midpoint, 2**k times after k blocks in a row piled up at the same end (at
    most 2**GUARD_MAX); a block that is not piled up ends the widening.  Until its first
    widening the guarded policy gives the adaptive policy's intervals bit for bit.  It
    reads the releases from ``posterior.releases()`` (the latent SMC's), so it sees
    nothing the curator does not; ``widenings`` counts the blocks it widened.
    """

    name = "adaptive-guarded"

    def __init__(self, policy: AdaptivePolicy, window):
        self.policy, self.window = policy, check_guard(window)
        self.a, self.b = policy.a, policy.b
        self.side, self.run, self.checked, self.widenings = 0, 0, 0, 0

    def next_interval(self, posterior, rng: np.random.Generator):
        l, r = self.policy.next_interval(posterior, rng)
        w = self.window
        if posterior.t - self.checked >= w:
            self.checked = posterior.t
            y, lo, hi = (v[-w:] for v in posterior.releases())
            up = float(np.mean(y > (lo + hi) / 2)) - 0.5
            side = int(np.sign(up)) if abs(up) > GUARD_Z / (2 * np.sqrt(w)) else 0
            self.run = self.run + 1 if side and side == self.side else int(side != 0)
            self.side = side
            self.widenings += side != 0
        if not self.side:
            return l, r
        half = 2.0 ** min(self.run, GUARD_MAX) * (r - l) / 2
        return (l + r) / 2 - half, (l + r) / 2 + half
