"""Issue 55: a user family's option declared bool reads true/false, 1/0, yes/no (argparse's
type=bool read 'false', 'False' and '0' as True)."""

import json
import textwrap

import pytest

from dpbook.cli import main

FAMILY = textwrap.dedent('''
    import numpy as np
    from scipy import special

    from dpbook.model.families import LocationScaleFamily


    class Skewed(LocationScaleFamily):
        """The logistic, with a bool option (read back by the tests, unused here)."""
        name = "skewed"
        options = {"mirror": (bool, False, "a bool option")}

        def __init__(self, mirror=False):
            if not isinstance(mirror, bool):
                raise ValueError(f"mirror must be True or False, got {mirror!r}")
            self.mirror = mirror

        def base_logpdf(self, z):
            return -z - 2 * np.log1p(np.exp(-z))

        def base_dlogpdf(self, z):
            return -1 + 2 * special.expit(-z)

        def base_cdf(self, z):
            return special.expit(z)

        def base_sf(self, z):
            return special.expit(-z)

        def base_ppf(self, q):
            return np.log(q) - np.log1p(-q)

        def base_sample(self, rng, size=None):
            return self.base_ppf(rng.uniform(size=size))
''')


@pytest.mark.parametrize("text, want", [("false", False), ("False", False), ("0", False),
                                        ("no", False), ("true", True), ("True", True),
                                        ("1", True), ("YES", True)])
def test_a_bool_option_reads_false_as_false(tmp_path, capsys, text, want):
    (tmp_path / "skewed.py").write_text(FAMILY)
    argv = ["fisher", "--family", f"{tmp_path / 'skewed.py'}:Skewed", "--mirror", text,
            "--eps", "1", "--a", "-2", "--b", "2", "--json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["family_options"] == {"mirror": want}


def test_a_bool_option_of_another_word_is_one_line(tmp_path, capsys):
    (tmp_path / "skewed.py").write_text(FAMILY)
    assert main(["fisher", "--family", f"{tmp_path / 'skewed.py'}:Skewed", "--mirror",
                 "maybe", "--eps", "1", "--a", "-2", "--b", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--mirror" in err and "not true or false: 'maybe'" in err
