"""A user's family file is hostile input (issue 55, item 4): whatever it does at import,
in its options or in its methods, the command line answers in one line with exit
status 2 naming the family and what was wrong, never a traceback, a hang or an
answer computed from NaN."""

import pytest

from dpbook.cli import main

GOOD = """
import numpy as np
from scipy import special
from dpbook.model.families import LocationScaleFamily
class Good(LocationScaleFamily):
    name = "good"
    def base_logpdf(self, z): return -np.abs(z) - 2 * np.log1p(np.exp(-np.abs(z)))
    def base_dlogpdf(self, z): return -np.tanh(z / 2)
    def base_cdf(self, z): return special.expit(z)
    def base_ppf(self, q): return np.log(q) - np.log1p(-q)
    def base_sample(self, rng, size=None): return rng.logistic(0.0, 1.0, size)
"""
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
