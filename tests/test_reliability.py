"""Issue 55, item 3: no method reports without saying when it cannot be trusted.  Each
sampler and estimator carries stated diagnostics with thresholds
(:func:`dpbook.diagnostics.check_reliability`); a run beyond one warns in one line that
names the option to change, and the command line's JSON records the diagnostic and the
warning.  Each is tripped here by a setting, and left quiet by an ordinary one."""

import json
import warnings

import numpy as np
import pytest

from dpbook.cli import main
from dpbook.diagnostics import check_reliability
from dpbook.validation import ReliabilityWarning

EPS = 5.0


def _releases(n=60, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(50.0, 3.0, n)
    y = np.clip(x, 40.0, 60.0) + rng.laplace(0.0, 20.0 / EPS, n)
    return y, np.full(n, 40.0), np.full(n, 60.0)


def _smc(n_particles, subset=None):
    from dpbook.smc import smc_posterior

    return smc_posterior(*_releases(), EPS, n_particles=n_particles, seed=0, subset=subset)


def _marginal(n_particles):
    from dpbook.online import marginal_posterior

    return marginal_posterior(*_releases(), EPS, n_particles=n_particles, seed=0)


def _mhaar(n_iter):
    from dpbook.mhaar import mhaar

    return mhaar(*_releases(), EPS, n_iter=n_iter, seed=0)


def _gradient(far):
    """``far`` of 40 releases clipped at one end of [40, 60], far from the start (0, 1.2),
    then the rest near it: the estimate stays put through the first ones."""
    from dpbook.online import OnlineGradient

    est = OnlineGradient(EPS)
    rng = np.random.default_rng(1)
    est.update_many(np.full(far, 50.0), np.full(far, 40.0), np.full(far, 60.0))
    near = 40 - far
    est.update_many(rng.normal(0.0, 1.0, near), np.full(near, -2.0), np.full(near, 2.0))
    check_reliability(est, "the online gradient")
    return est


CASES = [  # (run, tripping setting, ordinary setting, diagnostic, words of the warning)
    (_smc, 4, 200, "ess", "fewer than 10 particles.*--particles"),
    (lambda n: _smc(n, subset=5), 4, 200, "ess", "fewer than 10 particles.*--particles"),
    (_marginal, 2, 200, "ess", "marginal SMC's weights.*--particles"),
    (_mhaar, 300, 5000, "chain_ess", "worth .* independent draws.*--iters"),
    (_gradient, 30, 10, "stalled_steps", "did not move at 30 of its 40 steps.*--method"),
]


@pytest.mark.parametrize("run, bad, good, name, words", CASES,
                         ids=["smc", "smc-subset", "smc-marginal", "mhaar", "gradient"])
def test_each_method_warns_beyond_its_threshold_and_only_then(run, bad, good, name, words):
    with pytest.warns(ReliabilityWarning, match=words) as rec:
        post = run(bad)
    d = post.reliability[name]
    assert d["warning"] in [str(w.message) for w in rec]
    side = "floor" if "floor" in d else "ceiling"
    assert (d["value"] < d[side]) if side == "floor" else (d["value"] > d[side])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReliabilityWarning)
        post = run(good)
    assert post.reliability[name]["warning"] is None


def test_a_frozen_mhaar_chain_trips_its_acceptance():
    """Near-noiseless releases: the chain accepts nothing; both of its diagnostics say so."""
    from dpbook.mhaar import mhaar

    y, l, r = np.array([1.0, 1.5]), np.zeros(2), np.full(2, 2.0)
    with pytest.warns(ReliabilityWarning, match="accepted none of its last 400 .*--iters"):
        res = mhaar(y, l, r, 1e6, n_iter=2000, seed=0)
    assert res.reliability["acceptance"]["value"] == 0
    assert res.reliability["chain_ess"]["warning"] is not None


def test_the_diagnostics_change_no_number():
    """The check reads the run: a run whose warnings are silenced gives the same bits."""
    with pytest.warns(ReliabilityWarning):
        a = _mhaar(300)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        b = _mhaar(300)
    np.testing.assert_array_equal(a.samples, b.samples)


def _csv(path, n=60):
    y, l, r = (v.tolist() for v in _releases(n))
    path.write_text("y,l,r\n" + "".join(f"{a!r},{b!r},{c!r}\n" for a, b, c in zip(y, l, r)))
    return str(path)


@pytest.mark.parametrize("method, option, value, name", [
    ("smc-marginal", "--particles", "2", "ess"),
    ("mhaar", "--iters", "300", "chain_ess")])
def test_the_json_records_the_diagnostic_and_its_warning(tmp_path, capsys, method, option,
                                                         value, name):
    args = ["posterior", _csv(tmp_path / "r.csv"), "--eps", str(EPS), "--method", method,
            "--prior", "paper", "--json"]
    assert main([*args, option, value]) == 0
    io = capsys.readouterr()
    d = json.loads(io.out)["diagnostics"][name]
    assert f"dpbook: warning: {d['warning']}\n" in io.err and option in d["warning"]
    assert main(args) == 0  # the default: within every threshold, no such line
    io = capsys.readouterr()
    assert all(v["warning"] is None for v in json.loads(io.out)["diagnostics"].values())
    assert "not reliable" not in io.err


def test_stream_and_the_curator_check_their_posterior_too(tmp_path, capsys):
    """The online SMC of ``stream`` (Algorithm 1) and a curator's state: too few
    particles are one warning line, and the JSON says which diagnostic."""
    values = tmp_path / "v.csv"
    values.write_text("v\n" + "".join(f"{v!r}\n" for v in _releases()[0].tolist()))
    assert main(["stream", str(values), "--column", "v", "--eps", str(EPS), "--method",
                 "smc", "--particles", "3", "--prior", "paper", "--json"]) == 0
    io = capsys.readouterr()
    assert json.loads(io.out)["diagnostics"]["ess"]["warning"] in io.err
    state = str(tmp_path / "state.db")
    assert main(["curator", "init", state, "--eps", str(EPS), "--particles", "2",
                 "--prior", "paper", "--interval", "40", "60"]) == 0
    assert main(["curator", "publish", state, "--k", "20"]) == 0
    assert main(["curator", "take", state, _csv(tmp_path / "r.csv", 20), "--json"]) == 0
    io = capsys.readouterr()
    d = json.loads(io.out.splitlines()[-1])["diagnostics"]["ess"]
    assert d["value"] < d["floor"] and "--particles" in d["warning"] in io.err
