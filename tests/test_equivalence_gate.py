"""benchmarks/section6_equivalence.py, issue 38's gate for re-recording the paper's
stores: it passes a correct Monte Carlo rerun and fails a biased, a noisier and a
farther-from-exact one (negative controls), on synthetic stores with known structure."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "section6_equivalence.py"
_spec = importlib.util.spec_from_file_location("_section6_equivalence", SCRIPT)
eq = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(eq)

RUNS, MC = 30, 0.1  # Monte Carlo sd of an estimate, in units of the across-run sd


def _store(truth, mc_noise, rng, shift=0.0, scale=1.0):
    rows = []
    for (eps, method, run), t in truth.items():
        rows.append(dict(eps=eps, method=method, run=run, mu_true=50.0, sigma_true=3.0,
                         mu_hat=t[0] + shift + scale * MC * mc_noise * rng.standard_normal(),
                         sigma_hat=t[1] + scale * MC * 0.2 * rng.standard_normal()))
    return pd.DataFrame(rows)


@pytest.fixture(scope="module")
def stores():
    rng = np.random.default_rng(1)
    truth = {}
    for eps in (2.0, 10.0):
        for method in ("smc-adaptive", "smc-fixed", "mhaar"):
            for run in range(RUNS):
                # adaptive clearly better, as in chapter 6, so its verdicts are stable
                k = 0.4 if method == "smc-adaptive" else 1.0
                truth[eps, method, run] = (50 + k * rng.standard_normal(),
                                           3 + 0.2 * k * rng.standard_normal())
    old = _store(truth, 1.0, np.random.default_rng(2))
    reseeded = _store(truth, 1.0, np.random.default_rng(3))
    exact = {(eps, run): dict(zip(("mu", "sigma"), truth[eps, "smc-fixed", run]))
             for eps in (2.0, 10.0) for run in range(RUNS)}
    return truth, old, reseeded, exact


def test_a_correct_rerun_passes(stores):
    truth, old, reseeded, exact = stores
    new = _store(truth, 1.0, np.random.default_rng(4))
    table, changed, ok = eq.compare(old, reseeded, new, exact=exact)
    assert ok, table
    assert len(table) == 2 * 3 * 2 and not changed


@pytest.mark.parametrize("kind", ["bias", "noisier", "farther"])
def test_a_wrong_kernel_fails(stores, kind):
    truth, old, reseeded, exact = stores
    if kind == "bias":  # half the across-run sd: twice the margin
        new = _store(truth, 1.0, np.random.default_rng(4), shift=0.5)
    elif kind == "noisier":  # three times the Monte Carlo spread
        new = _store(truth, 1.0, np.random.default_rng(4), scale=3.0)
    else:  # unbiased on average but consistently farther from the exact mean
        new = old.copy()
        ex = [exact[e, r]["mu"] for e, r in zip(old.eps, old.run)]
        new["mu_hat"] = old.mu_hat + 0.3 * MC * np.sign(old.mu_hat - ex)
    table, _, ok = eq.compare(old, reseeded, new, exact=exact)
    assert not ok
    if kind == "bias":
        assert not table[table.param == "mu"].tost_ok.any()
    if kind == "noisier":
        assert not table[table.param == "mu"].sd_ok.all()
    if kind == "farther":
        assert table.tost_ok.all() and not table.exact_ok.all()


def test_stores_of_other_tasks_are_refused(stores):
    truth, old, reseeded, _ = stores
    with pytest.raises(ValueError, match="same tasks"):
        eq.compare(old, reseeded, old[old.run > 0])


def test_holm():
    np.testing.assert_allclose(eq.holm([0.01, 0.04, 0.03]), [0.03, 0.06, 0.06])
