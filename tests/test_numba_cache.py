"""numba's on-disk cache of the kernels compiled per family (dpbook.numba_cache): keyed by
what the kernel computes, so a changed family compiles afresh and an unchanged one is
loaded in the next process."""

import os
import subprocess
import sys
import textwrap

import numpy as np
from numba import njit

from dpbook.model.compiler import outlined
from dpbook.numba_cache import cached
from dpbook.vmath import compile_scalar


def _kernel(scale, helper=None):
    """An outlined family primitive, as the engines build one per family."""

    def base_logpdf(self, z):
        return -scale * z * z + (0.0 if helper is None else helper(z))

    return outlined(compile_scalar(base_logpdf))


def test_the_key_follows_the_code_and_the_values_it_reads():
    key = lambda d: d._cache._content_key  # noqa: E731
    assert key(_kernel(0.5)) == key(_kernel(0.5))
    assert key(_kernel(0.5)) != key(_kernel(0.25))  # a cell's value
    h1 = njit(lambda z: 0.0 * z)
    h2 = njit(lambda z: 1.0 * z)
    assert key(_kernel(0.5, h1)) != key(_kernel(0.5, h2))  # a function it calls


def test_a_kernel_whose_content_cannot_be_read_is_left_uncached():
    class Opaque:
        pass

    box = Opaque()

    @njit
    def f(z):
        return z

    def g(z):
        return f(z) if box else z

    d = cached(njit(g))
    assert not hasattr(d._cache, "_content_key")


_RUN = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from test_engine import Logistic
    from dpbook.model.compiler import compiled_family
    cf = compiled_family(Logistic())
    print(sum(cf.logpdf1.stats.cache_hits.values()), repr(cf.logpdf1(cf.state[0], 0.3)))
""")


def test_a_second_process_loads_the_family_s_kernel_with_the_same_numbers(tmp_path):
    """The first process compiles a user's family's primitive and saves it; the next one
    loads it from the cache and computes the same number, bit for bit (the golden record
    runs every engine through the cache)."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_NUM_THREADS": "1"}
    code = _RUN.format(tests=os.path.dirname(__file__))
    out = [subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, check=True).stdout.split() for _ in range(2)]
    assert out[0][0] == "0" and int(out[1][0]) > 0, out
    assert out[0][1] == out[1][1]
    assert np.isfinite(float(out[1][1]))
