"""Issue 55: an environment dpbook cannot use is one line and exit status 2, and one it
can work around is a working run, never a traceback from inside an import."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dpbook
from dpbook import environment

FISHER = ["fisher", "--eps", "1", "--a", "-1", "--b", "1"]


def _run(args, env=(), unset=(), **kw):
    e = {**os.environ, "NUMBA_NUM_THREADS": "1", **dict(env)}
    for k in unset:
        e.pop(k, None)
    return subprocess.run([sys.executable, "-m", "dpbook.cli", *args], env=e,
                          capture_output=True, text=True, timeout=120, **kw)


def _one_line(out, needle):
    assert out.returncode == 2 and out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("dpbook: error: ") and needle in out.stderr, out.stderr


@pytest.mark.parametrize("threads", ["0", "-3", "two"])
def test_a_thread_count_numba_refuses_is_one_line(threads):
    _one_line(_run(FISHER, {"NUMBA_NUM_THREADS": threads}), f"NUMBA_NUM_THREADS={threads!r}")


def test_more_threads_than_cores_runs():
    out = _run(FISHER, {"NUMBA_NUM_THREADS": "1000"})
    assert out.returncode == 0 and "F_mumu" in out.stdout, out.stderr


def test_a_removed_working_directory_is_one_line(tmp_path):
    gone = tmp_path / "gone"
    gone.mkdir()
    out = _run(["families"], preexec_fn=lambda: (os.chdir(gone), os.rmdir(gone)))
    _one_line(out, "working directory no longer exists")


@pytest.fixture(scope="module")
def read_only_install(tmp_path_factory):
    """A copy of dpbook whose __pycache__ directories cannot be made (each is a file), as
    in a read-only install."""
    root = tmp_path_factory.mktemp("ro")
    shutil.copytree(Path(dpbook.__file__).parent, root / "dpbook",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for d in [root / "dpbook", *(p for p in (root / "dpbook").rglob("*") if p.is_dir())]:
        (d / "__pycache__").touch()
    return root


@pytest.mark.slow
@pytest.mark.parametrize("env, unset", [
    ({"NUMBA_CACHE_DIR": "/proc/no/such", "HOME": "/proc/no"}, ()),  # uncreatable
    ({"NUMBA_CACHE_DIR": "/dev/null/x", "XDG_CACHE_HOME": "/dev/null"}, ()),  # a file
    ({"HOME": "/proc/no", "TMPDIR": "/proc/no"}, ("NUMBA_CACHE_DIR",)),  # and no TMPDIR
    ({"XDG_CACHE_HOME": ""}, ("HOME", "NUMBA_CACHE_DIR"))])
def test_no_usable_numba_cache_directory_still_runs(read_only_install, tmp_path, env, unset):
    """It was 'RuntimeError: cannot cache function 'noise_loglik': no locator available'
    as dpbook was imported; now the kernels are cached under the temporary directory."""
    env = {**env, "PYTHONPATH": str(read_only_install)}
    out = _run([*FISHER, "--family", "student_t", "--df", "3"], env, unset, cwd=tmp_path)
    assert out.returncode == 0 and "F[loc" in out.stdout and not out.stderr, out.stderr
    assert not list(tmp_path.iterdir())  # nothing left in the working directory


def test_no_directory_at_all_for_numba_s_cache_is_one_line(monkeypatch):
    def fail(*a, **k):
        raise OSError("read-only file system")

    monkeypatch.setattr(environment, "_writable", lambda path: False)
    monkeypatch.setattr(environment.tempfile, "mkdtemp", fail)
    assert "set NUMBA_CACHE_DIR to a writable directory" in environment.environment_problem()
