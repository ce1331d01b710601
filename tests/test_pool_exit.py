"""Issue 29's leftovers: ``Exception ignored in: <function ... weakref_cb>`` printed after
pytest's summary at interpreter exit.  The local pool kept between calls
(``dpbook.experiment.executors._POOLS``) was never shut down: it was freed only while
the interpreter cleared module globals, and concurrent.futures' weakref callback then
ran against a half-cleared module.  Now an atexit hook shuts it down and frees it before
finalization.  The test: a process that uses the pool, then exits; an atexit hook
registered before the pool's (so run after it) finds the executor freed (before the
fix: still alive), and stderr holds nothing else."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"

SCRIPT = textwrap.dedent("""
    import atexit, gc, sys, weakref
    from dpbook.experiment import executors

    def double(x):
        return 2 * x

    if __name__ == "__main__":
        refs = []

        def report():  # registered before the pool's hook: runs after it
            gc.collect()
            print("alive" if refs[0]() is not None else "freed", file=sys.stderr)

        atexit.register(report)
        out = []
        executors.run_pool(double, [(i, i) for i in range(3)], 2,
                           lambda t, r: out.append(r))
        refs.append(weakref.ref(next(iter(executors._POOLS.values()))))
        print(sorted(out))
""")


@pytest.mark.slow
def test_the_kept_pool_is_shut_down_before_the_interpreter_finalizes(tmp_path):
    script = tmp_path / "use_pool.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[0, 2, 4]\n"
    assert done.stderr == "freed\n"


KILLED = textwrap.dedent("""
    import sys, time
    from dpbook.experiment import executors

    def slow(x):
        time.sleep(60)
        return x

    if __name__ == "__main__":
        executors.run_pool(slow, [(i, i) for i in range(4)], 2, lambda t, r: None)
""")


def _children(pid):
    """The pids of the processes whose parent is ``pid`` (Linux /proc)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def _alive(pid):
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.slow
def test_pool_workers_die_with_a_killed_parent(tmp_path):
    # issue 40: SIGKILL of the parent (no handler runs) left the pool's workers and
    # the resource tracker running; now every child is gone within seconds (5 s on a
    # quiet host; 30 s allowed, for a host loaded many times over)
    import signal
    import time

    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    proc = subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    kids = []
    while time.monotonic() < deadline and len(kids) < 3:  # 2 workers + the tracker
        time.sleep(0.2)
        kids = _children(proc.pid)
    assert len(kids) >= 3, f"the pool did not start: children {kids}"
    time.sleep(2)  # the workers are in their initializer or running tasks by now
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(_alive(k) for k in kids):
        time.sleep(0.1)
    left = [k for k in kids if _alive(k)]
    for k in left:
        os.kill(k, signal.SIGKILL)
    assert not left, f"{len(left)} of {len(kids)} children outlived their parent by 30 s"
