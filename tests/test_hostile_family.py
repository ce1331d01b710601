"""A user's family file is hostile input (issue 55, item 4): whatever it does at import,
in its options or in its methods, the command line answers in one line with exit
status 2 naming the family and what was wrong, never a traceback, a hang or an
answer computed from NaN."""

from pathlib import Path

import pytest

from dpbook.cli import main

GOOD = (Path(__file__).parent / "data" / "good_family.py").read_text()
FISHER = ["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--json"]


def _family(tmp_path, body, header=GOOD, name="fam.py"):
    path = tmp_path / name
    path.write_text(header + "\n" + body + "\n")
    return f"{path}:C"


def _error(capsys, argv):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.splitlines()) == 1 and err.startswith("dpbook: error: "), err
    return err


IMPORT = [
    ("import sys\nsys.exit(0)", "failed to run: it called sys.exit(0)"),
    ("def (", "failed to run: SyntaxError"),
    ("raise RuntimeError('boom')", "failed to run: RuntimeError: boom"),
    ("class C(Good):\n    options = ['shape']", "C.options must be a dict"),
    ("class C(Good):\n    options = {1: (float, 1.0, 'x')}", "the name 1 is not an identifier"),
    ("class C(Good):\n    options = {'shape': 2.0}", "maps 'shape' to 2.0, not to (type"),
    ("class C(Good):\n    options = {'shape': (float, 1.0, 'x')}",
     "C.__init__ does not match its declared options (shape): got an unexpected keyword"),
    ("class C(Good):\n    def __init__(self, k):\n        pass",
     "C.__init__ does not match its declared options (none): missing a required argument"),
]


@pytest.mark.parametrize("body, message", IMPORT, ids=[m[:30] for _, m in IMPORT])
def test_a_family_file_that_fails_at_import_or_in_its_options_is_one_line(
        capsys, tmp_path, body, message):
    spec = _family(tmp_path, body)
    assert message in _error(capsys, [*FISHER, "--family", spec])


METHODS = [
    ("base_cdf = LocationScaleFamily.base_cdf", "C does not define base_cdf()"),
    ("base_ppf = LocationScaleFamily.base_ppf", "C does not define base_ppf()"),
    ("def base_logpdf(self, z): return np.full_like(np.asarray(z, float), np.nan)",
     "C.base_logpdf returned nan"),
    ("def base_logpdf(self, z): return np.full_like(np.asarray(z, float), np.inf)",
     "C.base_logpdf returned inf"),
    ("def base_cdf(self, z): return np.zeros(3)",
     "C.base_cdf returned an array of shape (3,) for an input of shape (7,)"),
    ("def base_cdf(self, z): return 1 - special.expit(z)", "C.base_cdf is not a cdf"),
    ("def base_ppf(self, q): return np.asarray(q, float) * 0 + 5.0",
     "C.base_cdf(base_ppf(q)) is 0.9933 at q = 0.01"),
    ("def base_ppf(self, q): raise ZeroDivisionError('oops')",
     "C.base_ppf raised ZeroDivisionError: oops"),
    ("def __init__(self): raise KeyError('x')", "C() raised KeyError: 'x'"),
    ("def base_ppf(self, q):\n        while True: pass", "C.base_ppf did not return within 0.5 s"),
]


@pytest.mark.parametrize("body, message", METHODS, ids=[m[:30] for _, m in METHODS])
def test_a_family_whose_methods_fail_is_one_line_before_use(capsys, tmp_path, monkeypatch,
                                                            body, message):
    monkeypatch.setattr("dpbook.cli.family.USER_CODE_SECONDS", 0.5)
    spec = _family(tmp_path, "class C(Good):\n    " + body)
    err = _error(capsys, [*FISHER, "--family", spec])
    assert f"--family {spec}: {message}" in err


def test_a_family_without_default_theta_and_an_import_that_runs_forever(capsys, tmp_path,
                                                                          monkeypatch):
    monkeypatch.setattr("dpbook.cli.family.USER_CODE_SECONDS", 0.5)
    spec = _family(tmp_path, """
from dpbook.model.families import Family
class C(Family):
    name, params, positive = "c", ("a",), (False,)
    def ppf(self, q, a): return a + special.ndtri(q)""")
    assert "C does not define default_theta()" in _error(capsys, [*FISHER, "--family", spec])
    spec = _family(tmp_path, "while True:\n    pass", name="forever.py")
    assert "its import did not return within 0.5 s" in _error(capsys, [*FISHER, "--family",
                                                                        spec])


@pytest.mark.parametrize("body, message", [
    ("raise KeyError('late')", "its base_dlogpdf raised KeyError: 'late'"),
    ("sys.exit(0)", "its base_dlogpdf called sys.exit(0)"),
])
def test_a_method_that_fails_after_the_probe_is_one_line(capsys, tmp_path, body, message):
    """The probe tries seven points; a method that fails on others, later, is one line
    naming the class, its file and the method."""
    spec = _family(tmp_path, f"""
import sys
class C(Good):
    def base_dlogpdf(self, z):
        if np.size(z) > 7:
            {body}
        return -np.tanh(z / 2)""")
    err = _error(capsys, [*FISHER, "--family", spec])
    assert f"the family C of {spec[:-2]}: {message}" in err


def test_the_probe_passes_the_shipped_and_the_test_families():
    from dpbook.cli.family import user_family
    from dpbook.model.checks import probe_family
    from dpbook.model.families import available

    for cls in available().values():
        probe_family(cls())
    for spec in ("hypsecant_family.py:HypSecant", "genlogistic_family.py:GenLogistic",
                 "good_family.py:Good"):
        probe_family(user_family(f"{Path(__file__).parent / 'data' / spec}")())


def _new_process(path):
    """Forget the imported family file, as the next command's process would."""
    import sys

    for k, m in list(sys.modules.items()):
        if k.startswith("dpbook_user_") and getattr(m, "__file__", None) == str(path.resolve()):
            del sys.modules[k]


def _unhashed(state):
    """The state as made before issue 55: its config without family_sha256."""
    import hashlib
    import json
    import sqlite3

    con = sqlite3.connect(state)
    config = json.loads(con.execute("SELECT value FROM meta WHERE key = 'config'").fetchone()[0])
    text = json.dumps({k: v for k, v in config.items() if k != "family_sha256"})
    sha = hashlib.sha256(json.dumps(["meta", "config", text]).encode()).hexdigest()
    con.execute("UPDATE meta SET value = ?, sha256 = ? WHERE key = 'config'", (text, sha))
    con.commit()
    con.close()


def test_a_curator_state_refuses_a_changed_family_file(capsys, tmp_path):
    spec = _family(tmp_path, "class C(Good):\n    pass")
    path, state = tmp_path / "fam.py", tmp_path / "st"
    assert main(["curator", "init", str(state), "--eps", "1", "--range", "0", "10",
                 "--particles", "40", "--family", spec]) == 0
    assert main(["curator", "publish", str(state)]) == 0
    path.write_text(path.read_text().replace("- 2 * np.log1p", "- 1.9 * np.log1p"))
    _new_process(path)
    err = _error(capsys, ["curator", "publish", str(state)])
    assert f"its family {path}:C has changed since the state was made (sha256 " in err
    assert main(["curator", "status", str(state), "--family-changed-ok"]) == 0
    _new_process(path)
    _unhashed(state)  # a state made before the hash: loaded as before
    assert main(["curator", "status", str(state)]) == 0
    path.write_text(path.read_text().replace("return -np.abs(z)", "return np.nan * z"))
    _new_process(path)  # a changed file is probed as the command line's init probes it
    assert "C.base_logpdf returned nan" in _error(capsys, ["curator", "status", str(state)])


def test_an_experiment_store_refuses_a_changed_family_file(capsys, tmp_path):
    spec = _family(tmp_path, "SCALE = 1.0\nclass C(Good):\n    pass")
    path, out = tmp_path / "fam.py", tmp_path / "out"
    argv = ["experiment", "--out", str(out), "--runs", "1", "--n", "6", "--particles", "20",
            "--eps", "2", "--workers", "1", "--no-progress", "--methods", "smc-fixed",
            "--family", spec, "--json"]
    assert main(argv) == 0
    path.write_text(path.read_text().replace("SCALE = 1.0", "SCALE = 2.0"))  # not the class
    _new_process(path)
    err = _error(capsys, argv)
    assert f"{out} holds results of the family 'good' from a file that has changed" in err
    capsys.readouterr()
    assert main([*argv, "--family-changed-ok"]) == 0
    assert '"tasks": 1' in capsys.readouterr().out


def test_a_calibration_store_refuses_a_changed_family_file(capsys, tmp_path):
    """A calibration study runs a family file (it named only the shipped ones), records
    the file's sha256 and refuses a changed file with both, as an experiment store."""
    spec = _family(tmp_path, "SCALE = 1.0\nclass C(Good):\n    pass")
    path, out = tmp_path / "fam.py", tmp_path / "cal"
    argv = ["calibrate", "--method", "exact", "--eps", "1", "--n", "5", "--reps", "1",
            "--grid", "9", "--workers", "1", "--no-progress", "--out", str(out),
            "--family", spec, "--json"]
    assert main(argv) == 0
    assert '"reps": 1' in capsys.readouterr().out
    path.write_text(path.read_text().replace("SCALE = 1.0", "SCALE = 2.0"))
    _new_process(path)
    err = _error(capsys, argv)
    assert f"{out} holds results of the family 'good' from a file that has changed" in err
    assert "(sha256 " in err and " then, " in err and " now)" in err
    assert main([*argv, "--family-changed-ok"]) == 0  # its replication is kept, not redone
    io = capsys.readouterr()
    assert '"reps": 1' in io.out and "quarantine" not in io.err
