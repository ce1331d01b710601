"""Compiled kernels run over chunks of their items on a thread pool."""

from __future__ import annotations

import concurrent.futures
import os

import numba

_PARALLEL_WORK = 1 << 15  # particles x latent values per thread, at least


def run_chunks(kernel, n, work, *args):
    """``kernel(i0, i1, *args)`` over items 0..n-1 (``work`` per item), in as many chunks
    as numba has threads (one on this thread, the others on the pool: the kernel releases
    the GIL), when that is enough work to pay for waking threads."""
    k = min(numba.get_num_threads(), max(1, n * max(work, 1) // _PARALLEL_WORK), n)
    cuts = [n * j // k for j in range(k + 1)]
    others = [_pool().submit(kernel, cuts[j], cuts[j + 1], *args) for j in range(1, k)]
    kernel(cuts[0], cuts[1], *args)
    for f in others:
        f.result()


_POOLS: dict = {}


def _pool():
    """This process's thread pool (one per process id: a forked worker does not inherit
    its parent's threads)."""
    pid = os.getpid()
    if pid not in _POOLS:
        _POOLS[pid] = concurrent.futures.ThreadPoolExecutor(
            numba.config.NUMBA_NUM_THREADS, thread_name_prefix="dpbook")
    return _POOLS[pid]
