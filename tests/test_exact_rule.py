"""benchmarks/exact_rule.py, issue 51's rule for re-recording an algorithm's stores: it
passes a kernel whose runs are as close to the exact posterior as the old kernel's, and
fails one that is farther or whose 90% intervals hold another mass (negative controls),
on synthetic per-run rows with known structure."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "exact_rule.py"
_spec = importlib.util.spec_from_file_location("_exact_rule", SCRIPT)
rule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rule)

RUNS = 500  # per eps: four eps pooled, as the rule pools them


def _rows(seed, z_sd=0.1, mass=0.9):
    g = np.random.default_rng(seed)
    keys = [(0, m, e, r) for m in rule.METHODS for e in (1.0, 2.0, 5.0, 10.0)
            for r in range(RUNS)]
    df = pd.DataFrame(keys, columns=["root", "method", "eps", "run"])
    for p in ("mu", "sigma"):
        df[f"z_{p}"] = z_sd * g.standard_normal(len(df))
        df[f"mass_{p}"] = mass + 0.02 * g.standard_normal(len(df))
    return df


@pytest.mark.parametrize("other, passes", [
    (dict(seed=1), True),  # a correct rerun
    (dict(seed=2, z_sd=0.15), False),  # farther from the exact posterior (ratio 1.5)
    (dict(seed=3, mass=0.85), False),  # 90% intervals that hold 85%
])
def test_the_rule_passes_a_rerun_and_fails_a_worse_kernel(other, passes):
    t = rule.judge(_rows(0), _rows(**other))
    assert len(t) == 4 and t.ok.all() == passes, t
    if passes:
        assert (t.ratio_upper < rule.RATIO).all() and (t.ratio_upper > t.ratio).all()


def test_the_rule_refuses_stores_of_other_tasks():
    with pytest.raises(ValueError, match="same tasks"):
        rule.judge(_rows(0), _rows(1).iloc[1:])
