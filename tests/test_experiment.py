"""The experiment runner: reproducibility, resumption, executors, store and CLI."""

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_same_estimates

from dpbook import experiment as ex

SMALL = dict(eps=(1, 5), runs=2, n=40, particles=100, mhaar_iters=100, interval_grid=10,
             progress=False)
N_TASKS = 3 * 2 * 2
_REAL_RUN_TASK = ex.run_task


def _run(out, **kw):
    return ex.run_experiment(out=out, **{**SMALL, **kw})


def _same_tasks(d1: Path, d2: Path):
    """Every task file of d1 has bit-identical arrays in d2 (apart from the timing)."""
    names = sorted(p.name for p in (d1 / "tasks").glob("*.npz"))
    assert names == sorted(p.name for p in (d2 / "tasks").glob("*.npz"))
    for name in names:
        with np.load(d1 / "tasks" / name) as z1, np.load(d2 / "tasks" / name) as z2:
            assert sorted(z1.files) == sorted(z2.files)
            for k in z1.files:
                if k == "row_json":
                    r1, r2 = json.loads(str(z1[k])), json.loads(str(z2[k]))
                    r1.pop("seconds"), r2.pop("seconds")
                    assert r1 == r2, name
                else:
                    np.testing.assert_array_equal(z1[k], z2[k], err_msg=f"{name}:{k}")


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    """The reference: a serial run (workers=1, all numba threads) of the small config."""
    out = tmp_path_factory.mktemp("ref") / "paper"
    df = _run(out, workers=1)
    return out, df


def test_reference_store(ref):
    out, df = ref
    assert len(df) == N_TASKS
    assert list(df.columns[:10]) == ["method", "eps", "run", "seed", "data_seed", "mu_hat",
                                     "sigma_hat", "mu_sd", "sigma_sd", "seconds"]
    assert {"a", "b", "l_c", "r_c"} <= set(df.columns)
    assert np.isfinite(df[["mu_hat", "sigma_hat", "mu_sd", "sigma_sd"]].to_numpy()).all()
    assert (df["seconds"] > 0).all()
    ad = df[df.method == "smc-adaptive"]
    assert ad[["a", "b"]].notna().all().all() and ad[["l_c", "r_c"]].isna().all().all()
    fx = df[df.method != "smc-adaptive"]
    np.testing.assert_allclose(fx["l_c"], 50 - 10 * 10 ** 0.5)
    np.testing.assert_allclose(fx["r_c"], 50 + 10 * 10 ** 0.5)
    assert len(list((out / "tasks").glob("*.npz"))) == N_TASKS
    assert not list((out / "tasks").glob(".tmp-*"))
    pd.testing.assert_frame_equal(pd.read_parquet(out / "estimates.parquet"), df)
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] and m["config"]["runs"] == 2 and m["config"]["eps"] == [1.0, 5.0]
    assert set(m["intervals"]) == {"1.0", "5.0"}
    assert m["code"]["dpbook"] and "dirty" in m["code"]
    for p in ("python", "numpy", "scipy", "numba", "pandas", "dask"):
        assert m["packages"][p]
    # seeds: data seed depends on (eps, run) only; algorithm seed on (method, eps, run)
    assert df.groupby(["eps", "run"])["data_seed"].nunique().eq(1).all()
    assert df["seed"].nunique() == N_TASKS and df["data_seed"].nunique() == 4


def test_same_config_twice_bit_identical(ref, tmp_path):
    out, df = ref
    df2 = _run(tmp_path / "again", workers=1)
    assert_same_estimates(df, df2)
    _same_tasks(out, tmp_path / "again")


def test_seeds_come_from_identities_not_positions(ref, tmp_path):
    """A sub-experiment (one eps, one method, other runs absent) gives the same rows."""
    _, df = ref
    sub = _run(tmp_path / "sub", eps=(5,), methods="smc-fixed", workers=1)
    want = df[(df.method == "smc-fixed") & (df.eps == 5.0)].reset_index(drop=True)
    assert_same_estimates(want, sub)
    sub2 = _run(tmp_path / "sub2", eps=(5, 1), methods=("mhaar", "smc-fixed"), workers=1)
    assert_same_estimates(df[df.method != "smc-adaptive"].reset_index(drop=True), sub2)


def test_methods_share_the_sample(ref):
    """smc-fixed and mhaar see the same released values (same x, same interval)."""
    _, tr = ex.load_results(ref[0])
    for eps in (1.0, 5.0):
        for run in (0, 1):
            np.testing.assert_array_equal(tr["smc-fixed", eps, run]["y"],
                                          tr["mhaar", eps, run]["y"])
    assert not np.array_equal(tr["smc-fixed", 1.0, 0]["y"], tr["smc-fixed", 1.0, 1]["y"])


def test_resume_after_deleting_a_task(ref, tmp_path, monkeypatch):
    out = tmp_path / "resume"
    shutil.copytree(ref[0], out)
    (out / "tasks" / "smc-adaptive_eps5.0_run1.npz").unlink()
    (out / "estimates.parquet").unlink()
    calls = []
    real = ex.run_task
    monkeypatch.setattr(ex.runner, "run_task", lambda spec: calls.append(spec) or real(spec))
    df = _run(out, workers=1)
    assert [(c["method"], c["eps"], c["run"]) for c in calls] == [("smc-adaptive", 5.0, 1)]
    assert_same_estimates(ref[1], df)
    _same_tasks(ref[0], out)
    calls.clear()
    _run(out, workers=1)  # complete: nothing runs
    assert calls == []


def test_interrupted_run_loses_nothing(ref, tmp_path, monkeypatch):
    out = tmp_path / "interrupted"
    real = ex.run_task
    calls = []

    def flaky(spec):
        calls.append(spec)
        if len(calls) == 5:
            raise KeyboardInterrupt
        return real(spec)

    monkeypatch.setattr(ex.runner, "run_task", flaky)
    with pytest.raises(KeyboardInterrupt):
        _run(out, workers=1)
    assert len(list((out / "tasks").glob("*.npz"))) == 4
    assert len(pd.read_parquet(out / "estimates.parquet")) == 4
    assert not json.loads((out / "manifest.json").read_text())["complete"]
    calls.clear()
    monkeypatch.setattr(ex.runner, "run_task", lambda spec: calls.append(spec) or real(spec))
    df = _run(out, workers=1)
    assert len(calls) == N_TASKS - 4
    assert_same_estimates(ref[1], df)
    _same_tasks(ref[0], out)
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] and len(m["sessions"]) == 2


def test_process_pool_matches_serial(ref, tmp_path):
    out = tmp_path / "pool"
    df = _run(out, workers=2)
    m = json.loads((out / "manifest.json").read_text())
    assert m["sessions"][-1]["executor"] == "pool" and m["sessions"][-1]["workers"] == 2
    assert_same_estimates(ref[1], df)
    _same_tasks(ref[0], out)


@pytest.mark.slow
def test_dask_cluster_matches_local(ref, tmp_path, dask_scheduler):
    import distributed

    addr = dask_scheduler
    assert addr.startswith("tcp://127.0.0.1:")
    out = tmp_path / "dask"
    df = _run(out, scheduler=addr)
    with distributed.Client(addr) as c:
        assert len(c.scheduler_info()["workers"]) == 2
    m = json.loads((out / "manifest.json").read_text())
    assert m["sessions"][-1]["executor"] == "dask"
    assert m["sessions"][-1]["scheduler"] == addr and m["sessions"][-1]["workers"] == 2
    assert_same_estimates(ref[1], df)
    _same_tasks(ref[0], out)


def test_config_mismatch(ref, tmp_path):
    out = tmp_path / "mismatch"
    shutil.copytree(ref[0], out)
    with pytest.raises(ValueError, match=r"differing: runs\)") as e:
        _run(out, runs=3)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"differing: n, seed\)"):
        _run(out, n=61, seed=1)
    with pytest.raises(ValueError, match="differing: methods"):
        _run(out, methods="smc-fixed")
    assert_same_estimates(ref[1], ex.load_results(out)[0])  # nothing was touched


@pytest.mark.parametrize("kw, msg", [
    (dict(eps=(0,)), "eps"), (dict(eps=(1, -2)), "eps"), (dict(eps=(float("nan"),)), "eps"),
    (dict(eps=(float("inf"),)), "eps"), (dict(eps=()), "eps"), (dict(runs=0), "runs"),
    (dict(runs=1.5), "runs"), (dict(n=0), "n must"), (dict(particles=1), "particles"),
    (dict(methods="smc,mhaar"), "unknown method 'smc'"), (dict(methods=()), "method"),
    (dict(seed=-1), "seed"), (dict(interval_method="grid"), "interval_method"),
    (dict(sigma=0), "sigma"), (dict(mu=float("nan")), "mu"), (dict(workers=0), "workers"),
])
def test_bad_inputs(tmp_path, kw, msg):
    with pytest.raises(ValueError, match=msg) as e:
        _run(tmp_path / "bad", **kw)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "bad").exists()


def test_unreachable_scheduler(tmp_path):
    with pytest.raises(ValueError, match="cannot reach the Dask scheduler") as e:
        _run(tmp_path / "bad", scheduler="tcp://127.0.0.1:9", scheduler_timeout=2)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "bad").exists()


def test_load_and_ensure_results(ref, tmp_path, monkeypatch):
    out, df = ref
    est, tr = ex.load_results(out)
    assert_same_estimates(df, est)
    assert len(tr) == N_TASKS and ("mhaar", 5.0, 1) in tr
    d = tr["smc-adaptive", 1.0, 0]
    for k in ("mean_mu", "mean_sigma", "sd_mu", "sd_sigma", "ess", "l", "r", "y"):
        assert d[k].shape == (40,)
    assert d["mean_mu"][-1] == est.loc[0, "mu_hat"]
    a, b = est.loc[0, "a"], est.loc[0, "b"]
    np.testing.assert_allclose((d["r"] - d["l"]) / (b - a) > 0, True)
    t, mu, sig = tr.particles("smc-adaptive", 1.0, 0)
    assert list(t) == [20, 40] and mu.shape == sig.shape == (2, 100)
    t2, mu2, _ = tr.particles("smc-adaptive", 1.0, 0)
    np.testing.assert_array_equal(mu, mu2)  # resampling is deterministic
    _, mu_w, _, w = tr.particles("smc-fixed", 5.0, 0, resample=False)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert set(np.unique(mu)) <= set(np.unique(tr["smc-adaptive", 1.0, 0]["snapshot_mu"]))
    with pytest.raises(KeyError):
        tr.particles("smc-adaptive", 1.0, 1)  # keep_particles=1: only run 0 keeps them
    steps = tr.steps(methods=("smc-fixed",))
    assert len(steps) == 4 * 40 and set(steps.method) == {"smc-fixed"}
    s = ex.summarize(est)
    assert len(s) == 6 and {"mu_bias", "mu_rmse", "sigma_bias", "sigma_rmse"} <= set(s)

    def boom(spec):
        raise AssertionError("ensure_results must not rerun a complete store")

    monkeypatch.setattr(ex.runner, "run_task", boom)
    cfg = {k: v for k, v in SMALL.items() if k != "progress"}
    est2, _ = ex.ensure_results(out=out, progress=False, **cfg)
    assert_same_estimates(df, est2)
    # an incomplete store is resumed
    part = tmp_path / "part"
    shutil.copytree(out, part)
    (part / "tasks" / "mhaar_eps1.0_run0.npz").unlink()
    monkeypatch.setattr(ex.runner, "run_task", _REAL_RUN_TASK)
    est3, _ = ex.ensure_results(out=part, progress=False, workers=1, **cfg)
    assert_same_estimates(df, est3)
    with pytest.raises(ValueError, match="no experiment results"):
        ex.load_results(tmp_path / "nothing")


def test_cli(ref, tmp_path, capsys):
    from dpbook.cli import main

    out = tmp_path / "cli"
    shutil.copytree(ref[0], out)
    argv = ["experiment", "--eps", "1", "5", "--runs", "2", "--n", "40", "--particles", "100",
            "--mhaar-iters", "100", "--out", str(out), "--no-progress", "--json"]
    # the CLI uses the default interval grid; this store was made with grid 10
    assert main(argv) == 2
    assert "differing: interval_grid" in capsys.readouterr().err
    out2 = tmp_path / "cli2"
    small = ["experiment", "--eps", "1", "5", "--runs", "2", "--n", "30", "--particles", "50",
             "--mhaar-iters", "100", "--methods", "smc-fixed,mhaar", "--seed", "3",
             "--out", str(out2), "--no-progress"]
    assert main(small + ["--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["tasks"] == 8 and res["complete"]
    assert res["paths"]["estimates"] == str(out2 / "estimates.parquet")
    rows = {(r["method"], r["eps"]): r for r in res["summary"]}
    assert set(rows) == {("smc-fixed", 1.0), ("smc-fixed", 5.0), ("mhaar", 1.0), ("mhaar", 5.0)}
    assert all(np.isfinite(r["mu_rmse"]) and r["runs"] == 2 for r in rows.values())
    est = pd.read_parquet(out2 / "estimates.parquet")
    r = rows[("mhaar", 5.0)]
    v = est[(est.method == "mhaar") & (est.eps == 5.0)]["mu_hat"].to_numpy()
    assert r["mu_bias"] == pytest.approx(v.mean() - 50)
    assert r["mu_rmse"] == pytest.approx(np.sqrt(np.mean((v - 50) ** 2)))
    assert main(small) == 0
    text = capsys.readouterr().out
    assert "smc-fixed" in text and "rmse" in text
    for bad in (["--eps", "0"], ["--eps", "nan"], ["--runs", "0"], ["--n", "0"],
                ["--methods", "smc,foo"], ["--scheduler", "tcp://127.0.0.1:9"]):
        assert main(["experiment", "--out", str(tmp_path / "x"), "--no-progress", *bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dpbook: error: ") and err.count("\n") == 1


def test_stale_store_is_moved_aside_and_rerun(ref, tmp_path, monkeypatch):
    out, df = ref
    store = tmp_path / "paper"
    shutil.copytree(out, store)
    old = json.loads((store / "manifest.json").read_text())["config"]["algorithm"]
    monkeypatch.setattr(ex.config, "algorithm_fingerprint", lambda *extra: "0" * 16)
    cfg = {k: v for k, v in SMALL.items() if k != "progress"}
    est, tr = ex.ensure_results(out=store, progress=False, workers=1, **cfg)
    aside = tmp_path / f"paper.stale-{old}"
    assert (aside / "manifest.json").exists() and len(list((aside / "tasks").glob("*"))) == N_TASKS
    assert tr.config["algorithm"] == "0" * 16
    assert_same_estimates(df, est)  # the same code really ran again: same numbers
    # run_experiment itself refuses to mix stores made by different code
    monkeypatch.setattr(ex.config, "algorithm_fingerprint", lambda *extra: "1" * 16)
    with pytest.raises(ValueError, match="differing: algorithm"):
        _run(store, workers=1)


def test_ensure_results_serialises_concurrent_callers(ref, tmp_path):
    import fcntl
    import threading

    out, df = ref
    store = tmp_path / "paper"
    shutil.copytree(out, store)
    cfg = {k: v for k, v in SMALL.items() if k != "progress"}
    done = threading.Event()
    result = {}

    def caller():
        result["est"] = ex.ensure_results(out=store, progress=False, **cfg)[0]
        done.set()

    with open(store / ".lock", "w") as lock:  # another caller holds the store
        fcntl.flock(lock, fcntl.LOCK_EX)
        thread = threading.Thread(target=caller)
        thread.start()
        assert not done.wait(1.0)  # ensure_results waits for the lock
    thread.join(60)
    assert done.is_set()
    assert_same_estimates(df, result["est"])


def test_book_experiment_store_names(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(ex.runner, "ensure_results",
                        lambda out, **kw: (seen.append((Path(out), kw)), (None, None))[1])
    for mode, seed, name in [("full", 0, "paper"), ("quick", 0, "quick"),
                             ("quick", 3, "quick-seed3")]:
        _, _, path, _, _ = ex.book_experiment(mode, seed, root=tmp_path)
        assert path == tmp_path / "results" / name
    assert seen[0][1]["runs"] == 30 and seen[0][1]["mhaar_iters"] == 100_000
    assert seen[2][1]["seed"] == 3
    with pytest.raises(ValueError, match="mode"):
        ex.book_experiment("medium")
    # chapter 5's eps and runs: the mode's own go to the shared store, others to their own
    for kw, name in [(dict(eps=[10, 5, 2, 1], runs=5), "quick"),
                     (dict(eps=[3, 1], runs=2), "quick-eps1-3-runs2"),
                     (dict(eps=0.5), "quick-eps0.5")]:
        _, _, path, _, _ = ex.book_experiment("quick", root=tmp_path, **kw)
        assert path == tmp_path / "results" / name
        assert all(seen[-1][1][k] == v for k, v in kw.items())
    with pytest.raises(ValueError, match="runs must be an integer"):
        ex.book_experiment("quick", root=tmp_path, runs=0)


def test_rmse_ratios_paired_bootstrap():
    rng = np.random.default_rng(0)
    rows = []
    for eps in (1.0, 5.0):
        for run in range(8):
            shared = rng.normal()  # the population of the run, common to the methods
            for method, noise in (("smc-adaptive", 0.5), ("smc-fixed", 1.0), ("mhaar", 0.5)):
                rows.append({"method": method, "eps": eps, "run": run, "mu_true": 0.0,
                             "sigma_true": 1.0, "mu_hat": shared + noise * rng.normal(),
                             "sigma_hat": 1.0 + noise * rng.normal()})
    est = pd.DataFrame(rows)
    r = ex.rmse_ratios(est, B=500, rng=1)
    assert len(r) == 2 * 2 * 2 and set(r.other) == {"smc-fixed", "mhaar"}
    one = r[(r.eps == 1.0) & (r.param == "mu") & (r.other == "smc-fixed")].iloc[0]
    g = est[est.eps == 1.0].pivot(index="run", columns="method", values="mu_hat")
    rmse = np.sqrt((g**2).mean())
    assert one.ratio == pytest.approx(rmse["smc-adaptive"] / rmse["smc-fixed"])
    assert one.q05 <= one.ratio <= one.q95 and one.lowest == rmse.idxmin()
    # same seed, same numbers
    pd.testing.assert_frame_equal(r, ex.rmse_ratios(est, B=500, rng=1))


def test_fingerprints_follow_the_versions_of_the_algorithms_used(monkeypatch):
    # a configuration's fingerprint changes with the versions of the algorithms its
    # store holds (dpbook.versions), not with those of others, and not with the source
    from dpbook.experiment import make_config
    from dpbook.versions import VERSIONS

    def fps():
        return [make_config(runs=1, n=10, **kw)["algorithm"] for kw in (
            {}, dict(methods=["smc-marginal-adaptive"]),
            dict(family="laplace"), dict(mechanism="gaussian"))]

    paper, long, laplace, gauss = fps()
    assert paper == ex.config.algorithm_fingerprint() and laplace == gauss  # generic model
    assert len({paper, long, laplace}) == 3
    monkeypatch.setitem(VERSIONS, "marginal", 2)
    assert fps() == [paper, fps()[1], laplace, gauss] and fps()[1] != long
    monkeypatch.setitem(VERSIONS, "generic-model", VERSIONS["generic-model"] + 1)  # others
    assert fps()[0] == paper and fps()[2] != laplace and fps()[3] != gauss
    monkeypatch.setitem(VERSIONS, "smc", 2)
    assert fps()[0] != paper


# the source hash of the paper's algorithm modules at the commit before dpbook.versions
LEGACY = "b1681e7a1935cb81"


def _as_legacy(store: Path, **extra):
    """Rewrite a store as the code before the versions wrote it: the source hash in the
    manifest, and that configuration's hash in every task file."""
    path = store / "manifest.json"
    m = json.loads(path.read_text())
    m["config"].update(algorithm=LEGACY, **extra)
    path.write_text(json.dumps(m))
    sha = ex.config.config_hash(m["config"])
    for f in (store / "tasks").glob("*.npz"):
        with np.load(f) as z:
            arrays = {k: z[k] for k in z.files}
        arrays["config_sha"] = np.array(sha)
        np.savez_compressed(f, **arrays)


def test_store_made_before_the_versions_is_migrated_not_recomputed(ref, tmp_path,
                                                                   monkeypatch):
    from dpbook.versions import VERSIONS

    out, df = ref
    store = tmp_path / "paper"
    shutil.copytree(out, store)
    _as_legacy(store)
    cfg = {k: v for k, v in SMALL.items() if k != "progress"}
    assert ex.is_complete(store, **cfg)
    monkeypatch.setattr(ex.runner, "run_task", lambda spec: pytest.fail("recomputed"))
    est, tr = ex.ensure_results(out=store, progress=False, workers=1, **cfg)
    assert_same_estimates(df, est)
    assert tr.config["algorithm"] == ex.config.algorithm_fingerprint()
    assert not list(tmp_path.glob("paper.stale-*"))
    _run(store, workers=1)  # resuming writes the manifest in today's terms
    assert json.loads((store / "manifest.json").read_text())["config"]["algorithm"] == \
        ex.config.algorithm_fingerprint()
    # ... while the versions are those of the code before them
    shutil.rmtree(store)
    shutil.copytree(out, store)
    _as_legacy(store)
    monkeypatch.setitem(VERSIONS, "mhaar", VERSIONS["mhaar"] + 1)
    assert not ex.is_complete(store, **cfg)
    assert ex.runner.set_aside_if_stale(store, ex.make_config(**cfg)) == \
        tmp_path / f"paper.stale-{LEGACY}"


def test_original_code_releases_with_the_authors_noise_scale(tmp_path):
    # the same data and noise draws, released with scale (r - l)/(eps sqrt 2): for the
    # fixed interval y - T(x) shrinks by sqrt 2, so T(x) = y_s - (y - y_s)/(sqrt 2 - 1)
    # must lie in [l_c, r_c] for every individual; the methods analyse at eps
    cfg = dict(eps=(2.0,), runs=1, n=60, particles=50, mhaar_iters=100, interval_grid=6,
               methods=["smc-fixed", "mhaar"], progress=False, workers=1)
    ex.run_experiment(out=tmp_path / "c", **cfg)
    ex.run_experiment(out=tmp_path / "s", original_code=True, **cfg)
    assert "original_code" not in ex.make_config(**{k: v for k, v in cfg.items()
                                                    if k not in ("progress", "workers")})
    res_c, res_s = ex.load_results(tmp_path / "c")[1], ex.load_results(tmp_path / "s")[1]
    assert res_s.config["original_code"] is True
    for method in ("smc-fixed", "mhaar"):
        a, b = res_c.get(method, 2.0, 0), res_s.get(method, 2.0, 0)
        np.testing.assert_array_equal(a["l"], b["l"])
        x = b["y"] - (a["y"] - b["y"]) / (2 ** 0.5 - 1)
        assert np.all((x >= a["l"] - 1e-9) & (x <= a["r"] + 1e-9))
        assert not np.allclose(a["y"], b["y"])
    with pytest.raises(ValueError, match="original_code must be True or False"):
        ex.make_config(original_code="yes")


def test_algorithm_seed_reseeds_the_algorithms_not_the_data(ref, tmp_path):
    # issue 38's equivalence check reruns a kernel with a second algorithm seed: the
    # fixed-interval releases must be those of the reference, the estimates not
    cfg = {k: v for k, v in SMALL.items() if k != "progress"}
    assert "algorithm_seed" not in ex.make_config(**cfg)
    assert ex.make_config(algorithm_seed=1, **cfg)["algorithm_seed"] == 1
    df = _run(tmp_path / "a", eps=(5,), methods=("smc-fixed", "mhaar"), workers=1,
              algorithm_seed=1)
    tr_ref, tr = ex.load_results(ref[0])[1], ex.load_results(tmp_path / "a")[1]
    want = ref[1]
    for method in ("smc-fixed", "mhaar"):
        for run in (0, 1):
            np.testing.assert_array_equal(tr[method, 5.0, run]["y"], tr_ref[method, 5.0, run]["y"])
        got = df[df.method == method].mu_hat.to_numpy()
        old = want[(want.method == method) & (want.eps == 5.0)].mu_hat.to_numpy()
        assert not np.array_equal(got, old)
    with pytest.raises(ValueError, match="algorithm_seed"):
        ex.make_config(algorithm_seed=-1)


def test_run_online_analyses_at_the_eps_it_is_given():
    from dpbook.online import run_online
    from dpbook.privacy.policies import FixedPolicy
    from dpbook.privacy.population import normal_population

    pop = normal_population(5, 0.0, 1.0, 2.0 * 2 ** 0.5, seed=1)
    assert run_online(pop, FixedPolicy(-5, 5), 5, n_particles=10, eps=2.0).smc.eps == 2.0
    pop = normal_population(5, 0.0, 1.0, 2.0, seed=1)
    assert run_online(pop, FixedPolicy(-5, 5), 5, n_particles=10).smc.eps == 2.0


def test_quantiles_are_kept_only_when_asked(ref, tmp_path):
    # the scale's posterior can have infinite variance under clipping: the rows then
    # carry the final posterior's quantiles (the exact-posterior rule reads them)
    cfg = {k: v for k, v in SMALL.items() if k != "progress"}
    assert "quartiles" not in ex.make_config(**cfg)
    df = _run(tmp_path / "q", eps=(5,), methods=("smc-fixed", "mhaar"), workers=1,
              quartiles=True)
    smc = df[df.method == "smc-fixed"]
    for p in ("mu", "sigma"):
        q = smc[[f"{p}_q{k:02d}" for k in (5, 25, 50, 75, 95)]].to_numpy()
        assert (np.diff(q, axis=1) > 0).all()
    assert df[df.method == "mhaar"].mu_q50.isna().all()  # a batch method: no quartiles
    # the estimates are those of the store without them
    want = ref[1][(ref[1].eps == 5.0) & (ref[1].method != "smc-adaptive")]
    np.testing.assert_array_equal(df.mu_hat.to_numpy(), want.mu_hat.to_numpy())
    with pytest.raises(ValueError, match="quartiles must be True or False"):
        ex.make_config(quartiles="yes", **cfg)


def test_normal_theta_and_prior_are_the_ones_given(tmp_path):
    """The normal family's theta= is its (mu, sigma), and a prior that is not Section 6's
    is recorded and used by the tasks (both were silently replaced by the defaults)."""
    from dpbook.model.families.normal import Normal
    from dpbook.model.prior import LocationScalePrior

    prior = LocationScalePrior(loc_mean=20.0, loc_var=1.0, scale2_shape=3.0, scale2_scale=8.0)
    kw = dict(eps=[2.0], runs=1, n=30, particles=100, methods=["smc-fixed"], progress=False,
              workers=1)
    a, _ = ex.ensure_results(tmp_path / "a", family=Normal().with_prior(prior), theta=(20.0, 2.0),
                          **kw)
    b, _ = ex.ensure_results(tmp_path / "b", family=Normal(), theta=(20.0, 2.0), **kw)
    assert a.mu_true.iloc[0] == 20.0 and a.sigma_true.iloc[0] == 2.0
    config = {k: json.loads((tmp_path / k / "manifest.json").read_text())["config"]
              for k in "ab"}
    assert config["a"]["prior"]["loc_mean"] == 20.0
    assert "prior" not in config["b"]  # the default keeps its configuration and hash
    assert a.mu_hat.iloc[0] != b.mu_hat.iloc[0]
