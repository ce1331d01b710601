"""What dpbook needs of its environment, seen before numba is imported: numba reads
NUMBA_NUM_THREADS as it is imported, and finds a cache directory for each function
marked ``cache=True`` as it is defined, so a bad value failed in a traceback from inside
an import.  This module imports neither numba nor numpy."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile


def _writable(path) -> bool:
    """numba's test of a cache directory (numba.core.caching): made if need be, a file
    written in it."""
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()
    except OSError:
        return False
    return True


def ensure_numba_cache() -> bool:
    """numba compiles a ``cache=True`` function only if it can cache it: in
    NUMBA_CACHE_DIR, in the __pycache__ next to its source or in the user's cache
    directory.  Where none can be written (a read-only install without a usable home),
    importing dpbook failed ('cannot cache function ...: no locator available'); then
    the kernels are cached in a directory of this process under the temporary one (read
    by its worker processes too), removed at exit.  False if there is none either."""
    user = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")),
                        "numba")  # numba's appdirs on Linux; not absolute: no home
    here = os.path.join(os.path.dirname(__file__), "__pycache__")
    if any(_writable(d) for d in (os.environ.get("NUMBA_CACHE_DIR"), here,
                                  user if os.path.isabs(user) else None) if d):
        return True
    try:
        path = tempfile.mkdtemp(prefix="dpbook-numba-")
    except OSError:
        return False
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    os.environ["NUMBA_CACHE_DIR"] = path
    if "numba" in sys.modules:  # imported already: it has read the environment
        sys.modules["numba"].config.CACHE_DIR = path
    return True


def environment_problem() -> str | None:
    """What in the environment stops dpbook from running, in one line, or None."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return "the working directory no longer exists (removed or moved): cd to one that does"
    threads = os.environ.get("NUMBA_NUM_THREADS", "")
    try:
        good = threads == "" or int(threads) >= 1  # "" is unset to numba
    except ValueError:
        good = False
    if not good:
        return (f"NUMBA_NUM_THREADS={threads!r} is not a whole number >= 1 (numba's "
                f"threads; unset, one per core)")
    if not ensure_numba_cache():
        return ("no directory to cache compiled code in: NUMBA_CACHE_DIR, dpbook's "
                "__pycache__, ~/.cache/numba and the temporary directory cannot be "
                "written; set NUMBA_CACHE_DIR to a writable directory")
    return None
