"""benchmarks/stream_vs_exact.py (issue 25's done-when): what it compares is what the
commands compute."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dpbook.cli import main

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "stream_vs_exact.py"


@pytest.fixture
def bench():
    spec = importlib.util.spec_from_file_location("_stream_vs_exact", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("method", ["smc-marginal", "smc"])
def test_the_benchmark_is_the_commands(bench, method, tmp_path, capsys):
    """Its stream is `dpbook stream --seed 3`, its re-run with seed 1 is `dpbook
    posterior --method M --seed 1` on that stream's released file, its exact quartiles
    those of `dpbook posterior --method exact`, and its gaps are theirs in exact IQRs."""
    values = tmp_path / "values.csv"
    pd.DataFrame({"v": np.random.default_rng(2).normal(3300, 500, 80)}).to_csv(
        values, index=False)
    prior = ["--prior-loc", "3300", "250000", "--prior-scale2", "2", "500000"]
    [res] = bench.main([str(values), "--column", "v", "--methods", method, "--seeds", "2",
                        "--particles", "100", "--seed", "3", *prior])
    capsys.readouterr()
    released = tmp_path / "released.csv"
    assert main(["stream", str(values), "--column", "v", "--eps", "1", "--method", method,
                 "--particles", "100", "--seed", "3", "--released", str(released),
                 "--json", *prior]) == 0
    post = json.loads(capsys.readouterr().out)["posterior"]
    assert {f"{p}_q{q}": post[p][name] for p in ("mu", "sigma") for q, name in
            ((25, "q25"), (50, "median"), (75, "q75"))} == res["stream_quartiles"]
    assert res["stream_replayed"]

    def posterior(*args):
        assert main(["posterior", str(released), "--eps", "1", "--json", *prior,
                     *args]) == 0
        out = json.loads(capsys.readouterr().out)["posterior"]
        return {f"{p}_q{q}": out[p][name] for p in ("mu", "sigma")
                for q, name in ((25, "q25"), (50, "median"), (75, "q75"))}

    assert posterior("--method", method, "--particles", "100", "--seed", "1") == res["runs"][0]
    exact = posterior("--method", "exact")
    assert exact == res["exact_quartiles"]
    for row in res["rows"]:
        key = f"{row['param']}_{row['quartile']}"
        iqr = exact[f"{row['param']}_q75"] - exact[f"{row['param']}_q25"]
        gaps = [(run[key] - exact[key]) / iqr for run in res["runs"]]
        assert row["mean_gap"] == pytest.approx(np.mean(gaps))
        assert row["sd"] == pytest.approx(np.std(gaps, ddof=1))
        assert row["stream_gap"] == pytest.approx((res["stream_quartiles"][key] - exact[key])
                                                  / iqr)


def test_pooled_standardises_by_the_pooled_sd(bench):
    """Two files with K = 2 and 5 re-runs: s^2 = (1 * 0.1^2 + 4 * 0.2^2) / 5, and z_f =
    (stream gap - mean gap) / (s sqrt(1 + 1/K_f))."""
    def result(k, sd, stream, mean):
        return {"seeds": list(range(k)), "rows": [{"param": "mu", "quartile": "q50", "sd": sd,
                                                   "stream_gap": stream, "mean_gap": mean}]}

    [row] = bench.pooled([result(2, 0.1, 0.3, 0.1), result(5, 0.2, -0.1, 0.0)])
    s = np.sqrt((0.1**2 + 4 * 0.2**2) / 5)
    z = [0.2 / (s * np.sqrt(1.5)), -0.1 / (s * np.sqrt(1.2))]
    assert row["pooled_sd"] == pytest.approx(s)
    assert row["z"] == pytest.approx(z)
    assert row["shift"] == pytest.approx(np.mean(z) * np.sqrt(2))
    assert row["rms"] == pytest.approx(np.sqrt(np.mean(np.square(z))))
