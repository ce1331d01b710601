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


def test_the_kept_pool_is_shut_down_before_the_interpreter_finalizes(tmp_path):
    script = tmp_path / "use_pool.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "[0, 2, 4]\n"
    assert done.stderr == "freed\n"
