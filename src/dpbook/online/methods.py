"""The online methods by name: the one vocabulary of Algorithm 1's posteriors (objects
with ``update(y, l, r)`` and ``thompson_draw(rng)``), read by the command line, the
experiment, the calibration study and the streams:

* ``smc``: the latent SMC of Algorithms 2-3 (:class:`dpbook.smc.SMC`), O(N n^2);
* ``smc-subset``: the same moving a random subset of m latent values per step
  (Section 4's subset rejuvenation);
* ``smc-marginal`` (also ``ibis``): the marginal SMC on theta
  (:mod:`dpbook.online.ibis`, IBIS), about O(N n log n);
* ``online-gradient``: the online gradient estimate of Section 7
  (:mod:`dpbook.online.gradient`), a point estimate, O(n).

In the experiment (Section 6, chapter 9) each runs with the adaptive policy (Thompson
sampling and eq. 13) and the fixed interval, as the tasks of :attr:`OnlineMethod.tasks`
with their seed codes (:mod:`dpbook.experiment.config`); the online gradient has no
posterior to draw from and places its own base interval at its estimate: one task.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from dpbook.diagnostics import quiet_diagnostics
from dpbook.model.families import as_family
from dpbook.model.mechanisms import get_mechanism
from dpbook.multivariate.policy import BoxPolicy
from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy, ThetaGridPolicy


@dataclass(frozen=True)
class OnlineMethod:
    """An online posterior of Algorithm 1.  ``tasks``: the experiment's (task name,
    policy, seed code); ``latent``: it carries x_{1:t} (needs the stream's length
    n_max); ``subset``: it moves a subset of them (needs ``subset``); ``particles``: it
    has N particles; ``point_estimate``: no posterior, no credible interval, no random
    numbers; ``long_stream``: chapter 9's, not Section 6's."""

    name: str
    tasks: tuple
    aliases: tuple = ()
    latent: bool = False
    subset: bool = False
    particles: bool = True
    point_estimate: bool = False
    long_stream: bool = True

    def build(self, eps, family=None, mechanism="laplace", n_particles=1000, n_max=None,
              subset=None, seed=0):
        """The online posterior for releases at privacy level ``eps``."""
        if (subset is not None) != self.subset:
            raise ValueError("subset goes with method 'smc-subset', and that method "
                             "needs it")
        if self.latent:
            from dpbook.smc import SMC

            if n_max is None:
                raise ValueError(f"method {self.name!r} needs n_max, the stream's length")
            return SMC(eps, family, mechanism, n_particles=n_particles, n_max=n_max,
                       seed=seed, every=max(int(n_max), 1), subset=subset)
        if self.point_estimate:
            from dpbook.online.gradient import OnlineGradient

            return OnlineGradient(eps, family=family, mechanism=mechanism)
        from dpbook.online.ibis import MarginalSMC

        return MarginalSMC(eps, family, mechanism, n_particles=n_particles, seed=seed)

    def adaptive_policy(self, posterior, eps, family=None, mechanism="laplace", best=None):
        """Thompson sampling with the base interval ``best`` = (a, b) (default eq.
        13's, :func:`adaptive_policy`); a point estimate's own interval at its estimate."""
        if self.point_estimate:
            return AdaptivePolicy(posterior.a, posterior.b)
        if best is not None:
            return (BoxPolicy if np.ndim(best[0]) else AdaptivePolicy)(*best)
        return adaptive_policy(family, eps, mechanism)


ONLINE_METHODS = {m.name: m for m in (
    OnlineMethod("smc", (("smc-adaptive", "adaptive", 1), ("smc-fixed", "fixed", 2)),
                 latent=True, long_stream=False),
    OnlineMethod("smc-subset", (("smc-subset-adaptive", "adaptive", 10),
                                ("smc-subset-fixed", "fixed", 11)), latent=True, subset=True),
    OnlineMethod("smc-marginal", (("smc-marginal-adaptive", "adaptive", 7),
                                  ("smc-marginal-fixed", "fixed", 8)), aliases=("ibis",)),
    OnlineMethod("online-gradient", (("online-gradient", "adaptive", 9),), particles=False,
                 point_estimate=True),
)}
METHODS = tuple(ONLINE_METHODS)  # the names
# every name the command line takes for an online posterior, aliases after their method
NAMES = tuple(n for m in ONLINE_METHODS.values() for n in (m.name, *m.aliases))
# the experiment's tasks: task name -> (method, policy, seed code)
TASKS = {task: (m, policy, code) for m in ONLINE_METHODS.values()
         for task, policy, code in m.tasks}


def get_method(name) -> OnlineMethod:
    """The online method called ``name`` (one of :data:`METHODS`, or an alias)."""
    for m in ONLINE_METHODS.values():
        if name == m.name or name in m.aliases:
            return m
    raise ValueError(f"method must be one of {', '.join(METHODS)}, got {name!r}")


def adaptive_policy(family, eps, mechanism="laplace", method="exact", theta=None,
                    score="mu", **grid_kw):
    """The adaptive policy of Section 5 for any family.

    Location-scale: AdaptivePolicy(a*, b*) with (a*, b*) of eq. (13) for the base
    distribution (best_interval; theta is not needed, Theorem 3; grid_kw go to
    it: grid, lims, M, K, seed, workers).  Otherwise ThetaGridPolicy over a
    ThetaGridIntervals centred at theta (default family.default_theta()); grid_kw go to
    it (theta_grid, span, points, grid, M, K, seed, workers).  ``method``: the Fisher
    information's, exact or mc.
    """
    from dpbook.fisher.truncation import ThetaGridIntervals, best_interval

    fam = as_family(family)
    if getattr(fam, "event_shape", ()):
        return BoxPolicy(*standard_box(eps, fam, mechanism))
    if fam.location_scale:
        best = best_interval(eps, fam, mechanism, None, method, score=score, **grid_kw)
        return AdaptivePolicy(best["a"], best["b"])
    return ThetaGridPolicy(ThetaGridIntervals(fam, eps, mechanism, centre=theta, method=method,
                                              score=score, **grid_kw))


@functools.lru_cache(maxsize=64)
def _standard_box(eps, score, mechanism):
    from dpbook.multivariate.box_fisher import best_box

    return best_box(eps, score, mechanism=mechanism)


def standard_box(eps, family, mechanism="laplace"):
    """The standard box (a, b) of a vector family (dpbook.multivariate): eq. (13) in two
    dimensions, the box maximising the family's ``box_score`` of the release's Fisher
    matrix at mu = 0, sigma = (1, 1), rho = 0 (:func:`dpbook.multivariate.box_fisher.
    best_box`), which the box policy moves and scales per component (exact for a shift
    and a common scale; chapter 14 measures what it loses elsewhere)."""
    if family.event_shape != (2,):
        raise ValueError("the box policy's search is written for d = 2")
    mech = get_mechanism(mechanism).name
    return tuple(v.copy() for v in _standard_box(float(eps), family.box_score, mech))


def stream_policy(policy, method, posterior, eps, family=None, mechanism="laplace"):
    """``"adaptive"`` (:meth:`OnlineMethod.adaptive_policy`), ``(l, r)`` (the fixed
    interval) or a policy object, for a stream run by ``method``."""
    if isinstance(policy, str):
        if policy != "adaptive":
            raise ValueError(f"policy must be 'adaptive', (l, r) or a policy, got {policy!r}")
        return get_method(method).adaptive_policy(posterior, eps, family, mechanism)
    if isinstance(policy, (tuple, list)):
        return FixedPolicy(*policy)
    return policy


_WARM: set = set()
WARM_N = 50  # releases of a warm-up run


def warm_up(methods=METHODS, family=None, mechanism="laplace"):
    """Compile (or load from numba's cache) the kernels of ``methods`` (online methods,
    the experiment's tasks or ``"mhaar"``) for the model, with a short run once per
    process, so that the clocks that follow do not count compilation.  Synthetic
    releases (no population); no random state is kept."""
    from dpbook.model.mechanisms import release_one
    from dpbook.multivariate.release import release_box

    fam = as_family(family)
    vector = bool(getattr(fam, "event_shape", ()))
    for name in (methods,) if isinstance(methods, str) else methods:
        base = name if name == "mhaar" else (TASKS[name][0] if name in TASKS
                                             else get_method(name))
        key = (getattr(base, "name", base), fam.describe(), str(mechanism))
        if key in _WARM:
            continue
        rng = np.random.default_rng(0)
        theta = (0.0, 1.0) if fam.location_scale else fam.default_theta()
        x = np.asarray(fam.sample(rng, *theta, size=WARM_N), float)
        lc, rc = fam.fixed_interval(*theta)
        if base == "mhaar":
            from dpbook.mhaar import mhaar

            y = [release_one(v, lc, rc, 1.0, rng, mechanism) for v in x]
            with quiet_diagnostics():  # 4 iterations: too few to trust, by design
                mhaar(y, lc, rc, 1.0, fam, mechanism, n_iter=4, n_aux=2, seed=0)
        else:
            post = base.build(1.0, fam, mechanism, n_particles=16, n_max=WARM_N,
                              subset=2 if base.subset else None)
            policy = base.adaptive_policy(post, 1.0, fam, mechanism, best=(-1.0, 1.0)) \
                if fam.location_scale else FixedPolicy(lc, rc)
            release = release_box if vector else release_one
            for v in x:
                l, r = policy.next_interval(post, rng)
                post.update(release(v, l, r, 1.0, rng, mechanism), l, r)
        _WARM.add(key)
