"""SIGTERM and SIGHUP in the middle of a command that writes (issue 55, item 6): one line,
the status 128 + the signal's number, every output complete or absent (no temporary
file left), and a rerun resumes; a curator command whose output fails after it changed
its state says what it changed."""

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import dpbook.calibration.study as study
from dpbook.cli import main

SRC = str(Path(__file__).resolve().parents[1] / "src")
# the command line as the dpbook script runs it; "ready" once its early handlers are in
_RUN = ("import sys; sys.argv[0] = 'dpbook'; import dpbook.cli; print('ready', flush=True); "
        "sys.exit(dpbook.cli.main(sys.argv[1:]))")
_CALIBRATE = ["calibrate", "--method", "exact", "--eps", "1", "--n", "20", "--reps", "4",
              "--grid", "21", "--workers", "1", "--no-progress"]


def test_a_calibration_stopped_before_its_first_replication_resumes(tmp_path, monkeypatch,
                                                                    capsys):
    """Its store kept a table of no rows, and so no columns: the rerun's merge with it
    was a KeyError traceback."""
    def stopped(spec):
        raise KeyboardInterrupt

    argv = [*_CALIBRATE, "--out", str(tmp_path / "c")]
    with monkeypatch.context() as m:
        m.setattr(study, "run_replication", stopped)
        assert main(argv) == 130
        assert main(argv) == 130  # stopped again, with the empty table there
    assert main([*argv, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reps"] == 4
    assert len(pd.read_parquet(tmp_path / "c" / "estimates.parquet")) == 4


def test_a_signal_swallowed_inside_a_ctypes_callback_is_sent_again():
    """A signal whose exception is raised inside a ctypes callback (numba's compiler
    loading its cache calls back into Python) was swallowed by ctypes, with a trace on
    stderr, and the command ran on to its end with exit 0."""
    from dpbook.cli.app import _signals, _Terminated

    @ctypes.CFUNCTYPE(None)
    def callback():
        os.kill(os.getpid(), signal.SIGTERM)
        for _ in range(10 ** 5):  # the handler runs in here
            pass

    with pytest.raises(_Terminated), _signals():
        callback()
        time.sleep(5)  # sent again a moment later


def _outputs_whole(path):
    """Every file under ``path`` is complete (it parses), and none is a temporary one."""
    files = [p for p in Path(path).rglob("*") if p.is_file()] if Path(path).is_dir() else \
        [Path(path)] if Path(path).exists() else []
    for p in files:
        assert ".tmp" not in p.name, p
        if p.suffix == ".json":
            json.loads(p.read_text())
        elif p.suffix == ".parquet":
            pd.read_parquet(p)
        elif p.suffix == ".npz":
            assert dict(np.load(p))
        elif p.suffix == ".csv":
            assert p.read_text().startswith("y,l,r\n") and p.read_text().endswith("\n")


@pytest.mark.parametrize("sig, command", [
    ("SIGHUP", "stream"), ("SIGHUP", "experiment"), ("SIGHUP", "calibrate"),
    ("SIGTERM", "calibrate"), ("nohup", "calibrate")])
def test_a_signal_mid_command_leaves_outputs_whole_and_a_rerun_resumes(tmp_path, sig,
                                                                       command):
    values = tmp_path / "v.csv"
    # enough values that the stream is still at work when the signal comes (300 could
    # be done within the two seconds on a quiet machine)
    values.write_text("x\n" + "".join(f"{50 + i % 7}\n" for i in range(3000)))
    out = tmp_path / "out"
    argv = {"stream": ["stream", str(values), "--column", "x", "--eps", "1", "--range", "0",
                       "100", "--method", "smc", "--particles", "300", "--released",
                       str(tmp_path / "rel.csv"), "--no-progress"],
            "experiment": ["experiment", "--eps", "1", "--runs", "3", "--n", "30",
                           "--particles", "50", "--methods",
                           "smc-adaptive,smc-fixed", "--workers", "1", "--out", str(out),
                           "--no-progress"],
            "calibrate": [*_CALIBRATE, "--out", str(out)]}[command]
    nohup = sig == "nohup"  # SIGHUP ignored from the start, as nohup does: it runs on
    p = subprocess.Popen([sys.executable, "-c", _RUN, *argv], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, PYTHONPATH=SRC, NUMBA_NUM_THREADS="1"),
                         preexec_fn=lambda: nohup and signal.signal(signal.SIGHUP,
                                                                    signal.SIG_IGN))
    sig = "SIGHUP" if nohup else sig
    assert p.stdout.readline() == "ready\n"
    t0 = time.monotonic()  # at work: its store begun, or two seconds into the stream
    while time.monotonic() - t0 < (2 if command == "stream" else 60) and \
            not (out / "manifest.json").exists():
        time.sleep(0.05)
    p.send_signal(getattr(signal, sig))
    _, err = p.communicate(timeout=60)
    if nohup:
        assert p.returncode == 0 and err == "", err
        return
    word = "hung up" if sig == "SIGHUP" else "terminated"
    assert p.returncode == 128 + getattr(signal, sig) and err.startswith(f"dpbook: {word}") \
        and err.count("\n") == 1, (p.returncode, err)
    _outputs_whole(out)
    _outputs_whole(tmp_path / "rel.csv")
    assert [f.name for f in tmp_path.iterdir() if ".tmp" in f.name] == []
    if command != "stream":  # the rerun takes up what was stored
        assert main(argv) == 0


def test_a_curator_command_whose_output_fails_says_what_it_changed(tmp_path, capsys):
    state = tmp_path / "s.db"
    assert main(["curator", "init", str(state), "--eps", "1", "--interval", "-5", "5",
                 "--range", "-5", "5", "--particles", "50"]) == 0
    capsys.readouterr()
    with open(os.devnull if not os.path.exists("/dev/full") else "/dev/full", "w") as full:
        p = subprocess.run([sys.executable, "-m", "dpbook.cli", "curator", "publish",
                            str(state), "--k", "2"], stdout=full, stderr=subprocess.PIPE,
                           text=True, env=dict(os.environ, PYTHONPATH=SRC), timeout=120)
    assert p.returncode == 2 and p.stderr == (
        f"dpbook: error: cannot write the output (No space left on device), but {state} was "
        f"changed: published [-5.0, 5.0] for k = 2\n")
    assert main(["curator", "status", str(state), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["outstanding"] == [
        {"l": -5.0, "r": 5.0, "k": 2}]
