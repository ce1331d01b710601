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
