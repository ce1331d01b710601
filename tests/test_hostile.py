"""Hostile inputs found by benchmarks/hostile_sweep.py (issue 40): each class fixed
here has a test that failed before the fix, with values other than the issue's."""

import subprocess
import sys
import time

import numpy as np
import pytest


def _cli(*args, timeout=60):
    return subprocess.run([sys.executable, "-m", "dpbook.cli", *map(str, args)],
                          capture_output=True, text=True, timeout=timeout)


def test_poisson_mass_beyond_the_sum_limit_is_refused_before_allocating():
    """The likelihood of a discrete family sums over the integers where it has mass;
    a Poisson of mean 5e8 (~340,000 of them) is refused in one line naming the limit
    (it was a 2.6 GiB allocation per chunk: a MemoryError, or the kernel's kill)."""
    from dpbook.likelihood.quadrature import MAX_TERMS, log_density

    with pytest.raises(ValueError, match="limit of 100,000"):
        log_density(5e8, 0.0, 1e9, 1.0, (np.full(7, 5e8),), "poisson")
    lam = (MAX_TERMS / 20.0) ** 2  # well inside the limit: computed
    assert np.isfinite(log_density(lam, 0.0, 2 * lam, 1.0, (np.full(3, lam),), "poisson")).all()


def test_poisson_stream_of_huge_counts_exits_2_in_one_line(tmp_path):
    values = tmp_path / "counts.csv"
    values.write_text("n\n" + "".join(f"{7_000_000_000 + 37 * i}\n" for i in range(4)))
    t0 = time.monotonic()
    out = _cli("stream", values, "--column", "n", "--eps", 2, "--family", "poisson",
               "--interval", 0, 1.4e10, "--range", 0, 1.4e10, "--particles", 30)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "limit of 100,000" in out.stderr
    assert time.monotonic() - t0 < 30


@pytest.mark.parametrize("loc_var, warns", [(1e-200, True), (1e-9, True), (4.0, False)])
def test_a_prior_too_narrow_to_move_is_named(loc_var, warns):
    """n I_X v0 < 1e-4: 40 releases cannot move a location prior of variance 1e-9 at
    sigma ~ 2 (40 x 0.25 x 1e-9 = 1e-8); one of variance 4 is moved (40)."""
    from dpbook.diagnostics import narrow_prior, prior_data_conflict
    from dpbook.model.families import get_family

    fam = get_family("normal").with_prior(loc_mean=3.0, loc_var=loc_var)
    out = narrow_prior(fam, 40, {"mu": 3.0, "sigma": 2.0})
    assert bool(out) is warns
    if warns:
        assert len(out) == 1 and "prior of mu" in out[0] and "\n" not in out[0]
        rng = np.random.default_rng(1)
        y = rng.normal(3.0, 2.0, 40)
        warned = prior_data_conflict(fam, y, np.full(40, -20.0), np.full(40, 20.0), 5.0,
                                     medians={"mu": 3.0, "sigma": 2.0})
        assert any("prior too narrow" in w for w in warned)


def test_a_narrow_gamma_prior_of_a_poisson_is_named():
    from dpbook.diagnostics import narrow_prior
    from dpbook.model.families import get_family
    from dpbook.model.prior import GammaPrior

    fam = get_family("poisson").with_prior(GammaPrior(4e12, 2e11))  # mean 20, sd 1e-5
    assert "prior of lam" in narrow_prior(fam, 25, {"lam": 20.0})[0]
    assert narrow_prior(get_family("poisson"), 25, {"lam": 20.0}) == []


def test_posterior_cli_warns_of_a_prior_too_narrow(tmp_path):
    releases = tmp_path / "rel.csv"
    rng = np.random.default_rng(2)
    releases.write_text("y,l,r\n" + "".join(f"{v!r},-10.0,10.0\n"
                                            for v in rng.normal(1.0, 3.0, 20).tolist()))
    out = _cli("posterior", releases, "--eps", 1, "--prior-loc", 7, 1e-80,
               "--prior-scale2", 1, 4, "--method", "smc", "--particles", 40)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("prior too narrow") == 1 and "prior of mu" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.parametrize("flag, text", [("--eps", "2_5"), ("--particles", "3_0")])
def test_digit_separators_are_not_read_as_another_number(tmp_path, flag, text):
    """float('2_5') is 25: a typo for 2.5 ran with eps = 25."""
    from dpbook.cli import main

    values = tmp_path / "v.csv"
    values.write_text("x\n1\n2\n")
    argv = ["stream", str(values), "--column", "x", "--eps", "1", "--range", "0", "4",
            "--particles", "30"]
    argv[argv.index(flag) + 1] = text
    assert main(argv) == 2


@pytest.mark.parametrize("cell", ["3.25", "-2", "0.5"])
def test_a_count_outside_the_poisson_support_is_refused(tmp_path, cell):
    """A value of 3.25 or -2 in a Poisson stream was released and read as a count."""
    from dpbook.online.streams import run_stream

    with pytest.raises(ValueError, match=r"^value 3 \(.*\) is outside the support of the "
                                         r"poisson family"):
        run_stream(np.array([4.0, 7.0, float(cell), 1.0]), 1.0, family="poisson",
                   policy=(0.0, 12.0), n_particles=20)


def test_a_grid_that_cannot_fit_is_refused_before_the_study(tmp_path):
    """calibrate --grid 1e9 ran until killed (a 1e9 x 1e9 exact-posterior grid)."""
    from dpbook.calibration.study import calibration_config
    from dpbook.posterior import exact_posterior

    with pytest.raises(ValueError, match="grid would need about"):
        calibration_config(grid=3_000_000)
    with pytest.raises(ValueError, match="grid would need about"):
        exact_posterior([1.0], [0.0], [2.0], 1.0, grid=(400_000, 400_000))
