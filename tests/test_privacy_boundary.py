"""Algorithm 1 / Proposition 1: only the population sees the sensitive values."""

import ast
import inspect
import pathlib

import numpy as np
import pytest

import dpbook
from dpbook.online import run_online
from dpbook.policies import AdaptivePolicy, FixedPolicy
from dpbook.population import Population, normal_population

SRC = pathlib.Path(dpbook.__file__).parent


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


def _imports(path):
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names.add((node.module or "").split(".")[-1])
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.Import):
            names.update(a.name.split(".")[-1] for a in node.names)
    return names


@pytest.mark.parametrize("module", ["smc", "policies", "fisher", "exact", "mhaar"])
def test_estimators_never_import_the_population(module):
    path = SRC / f"{module}.py"
    if not path.exists():
        pytest.skip(f"{module}.py not present")
    assert "population" not in _imports(path)


def test_estimator_inputs_are_releases_only():
    from dpbook.smc import SMC

    assert list(inspect.signature(SMC.update).parameters) == ["self", "y", "l", "r"]
