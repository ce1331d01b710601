"""Where the tasks of the Section 6 experiment run: in this process, a local process pool, or a Dask
cluster.  The executors only call ``fn(spec)`` and hand each result to ``on_done`` as it
finishes; the results do not depend on which executor ran them, nor in which order.
"""

from __future__ import annotations

import platform

from dpbook.experiment.tasks import init_worker


def connect(scheduler: str, timeout: float):
    """A Dask client of the scheduler at ``scheduler``; ValueError if unreachable."""
    try:
        from dask.distributed import Client
    except ImportError as e:  # pragma: no cover
        raise ValueError(f"dask.distributed is not available: {e}") from None
    _probe(scheduler, timeout)
    _identify(scheduler, timeout)
    try:
        return Client(scheduler, timeout=timeout, set_as_default=False)
    except Exception as e:  # noqa: BLE001 - any failure means: not reachable
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {msg}") from None


def _identify(scheduler: str, timeout: float):
    """Ask the server at ``scheduler`` who it is, within ``timeout`` seconds.

    A server that is not Dask may accept the connection and never answer; the Dask
    client then waits forever.  The question runs on its own event loop in a helper
    thread (the caller may be inside a running loop, e.g. a notebook)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from distributed.comm import connect as comm_connect

    async def ask():
        comm = await comm_connect(scheduler, timeout=timeout)
        try:
            await comm.write({"op": "identity"})
            return await comm.read()
        finally:
            comm.abort()

    def run():
        return asyncio.run(asyncio.wait_for(ask(), timeout))

    with ThreadPoolExecutor(1) as ex:
        try:
            answer = ex.submit(run).result()
        except TimeoutError:
            raise ValueError(f"no Dask scheduler answered at {scheduler!r} within "
                             f"{timeout:g} s (is another kind of server listening "
                             f"there?)") from None
        except Exception as e:  # noqa: BLE001 - a closed or garbled connection
            msg = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise ValueError(f"{scheduler!r} did not answer as a Dask scheduler: "
                             f"{msg}") from None
    kind = answer.get("type") if isinstance(answer, dict) else None
    if kind != "Scheduler":
        raise ValueError(f"{scheduler!r} is not a Dask scheduler (it says it is "
                         f"{kind or 'something else'})")


def _probe(scheduler: str, timeout: float):
    """Fail fast (instead of retrying until the timeout) when nothing listens on a tcp
    address; other protocols are left to the Dask client."""
    import socket

    from distributed.comm import parse_address
    from distributed.comm.addressing import parse_host_port

    try:
        proto, loc = parse_address(scheduler, strict=False)
        if proto != "tcp":
            return
        host, port = parse_host_port(loc)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ValueError(f"bad Dask scheduler address {scheduler!r}: {msg}") from None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as e:
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: "
                         f"{e.strerror or e}") from None


def run_serial(fn, specs, on_done):
    """Each (task, spec) of ``specs`` in turn, in this process."""
    for task, spec in specs:
        on_done(task, fn(spec))


_POOLS: dict = {}  # (workers, source stamp) -> the pool kept for the next call


def _source_stamp() -> tuple:
    """Names, sizes and modification times of dpbook's source files: a pool whose workers
    imported other code than this process would now import is not reused."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    return tuple(sorted((str(p), st.st_size, st.st_mtime_ns) for p in root.rglob("*.py")
                        for st in (p.stat(),)))


def _pool(workers):
    """The local pool of ``workers`` processes, kept between calls: starting one costs
    seconds (spawn, imports, compiled-kernel caches), and a chapter runs several
    studies.  The tasks are pure functions of their specs, so reuse changes no result."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor

    key = (workers, _source_stamp())
    if key not in _POOLS:
        _close_pools()
        _close_at_exit()
        _POOLS[key] = ProcessPoolExecutor(max_workers=workers, initializer=init_worker,
                                          mp_context=mp.get_context("spawn"))
    return key, _POOLS[key]


def _close_pools(wait=False):
    while _POOLS:
        _POOLS.popitem()[1].shutdown(wait=wait, cancel_futures=True)


_EXIT_HOOK = []


def _close_at_exit():
    """Shut the kept pool down at interpreter exit, while every module is intact.

    Left in ``_POOLS``, the executor was freed only when this module's globals were
    cleared during interpreter finalization; its weakref callback in
    ``concurrent.futures.process`` then ran after that module's own globals had been
    cleared and printed ``Exception ignored in: <function ... weakref_cb>`` after
    pytest's summary.  An atexit hook runs before finalization clears any
    module (and after ``concurrent.futures``' own exit hook has stopped the manager
    thread), so the pool is shut down and freed there."""
    if not _EXIT_HOOK:
        import atexit

        atexit.register(_close_pools, wait=True)
        _EXIT_HOOK.append(True)


def run_pool(fn, specs, workers, on_done):
    """A local pool of ``workers`` spawned processes with one numba thread each (kept
    for the next call; see :func:`_pool`)."""
    from concurrent.futures import as_completed

    key, ex = _pool(workers)
    try:
        futs = {ex.submit(fn, spec): task for task, spec in specs}
        _raise_first(_gather(as_completed(futs), futs, on_done))
    except BaseException:
        # a failed, interrupted or broken pool is not reused; its workers ignore SIGINT
        # (init_worker), so they are stopped here rather than left to finish their tasks
        _POOLS.pop(key, None)
        procs = list((getattr(ex, "_processes", None) or {}).values())  # none public (3.11)
        ex.shutdown(wait=False, cancel_futures=True)  # cancel what has not started
        for p in procs:
            p.terminate()
        raise


def _versions() -> dict:
    """What decides the numbers a worker produces (run on the Dask workers)."""
    from importlib.metadata import version

    from dpbook import __version__

    return {"dpbook": __version__, "numpy": version("numpy"), "numba": version("numba"),
            "python": platform.python_version()}


def check_workers(client) -> dict:
    """The versions each Dask worker runs; warns where they differ from this process."""
    import warnings

    try:
        remote = client.run(_versions)
    except Exception as e:  # noqa: BLE001 - informative only
        return {"error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    if not remote:
        warnings.warn("the Dask scheduler has no workers yet; tasks wait until some join",
                      stacklevel=3)
    here = _versions()
    for addr, v in remote.items():
        if v != here:
            warnings.warn(f"Dask worker {addr} runs {v}, this process {here}: results may "
                          f"differ from a local run", stacklevel=3)
    return remote


def run_dask(fn, client, specs, on_done):
    """The tasks on the Dask cluster of ``client``; no retries (a task is not re-run
    behind the user's back)."""
    from dask.distributed import as_completed

    futs = {client.submit(fn, spec, key=f"dpbook-experiment-{task.name}-{spec['seed']}",
                          pure=False, retries=0): task for task, spec in specs}
    try:
        errors = _gather(as_completed(list(futs), loop=client.loop), futs, on_done,
                         release=True)
    except BaseException:
        client.cancel(list(futs))
        raise
    _raise_first(errors)


def _gather(finished, futs, on_done, release=False) -> list:
    """Hand each result of the ``finished`` futures (``futs``: future -> task) to
    ``on_done``; return the (task, error) of those that failed, the others kept."""
    errors = []
    for f in finished:
        try:
            res = f.result()
        except Exception as e:  # noqa: BLE001 - keep the others, report at the end
            errors.append((futs[f], e))
            continue
        on_done(futs[f], res)
        if release:
            f.release()
    return errors


def _raise_first(errors):
    """Re-raise the first task error (after every other task has been stored)."""
    if errors:
        task, e = errors[0]
        e.add_note(f"in task {task.name} ({len(errors)} task(s) failed)")
        raise e
