"""The online methods' one vocabulary (dpbook.online.methods) and who reads it."""

import argparse

import pytest

from dpbook.cli import build_parser
from dpbook.online import methods as om


def _choices(command):
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return tuple(next(a for a in sub.choices[command]._actions if a.dest == "method").choices)


def test_the_seed_codes_of_the_tasks_stay():
    # a task's seed is SeedSequence(seed, spawn_key=(code, eps bits, run)): the stores
    # hold numbers made with these codes
    from dpbook.experiment.config import ALL_METHODS, METHOD_CODE

    assert METHOD_CODE == {"smc-adaptive": 1, "smc-fixed": 2, "mhaar": 3,
                           "smc-marginal-adaptive": 7, "smc-marginal-fixed": 8,
                           "online-gradient": 9, "smc-subset-adaptive": 10,
                           "smc-subset-fixed": 11}
    # the order of a configuration's methods (so its hash) follows ALL_METHODS
    assert ALL_METHODS == ("smc-adaptive", "smc-fixed", "mhaar", "smc-marginal-adaptive",
                           "smc-marginal-fixed", "online-gradient", "smc-subset-adaptive",
                           "smc-subset-fixed")


def test_every_reader_takes_the_registry():
    from dpbook import calibration, experiment

    assert om.METHODS == ("smc", "smc-subset", "smc-marginal", "online-gradient")
    assert _choices("stream") == om.METHODS
    assert _choices("posterior") == (*om.NAMES, "mhaar", "exact")
    assert set(experiment.ALL_METHODS) == {*om.TASKS, "mhaar"}
    assert experiment.METHODS == ("smc-adaptive", "smc-fixed", "mhaar")
    assert set(experiment.config.LONG_STREAM_METHODS) == \
        {t for t, (m, _, _) in om.TASKS.items() if m.long_stream}
    assert [m for m in calibration.METHODS if m in om.TASKS] == ["smc-adaptive", "smc-fixed"]


def test_names_and_aliases():
    assert om.get_method("ibis") is om.get_method("smc-marginal")
    with pytest.raises(ValueError, match="method must be one of smc, smc-subset, "
                                         "smc-marginal, online-gradient, got 'x'"):
        om.get_method("x")
    with pytest.raises(ValueError, match="subset goes with method 'smc-subset'"):
        om.get_method("smc").build(5.0, n_max=10, subset=3)


def test_the_adaptive_policy_is_the_methods_own():
    from dpbook.fisher import best_interval

    grad = om.get_method("online-gradient")
    post = grad.build(5.0)
    pol = om.stream_policy("adaptive", "online-gradient", post, 5.0)
    assert (pol.a, pol.b) == (post.a, post.b)  # its base interval, at its estimate
    best = best_interval(5.0, method="exact")
    pol = om.stream_policy("adaptive", "smc-marginal", None, 5.0)
    assert (pol.a, pol.b) == (best["a"], best["b"])  # eq. (13)
    assert om.stream_policy((1.0, 2.0), "smc", None, 5.0).l == 1.0


def test_warm_up_once_per_process_for_any_name():
    om.warm_up(("smc-marginal-fixed", "ibis", "mhaar"))
    key = ("smc-marginal", "normal(mu, sigma)", "laplace")
    assert {key, ("mhaar", "normal(mu, sigma)", "laplace")} <= om._WARM
    om._WARM.discard(key)
    om.warm_up("smc-marginal")
    assert key in om._WARM
