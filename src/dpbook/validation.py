"""Input checks shared by the Python API and the command line.

Every check raises ``ValueError`` with a one-line message that names the problem;
the command line turns it into ``dpbook: error: <message>`` and exit status 2.
"""

from __future__ import annotations

import math
import os

import numpy as np


class ReliabilityWarning(UserWarning):
    """A result was computed but a diagnostic says it may be poor (for example, the SMC
    weights collapsed, or an MCMC chain never moved).  The command line prints it as
    one line, ``dpbook: warning: ...``."""


# The supported ranges: inside them every result is finite and checked (tests/
# test_extremes.py, tests/test_properties.py); outside them a call fails with a message
# naming the range instead of returning a number that may be wrong.
EPS_RANGE = (1e-4, 1e6)
MAX_ABS = 1e12  # data, interval ends, locations
MIN_REL_WIDTH = 1e-9  # r - l >= MIN_REL_WIDTH * max(1, |l|, |r|)


def check_eps(eps) -> float:
    """Return eps as a float; reject eps outside EPS_RANGE (and non-numbers)."""
    v = check_positive("eps", eps)
    if not EPS_RANGE[0] <= v <= EPS_RANGE[1]:
        raise ValueError(f"eps must be in [{EPS_RANGE[0]:g}, {EPS_RANGE[1]:g}] (the range "
                         f"where dpbook's results are checked), got {eps!r}")
    return v


def check_positive(name: str, value) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a positive finite number, got {value!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {value!r}")
    return v


def check_count(name: str, value, minimum: int = 1) -> int:
    """Return value as an int; reject booleans, non-integers and values below minimum."""
    ok = not isinstance(value, bool)
    try:
        v = int(value)
        ok = ok and v == value
    except (TypeError, ValueError, OverflowError):
        ok = False
    if not ok or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return v


def check_finite(name: str, values) -> np.ndarray:
    """Values as a float array; reject non-finite values and magnitudes above MAX_ABS."""
    a = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite, got a non-finite value")
    if a.size and np.max(np.abs(a)) > MAX_ABS:
        raise ValueError(f"{name} must lie in [-{MAX_ABS:g}, {MAX_ABS:g}] (rescale the "
                         f"data), got {float(a.flat[np.argmax(np.abs(a))])!r}")
    return a


def _check_width(l, r, name, ends=("l", "r")):
    lo, hi = ends
    width = r - l
    need = MIN_REL_WIDTH * np.maximum(1.0, np.maximum(np.abs(l), np.abs(r)))
    if np.any(width < need):
        raise ValueError(f"{name} is too narrow: {hi} - {lo} must be at least "
                         f"{MIN_REL_WIDTH:g} times max(1, |{lo}|, |{hi}|)")


def check_interval(l, r, name: str = "interval", ends=("l", "r")):
    """Return (l, r) as float arrays (broadcast); reject non-finite ends or l >= r.
    ``ends``: the names of the two ends in messages (the command line's a and b)."""
    lo, hi = ends
    l = check_finite(f"{name} lower end {lo}", l)
    r = check_finite(f"{name} upper end {hi}", r)
    if np.any(np.broadcast_to(l, np.broadcast(l, r).shape) >= r):
        raise ValueError(f"{name} must have {lo} < {hi}")
    _check_width(l, r, name, ends)
    return l, r


def check_finite_number(name: str, value) -> float:
    """A single finite number as a float (the scalar case of check_finite, without numpy:
    the online loop calls it three times per individual)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a finite number, got {value!r}") from None
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite, got a non-finite value")
    if abs(v) > MAX_ABS:
        raise ValueError(f"{name} must lie in [-{MAX_ABS:g}, {MAX_ABS:g}] (rescale the "
                         f"data), got {value!r}")
    return v


def check_one_interval(l, r, name: str = "interval"):
    """A single interval [l, r] as two floats (the scalar case of check_interval)."""
    l = check_finite_number(f"{name} lower end l", l)
    r = check_finite_number(f"{name} upper end r", r)
    if not l < r:
        raise ValueError(f"{name} must have l < r")
    if r - l < MIN_REL_WIDTH * max(1.0, abs(l), abs(r)):
        _check_width(l, r, name)
    return l, r


def check_release(y, l, r, t, n_max):
    """One release (y, l, r) for an online estimator at time t < n_max, as floats."""
    y = check_finite_number("y", y)
    l, r = check_one_interval(l, r)
    if t >= n_max:
        raise ValueError(f"SMC was built for n_max={n_max} observations")
    return y, l, r


def check_observations(y, l, r):
    """Validate a released data set (y, l, r): equal lengths, finite, l < r."""
    y = check_finite("y", y)
    l, r = check_interval(l, r)
    y, l, r = np.broadcast_arrays(np.atleast_1d(y), np.atleast_1d(l), np.atleast_1d(r))
    if y.ndim != 1 or y.size == 0:
        raise ValueError("observations must be a non-empty 1-d sequence")
    return (np.ascontiguousarray(y, dtype=float), np.ascontiguousarray(l, dtype=float),
            np.ascontiguousarray(r, dtype=float))


def as_generator(rng) -> np.random.Generator:
    """A Generator from what ``numpy.random.default_rng`` accepts: a Generator (used as
    it is), a BitGenerator, an int seed >= 0, a SeedSequence, or None (fresh entropy);
    ValueError otherwise."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (np.random.SeedSequence, np.random.BitGenerator)) or (
            isinstance(rng, (int, np.integer)) and not isinstance(rng, bool)):
        try:
            return np.random.default_rng(rng)
        except ValueError as e:
            raise ValueError(f"rng: {e}") from None
    raise ValueError(f"rng must be a numpy Generator, a BitGenerator, an int seed >= 0, a "
                     f"SeedSequence or None, got {type(rng).__name__}")


def available_memory() -> int:
    """Bytes of memory this process can still allocate: the smaller of the system's
    MemAvailable and the room left under a cgroup limit (Linux); physical memory
    elsewhere."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 1 << 62
    try:
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        used = int(open("/sys/fs/cgroup/memory.current").read().strip())
        if limit != "max":
            avail = min(avail, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(avail, 0)


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if nbytes < 1024 or unit == "PiB":
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} EiB"  # pragma: no cover


def check_memory(what: str, nbytes: float):
    """ValueError before allocating when ``what`` would need more memory (``nbytes``,
    an estimate of its arrays) than the machine has available."""
    avail = available_memory()
    if nbytes > avail:
        raise ValueError(f"{what} would need about {_size(nbytes)} of memory; this machine "
                         f"has {_size(avail)} available")
