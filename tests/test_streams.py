"""Timed online runs for long streams (dpbook.online.streams, chapter 9)."""

import numpy as np
import pytest

from dpbook.online import streams
from dpbook.privacy.population import normal_population


def test_timed_smc_is_algorithm_1():
    # the clock does not change the run: the same particles as run_online's
    from dpbook.fisher import best_interval
    from dpbook.online import run_online
    from dpbook.privacy.policies import AdaptivePolicy

    best = best_interval(5.0, method="exact")
    ref = run_online(normal_population(60, 50.0, 3.0, 5.0, seed=2),
                     AdaptivePolicy(best["a"], best["b"]), 60, n_particles=100, seed=3)
    timed = streams.timed_run("smc", normal_population(60, 50.0, 3.0, 5.0, seed=2), 60,
                              n_particles=100, seed=3)
    assert np.array_equal(ref.y, timed.run.y) and np.array_equal(ref.l, timed.run.l)
    assert np.array_equal(ref.smc.quantile([0.5]), timed.run.smc.quantile([0.5]))
    clock = timed.clock
    assert clock.t.tolist() == [1, 2, 5, 10, 20, 50, 60]
    assert clock.wall_s.is_monotonic_increasing and clock.cpu_s.is_monotonic_increasing
    last = clock.iloc[-1]
    assert np.allclose([last.mu_q25, last.mu_q50, last.mu_q75],
                       np.ravel(ref.smc.quantile([0.25, 0.5, 0.75])[:, 0]))


@pytest.mark.parametrize("method", ["smc-subset", "smc-marginal", "online-gradient"])
def test_every_method_runs_and_finds_mu(method):
    pop = normal_population(300, 5.0, 2.0, 5.0, seed=4)
    run = streams.timed_run(method, pop, 300, n_particles=200, seed=5,
                            subset=10 if method == "smc-subset" else None,
                            checkpoints=[100, 300])
    assert run.clock.t.tolist() == [100, 300]
    last = run.clock.iloc[-1]
    assert last.mu_q25 <= last.mu_q50 <= last.mu_q75
    assert abs(last.mu_q50 - 5.0) < 1.0  # 300 releases at eps = 5, sigma = 2


def test_fixed_policy_and_bad_arguments():
    pop = normal_population(30, 0.0, 1.0, 2.0, seed=0)
    run = streams.timed_run("smc-marginal", pop, 30, policy=(-3.0, 3.0), n_particles=50)
    assert set(run.run.l) == {-3.0} and set(run.run.r) == {3.0}
    for kwargs, needle in [(dict(method="slice"), "method"),
                           (dict(method="smc-subset"), "subset"),
                           (dict(method="smc", subset=5), "subset"),
                           (dict(method="smc", n=0), "n"),
                           (dict(method="smc", policy="greedy"), "policy")]:
        args = dict(method="smc", population=pop, n=10, n_particles=20) | kwargs
        with pytest.raises(ValueError, match=needle):
            streams.timed_run(**args)
