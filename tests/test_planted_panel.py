"""The planted-bug panel (tests/planted/bugs.toml, run by benchmarks/planted_bugs.py)
stays applicable: every bug's old text stands exactly once in its file, so moving code
without updating the panel fails here, not only when someone runs the panel."""

import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUGS = tomllib.loads((ROOT / "tests" / "planted" / "bugs.toml").read_text())["bug"]


@pytest.mark.parametrize("bug", BUGS, ids=lambda b: b["name"])
def test_each_planted_bug_applies_once(bug):
    assert (ROOT / bug["file"]).read_text().count(bug["old"]) == 1, bug["file"]
