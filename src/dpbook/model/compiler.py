"""A location-scale family's primitives compiled by numba, shared by the algorithms.

:func:`compiled_family` compiles a family's ``base_logpdf``, ``base_ppf`` (and, where
it has them, ``base_draw``, ``base_draw_pair`` and ``base_dlogpdf``) for one value with
:func:`dpbook.vmath.compile_scalar` and checks each against the family's numpy code;
:func:`compiled_primitive` does the same for one named primitive.  A primitive that does
not compile, or compiles to other values, raises :class:`NotCompilable` naming it, and
the algorithm falls back to its numpy path with one warning (:func:`warn_not_compiled`).
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
from numba import njit

from dpbook import vmath
from dpbook.model.families.base import LocationScaleFamily
from dpbook.numba_cache import cached
from dpbook.vmath import sum8


class NotCompilable(Exception):
    """A family primitive that numba cannot compile (the message names it)."""


# ------------------------------------------------------------------ the family, compiled
def _numeric_attributes(family) -> dict:
    return {k: float(v) for k, v in sorted(vars(family).items())
            if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool)}


def _state(attrs: dict):
    """A family's numeric attributes as a one-element structured array: its element (a
    numba Record, read through a pointer) is what the compiled primitives get as
    ``self``, so that ``self.df`` compiles."""
    names = tuple(attrs) or ("_unused",)
    out = np.zeros(1, dtype=[(n, np.float64) for n in names])
    for n, v in attrs.items():
        out[0][n] = v
    return out


def _first_line(e) -> str:
    lines = [s.strip() for s in str(e).splitlines() if s.strip()]
    for s in lines:  # numba's message starts with a banner; the reason follows
        if any(w in s for w in ("Unknown attribute", "Untyped global", "No implementation",
                                "not supported", "Cannot determine", "Use of unsupported")):
            return s
    return lines[0] if lines else type(e).__name__


def family_key(family) -> tuple:
    """A hashable key of a family: its class and numeric attributes (what its compiled
    code depends on)."""
    return (type(family), tuple(_numeric_attributes(family).items()))


def family_state(family):
    """A family's numeric attributes as the compiled primitives' ``self`` (:func:`_state`)."""
    return _state(_numeric_attributes(family))


class CompiledFamily:
    """A location-scale family's base compiled for scalars: ``state`` (its numeric
    attributes, passed as ``state[0]``), ``logpdf(self, z)`` = log g(z) and
    ``ppf(self, q)`` = G^-1(q), which the engine's loops inline, and ``logpdf1``,
    ``ppf1``, the same as functions of their own (called once per particle)."""

    def __init__(self, family):
        self.state = _state(_numeric_attributes(family))
        self.logpdf, self.ppf, self.logpdf1, self.ppf1 = _primitives(type(family))
        self._check(family)
        self.draw, self.pair = _draw_primitives(type(family))
        if self.draw is not None:
            try:
                outlined(self.draw)(self.state[0], np.uint64(1))
            except Exception as e:  # numba's typing errors are many classes
                raise NotCompilable(f"base_draw: {_first_line(e)}") from None
        if self.pair is not None:
            u = np.array([0.1, 0.3, 0.5, 0.9, 0.95])
            v = np.array([0.2, 0.6, 0.5, 0.9, 0.7])
            try:
                got = np.array([_outlined2(self.pair)(self.state[0], a, b)
                                for a, b in zip(u, v)])
            except Exception as e:  # numba's typing errors are many classes
                raise NotCompilable(f"base_draw_pair: {_first_line(e)}") from None
            with np.errstate(all="ignore"):  # the rejections: sqrt of a negative, log 0
                ref = np.asarray(family.base_draw_pair(u, v), float)
            if not np.allclose(got, ref, rtol=1e-12, atol=1e-14, equal_nan=True):
                raise NotCompilable(f"base_draw_pair: its compiled form gives {got!r} where "
                                    f"the numpy one gives {ref!r}")
        self.information = _information_kernel(type(family))
        if self.information is not None:
            try:
                self._check_dlogpdf(family)
            except Exception:  # base_dlogpdf does not compile: the numpy J
                self.information = None

    def _check_dlogpdf(self, family):
        z = np.array([-3.0, -0.4, 0.0, 0.7, 2.2])
        x = z[None, :]
        got = self.information(self.state, np.array([[0.0, 1.0]]), x)
        d = np.asarray(family.base_dlogpdf(z), float)
        want = ((d * d).sum(), (d * (1 + z * d)).sum(), ((1 + z * d) ** 2).sum())
        if not np.allclose(got, want, rtol=1e-11, atol=1e-14):
            raise NotCompilable("base_dlogpdf: its compiled form differs")

    def _check(self, family):
        """Compile the primitives now and compare them with the family's numpy code."""
        for name, fn, arg, want in (
                ("base_logpdf", self.logpdf1, (-3.0, -1.2, -0.3, 0.0, 0.4, 1.1, 2.5),
                 family.base_logpdf),
                ("base_ppf", self.ppf1, (1e-6, 0.02, 0.3, 0.5, 0.77, 0.999),
                 family.base_ppf)):
            try:
                got = np.array([fn(self.state[0], v) for v in arg])
            except Exception as e:  # numba's typing errors are many classes
                raise NotCompilable(f"{name}: {_first_line(e)}") from None
            ref = np.asarray(want(np.array(arg)), float)
            if not np.allclose(got, ref, rtol=1e-12, atol=1e-14, equal_nan=True):
                raise NotCompilable(f"{name}: its compiled form gives {got[0]!r} where the "
                                    f"numpy one gives {ref[0]!r} at {arg[0]!r}")


@functools.cache
def _information_kernel(cls):
    """The compiled J of the latent SMC's random-walk covariance for the family class (None if
    it has no base_dlogpdf)."""
    if getattr(cls.base_dlogpdf, "__func__", cls.base_dlogpdf) is \
            LocationScaleFamily.base_dlogpdf:
        return None
    return make_information(vmath.compile_scalar(cls.base_dlogpdf))


@functools.cache
def _primitives(cls):
    logpdf = vmath.compile_scalar(cls.base_logpdf)
    ppf = vmath.compile_scalar(cls.base_ppf)
    return logpdf, ppf, outlined(logpdf), outlined(ppf)


@functools.cache
def _draw_primitives(cls):
    """The family's ``base_draw`` (a draw of g from a keyed generator state) and
    ``base_draw_pair`` (from two uniforms, nan for a rejection: only with base_draw)
    compiled, each None if it has none."""
    if cls.base_draw is None:
        return None, None
    pair = None if cls.base_draw_pair is None else vmath.compile_scalar(cls.base_draw_pair)
    return vmath.compile_scalar(cls.base_draw), pair


def _outlined2(fn):
    @njit(error_model="numpy")
    def call(state, u, v):
        return fn(state, u, v)
    return cached(call)


@functools.cache
def outlined(fn):
    """``fn(state, v)`` (a primitive of :func:`dpbook.vmath.compile_scalar`, which numba
    inlines at every call) called out of line: for call sites outside a vectorised loop,
    where inlining only multiplies the compile time."""
    @njit(error_model="numpy")
    def call(state, v):
        return fn(state, v)
    return cached(call)


_COMPILED: dict = {}
_WARNED: set = set()


def warn_not_compiled(family, message, stacklevel=2):
    """``message`` (why an algorithm of ``family`` does not run compiled, naming the
    primitive) as a warning, once per family class and message in this process."""
    key = (type(family), message)
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, stacklevel=stacklevel + 1)


def compiled_family(family) -> CompiledFamily:
    """The compiled base of a location-scale family (cached per class and numeric
    attributes), or :class:`NotCompilable` naming the primitive that does not compile."""
    key = (type(family), tuple(_numeric_attributes(family).items()))
    if key not in _COMPILED:
        try:
            _COMPILED[key] = CompiledFamily(family)
        except NotCompilable as e:
            _COMPILED[key] = e
    out = _COMPILED[key]
    if isinstance(out, NotCompilable):
        raise out
    return out


def compiled_primitive(family, name, args):
    """``family.<name>`` (a base function of one array argument, written with numpy)
    compiled for one float by :func:`dpbook.vmath.compile_scalar` and checked against
    the numpy code at ``args``; called as ``fn(family_state(family)[0], z)``.
    Raises :class:`NotCompilable` naming the primitive (cached per class)."""
    key = (type(family), name, tuple(_numeric_attributes(family).items()))
    if key not in _COMPILED:
        try:
            fn = vmath.compile_scalar(getattr(type(family), name))
            one, state = outlined(fn), family_state(family)[0]  # compiled once
            got = np.array([one(state, v) for v in args])
        except Exception as e:  # numba's typing errors are many classes
            _COMPILED[key] = NotCompilable(f"{name}: {_first_line(e)}")
        else:
            ref = np.asarray(getattr(family, name)(np.array(args)), float)
            ok = np.allclose(got, ref, rtol=1e-12, atol=1e-14, equal_nan=True)
            _COMPILED[key] = fn if ok else NotCompilable(
                f"{name}: its compiled form gives {got[0]!r} where the numpy one gives "
                f"{ref[0]!r} at {args[0]!r}")
    out = _COMPILED[key]
    if isinstance(out, NotCompilable):
        raise out
    return out



def make_information(dlogpdf):
    """J of the latent SMC's random-walk covariance for a location-scale family with compiled
    ``dlogpdf`` = (log g)': the scores in (m, log c) of x_k given (m, c) are
    (-g'(z)/g(z) / c, -(1 + z g'(z)/g(z))), z = (x_k - m)/c (non-finite ones count as
    0); returns the entries (0,0), (0,1), (1,1) of the average over rows of
    sum_k s_k s_k^T."""

    @njit(error_model="numpy")
    def information(state, th, x):
        fs = state[0]  # the family's numeric attributes (self.df, say)
        rows, t = x.shape
        p00 = np.empty(max(t, 1))
        p01 = np.empty(max(t, 1))
        p11 = np.empty(max(t, 1))
        s00 = s01 = s11 = 0.0
        for i in range(rows):
            m = th[i, 0]
            inv = 1.0 / th[i, 1]
            for k in range(t):
                z = (x[i, k] - m) * inv
                g = dlogpdf(fs, z)
                a = -g * inv
                b = -(1.0 + z * g)
                a = a if abs(a) < math.inf else 0.0
                b = b if abs(b) < math.inf else 0.0
                p00[k] = a * a
                p01[k] = a * b
                p11[k] = b * b
            s00 += sum8(p00, t)
            s01 += sum8(p01, t)
            s11 += sum8(p11, t)
        return s00 / rows, s01 / rows, s11 / rows

    return cached(information)
