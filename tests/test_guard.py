"""dpbook's guard against lock-in (GuardedPolicy, issue 53 item 5): not the paper's, off
by default, and the same intervals as the adaptive policy until it acts."""

import subprocess
import sys

import numpy as np
import pytest

from dpbook.experiment.config import make_config
from dpbook.privacy.policies import GUARD_Z, AdaptivePolicy, GuardedPolicy, check_guard


class Releases:
    """A posterior stand-in: Thompson draws (m, c) from a fixed list, given releases."""

    def __init__(self, y, l, r):
        self.y, self.l, self.r, self.t = np.asarray(y, float), np.asarray(l, float), \
            np.asarray(r, float), 0

    def thompson_draw(self, rng):
        return rng.normal(50.0, 1.0), 3.0

    def releases(self):
        return self.y[:self.t], self.l[:self.t], self.r[:self.t]


def intervals(policy, post, n, seed=0):
    rng, out = np.random.default_rng(seed), []
    for t in range(n):
        post.t = t
        out.append(policy.next_interval(post, rng))
    return np.array(out)


def test_guard_is_the_adaptive_policy_until_a_block_piles_up():
    n, w = 60, 10
    balanced = Releases(np.tile([1.0, -1.0], n // 2), -np.ones(n), np.ones(n))
    plain = intervals(AdaptivePolicy(-1.0, 1.0), balanced, n)
    guarded = GuardedPolicy(AdaptivePolicy(-1.0, 1.0), w)
    assert np.array_equal(intervals(guarded, balanced, n), plain)  # bit for bit
    assert guarded.widenings == 0


def test_guard_widens_about_the_midpoint_while_blocks_pile_up_then_stops():
    w = 10
    y = np.r_[np.full(3 * w, 5.0), np.tile([1.0, -1.0], w)]  # 3 blocks above, 1 balanced
    post = Releases(y, -np.ones(y.size), np.ones(y.size))
    plain = intervals(AdaptivePolicy(-1.0, 1.0), post, y.size + 1)
    got = intervals(GuardedPolicy(AdaptivePolicy(-1.0, 1.0), w), post, y.size + 1)
    mid, half = plain.mean(1), np.diff(plain, axis=1)[:, 0] / 2
    for k, factor in enumerate([1, 2, 4, 8, 1]):  # block k's intervals
        sl = slice(k * w, min((k + 1) * w, y.size + 1))
        np.testing.assert_allclose(got[sl, 0], mid[sl] - factor * half[sl], rtol=1e-12)
        np.testing.assert_allclose(got[sl, 1], mid[sl] + factor * half[sl], rtol=1e-12)


def test_guard_false_alarm_rate_is_its_binomial_level():
    """Balanced releases (each above the midpoint with probability 1/2): the guard acts
    on a block with the binomial probability that |u - 1/2| > GUARD_Z / (2 sqrt(w))."""
    from scipy import stats

    w, blocks = 16, 20_000
    k = np.arange(w + 1)
    level = stats.binom.pmf(k, w, 0.5)[np.abs(k / w - 0.5) > GUARD_Z / (2 * np.sqrt(w))].sum()
    rng = np.random.default_rng(3)
    y = rng.choice([1.0, -1.0], size=w * blocks)
    post = Releases(y, -np.ones(y.size), np.ones(y.size))
    guard = GuardedPolicy(AdaptivePolicy(-1.0, 1.0), w)
    for t in range(w, y.size + 1, w):  # one look per block
        post.t = t
        guard.next_interval(post, rng)
    rate, sd = guard.widenings / blocks, np.sqrt(level * (1 - level) / blocks)
    assert 0 < level < 0.01
    assert abs(rate - level) < 4 * sd, (rate, level, sd)


@pytest.mark.parametrize("bad", [9, 0, -3, 2.5, "10", True, None])
def test_guard_refuses_a_bad_window_in_one_line(bad):
    with pytest.raises(ValueError, match="guard must be an integer number of releases >= 10"):
        check_guard(bad)


def test_guard_is_off_in_the_papers_configuration_and_recorded_only_when_given():
    assert "guard" not in make_config()
    assert make_config(methods=["smc-adaptive"], guard=10)["guard"] == 10
    with pytest.raises(ValueError, match="guard goes with the latent SMC's adaptive"):
        make_config(methods=["smc-fixed", "mhaar"], guard=10)


@pytest.mark.parametrize("value", ["5", "x"])
def test_cli_guard_bad_value_is_one_line_exit_2(value, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "dpbook.cli", "experiment", "--guard", value,
                           "--methods", "smc-adaptive", "--runs", "1", "--n", "20",
                           "--out", str(tmp_path / "s"), "--no-progress"],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "guard" in proc.stderr


def test_guarded_experiment_task_is_the_unguarded_one_until_it_widens(tmp_path):
    """The same data and algorithm seeds: a guarded task that never widened is the
    unguarded task bit for bit, so the two stores compare runs pairwise."""
    from dpbook.experiment import run_experiment

    kw = dict(eps=[1.0, 5.0], runs=3, n=60, particles=50, methods=["smc-adaptive"],
              progress=False, workers=1, interval_grid=10)
    plain = run_experiment(out=tmp_path / "plain", **kw).sort_values(["eps", "run"])
    guard = run_experiment(out=tmp_path / "guard", guard=10, **kw).sort_values(["eps", "run"])
    assert "widenings" not in plain and (guard["widenings"] >= 0).all()
    same = guard["widenings"].to_numpy() == 0
    assert same.any()
    assert np.array_equal(guard["mu_hat"].to_numpy()[same], plain["mu_hat"].to_numpy()[same])


def test_lockin_paired_bootstrap_of_rmse_differences():
    """benchmarks/lockin.py's paired interval: zero for the same errors, and for errors
    twice as large it brackets the difference -RMSE(a), all of it below zero."""
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    import lockin

    a = np.random.default_rng(5).standard_normal(100)
    assert lockin.paired_rmse_diff(a, a) == (0.0, 0.0, 0.0)
    d, lo, hi = lockin.paired_rmse_diff(a, 2 * a)
    assert d == pytest.approx(-np.sqrt(np.mean(a ** 2)))
    assert lo < d < hi < 0
