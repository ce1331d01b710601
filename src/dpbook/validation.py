"""Input checks shared by the Python API and the command line.

Every check raises ``ValueError`` with a one-line message that names the problem;
the command line turns it into ``dpbook: error: <message>`` and exit status 2.
"""

from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

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


def _not_real(name: str, value) -> str | None:
    """Why a scalar that ``float()`` would take means something else, or None: a boolean
    (True is not the number 1), a complex number (its imaginary part would be dropped) or
    text with characters outside ASCII (``float()`` reads the digits of every script, a
    CSV reader and most other tools do not: dpbook reads ASCII numerals only)."""
    if isinstance(value, (bool, np.bool_)):
        return f"{name} must be a number, not a boolean (got {value!r})"
    if isinstance(value, (complex, np.complexfloating)):
        return f"{name} must be a real number, got the complex number {value!r}"
    if isinstance(value, (str, bytes)) and not value.isascii():
        return f"{name} must be written with ASCII digits, got {value!r}"
    if isinstance(value, np.ndarray) and value.dtype.kind in "bc":
        return _not_real(name, value.reshape(-1)[0]) if value.size else None
    return None


def refuse_not_real(name: str, value):
    """ValueError if the scalar ``value`` is a boolean, a complex number or non-ASCII
    text (see :func:`_not_real`)."""
    why = _not_real(name, value)
    if why:
        raise ValueError(why)


def check_positive(name: str, value) -> float:
    refuse_not_real(name, value)
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


def check_mc_size(name: str, value) -> int:
    """M or K of the Monte Carlo Fisher information (eq. 8, Algorithm 4): an integer
    >= 2, as its standard error is a spread over at least two draws (with one, every
    result carried a NaN standard error)."""
    try:
        return check_count(name, value, 2)
    except ValueError:
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            raise ValueError(f"{name} must be at least 2 (the Monte Carlo standard error "
                             f"needs two draws), got {value!r}") from None
        raise


def _short(values) -> str:
    text = repr(values)
    return text if len(text) <= 60 else text[:57] + "..."


def refuse_not_real_array(name: str, values):
    """ValueError if ``values`` (an array, a sequence or a scalar) holds a boolean, a
    complex number or non-ASCII text (see :func:`_not_real`); numpy would turn the first
    two into numbers (True as 1, 1+2j as 1) without a word."""
    kind = getattr(getattr(values, "dtype", None), "kind", None)
    if kind in ("b", "c"):
        raise ValueError(f"{name} must be real numbers, got "
                         f"{'booleans' if kind == 'b' else 'complex numbers'}")
    if kind in ("f", "i", "u"):
        return
    if kind is None and isinstance(values, (int, float)) and not isinstance(values, bool):
        return
    try:
        items = np.asarray(values, dtype=object)
    except (TypeError, ValueError):
        return  # left to the conversion, which names the problem
    for v in items.flat:
        why = _not_real(name, v)
        if why:
            raise ValueError(why)


def check_finite(name: str, values) -> np.ndarray:
    """Values as a float array; reject non-finite values and magnitudes above MAX_ABS,
    and values that are not real numbers (booleans, complex numbers, non-ASCII text)."""
    refuse_not_real_array(name, values)
    try:
        a = np.asarray(values, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be numbers, got {_short(values)}") from None
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
    if type(value) not in (float, np.float64):  # the online loop's cases, kept fast
        refuse_not_real(name, value)
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
    return kernel_arrays(y, l, r)


def kernel_arrays(*arrays) -> tuple:
    """Each array copied into a new contiguous, writable float array, as the compiled
    kernels take them: numba types a read-only array (a pandas column, say) apart, and
    would compile every kernel again for one."""
    return tuple(np.array(v, dtype=float) for v in arrays)


def as_generator(rng, name: str = "rng") -> np.random.Generator:
    """A Generator from what ``numpy.random.default_rng`` accepts: a Generator (used as
    it is), a BitGenerator, an int seed >= 0, a SeedSequence, or None (fresh entropy);
    ValueError naming the argument (``name``) otherwise."""
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (np.random.SeedSequence, np.random.BitGenerator)):
        return np.random.default_rng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(check_seed(rng, name))
    raise ValueError(f"{name} must be a numpy Generator, a BitGenerator, an int seed >= 0, "
                     f"a SeedSequence or None, got {_short(rng)}")


def check_seed(seed, name: str = "seed"):
    """``seed`` unchanged if it is an int >= 0 (not a boolean), a non-empty list or tuple
    of them (entropy, as numpy's SeedSequence takes it: the chapters key their streams
    with [seed, key, ...]) or a numpy SeedSequence; ValueError naming ``name``
    otherwise (numpy's own errors are a TypeError for 1.5 and a message without the
    argument's name for -1)."""
    if isinstance(seed, np.random.SeedSequence) or _seed_int(seed) or (
            isinstance(seed, (list, tuple)) and seed and all(_seed_int(k) for k in seed)):
        return seed
    raise ValueError(f"{name} must be an int >= 0, a non-empty list of them or a numpy "
                     f"SeedSequence, got {_short(seed)}")


def _seed_int(k) -> bool:
    return isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)) and k >= 0


def seed_sequence(seed, name: str = "seed") -> np.random.SeedSequence:
    """``seed`` as a numpy SeedSequence: a SeedSequence unchanged, an int >= 0 (see
    :func:`check_seed`), a non-empty list or tuple of them (entropy, as
    ``numpy.random.SeedSequence`` takes it: the chapters key streams that way) or None
    (fresh entropy)."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(None if seed is None else check_seed(seed, name))


def unspawned(ss: np.random.SeedSequence) -> np.random.SeedSequence:
    """A copy of ``ss`` as it was before anything was spawned from it: its ``spawn(k)``
    gives ss's first k children, whatever ss itself has spawned already."""
    return np.random.SeedSequence(ss.entropy, spawn_key=ss.spawn_key, pool_size=ss.pool_size)


def check_store_path(out, name: str = "out") -> Path:
    """A store directory as a Path; ValueError for an empty path (``Path("")`` is the
    current directory, where a store would be written among other files) or a
    non-path."""
    if not isinstance(out, (str, os.PathLike)):
        raise ValueError(f"{name} must be a directory path, got {_short(out)}")
    text = os.fsdecode(out)
    if not text.strip():
        raise ValueError(f"{name} must name a directory, got an empty path {text!r} (use "
                         f"'.' for the current directory)")
    return Path(text)


_JSON_KINDS = {dict: "an object", list: "an array", str: "a string", int: "a number",
               float: "a number", bool: "true or false", type(None): "null"}


def _json_kind(x) -> str:
    if isinstance(x, tuple):  # one of several types
        return " or ".join(dict.fromkeys(map(_json_kind, x)))
    return _JSON_KINDS.get(x if isinstance(x, type) else type(x), "something else")


def check_json(value, what: str, required: dict, optional: dict | None = None):
    """``value``, read from JSON, if it is an object with the ``required`` keys, each of
    its type ({key: type}), and the ``optional`` ones of theirs where present; otherwise
    ValueError naming ``what`` (the file) and the key: valid JSON of another shape was
    an AttributeError or a KeyError deep in a reader."""
    if not isinstance(value, dict):
        raise ValueError(f"{what} is {_json_kind(value)}, not a JSON object")
    for key, kind in {**required, **(optional or {})}.items():
        if key not in value:
            if key in required:
                raise ValueError(f"{what} has no {key!r}")
        elif not isinstance(value[key], kind):
            raise ValueError(f"{what}: {key!r} is {_json_kind(value[key])}, not "
                             f"{_json_kind(kind)}")
    return value


def output_file(path, inputs=()) -> Path:
    """The file an output goes to: a symlink is followed (its target is written, and
    locked), and a ValueError refuses a target that is not a regular file (a directory,
    device or FIFO) or that is one of the command's ``inputs``: dpbook never replaces
    what it was given."""
    target = Path(os.path.realpath(path))
    if target.exists() and not target.is_file():
        what = "a directory" if target.is_dir() else "not a regular file (a device or FIFO)"
        raise ValueError(f"cannot write {path}: it is {what}, and dpbook writes its outputs "
                         f"only to regular files")
    if target.exists() and any(p is not None and Path(p).exists() and
                               os.path.samefile(target, p) for p in inputs):
        raise ValueError(f"cannot write {path}: it is an input of this command, and dpbook "
                         f"does not overwrite it (give another output file)")
    return target


def missing_method(obj, method: str) -> NotImplementedError:
    """The error of a method that a subclass of one of dpbook's interfaces (Family,
    Mechanism, Policy) did not define: it names the class and the method (a bare
    NotImplementedError says neither)."""
    base = next((c.__name__ for c in type(obj).__mro__[1:]
                 if c.__module__.startswith("dpbook.") and method in vars(c)), "its base")
    return NotImplementedError(
        f"{type(obj).__name__} does not define {method}(), which this computation needs; "
        f"a subclass of {base} must define it (see the book's 'Extending dpbook')")


def available_memory() -> int:
    """Bytes of memory this process can still allocate: the smaller of the system's
    MemAvailable and the room left under a cgroup limit (Linux); physical memory
    elsewhere."""
    avail = None
    with contextlib.suppress(OSError, ValueError):
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
    if avail is None:
        try:
            avail = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError, AttributeError):
            return 1 << 62
    with contextlib.suppress(OSError, ValueError):
        limit = open("/sys/fs/cgroup/memory.max").read().strip()
        used = int(open("/sys/fs/cgroup/memory.current").read().strip())
        if limit != "max":
            avail = min(avail, int(limit) - used)
    return max(avail, 0)


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if nbytes < 1024:
            return f"{nbytes:.3g} {unit}"
        nbytes /= 1024
    return f"{nbytes:.3g} PiB"


def check_memory(what: str, nbytes: float):
    """ValueError before allocating when ``what`` would need more memory (``nbytes``,
    an estimate of its arrays) than the machine has available."""
    avail = available_memory()
    if nbytes > avail:
        raise ValueError(f"{what} would need about {_size(nbytes)} of memory; this machine "
                         f"has {_size(avail)} available")
