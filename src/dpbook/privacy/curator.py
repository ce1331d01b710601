"""The curator's side of Algorithm 1, for a deployment where it runs apart from the
individuals.

The curator never sees a sensitive value.  It publishes intervals [l, r] (eq. 11: a
Thompson draw from its online posterior, or a fixed interval), takes back releases
(y, l, r) made by individuals with those intervals, and keeps the posterior of theta
given the releases (eq. 5).  By post-processing (Theorem 1, Proposition 1) everything it
computes is eps-DP for every individual.

* :meth:`Curator.next_interval` publishes the interval for the next individual;
  :meth:`Curator.publish` one interval for a batch of k individuals (one Thompson draw;
  the releases of a batch may come back in any order and interleaved with other
  batches' releases);
* :meth:`Curator.take` absorbs one release of a published interval,
  :meth:`Curator.take_many` several;
* :mod:`dpbook.online.curator_state` keeps its whole state in one SQLite file (the
  release log, the intervals, the configuration and checked snapshots of the
  posterior), so that a stream can stop and resume mid-way with the same numbers as a
  run without the stop.

:func:`dpbook.online.algorithm1.run_online` is the curator and a population in one loop;
the individual's side is :mod:`dpbook.privacy.individual`.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from dpbook.validation import (
    as_generator,
    check_count,
    check_finite,
    check_finite_number,
    check_observations,
    check_one_interval,
)


def absorb(posterior, y, l, r):
    """Releases (arrays y, l, r) into an online posterior in turn: its ``update_many``
    where it has one (the marginal SMC: a block's likelihood in one compiled call; the
    online gradient: its steps in one compiled loop), else ``update`` on each."""
    update_many = getattr(posterior, "update_many", None)
    if update_many is not None:
        update_many(y, l, r)
    else:
        for t in range(len(y)):
            posterior.update(float(y[t]), float(l[t]), float(r[t]))


def published(l, r):
    """An interval as two floats; a box (dpbook.multivariate) as two tuples of floats:
    hashable, so the curator counts the releases it awaits per interval."""
    if np.ndim(l) == 0:
        return float(l), float(r)
    from dpbook.multivariate.release import check_box

    return tuple(tuple(v.tolist()) for v in check_box(l, r))


class Curator:
    """The curator of Algorithm 1: an online ``posterior`` (an object with
    ``update(y, l, r)`` and ``thompson_draw(rng)``: :class:`dpbook.smc.SMC`,
    :class:`dpbook.online.ibis.MarginalSMC`, :class:`dpbook.online.gradient.OnlineGradient`) and an
    interval ``policy`` (:mod:`dpbook.privacy.policies`); ``seed`` (int, SeedSequence or
    Generator) drives the policy's Thompson draws.  :func:`dpbook.online.streams.make_curator`
    builds one by method name."""

    def __init__(self, posterior, policy, seed=0):
        for name in ("update", "thompson_draw"):
            if not callable(getattr(posterior, name, None)):
                raise ValueError(f"the curator's posterior needs a method {name}()")
        if not callable(getattr(policy, "next_interval", None)):
            raise ValueError("the curator's policy needs a method next_interval(posterior, rng)")
        self.posterior = posterior
        self.policy = policy
        self.rng = as_generator(seed, "seed")
        self.outstanding = Counter()  # (l, r) -> releases still expected with it
        self.intervals = []  # (l, r, k): published for k individuals; k < 0: withdrawn
        self.y, self.l, self.r = [], [], []

    @property
    def n(self) -> int:
        """The number of releases taken."""
        return len(self.y)

    def publish(self, k=1):
        """One interval (l, r) for the next k individuals (a batch): one policy step."""
        k = check_count("k", k)
        l, r = published(*self.policy.next_interval(self.posterior, self.rng))
        if self.outstanding[(l, r)] + k > 2 ** 63 - 1:  # SQLite's largest integer
            raise ValueError(f"[{l!r}, {r!r}] would then await {self.outstanding[(l, r)] + k}"
                             f" releases, more than a state counts (2^63 - 1)")
        self.outstanding[(l, r)] += k
        self.intervals.append((l, r, k))
        return l, r

    def next_interval(self):
        """The interval (l, r) for the next individual (:meth:`publish` with k = 1)."""
        return self.publish(1)

    def take(self, y, l, r):
        """Absorb the release y that an individual made with the published interval
        [l, r]; a release of an interval that was not published, or of one whose
        releases have all come back, is refused."""
        if np.ndim(l):  # a box's release (dpbook.multivariate)
            y, (l, r) = tuple(check_finite("y", y).tolist()), published(l, r)
        else:
            y = check_finite_number("y", y)
            l, r = check_one_interval(l, r)
        key = (l, r)
        if self.outstanding[key] <= 0:  # a Counter's missing key reads 0, not stored
            raise ValueError(f"the interval [{l!r}, {r!r}] was not published, or all its "
                             "releases have been taken")
        self.posterior.update(y, l, r)
        self.outstanding -= Counter([key])  # a count that reaches 0 is dropped
        self.y.append(y)
        self.l.append(l)
        self.r.append(r)

    def take_many(self, y, l, r):
        """:meth:`take` of each release (y_t, l_t, r_t) in turn, the same numbers, with the
        posterior's ``update_many`` where it has one (the likelihood of a block in one
        call: :class:`dpbook.online.ibis.MarginalSMC`).  All or nothing: if a release is
        refused, none is taken."""
        y, l, r = check_observations(y, l, r)
        bad = self.unexpected(l, r)
        if bad is not None:
            raise ValueError(f"release {bad[0] + 1}: {bad[1]}; nothing taken")
        absorb(self.posterior, y, l, r)
        self.outstanding -= Counter(zip(l.tolist(), r.tolist()))
        self.y.extend(y.tolist())
        self.l.extend(l.tolist())
        self.r.extend(r.tolist())

    def unexpected(self, l, r):
        """The first release (index, why) among intervals ``l``, ``r`` that the curator
        does not expect: its interval was not published, all its releases have been
        taken or withdrawn, or the releases before it in the list take them; None if
        every one is expected."""
        left = Counter(self.outstanding)
        for i, key in enumerate(zip(np.asarray(l, float).tolist(),
                                    np.asarray(r, float).tolist())):
            if left[key] <= 0:
                k = self.outstanding[key]
                iv = f"the interval [{key[0]!r}, {key[1]!r}]"
                return i, (f"{iv} was not published, or all its releases have been taken "
                           "or withdrawn" if not k else
                           f"{iv} has {k} release{'s' * (k != 1)} expected, and the "
                           f"releases before this one take {'them all' if k != 1 else 'it'}")
            left[key] -= 1
        return None

    def withdraw(self, l, r, k=1):
        """Forget k expected releases of the published interval [l, r] (individuals who
        never answered): nothing was learnt from them."""
        l, r = check_one_interval(l, r)
        k = check_count("k", k)
        if self.outstanding[(l, r)] < k:
            raise ValueError(f"fewer than {k} releases of [{l!r}, {r!r}] are expected")
        self.outstanding -= Counter({(l, r): k})
        self.intervals.append((l, r, -k))

    def releases(self):
        """The releases taken so far, in the order taken: arrays (y, l, r)."""
        return tuple(np.array(v, float) for v in (self.y, self.l, self.r))
