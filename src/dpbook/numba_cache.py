"""numba's on-disk cache for the kernels dpbook compiles per family.

numba caches a function only by its own bytecode and, for a closure, a pickle of its
cells; the kernels built for a family are closures over other compiled functions, whose
pickles differ from process to process, so numba compiles them again in every process
(12 s for the SMC of a new family).  :func:`cached` keys them by their content instead:
the bytecode of the function and of everything it calls, its cells and the globals it
reads, followed recursively, with dpbook's own source and the versions of numba and
numpy.  A kernel whose content cannot be read that way (a cell holding an object of
another kind) is compiled as before, in every process.
"""

from __future__ import annotations

import dis
import functools
import hashlib
import sys
import types
from pathlib import Path

import numpy as np
from numba.core.caching import FunctionCache, IndexDataCacheFile
from numba.core.dispatcher import Dispatcher
from numba.core.types import Type as NumbaType
from numba.np.ufunc.ufuncbuilder import UFuncDispatcher

_PLAIN = (int, float, complex, bool, str, bytes, type(None), np.generic, NumbaType)


class _Unreadable(Exception):
    pass


@functools.cache
def _salt() -> bytes:
    """dpbook's source and the compilers' versions: any change compiles afresh."""
    import numba

    h = hashlib.sha256(f"{numba.__version__} {np.__version__} {sys.version}".encode())
    for f in sorted(Path(__file__).parent.rglob("*.py")):
        h.update(f.read_bytes())
    return h.digest()


def _code(code, h, names):
    """Hash ``code`` (and the code it nests); add the globals it reads to ``names``."""
    h.update(code.co_code)
    h.update(repr(code.co_names).encode())
    names.update(i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL")
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            _code(c, h, names)
        else:
            h.update(repr(c).encode())


def _read(obj, h, seen):
    """Feed what a compiled ``obj`` depends on into the hash ``h``."""
    obj = getattr(obj, "_dispatcher", obj)  # a numba ufunc (vectorize): its kernel
    if isinstance(obj, (Dispatcher, UFuncDispatcher)):
        h.update(repr(sorted(obj.targetoptions.items())).encode())
        obj = obj.py_func
    if isinstance(obj, _PLAIN):
        h.update(repr((type(obj).__name__, obj)).encode())
    elif isinstance(obj, tuple):
        for x in obj:
            _read(x, h, seen)
    elif isinstance(obj, np.ndarray):
        h.update(f"{obj.dtype.str}{obj.shape}".encode() + obj.tobytes())
    elif isinstance(obj, types.ModuleType):  # dpbook's are in the salt, numpy's versioned
        h.update(obj.__name__.encode())
        path = getattr(obj, "__file__", None) or ""
        if path and not path.startswith((sys.prefix, sys.base_prefix)):
            h.update(Path(path).read_bytes())  # a user's module of helpers
    elif isinstance(obj, types.FunctionType):
        if id(obj) in seen:
            return
        seen.add(id(obj))
        names = set()
        _code(obj.__code__, h, names)
        for cell in obj.__closure__ or ():
            _read(cell.cell_contents, h, seen)
        for name in sorted(names):
            if name in obj.__globals__:
                h.update(name.encode())
                _read(obj.__globals__[name], h, seen)
    else:
        raise _Unreadable(type(obj).__name__)


class _ContentCache(FunctionCache):
    """numba's cache of one function, in index files of their own per content key."""

    def __init__(self, py_func, key: str):
        super().__init__(py_func)
        self._content_key = key
        self._cache_file = IndexDataCacheFile(
            self._cache_path, f"{self._impl.filename_base}-{key[:20]}",
            self._impl.locator.get_source_stamp())

    def _index_key(self, sig, codegen):
        return (sig, codegen.magic_tuple(), self._content_key)


def cached(dispatcher: Dispatcher) -> Dispatcher:
    """``dispatcher`` (an njit function, a closure say) with numba's on-disk cache keyed
    by its content (module docstring); returned unchanged where that cannot be read."""
    h = hashlib.sha256(_salt())
    try:
        _read(dispatcher, h, set())
    except (_Unreadable, OSError):
        return dispatcher
    dispatcher._cache = _ContentCache(dispatcher.py_func, h.hexdigest())
    return dispatcher
