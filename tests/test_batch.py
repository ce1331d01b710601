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
from dpbook.experiment.config import config_hash, config_tasks
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


@pytest.mark.slow
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


@pytest.mark.slow
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
    # one batch size in a list is that batch size: today's store, keys and task names
    assert make_config(runs=1, n=20, batch=[1]) == base
    assert make_config(runs=1, n=20, batch=(5,)) == batched
    assert config_tasks(batched) == config_tasks(base)
    several = make_config(runs=1, n=20, batch=[10, 1])
    assert several["batch"] == [1, 10]
    assert sorted(t.name for t in config_tasks(several) if t.method == "smc-adaptive") == [
        f"smc-adaptive_eps{e!r}_run0_batch{b}" for e in (1.0, 10.0, 2.0, 5.0)
        for b in (1, 10)]
    assert [t.name for t in config_tasks(several) if t.method == "mhaar"] == [
        f"mhaar_eps{e!r}_run0" for e in (1.0, 2.0, 5.0, 10.0)]


@pytest.mark.parametrize("batch, msg", [
    ([1, 1], "batch lists 1 twice"), ([], "at least one"), ([2, 0], ">= 1, got 0"),
    ([1, 2.5], ">= 1, got 2.5")])
def test_bad_batch_lists(batch, msg):
    with pytest.raises(ValueError, match=msg) as e:
        make_config(runs=1, n=20, batch=batch)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="batch goes with the online methods"):
        make_config(runs=1, n=20, methods=["mhaar"], batch=[1, 5])


# a store of two batch sizes against a store of each alone (the online smc-adaptive with
# its best intervals, and MHAAR, which is not batched, in every store)
SMALL = dict(eps=(2.0,), runs=2, n=40, particles=50, mhaar_iters=100, interval_grid=10,
             methods=["smc-adaptive", "mhaar"], progress=False, workers=1)
BATCHES = (1, 8)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    root = tmp_path_factory.mktemp("batches")
    both = run_experiment(out=root / "both", batch=list(BATCHES), **SMALL)
    alone = {b: run_experiment(out=root / f"b{b}", batch=b, **SMALL) for b in BATCHES}
    return root, both, alone


def _drop_timing(df):
    return df.drop(columns="seconds").reset_index(drop=True)


@pytest.mark.slow
def test_a_store_of_two_batch_sizes_is_the_stores_of_each_alone(stores):
    """Task for task, bit for bit: a task's streams do not depend on the other batch sizes
    of its store, and the store of B = 1 alone is today's unbatched store."""
    import pandas as pd

    from dpbook.experiment import load_results

    root, both, alone = stores
    assert "batch" not in alone[1].columns and "batch" not in alone[8].columns
    assert list(both.columns[:4]) == ["method", "eps", "run", "batch"]
    assert len(both) == 2 * 2 + 2 and both["batch"].isna().sum() == 2  # MHAAR's: not batched
    _, tr = load_results(root / "both")
    for b in BATCHES:
        mine = both[both["batch"].eq(b).fillna(False) | (both.method == "mhaar")]
        pd.testing.assert_frame_equal(_drop_timing(mine.drop(columns="batch")),
                                      _drop_timing(alone[b]), check_exact=True)
        _, tr_b = load_results(root / f"b{b}")
        for run in range(2):
            got, want = tr["smc-adaptive", 2.0, run, b], tr_b["smc-adaptive", 2.0, run]
            assert sorted(got) == sorted(want)
            for k in want:
                np.testing.assert_array_equal(got[k], want[k], err_msg=f"{b} {run} {k}")
    # the batches differ (one interval per 8 individuals: 5 distinct intervals of 40)
    assert len(np.unique(tr["smc-adaptive", 2.0, 0, 8]["l"])) == 5
    assert len(np.unique(tr["smc-adaptive", 2.0, 0, 1]["l"])) == 40
    assert len(tr) == 6 and ("mhaar", 2.0, 0, None) in tr and ("mhaar", 2.0, 0) in tr
    assert ("smc-adaptive", 2.0, 0) not in tr and ("smc-adaptive", 2.0, 0, 8) in tr
    assert tr.particles("smc-adaptive", 2.0, 0, batch=8)[1].shape == (2, 50)
    assert sorted(p.name for p in (root / "b8" / "tasks").glob("*")) == [
        f"{m}_eps2.0_run{r}.npz" for m in ("mhaar", "smc-adaptive") for r in (0, 1)]


def test_summaries_carry_the_batch(stores):
    from dpbook.experiment import rmse_ratios, summarize

    _, both, alone = stores
    s = summarize(both)
    assert [(r.method, r.batch) for r in s.itertuples()][:2] == [("smc-adaptive", 1),
                                                                 ("smc-adaptive", 8)]
    assert s["batch"].isna().tolist() == [False, False, True] and (s["runs"] == 2).all()
    for b in BATCHES:  # each batch size's summary is that of its store alone
        row = s[s["batch"].eq(b).fillna(False)].drop(columns=["batch", "seconds"])
        want = summarize(alone[b]).drop(columns="seconds").iloc[:1]
        assert row.reset_index(drop=True).equals(want.reset_index(drop=True))
    r = rmse_ratios(both, others=("mhaar",), B=50, rng=1)
    assert list(r.columns[:2]) == ["batch", "eps"] and sorted(set(r["batch"])) == [1, 8]
    one = rmse_ratios(alone[8], others=("mhaar",), B=50, rng=2)
    assert np.array_equal(r[r["batch"] == 8]["ratio"], one["ratio"])


def test_a_store_of_batch_sizes_resumes_and_refuses_other_batch_sizes(stores, tmp_path,
                                                                      monkeypatch):
    """Killed after three tasks, rerun: the other three only, and the same store; asking
    for more batch sizes is a changed configuration, refused as a changed eps list."""
    from dpbook.experiment import runner

    _, both, _ = stores
    real, calls = runner.run_task, []

    def killed(spec):
        calls.append(spec)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return real(spec)

    monkeypatch.setattr(runner, "run_task", killed)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(out=tmp_path / "s", batch=list(BATCHES), **SMALL)
    assert len(list((tmp_path / "s" / "tasks").glob("*.npz"))) == 3
    calls.clear()
    monkeypatch.setattr(runner, "run_task", lambda spec: calls.append(spec) or real(spec))
    again = run_experiment(out=tmp_path / "s", batch=list(BATCHES), **SMALL)
    assert len(calls) == 3
    assert _drop_timing(again).equals(_drop_timing(both))
    for batch in ([1, 8, 64], 8):
        with pytest.raises(ValueError, match=r"different configuration \(differing: batch\)"):
            run_experiment(out=tmp_path / "s", batch=batch, **SMALL)


def test_experiment_cli_several_batch_sizes(tmp_path, capsys):
    from dpbook.cli import main

    base = ["experiment", "--eps", "2", "--runs", "1", "--n", "20", "--workers", "1", "--out",
            str(tmp_path / "s"), "--no-progress"]
    argv = base + ["--particles", "20", "--methods", "smc-fixed"]
    assert main(argv + ["--batch", "5", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert [(r["method"], r["batch"]) for r in res["summary"]] == [("smc-fixed", 1),
                                                                   ("smc-fixed", 5)]
    assert main(argv + ["--batch", "1", "5"]) == 0  # complete: read, not rerun
    head, one, five = capsys.readouterr().out.splitlines()[:3]
    assert head.split()[:3] == ["method", "batch", "eps"]
    assert one.split()[:2] == ["smc-fixed", "1"] and five.split()[:2] == ["smc-fixed", "5"]
    for bad, msg in ((["--batch", "0"], "batch must be an integer >= 1, got 0"),
                     (["--batch", "1", "1"], "batch lists 1 twice"),
                     (["--batch", "1", "5", "10"], "differing: batch"),
                     (["--methods", "mhaar", "--batch", "5"], "--batch does not apply to "
                                                               "--methods mhaar")):
        assert main([*(base if "mhaar" in bad else argv), *bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dpbook: error: ") and err.count("\n") == 1 and msg in err


@pytest.mark.slow
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
    assert main(["stream", str(csv), "--column", "x", "--eps", "2", "--batch", "0",
                 "--prior", "paper"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "batch" in err[0]


@pytest.mark.slow
def test_batched_long_streams_on_dask_are_the_local_pool_s(tmp_path, dask_scheduler):
    """Many batched streams of the long-stream methods at once (issue 28, item 3), two
    batch sizes in one store: on a Dask cluster, the estimates of a local run, row for
    row (run in this process: the local pool's workers give the same,
    test_experiment.test_process_pool_matches_serial)."""
    import pandas as pd

    kw = dict(eps=(1.0, 5.0), runs=1, n=300, particles=100, progress=False, batch=[20, 50],
              methods=["smc-marginal-adaptive", "smc-marginal-fixed", "online-gradient"])
    local = run_experiment(out=tmp_path / "local", workers=1, **kw)
    dask = run_experiment(out=tmp_path / "dask", scheduler=dask_scheduler, **kw)
    cols = [c for c in local.columns if c != "seconds"]
    assert len(local) == 12 and sorted(set(local["batch"])) == [20, 50]
    pd.testing.assert_frame_equal(local[cols].reset_index(drop=True),
                                  dask[cols].reset_index(drop=True))
