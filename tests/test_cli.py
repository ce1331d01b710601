"""The dpbook command line: public names, JSON output, and one-line errors (exit 2)."""

import json

import pytest

from dpbook.cli import main


def run(capsys, *args):
    """The command line in this process (its process boundary, ``python -m dpbook.cli``,
    is tested in test_progress_and_signals and test_curator_cli)."""
    code = main(list(args))
    cap = capsys.readouterr()
    return code, cap.out, cap.err


GOOD = "y,l,r\n0.3,-1,1\n-0.2,-1,1\n1.4,-1,1\n0.1,-0.5,1.5\n"


@pytest.mark.parametrize("args, needle", [
    (["fisher", "--eps", "0", "--a", "-1", "--b", "1"], "eps"),
    (["fisher", "--eps", "-2", "--a", "-1", "--b", "1"], "eps"),
    (["fisher", "--eps", "inf", "--a", "-1", "--b", "1"], "eps"),
    (["fisher", "--eps", "nan", "--a", "-1", "--b", "1"], "eps"),
    (["fisher", "--eps", "1", "--a", "1", "--b", "1"], "a < b"),
    (["fisher", "--eps", "1", "--a", "2", "--b", "1"], "a < b"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "magic"], "method"),
    (["best-interval", "--eps", "0"], "eps"),
    (["best-interval", "--eps", "1", "--method", "magic"], "method"),
    (["best-interval", "--eps", "1", "--score", "det"], "score"),
    (["posterior", "--method", "smc", "--eps", "0", "DATA"], "eps"),
    (["posterior", "--method", "magic", "--eps", "1", "DATA"], "method"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_arguments(args, needle, write_csv, capsys):
    args = [write_csv(GOOD) if a == "DATA" else a for a in args]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("dpbook: error:") and needle in err
    assert "Traceback" not in err


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ("y,l,r\n", "no data rows"),
    ("y,l\n1,0\n", "lacks column(s) r"),
    ("y,l,r\n1,0,x\n", "non-number"),
    ("y,l,r\n1,0,\n", "line 2: column r is empty"),
    ("y,l,r\nnan,0,1\n", "non-number"),
    ("y,l,r\ninf,0,1\n", "finite"),
    ("y,l,r\n1,2,1\n", "l < r"),
])
def test_bad_csv(text, needle, write_csv, capsys):
    for method in ("smc", "exact"):
        assert main(["posterior", "--method", method, "--eps", "1", write_csv(text)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, err


def test_missing_file(capsys):
    assert main(["posterior", "--method", "smc", "--eps", "1", "/no/such.csv"]) == 2
    assert "no such file" in capsys.readouterr().err


@pytest.mark.slow
def test_posterior_json_and_reproducible(write_csv, capsys):
    path = write_csv(GOOD)
    argv = ["posterior", "--method", "smc", "--eps", "2", "--particles", "200", "--seed",
            "4", "--json", path]
    code, out, err = run(capsys, *argv)
    assert code == 0, err
    res = json.loads(out)
    assert set(res) >= {"posterior", "seconds"}
    keys = {"mean", "sd", "q05", "q25", "median", "q75", "q95"}
    assert set(res["posterior"]) == {"mu", "sigma"}
    assert all(set(v) == keys for v in res["posterior"].values())
    code2, out2, _ = run(capsys, *argv)
    strip = lambda r: {k: v for k, v in json.loads(r).items() if k != "seconds"}  # noqa: E731
    assert strip(out) == strip(out2)


@pytest.mark.slow
def test_fisher_json(capsys):
    code, out, err = run(capsys, "fisher", "--eps", "2", "--a", "-1", "--b", "1", "--json")
    assert code == 0, err
    F = json.loads(out)["F"]
    assert len(F) == 2 and len(F[0]) == 2 and F[0][0] > 0 and abs(F[0][1] - F[1][0]) < 1e-12


@pytest.mark.slow
def test_best_interval_json(capsys):
    code, out, err = run(capsys, "best-interval", "--eps", "5", "--grid", "20", "--json")
    assert code == 0, err
    res = json.loads(out)
    assert res["a"] < res["b"] and res["score"] > 0


@pytest.mark.parametrize("args", [
    ["posterior", "--method", "exact", "--eps", "1", "DATA"],
    ["posterior", "--method", "smc", "--eps", "2", "--particles", "100", "DATA"],
    ["fisher", "--eps", "2", "--a", "-1", "--b", "1"],
    ["best-interval", "--eps", "2", "--grid", "10"],
])
def test_human_readable_output_shows_the_json_numbers(write_csv, capsys, args):
    """The text output carries the same numbers as --json (to its printed precision)."""
    import re

    args = [write_csv(GOOD) if a == "DATA" else a for a in args]
    assert main(args + ["--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "{" not in text
    shown = [float(v) for v in re.findall(r"[-+]?\d+\.\d+(?:e[-+]?\d+)?", text)]
    if "F" in data:
        want = [v for row in data["F"] for v in row]
    elif "a" in data:
        want = [data["a"], data["b"], data["score"]]
    else:
        post = data["posterior"]
        want = [post[p][k] for p in ("mu", "sigma") for k in ("mean", "sd", "median")
                if post[p][k] is not None]
    for w in want:
        assert any(abs(s - w) <= 1e-4 * max(1.0, abs(w)) for s in shown), (w, text)


def test_every_option_has_help():
    """`dpbook SUB --help` explains every option (what it is, and its default)."""
    import argparse

    from dpbook.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {'/'.join(a.option_strings)}" for name, p in sub.choices.items()
               for a in p._actions if a.option_strings and not a.help]
    assert not missing, f"options without help: {missing}"


@pytest.mark.slow
@pytest.mark.parametrize("method", ["exact", "smc", "mhaar"])
def test_posterior_reports_quantiles(write_csv, capsys, method):
    """Quantiles besides mean and sd (sd is no safe summary of a scale under clipping);
    the text leads with the median and the 90% interval."""
    path = write_csv(GOOD)
    iters = ["--iters", "3000"] if method == "mhaar" else []
    assert main(["posterior", "--method", method, "--eps", "2", path, *iters,
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["posterior"]
    for p in ("mu", "sigma"):
        q = [out[p][k] for k in ("q05", "q25", "median", "q75", "q95")]
        assert q == sorted(q) and q[0] < q[-1]
    assert main(["posterior", "--method", method, "--eps", "2", path, *iters]) == 0
    text = capsys.readouterr().out
    assert f"mu    = {out['mu']['median']:.4f} (90% interval [{out['mu']['q05']:.4f}" in text


def test_exact_posterior_quantiles_are_the_grid_posteriors(write_csv, capsys):
    from dpbook.data import read_releases
    from dpbook.posterior import exact_posterior

    path = write_csv(GOOD)
    assert main(["posterior", "--method", "exact", "--eps", "2", path, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)["posterior"]
    q = exact_posterior(*read_releases(path)[0], 2.0).quantile([0.05, 0.5, 0.95])
    assert [out["sigma"][k] for k in ("q05", "median", "q95")] == list(q[:, 1])


def test_weighted_particle_quantiles():
    import numpy as np

    from dpbook.smc import SMC

    smc = SMC(1.0, n_particles=4, n_max=1, seed=0, generic=True)
    smc.theta = np.array([[3.0, 1.0], [1.0, 2.0], [2.0, 3.0], [4.0, 4.0]])
    smc.w = np.array([0.1, 0.2, 0.3, 0.4])
    # sorted mu: 1 (0.2), 2 (0.3), 3 (0.1), 4 (0.4): cumulative 0.2, 0.5, 0.6, 1.0
    np.testing.assert_array_equal(smc.quantile([0.1, 0.5, 0.55, 0.9])[:, 0], [1, 2, 3, 4])


@pytest.mark.parametrize("args, key, want", [
    (["experiment", "--eps", "2", "--eps", "5"], "eps", [2.0, 5.0]),
    (["experiment", "--eps", "2", "5", "--eps", "10"], "eps", [2.0, 5.0, 10.0]),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--theta", "0", "--theta", "2"],
     "theta", [0.0, 2.0]),
    (["best-interval", "--eps", "1", "--theta", "0", "--theta", "2"], "theta", [0.0, 2.0]),
    (["experiment", "--theta", "50", "--theta", "3"], "theta", [50.0, 3.0]),
])
def test_repeated_multi_value_options_extend(args, key, want):
    from dpbook.cli import build_parser

    assert getattr(build_parser().parse_args(args), key) == want


def test_lims_takes_one_pair_and_ends_are_named_as_given(capsys):
    assert main(["best-interval", "--eps", "1", "--lims", "-1", "1", "--lims", "0", "1"]) == 2
    assert "--lims takes one pair" in capsys.readouterr().err
    assert main(["fisher", "--eps", "1", "--a", "2", "--b", "1"]) == 2
    assert "interval [a, b] must have a < b" in capsys.readouterr().err


def test_score_is_named_by_the_familys_parameter(capsys):
    assert main(["best-interval", "--eps", "2", "--grid", "6", "--family", "student_t"]) == 0
    assert "score loc," in capsys.readouterr().out


def test_interrupt_is_one_line_and_status_130(monkeypatch, capsys):
    import dpbook.calibration as cal

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cal, "run_calibration", interrupted)
    assert main(["calibrate", "--method", "exact", "--eps", "1", "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted" in err and "resumes" in err
