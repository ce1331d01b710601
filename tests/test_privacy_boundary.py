"""Algorithm 1 / Proposition 1: only the population sees the sensitive values."""

import inspect

import numpy as np
import pytest

from dpbook.online import run_online
from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy
from dpbook.privacy.population import Population, normal_population


def test_population_exposes_only_release():
    pop = normal_population(5, 0.0, 1.0, 1.0, seed=0)
    public = {n for n in dir(pop) if not n.startswith("_")}
    assert public == {"release", "eps", "mechanism"}
    with pytest.raises(AttributeError):
        pop.values = 1  # __slots__: nothing can be stashed on it
    # the values live in a closure, not in any attribute
    for name in Population.__slots__:
        assert not isinstance(getattr(pop, name), np.ndarray)


class SpyPopulation:
    """Records every interaction; holds values the estimator must never see."""

    def __init__(self, n):
        self.inner = normal_population(n, 3.0, 2.0, 2.0, seed=1)
        self.eps = self.inner.eps
        self.calls = []

    def release(self, l, r):
        self.calls.append((l, r))
        return self.inner.release(l, r)


@pytest.mark.parametrize("policy", [AdaptivePolicy(-0.5, 0.5), FixedPolicy(-20, 20)])
def test_online_loop_only_calls_release(policy):
    spy = SpyPopulation(15)
    run = run_online(spy, policy, 15, n_particles=50, seed=3)
    assert len(spy.calls) == 15
    np.testing.assert_array_equal(run.l, [c[0] for c in spy.calls])


def test_estimator_inputs_are_releases_only():
    from dpbook.smc import SMC

    assert list(inspect.signature(SMC.update).parameters) == ["self", "y", "l", "r"]
