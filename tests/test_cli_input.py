"""The command line with a user's own family and data (issue 39): --family
module:Class and path/to/file.py:Class on every sub-command, --range and the prior's
refusal, --missing, and the one JSON shape of a posterior summary."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dpbook.cli import main

FAMILY = str(Path(__file__).parent / "data" / "hypsecant_family.py") + ":HypSecant"
GENLOG = str(Path(__file__).parent / "data" / "genlogistic_family.py") + ":GenLogistic"
SHAPE = {"mean", "sd", "q05", "q25", "median", "q75", "q95"}
RECORD = {"schema_version", "family", "mechanism", "prior", "eps", "n", "method", "seed"}


def _run(capsys, *args):
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def releases(tmp_path):
    rng = np.random.default_rng(0)
    y = np.clip(rng.normal(50, 3, 40), 40, 60) + rng.laplace(0, 4, 40)
    path = tmp_path / "rel.csv"
    path.write_text("y,l,r\n" + "".join(f"{v!r},40.0,60.0\n" for v in y.tolist()))
    return path


@pytest.fixture
def values(tmp_path):
    path = tmp_path / "v.csv"
    rng = np.random.default_rng(1)
    path.write_text("v\n" + "".join(f"{v!r}\n" for v in rng.normal(50, 3, 60).tolist()))
    return path


def test_a_family_file_on_fisher(capsys):
    code, out, err = _run(capsys, "fisher", "--family", FAMILY, "--eps", 1, "--a", -2,
                          "--b", 2, "--json")
    res = json.loads(out)
    assert code == 0 and res["family"] == "hypsecant" and res["F"][0][0] > 0, err


def test_a_family_module_on_fisher(capsys, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent / "data"))
    code, out, err = _run(capsys, "fisher", "--family", "hypsecant_family:HypSecant",
                          "--eps", 1, "--a", -2, "--b", 2, "--json")
    assert code == 0 and json.loads(out)["family"] == "hypsecant", err


def test_a_family_file_s_own_option_on_fisher(capsys):
    from dpbook.cli.family import user_family
    from dpbook.fisher import fisher_information

    code, out, err = _run(capsys, "fisher", "--family", GENLOG, "--shape", 2, "--eps", 1,
                          "--a", -2, "--b", 2, "--json")
    res = json.loads(out)
    assert code == 0 and res["family_options"] == {"shape": 2.0}, err
    cls = user_family(GENLOG)
    F2, F1 = (fisher_information(-2, 2, 1, (0, 1), cls(shape=a)).F for a in (2, 1))
    assert np.array_equal(res["F"], F2) and not np.allclose(F2, F1)
    with pytest.raises(SystemExit):
        main(["fisher", "--family", GENLOG, "--help"])
    shown = capsys.readouterr().out
    assert "--shape SHAPE" in shown and "shape of the generalised logistic" in shown


@pytest.mark.slow
def test_a_family_file_with_its_option_on_posterior_and_stream(capsys, releases, values):
    code, out, err = _run(capsys, "posterior", "--family", GENLOG, "--shape", 2, "--method",
                          "exact", "--eps", 2, "--range", 30, 70, "--json", releases)
    res = json.loads(out)
    assert code == 0 and res["family"] == "genlogistic" and err == "", err
    assert res["family_options"] == {"shape": 2.0}
    assert 45 < res["posterior"]["loc"]["median"] < 55
    code, out, err = _run(capsys, "stream", values, "--column", "v", "--family", GENLOG,
                          "--shape", 2, "--eps", 2, "--range", 30, 70, "--particles", 200,
                          "--json")
    res = json.loads(out)
    assert code == 0 and res["family_options"] == {"shape": 2.0}, err
    assert 45 < res["posterior"]["loc"]["median"] < 55


def test_a_family_module_in_the_current_directory(capsys, tmp_path, monkeypatch):
    """--family module:Class finds module.py in the current directory, as `python -m`
    does (the console script's sys.path lacks it), and a family file imports the modules
    beside it; sys.path is left as it was."""
    import sys

    from dpbook.model.families import family_class

    shutil.copy(Path(__file__).parent / "data" / "genlogistic_family.py",
                tmp_path / "genlog_here_53.py")
    (tmp_path / "fam").mkdir()
    (tmp_path / "fam" / "beside_53.py").write_text(
        "from hypsecant_base_53 import HypSecant\n\nclass Mine(HypSecant):\n    name = 'mine'\n")
    shutil.copy(Path(__file__).parent / "data" / "hypsecant_family.py",
                tmp_path / "fam" / "hypsecant_base_53.py")
    monkeypatch.chdir(tmp_path)
    path = list(sys.path)
    code, out, err = _run(capsys, "fisher", "--family", "genlog_here_53:GenLogistic",
                          "--shape", 2, "--eps", 1, "--a", -2, "--b", 2, "--json")
    assert code == 0 and json.loads(out)["family_options"] == {"shape": 2.0}, err
    assert family_class("fam/beside_53.py:Mine").name == "mine"
    assert sys.path == path
    monkeypatch.chdir(tmp_path / "fam")
    assert family_class("beside_53:Mine").name == "mine"
    with pytest.raises(ValueError, match="cannot import module genlog_here_53 .* nor find "
                                         "genlog_here_53.py in the current directory"):
        family_class("genlog_here_53:GenLogistic")


@pytest.mark.parametrize("args, message", [
    ([GENLOG, "--shape", "x"], "argument --shape: not a number: 'x'"),
    ([GENLOG, "--shape", -1], "shape must be in [0.05, 20], got -1.0"),
    ([GENLOG, "--df", 3], f"--df is not an option of {GENLOG}"),
    ([FAMILY, "--shape", 2], "unrecognized arguments: --shape 2"),
    (["normal", "--shape", 2], "unrecognized arguments: --shape 2"),
    ([GENLOG.replace(":GenLogistic", ":Clashing")],
     "its option 'eps' clashes with dpbook's own --eps"),
])
def test_a_family_option_that_does_not_fit_is_one_line(capsys, args, message):
    code, out, err = _run(capsys, "fisher", "--eps", 1, "--a", -1, "--b", 1, "--family", *args)
    assert code == 2 and err.count("\n") == 1 and message in err and out == "", err


@pytest.mark.slow
def test_a_family_file_with_its_option_in_worker_processes_and_on_dask(capsys, tmp_path,
                                                                        dask_scheduler):
    """The pool's spawned workers and a Dask cluster's get the class by value (no __main__
    guard, no file), with its option: the same estimates, bit for bit."""
    import pandas as pd

    argv = ["experiment", "--family", GENLOG, "--shape", 2, "--eps", 5, "--runs", 2, "--n",
            20, "--methods", "smc-fixed", "--particles", 50, "--theta", 0, 1,
            "--no-progress", "--json", "--out"]
    code, out, err = _run(capsys, *argv, tmp_path / "pool", "--workers", 2)
    assert code == 0, err
    res = json.loads(out)
    assert res["family_options"] == {"shape": 2.0} and res["tasks"] == 2 and res["complete"]
    code, out, err = _run(capsys, *argv, tmp_path / "dask", "--scheduler", dask_scheduler)
    assert code == 0 and json.loads(out)["complete"], err
    pool, dask = (pd.read_parquet(tmp_path / d / "estimates.parquet").drop(columns="seconds")
                  for d in ("pool", "dask"))
    pd.testing.assert_frame_equal(pool, dask, check_exact=True)


@pytest.mark.parametrize("spec, message", [
    ("no/such/file.py:A", "--family no/such/file.py:A: no such file no/such/file.py"),
    ("/etc/passwd:X", "a family file is a Python file ending in .py"),  # found by the sweep
    (FAMILY.replace(":HypSecant", ":Nope"), "defines no Nope"),
    (FAMILY.replace(":HypSecant", ":NotAFamily"), "NotAFamily is not a dpbook Family"),
    ("no_such_module_39:A", "cannot import module no_such_module_39"),
    (FAMILY.replace(":HypSecant", ":"), "write module:Class or path/to/file.py:Class"),
    ("hypsecant", "unknown family 'hypsecant'"),
])
def test_a_wrong_family_is_one_line(capsys, spec, message):
    code, out, err = _run(capsys, "fisher", "--family", spec, "--eps", 1, "--a", -1, "--b", 1)
    assert code == 2 and err.count("\n") == 1 and message in err and out == "", err


@pytest.mark.parametrize("sub", [["stream", "VALUES", "--column", "v"],
                                 ["curator", "init", "STATE"]])
def test_no_prior_is_refused_before_any_release(capsys, values, tmp_path, sub):
    argv = [values if a == "VALUES" else tmp_path / "c.pkl" if a == "STATE" else a
            for a in sub]
    code, out, err = _run(capsys, *argv, "--eps", 1)
    assert code == 2 and err.count("\n") == 1 and out == ""
    assert err.startswith("dpbook: error: no prior in the data's units: give --range LO HI")
    assert "spends the privacy budget for nothing" in err
    assert not (tmp_path / "c.pkl").exists()


def test_posterior_without_a_prior_warns(capsys, releases):
    code, out, err = _run(capsys, "posterior", "--method", "exact", "--eps", 2, releases)
    assert code == 0 and "warning: no prior in the data's units" in err


@pytest.mark.parametrize("args, message", [
    (["--range", 70, 30], "the range is empty"),
    (["--range", 30, 70, "--prior", "paper", "--prior-loc", 0, 1], "not both"),
    # a range beside an explicit prior was ignored without a word
    (["--range", 30, 70, "--prior", "paper"], "give --range or an explicit prior"),
    (["--range", 30, 70, "--prior-loc", 50, 4], "give --range or an explicit prior"),
    # ranges whose prior variance overflows a double (were OverflowError tracebacks)
    (["--range", 0, 1e308], "too wide for the prior's variance"),
    (["--range", 1e307, 1.0000001e307], "too wide for the prior's variance"),
])
def test_bad_priors_are_one_line(capsys, values, args, message):
    code, _, err = _run(capsys, "stream", values, "--column", "v", "--eps", 1, *args)
    assert code == 2 and err.count("\n") == 1 and message in err, err


def test_the_range_never_comes_from_the_values(capsys, tmp_path, monkeypatch):
    """Structurally: the prior is fixed before the values are read, and other values
    with the same range give the same prior."""
    import dpbook.cli.stream as stream
    import dpbook.data as data

    order = []
    real_prior, real_read = stream.prior_from_args, data.read_csv_columns
    monkeypatch.setattr(stream, "prior_from_args",
                        lambda *a, **k: order.append("prior") or real_prior(*a, **k))
    monkeypatch.setattr(data, "read_csv_columns",
                        lambda *a, **k: order.append("read") or real_read(*a, **k))
    priors = []
    for i, loc in enumerate((10.0, 90.0)):
        path = tmp_path / f"v{i}.csv"
        path.write_text("v\n" + "".join(f"{loc + d}\n" for d in (-1, 0, 1, 2)))
        code, out, err = _run(capsys, "stream", path, "--column", "v", "--eps", 1,
                              "--range", 0, 100, "--particles", 50, "--json")
        assert code == 0, err
        priors.append(json.loads(out)["prior"])
    assert order == ["prior", "read"] * 2
    assert priors[0] == priors[1] and priors[0]["loc_mean"] == 50.0


def test_a_prior_data_conflict_is_named(capsys, tmp_path):
    path = tmp_path / "far.csv"
    path.write_text("v\n" + "".join(f"{40000 + 50 * (i % 20)}\n" for i in range(200)))
    code, _, err = _run(capsys, "stream", path, "--column", "v", "--eps", 5, "--prior",
                        "paper", "--particles", 50, "--interval", 30000, 50000)
    assert code == 0 and "prior-data conflict" in err and "the prior" in err, err


@pytest.mark.parametrize("mode, code, skipped", [("error", 2, None), ("skip", 0, 2)])
def test_missing_cells(capsys, tmp_path, mode, code, skipped):
    path = tmp_path / "gaps.csv"
    path.write_text("id,v\n1,49\n2,\n3,51\n\n5,50\n")
    rc, out, err = _run(capsys, "stream", path, "--column", "v", "--eps", 1, "--range",
                        30, 70, "--particles", 50, "--missing", mode, "--json")
    assert rc == code, err
    if skipped is None:
        assert err.count("\n") == 1 and "line 3: column v is empty" in err
    else:
        res = json.loads(out)
        assert res["skipped"] == skipped and res["n"] == 3


@pytest.mark.parametrize("method", ["exact", "smc-marginal"])
def test_one_json_shape(capsys, releases, values, method):
    code, out, err = _run(capsys, "posterior", "--method", method, "--eps", 2, "--range",
                          30, 70, "--json", releases)
    post = json.loads(out)
    code, out, err = _run(capsys, "stream", values, "--column", "v", "--eps", 2, "--range",
                          30, 70, "--particles", 100, "--json")
    stream = json.loads(out)
    for res in (post, stream):
        assert RECORD <= set(res) and res["schema_version"] == 2
        assert set(res["posterior"]) == {"mu", "sigma"}
        assert all(set(s) == SHAPE for s in res["posterior"].values())
        # IG(1, .) on sigma^2: sigma's posterior has no variance under clipping
        assert res["posterior"]["sigma"]["sd"] is None
        assert res["posterior"]["mu"]["sd"] > 0
    code, out, err = _run(capsys, "posterior", "--method", "online-gradient", "--eps", 2,
                          "--range", 30, 70, "--json", releases)
    point = json.loads(out)
    assert RECORD <= set(point) and set(point["estimate"]) == {"mu", "sigma"}
    assert all(isinstance(v, float) for v in point["estimate"].values())


# ------------------------------------------------------------ outputs never destroy inputs
def _values(tmp_path):
    path = tmp_path / "values.csv"
    path.write_text("v\n" + "\n".join(str(v) for v in np.linspace(40, 60, 12)) + "\n")
    return path


def test_an_output_that_is_an_input_or_not_a_regular_file_is_refused(capsys, tmp_path):
    """--released naming the values file (directly or through a link), a FIFO or a
    directory: one line, nothing written; the curator's state likewise."""
    import os

    values = _values(tmp_path)
    before = values.read_bytes()
    (tmp_path / "link.csv").symlink_to(values)
    os.mkfifo(tmp_path / "fifo")
    stream = ["stream", values, "--column", "v", "--eps", 2, "--range", 30, 70,
              "--particles", 50, "--method", "smc-marginal"]
    for out, says in ((values, "is an input"), (tmp_path / "link.csv", "is an input"),
                      (tmp_path / "fifo", "not a regular file"),
                      (tmp_path, "is a directory")):
        code, _, err = _run(capsys, *stream, "--released", out)
        assert code == 2 and err.count("\n") == 1 and says in err, err
    assert values.read_bytes() == before
    code, _, err = _run(capsys, "curator", "init", tmp_path / "fifo", "--eps", 1, "--range",
                        -5, 5, "--force")
    assert code == 2 and "not a regular file" in err, err
    assert (tmp_path / "fifo").is_fifo()


def test_an_output_through_a_symlink_writes_its_target(capsys, tmp_path):
    values = _values(tmp_path)
    target = tmp_path / "target.csv"
    target.write_text("old\n")
    (tmp_path / "out.csv").symlink_to(target)
    code, _, err = _run(capsys, "stream", values, "--column", "v", "--eps", 2, "--range", 30,
                        70, "--particles", 50, "--method", "smc-marginal", "--released",
                        tmp_path / "out.csv")
    assert code == 0, err
    assert (tmp_path / "out.csv").is_symlink() and target.read_text().startswith("y,l,r\n")


@pytest.mark.parametrize("body, says", [
    ("v\n40\n12,5\n50\n", "line 3: 2 fields where the header has 1 (a decimal comma?"),
    ("v,w\n40,1\n41,2,3\n", "line 3: 3 fields where the header has 2"),
    ("v\n40\n\n50\n", "line 3: column v is empty"),
    ("v,w\n40,1\n,\n50,2\n", "line 3: column v is empty"),
])
def test_decimal_commas_extra_fields_and_blank_lines_are_refused_by_line(capsys, tmp_path,
                                                                        body, says):
    """The same way in one-column and many-column files (a decimal comma in a one-column
    file was read as an index and a value)."""
    path = tmp_path / "values.csv"
    path.write_text(body)
    code, _, err = _run(capsys, "stream", path, "--column", "v", "--eps", 2, "--range", 30,
                        70, "--method", "smc-marginal", "--particles", 50)
    assert code == 2 and err.count("\n") == 1 and says in err, err


def test_compressed_input_is_read_and_a_damaged_one_or_a_fifo_is_one_line(capsys, tmp_path):
    """gzip, bz2, xz and zip as pandas reads them (each failed with a traceback, or as
    a binary file); a damaged archive and a FIFO (which waited forever) in one line."""
    import bz2
    import gzip
    import lzma
    import os
    import zipfile

    from dpbook.data import read_csv_columns

    text = b"v\n41.5\n47\n52.25\n"
    (tmp_path / "v.csv").write_bytes(text)
    for ext, pack in ((".gz", gzip.compress), (".bz2", bz2.compress), (".xz", lzma.compress)):
        (tmp_path / f"v.csv{ext}").write_bytes(pack(text))
    with zipfile.ZipFile(tmp_path / "v.csv.zip", "w") as z:
        z.writestr("v.csv", text)
    plain = read_csv_columns(tmp_path / "v.csv", ("v",))[0]["v"]
    for ext in (".gz", ".bz2", ".xz", ".zip"):
        got = read_csv_columns(tmp_path / f"v.csv{ext}", ("v",))[0]["v"]
        np.testing.assert_array_equal(got, plain)
    (tmp_path / "cut.csv.xz").write_bytes(lzma.compress(text)[:25])
    (tmp_path / "junk.csv.zip").write_bytes(b"PK junk")
    os.mkfifo(tmp_path / "pipe.csv")
    for name, says in (("cut.csv.xz", "EOFError"), ("junk.csv.zip", "BadZipFile"),
                       ("pipe.csv", "is a FIFO")):
        code, _, err = _run(capsys, "posterior", "--method", "exact", "--eps", 1,
                            tmp_path / name)
        assert code == 2 and err.count("\n") == 1 and says in err, err


@pytest.mark.parametrize("name", ["zeros.csv", "zeros.csv.gz"])
def test_a_file_that_stops_being_text_past_its_head_is_refused_in_bounded_memory(
        capsys, tmp_path, monkeypatch, name):
    """Valid CSV for 16 KB, then NUL bytes (a sparse or damaged file; 8 MB of gzip held
    2 GB of them, and pandas ran out of memory holding them at once: a traceback).  The
    check reads in chunks (64 KiB here) and names the first NUL, past the 4 KB head that
    it read first."""
    import gzip

    import dpbook.data

    head = b"y,l,r\n" + b"0.5,0,1\n" * 2000
    body = head + b"\0" * (1 << 22)
    path = tmp_path / name
    path.write_bytes(gzip.compress(body) if name.endswith(".gz") else body)
    monkeypatch.setattr(dpbook.data, "SCAN_CHUNK", 1 << 16)
    code, _, err = _run(capsys, "posterior", "--method", "exact", "--eps", 1, path)
    assert code == 2 and err.count("\n") == 1, err
    assert f"a binary file, not a CSV file (a NUL byte at byte {len(head)}, past" in err
