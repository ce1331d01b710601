"""Issue 55: every sub-command that writes to stdout, when its reader has gone
(``dpbook ... | head -1``), ends quietly with status 141 (128 + SIGPIPE, as a shell
reports a program SIGPIPE ends); a full device (``> /dev/full``) is one line, status 2."""

import json
import os
import subprocess
import sys

import pytest


def _run(args, cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, **kw):
    env = dict(os.environ, NUMBA_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "dpbook.cli", *map(str, args)], cwd=cwd,
                          env=env, stdout=stdout, stderr=stderr, timeout=120, **kw)


def _closed_pipe():
    """The write end of a pipe whose reader is gone: any write to it fails (EPIPE)."""
    r, w = os.pipe()
    os.close(r)
    return w


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """Small inputs, a curator with intervals out, and stores that the commands below
    resume (so that each run is quick)."""
    d = tmp_path_factory.mktemp("streams")
    (d / "rel.csv").write_text("y,l,r\n0.3,-1,1\n-0.2,-1,1\n1.4,-1,1\n")
    (d / "v.csv").write_text("x\n0.3\n-0.2\n1.4\n0.5\n")
    for args in (INIT, EXP, CAL):
        assert _run(args, d).returncode == 0
    out = _run(["curator", "publish", "st", "--k", 1000, "--json"], d,
               stdout=subprocess.PIPE)
    iv = json.loads(out.stdout)
    (d / "take.csv").write_text(f"y,l,r\n0.5,{iv['l']!r},{iv['r']!r}\n")
    (d / "interval").write_text(f"{iv['l']!r} {iv['r']!r}")
    return d


INIT = ["curator", "init", "st", "--eps", 1, "--range", 0, 10, "--particles", 40]
EXP = ["experiment", "--out", "out", "--runs", 1, "--n", 6, "--particles", 20, "--eps", 2,
       "--workers", 1, "--no-progress", "--methods", "smc-fixed"]
CAL = ["calibrate", "--method", "exact", "--eps", 1, "--n", 5, "--reps", 3, "--grid", 16,
       "--out", "cal", "--workers", 1, "--no-progress"]
COMMANDS = {
    "families": ["families"],
    "fisher": ["fisher", "--eps", 1, "--a", -1, "--b", 1],
    "best-interval": ["best-interval", "--eps", 1, "--grid", 5],
    "posterior": ["posterior", "rel.csv", "--eps", 1, "--range", -3, 3, "--method", "exact"],
    "stream": ["stream", "v.csv", "--column", "x", "--eps", 1, "--range", -3, 3,
               "--particles", 40],
    "experiment": EXP,
    "calibrate": CAL,
    "curator publish": ["curator", "publish", "st"],
    "curator status": ["curator", "status", "st"],
    "curator take": ["curator", "take", "st", "take.csv"],
    "curator withdraw": ["curator", "withdraw", "st", "INTERVAL"],
}
CASES = [(name, js) for name in COMMANDS for js in (False, True)]
CASES.append(("curator init", False))  # no --json


def _argv(name, js, d):
    if name == "curator init":
        return [*INIT, "--force"]
    args = [a for arg in COMMANDS[name] for a in
            ((d / "interval").read_text().split() if arg == "INTERVAL" else [arg])]
    return args + ["--json"] * js


@pytest.mark.slow
@pytest.mark.parametrize("name, js", CASES)
def test_a_closed_pipe_ends_quietly_and_a_full_device_in_one_line(work, name, js):
    w = _closed_pipe()
    try:
        out = _run(_argv(name, js, work), work, stdout=w)
    finally:
        os.close(w)
    assert (out.returncode, out.stderr) == (141, b"")
    with open("/dev/full", "wb") as full:
        out = _run(_argv(name, js, work), work, stdout=full)
    err = out.stderr.decode()
    assert out.returncode == 2 and err.count("\n") == 1, err
    if name in ("curator publish", "curator take", "curator withdraw"):  # saved first
        assert err.startswith("dpbook: error: cannot write the output (No space left") \
            and " was changed: " in err, err
    else:
        assert err.startswith("dpbook: error: cannot write the output: No space left"), err


@pytest.mark.parametrize("args", [["fisher", "--eps", 0, "--a", -1, "--b", 1],  # an error
                                  ["families"]])  # a success
def test_a_closed_stderr_or_stdout(tmp_path, args):
    """stderr whose reader has gone: quiet, 141 if something had to be said; stdout or
    stderr closed from the start (``>&-``): as /dev/null, no traceback."""
    w = _closed_pipe()
    try:
        out = _run(args, tmp_path, stderr=w, stdout=subprocess.PIPE)
    finally:
        os.close(w)
    assert out.returncode == (141 if args[0] == "fisher" else 0)
    for fd in (1, 2):
        out = _run(args, tmp_path, stdout=None, stderr=subprocess.PIPE if fd == 1 else None,
                   preexec_fn=lambda fd=fd: os.close(fd))
        assert out.returncode == (2 if args[0] == "fisher" else 0)
        assert not out.stderr or b"Traceback" not in out.stderr


def test_posterior_with_stdout_closed_from_the_start(write_csv, tmp_path):
    data = write_csv("y,l,r\n0.3,-1,1\n-0.2,-1,1\n")
    out = _run(["posterior", data, "--eps", 1, "--range", -3, 3, "--method", "exact"],
               tmp_path, stdout=None, preexec_fn=lambda: os.close(1))
    assert (out.returncode, out.stderr) == (0, b""), out.stderr
