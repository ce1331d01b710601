"""Subset rejuvenation of the latent SMC (Section 4's suggestion): at each step the MH move
of Algorithm 3 is applied to a random subset of m of the x_k instead of all of them.

m >= t is the full algorithm bit for bit; a small m keeps the posterior (each step is
still an MH kernel that leaves it invariant, the subset being drawn independently of the
particles), at a larger Monte Carlo error, checked against the exact posterior."""

import numpy as np
import pytest

from dpbook.posterior import exact_posterior
from dpbook.smc import SMC

QS = (0.25, 0.5, 0.75)
Z = 5.0  # tolerance in standard errors of the average of R independent runs


def _data(n=40, eps=5.0, seed=4, family="normal"):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.5, n) if family == "normal" else rng.laplace(0.0, 1.0, n)
    l, r = -4.0, 4.0
    return np.clip(x, l, r) + rng.laplace(0.0, (r - l) / eps, n), l, r, eps


def _run(y, l, r, eps, **kw):
    smc = SMC(eps, n_max=y.size, **kw)
    for t in range(y.size):
        smc.update(y[t], l, r)
    return smc


@pytest.mark.slow
@pytest.mark.parametrize("kw", [dict(), dict(generic=True),
                                dict(family="student_t", mechanism="gaussian")])
def test_subset_of_all_is_the_full_algorithm(kw):
    y, l, r, eps = _data(n=25)
    full = _run(y, l, r, eps, n_particles=200, seed=3, **kw)
    same = _run(y, l, r, eps, n_particles=200, seed=3, subset=y.size, **kw)
    np.testing.assert_array_equal(full.theta, same.theta)
    np.testing.assert_array_equal(full.w, same.w)
    np.testing.assert_array_equal(full.paths(), same.paths())
    # a subset changes the draws, and the same seed gives the same output
    a = _run(y, l, r, eps, n_particles=200, seed=3, subset=5, **kw)
    b = _run(y, l, r, eps, n_particles=200, seed=3, subset=5, **kw)
    np.testing.assert_array_equal(a.theta, b.theta)
    assert not np.array_equal(a.theta, full.theta)
    assert 0 < a.history.acceptance[-1] <= 1


@pytest.mark.slow
@pytest.mark.parametrize("family, kw", [("normal", dict()),
                                        ("laplace", dict(family="laplace"))])
def test_subset_matches_the_exact_posterior(family, kw):
    # quartiles of R = 6 runs moving 8 of up to 39 latent values per step; tolerance: Z
    # standard errors of their average plus 1% of the posterior IQR for the grid
    y, l, r, eps = _data(family=family)
    post = exact_posterior(y, l, r, eps, family=kw.get("family"))
    target = post.quantile(QS)
    runs = np.array([_run(y, l, r, eps, n_particles=1000, seed=s, subset=8, **kw)
                     .quantile(QS) for s in range(6)])
    se = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    tol = Z * se + 0.01 * (target[2] - target[0])
    assert np.all(np.abs(runs.mean(axis=0) - target) < tol), (runs.mean(axis=0), target, se)


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, "all"])
@pytest.mark.parametrize("kw", [dict(), dict(generic=True)])
def test_bad_subset(bad, kw):
    with pytest.raises(ValueError, match="subset"):
        SMC(1.0, n_particles=10, n_max=5, subset=bad, **kw)


def test_posterior_cli_smc_subset(write_csv, capsys):
    import json

    from dpbook.cli import main

    y, l, r, eps = _data(n=30)
    path = write_csv("y,l,r\n" + "".join(f"{a},{l},{r}\n" for a in y))
    base = ["posterior", "--eps", str(eps), "--particles", "300", "--json"]
    assert main([*base, "--method", "smc-subset", "--subset", "5", path]) == 0
    out = json.loads(capsys.readouterr().out)
    post = out["posterior"]
    assert out["method"] == "smc-subset" and post["mu"]["q25"] < post["mu"]["q75"]
    # --subset 30 (every x_k) is the SMC
    assert main([*base, "--method", "smc-subset", "--subset", "30", path]) == 0
    full = json.loads(capsys.readouterr().out)
    assert main([*base, "--method", "smc", path]) == 0
    assert json.loads(capsys.readouterr().out)["posterior"] == full["posterior"]
    for bad, needle in ((["--method", "smc-subset", "--subset", "0"], "subset"),
                        (["--method", "smc-subset"], "needs --subset"),
                        (["--method", "smc", "--subset", "4"], "does not apply")):
        assert main([*base, *bad, path]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_online_run_with_a_subset():
    from dpbook.online import run_online
    from dpbook.privacy.policies import AdaptivePolicy
    from dpbook.privacy.population import normal_population

    pop = normal_population(60, 0.0, 1.0, 5.0, seed=1)
    run = run_online(pop, AdaptivePolicy(-0.5, 0.5), 60, n_particles=200, seed=2, subset=10)
    assert run.smc.subset == 10 and run.smc.t == 60
    with pytest.raises(ValueError, match="subset"):
        run_online(pop, AdaptivePolicy(-0.5, 0.5), 60, posterior=run.smc, subset=10)


def test_subset_methods_run_through_the_experiment(tmp_path, capsys):
    import pandas as pd

    from dpbook.cli import main
    from dpbook.experiment import make_config, run_experiment

    kw = dict(eps=(5.0,), runs=2, n=60, particles=100, progress=False, subset=10,
              methods=["smc-subset-adaptive", "smc-subset-fixed"])
    serial = run_experiment(out=tmp_path / "serial", workers=1, **kw)
    pool = run_experiment(out=tmp_path / "pool", workers=2, **kw)
    cols = [c for c in serial.columns if c != "seconds"]
    assert len(serial) == 4 and serial.mu_hat.between(45, 55).all()
    pd.testing.assert_frame_equal(serial[cols], pool[cols])
    # the paper's configuration keeps its keys; subset goes with the subset methods only
    assert "subset" not in make_config()
    assert make_config(methods=kw["methods"], subset=10)["subset"] == 10
    with pytest.raises(ValueError, match="need subset"):
        make_config(methods=["smc-subset-fixed"])
    with pytest.raises(ValueError, match="goes with"):
        make_config(subset=5)
    assert main(["experiment", "--methods", "smc-subset-fixed", "--subset", "0", "--out",
                 str(tmp_path / "x"), "--no-progress"]) == 2
    assert "subset" in capsys.readouterr().err
