"""--family, --mechanism and `dpbook families` on the command line, and the experiment
runner with other families (shipped, and defined outside dpbook)."""

import json

import numpy as np
import pytest
from test_engine import Logistic

from dpbook.cli import main
from dpbook.experiment import load_results, run_experiment, summarize
from dpbook.model.families import available


def call(capsys, *args):
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_families_lists_every_shipped_family(capsys):
    code, out, _ = call(capsys, "families", "--json")
    assert code == 0
    got = json.loads(out)
    assert [f["name"] for f in got["families"]] == list(available())
    t = next(f for f in got["families"] if f["name"] == "student_t")
    assert t["options"]["df"]["default"] == 5.0 and t["location_scale"]
    assert got["mechanisms"] == ["laplace", "gaussian"]
    code, out, _ = call(capsys, "families")
    assert code == 0 and "poisson" in out and "--df" in out


@pytest.mark.parametrize("args, needle", [
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--family", "cauchy"], "unknown family"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--df", "3"], "no option 'df'"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--family", "student_t", "--df", "0"],
     "df"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--mechanism", "exponential"],
     "mechanism"),
    (["fisher", "--eps", "1", "--a", "8", "--b", "12", "--family", "poisson", "--theta", "-1"],
     "lam"),
    (["fisher", "--eps", "1", "--a", "8", "--b", "12", "--family", "poisson", "--theta", "1",
      "2"], "1 parameters"),
    (["best-interval", "--eps", "1", "--family", "laplace", "--lims", "1", "1"], "l < r"),
    (["experiment", "--family", "poisson", "--theta", "0", "--runs", "1"], "lam"),
])
def test_bad_family_arguments(args, needle, capsys):
    code, out, err = call(capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith("dpbook: error: ") and err.count("\n") == 1 and needle in err


@pytest.mark.slow
def test_fisher_for_other_families_and_mechanisms(capsys):
    from dpbook.likelihood.fisher_quadrature import fisher_exact

    code, out, _ = call(capsys, "fisher", "--eps", "1", "--a", "8", "--b", "12", "--family",
                        "poisson", "--theta", "10", "--json")
    got = json.loads(out)
    assert code == 0 and got["params"] == ["lam"] and np.shape(got["F"]) == (1, 1)
    assert got["F"][0][0] == pytest.approx(fisher_exact(8, 12, 1.0, (10.0,), "poisson")[0, 0],
                                           rel=1e-12)
    code, out, _ = call(capsys, "fisher", "--eps", "2", "--a", "-1", "--b", "1", "--family",
                        "student_t", "--df", "3", "--mechanism", "gaussian", "--method", "mc",
                        "--M", "200", "--K", "2000", "--json")
    got = json.loads(out)
    exact = fisher_exact(-1, 1, 2.0, (0.0, 1.0), available()["student_t"](3.0), "gaussian")
    assert code == 0 and got["mechanism"] == "gaussian"
    assert abs(got["F"][0][0] - exact[0, 0]) < 5 * got["se"][0][0]


@pytest.mark.slow
def test_best_interval_and_posterior_for_other_families(capsys, tmp_path):
    code, out, _ = call(capsys, "best-interval", "--eps", "2", "--family", "poisson", "--theta",
                        "10", "--grid", "12", "--json")
    got = json.loads(out)
    assert code == 0 and got["theta"] == [10.0] and got["a"] < got["b"]
    data = tmp_path / "d.csv"
    rng = np.random.default_rng(3)
    x = 5.0 + rng.laplace(size=20)
    y = np.clip(x, 0, 10) + 10 / 5.0 * rng.laplace(size=20)
    data.write_text("y,l,r\n" + "".join(f"{v},0,10\n" for v in y))
    for method, extra in [("exact", []), ("smc", ["--particles", "200"]),
                          ("mhaar", ["--iters", "2000"])]:
        code, out, _ = call(capsys, "posterior", "--method", method, "--family", "laplace",
                            "--eps", "5", *extra, "--json", str(data))
        got = json.loads(out)
        assert code == 0 and set(got["posterior"]) == {"loc", "scale"}
        assert got["family"] == "laplace" and abs(got["posterior"]["loc"]["mean"] - 5.0) < 2.0


@pytest.mark.slow
def test_experiment_with_other_families(tmp_path):
    """Shipped (Poisson, Gaussian mechanism: theta-grid intervals) and unshipped families
    run and store per-parameter columns.  (An unshipped family in worker processes, the
    pool's and a Dask cluster's, bit for bit: test_cli_input; one worker or two, the
    same results: test_experiment.test_process_pool_matches_serial; so both run in this
    process here.)"""
    kw = dict(eps=[2.0], runs=1, n=40, particles=64, mhaar_iters=100, seed=1,
              progress=False, interval_grid=12, workers=1)
    est = run_experiment(family="poisson", theta=8.0, mechanism="gaussian",
                         out=tmp_path / "p", **kw)
    assert {"lam_hat", "lam_sd", "lam_true"} <= set(est.columns) and len(est) == 3
    assert np.all(np.isfinite(est[["lam_hat", "lam_sd"]].to_numpy()))
    _, tr = load_results(tmp_path / "p")
    assert "table" in tr.manifest["intervals"]["2.0"]
    assert set(summarize(est).columns) >= {"lam_mean", "lam_bias", "lam_rmse"}
    g = Logistic()  # test_engine's: its kernels are compiled once for the suite
    kw.update(methods=["smc-adaptive", "smc-fixed"], theta=(50.0, 3.0), runs=2)
    one = run_experiment(family=g, out=tmp_path / "g1", **kw)
    cols = ["loc_hat", "scale_hat", "loc_sd", "scale_sd"]
    assert len(one) == 4 and np.all(np.isfinite(one[cols].to_numpy()))
