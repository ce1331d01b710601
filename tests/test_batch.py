"""Batched Algorithm 1 (issue 28, item 1): one published interval per B individuals.

B = 1 is Algorithm 1 as written (the golden cases run it bit for bit); here: the batches'
structure, the posterior of batched releases against the exact posterior of the same
releases, the configuration's key and the command line.  Tolerance of the quartiles as
in tests/test_marginal.py: 4 Monte Carlo standard errors (1.4 sd / sqrt(N_eff)) of a
marginal SMC with N = 1000 particles, N_eff >= 300, are 0.3 posterior sd.
"""

import json

import numpy as np
import pytest

from dpbook.experiment import make_config, run_experiment
from dpbook.experiment.config import config_hash
from dpbook.online import MarginalSMC, run_online
from dpbook.posterior import exact_posterior
from dpbook.privacy.policies import AdaptivePolicy
from dpbook.privacy.population import normal_population

Q = [0.25, 0.5, 0.75]


def _run(n, batch, seed=3):
    pop = normal_population(n, 50.0, 10**0.5, 5.0, seed=seed)
    post = MarginalSMC(5.0, n_particles=1000, seed=seed + 1)
    return run_online(pop, AdaptivePolicy(-0.54, 0.54), n, seed=seed + 2, posterior=post,
                      batch=batch)


def test_one_interval_per_batch_and_a_shorter_last_batch():
    run = _run(230, 50)
    l, r = run.l.reshape(-1), run.r.reshape(-1)
    starts = np.arange(0, 230, 50)
    for s in starts:
        assert np.all(l[s:s + 50] == l[s]) and np.all(r[s:s + 50] == r[s])
    # a new Thompson draw at each batch (continuous: all five differ)
    assert len({(l[s], r[s]) for s in starts}) == len(starts)


def test_batch_of_one_is_the_unbatched_loop():
    a, b = _run(60, 1), _run(60, 1)
    pop = normal_population(60, 50.0, 10**0.5, 5.0, seed=3)
    post = MarginalSMC(5.0, n_particles=1000, seed=4)
    c = run_online(pop, AdaptivePolicy(-0.54, 0.54), 60, seed=5, posterior=post)
    for x in (b, c):
        assert np.array_equal(a.y, x.y) and np.array_equal(a.l, x.l)
        assert np.array_equal(a.smc.theta, x.smc.theta)


def test_batched_posterior_is_the_exact_posterior_of_its_releases():
    run = _run(300, 30)
    exact = exact_posterior(run.y, run.l, run.r, 5.0, grid=(61, 61))
    got, want, sd = run.smc.quantile(Q), exact.quantile(Q), exact.sd()
    assert np.all(np.abs(got - want) < 0.3 * sd), (got, want, sd)


@pytest.mark.parametrize("batch", [0, -3, 1.5, True, "2"])
def test_bad_batch(batch):
    pop = normal_population(10, 50.0, 10**0.5, 5.0, seed=1)
    with pytest.raises(ValueError, match="batch must be an integer >= 1"):
        run_online(pop, AdaptivePolicy(-0.54, 0.54), 10, batch=batch)


def test_batch_enters_the_configuration_only_above_one():
    base = make_config(runs=1, n=20)
    assert "batch" not in make_config(runs=1, n=20, batch=1)
    assert config_hash(make_config(runs=1, n=20, batch=1)) == config_hash(base)
    batched = make_config(runs=1, n=20, batch=5)
    assert batched["batch"] == 5 and config_hash(batched) != config_hash(base)
    with pytest.raises(ValueError, match="batch goes with the online methods"):
        make_config(runs=1, n=20, methods=["mhaar"], batch=5)


def test_stream_cli_batch(tmp_path, capsys):
    from dpbook.cli import main

    values = np.random.default_rng(0).normal(3.0, 1.0, 120)
    csv = tmp_path / "v.csv"
    csv.write_text("x\n" + "\n".join(f"{v:.6f}" for v in values) + "\n")
    out = tmp_path / "rel.csv"
    assert main([
        "stream", str(csv), "--column", "x", "--eps", "2", "--batch", "40",
        "--prior-loc", "0", "100", "--particles", "200", "--released", str(out),
        "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["batch"] == 40 and res["n"] == 120
    rel = np.loadtxt(out, delimiter=",", skiprows=1)
    assert len({tuple(row) for row in rel[:, 1:]}) == 3  # three intervals of 40
    assert main(["stream", str(csv), "--column", "x", "--eps", "2", "--batch", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batch" in err[0]


def test_batched_long_streams_on_dask_are_the_local_pool_s(tmp_path):
    """Many batched streams of the long-stream methods at once (issue 28, item 3): on a
    Dask cluster, the estimates of the local pool, row for row."""
    import distributed
    import pandas as pd

    kw = dict(eps=(1.0, 5.0), runs=2, n=300, particles=100, progress=False, batch=20,
              methods=["smc-marginal-adaptive", "smc-marginal-fixed", "online-gradient"])
    local = run_experiment(out=tmp_path / "local", workers=2, **kw)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        dask = run_experiment(out=tmp_path / "dask", scheduler=cluster.scheduler_address,
                              **kw)
    cols = [c for c in local.columns if c != "seconds"]
    assert len(local) == 12
    pd.testing.assert_frame_equal(local[cols].reset_index(drop=True),
                                  dask[cols].reset_index(drop=True))
