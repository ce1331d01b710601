"""The experiment store under faults: foreign, corrupt or pickled task files, stores that
cannot be written, two writers at once, and a scheduler address where no Dask scheduler
answers (issue #13).  Every fault ends in a right answer or a one-line ValueError."""

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_same_estimates

from dpbook import experiment as ex
from dpbook.experiment.store import StoreWarning

SMALL = dict(eps=(1, 5), runs=2, n=30, particles=40, mhaar_iters=60, interval_grid=6,
             progress=False, workers=1)
N_TASKS = 3 * 2 * 2


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "ref"
    return out, ex.run_experiment(out=out, **SMALL)


def test_foreign_task_files_are_never_used(ref, tmp_path):
    """The manifest is deleted and another configuration runs into the same directory:
    the old files (same names, other n and seed) are moved aside, not reused."""
    out = tmp_path / "s"
    shutil.copytree(ref[0], out)
    (out / "manifest.json").unlink()
    with pytest.warns(StoreWarning, match="made by another configuration"):
        df = ex.run_experiment(out=out, **{**SMALL, "n": 25, "seed": 7})
    assert len(df) == N_TASKS and (df["n"] == 25).all()
    assert len(list((out / "quarantine").glob("*.npz"))) == N_TASKS
    m = json.loads((out / "manifest.json").read_text())
    assert m["complete"] and m["config"]["n"] == 25
    fresh = ex.run_experiment(out=tmp_path / "fresh", **{**SMALL, "n": 25, "seed": 7})
    assert_same_estimates(df, fresh)
    assert (pd.read_parquet(out / "estimates.parquet")["n"] == 25).all()


def _damage(path: Path, how: str):
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(700))
    elif how == "wrong keys":
        np.savez(path.with_suffix(""), something=np.arange(3))  # savez adds ".npz"
    elif how == "pickled":
        np.savez(path.with_suffix(""), row_json=np.array([{"a": 1}], dtype=object),
                 config_sha=np.array("x"))
    elif how.startswith("byte flipped at"):  # inside an array's compressed data
        at = int(len(data) * int(how.split()[-1].rstrip("%")) / 100)
        path.write_bytes(data[:at] + bytes([data[at] ^ 0x5A]) + data[at + 1:])
    elif how == "other task":
        other = sorted(path.parent.glob("*.npz"))
        other = next(p for p in other if p != path)
        shutil.copy(other, path)


@pytest.mark.parametrize("how", ["truncated", "empty", "garbage", "wrong keys", "pickled",
                                 "other task", "byte flipped at 23%", "byte flipped at 51%",
                                 "byte flipped at 77%"])
def test_corrupt_task_file_is_quarantined_and_recomputed(ref, tmp_path, how):
    out = tmp_path / "s"
    shutil.copytree(ref[0], out)
    victim = out / "tasks" / "smc-fixed_eps5.0_run1.npz"
    _damage(victim, how)
    with pytest.warns(StoreWarning) as rec:
        est, tr = ex.load_results(out)  # reading: the file is not used, nothing moves
    assert len(est) == N_TASKS - 1 and ("smc-fixed", 5.0, 1) not in tr
    msg = str(rec[0].message)
    assert str(victim) in msg and "\n" not in msg and "allow_pickle" not in msg
    with pytest.warns(StoreWarning, match="moved to .*quarantine.*recomputed"):
        df = ex.run_experiment(out=out, **SMALL)
    assert_same_estimates(ref[1], df)
    assert len(list((out / "quarantine").iterdir())) == 1
    assert_same_estimates(ref[1], ex.load_results(out)[0])


def test_cli_reports_a_quarantined_file_in_one_line(tmp_path, capsys):
    from dpbook.cli import main

    out = tmp_path / "s"
    args = ["experiment", "--out", str(out), "--eps", "1", "--runs", "1", "--n", "30",
            "--particles", "40", "--mhaar-iters", "60", "--methods", "smc-fixed,mhaar",
            "--workers", "1", "--no-progress"]
    assert main(args) == 0
    capsys.readouterr()
    _damage(out / "tasks" / "mhaar_eps1.0_run0.npz", "garbage")
    assert main(args) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line]
    assert len(err) == 1 and err[0].startswith("dpbook: warning: ") and "quarantine" in err[0]


@pytest.mark.parametrize("where", ["below a file", "unwritable"])
def test_store_that_cannot_be_written_fails_before_computing(tmp_path, where, monkeypatch):
    calls = []
    monkeypatch.setattr(ex.runner, "_best_intervals", lambda *a: calls.append(a) or {})
    if where == "below a file":
        (tmp_path / "f").write_text("x")
        out = tmp_path / "f" / "store"
    else:
        out = Path("/proc/self/dpbook-store")  # not writable, even for root
    with pytest.raises(ValueError, match="cannot write the store") as e:
        ex.run_experiment(out=out, **SMALL)
    assert str(out) in str(e.value) and "\n" not in str(e.value) and calls == []


def test_old_store_format_is_refused_by_load_and_set_aside_by_ensure(ref, tmp_path):
    out = tmp_path / "old"
    shutil.copytree(ref[0], out)
    m = json.loads((out / "manifest.json").read_text())
    m["format"] = m["config"]["format"] = 1
    (out / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(ValueError, match="store format 1"):
        ex.load_results(out)
    cfg = {k: v for k, v in SMALL.items() if k not in ("progress", "workers")}
    est, _ = ex.ensure_results(out=out, progress=False, workers=1, **cfg)
    assert_same_estimates(ref[1], est)
    assert list(tmp_path.glob("old.stale-*"))


_WRITER = """
import sys
from dpbook.experiment import run_experiment
if __name__ == "__main__":
    run_experiment(out=sys.argv[1], eps=(1, 5), runs=2, n=30, particles=40, mhaar_iters=60,
                   interval_grid=6, progress=False, workers=1)
"""


@pytest.mark.slow
def test_two_concurrent_writers_lose_no_manifest_update(ref, tmp_path):
    out = tmp_path / "shared"
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    procs = [subprocess.Popen([sys.executable, str(script), str(out)],
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for p in procs:
        assert p.wait(timeout=300) == 0, p.stderr.read()
    m = json.loads((out / "manifest.json").read_text())
    assert len(m["sessions"]) == 2 and all("finished" in s for s in m["sessions"])
    assert len({s["id"] for s in m["sessions"]}) == 2 and m["complete"]
    est, _ = ex.load_results(out)
    assert_same_estimates(ref[1], est)
    assert not list((out / "tasks").glob(".tmp-*"))


@pytest.mark.slow
def test_server_that_is_not_a_dask_scheduler_fails_within_the_timeout(tmp_path):
    """A server that accepts connections and never answers (the Dask client alone would
    wait forever)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                conns.append(srv.accept()[0])
            except OSError:
                pass

    threading.Thread(target=accept, daemon=True).start()
    address = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError, match="no Dask scheduler answered") as e:
            ex.run_experiment(out=tmp_path / "x", scheduler=address, scheduler_timeout=2,
                              **{k: v for k, v in SMALL.items() if k != "workers"})
    finally:
        stop.set()
        for c in conns:
            c.close()
        srv.close()
    assert time.perf_counter() - t0 < 10
    assert address in str(e.value) and "\n" not in str(e.value)
    assert not (tmp_path / "x").exists()


def test_dead_writers_debris_is_removed_but_live_writers_files_are_kept(ref, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(ref[0], out)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    (out / "tasks" / f".tmp-{dead}-mhaar_eps1.0_run0.npz").write_bytes(b"partial")
    live = out / "tasks" / f".tmp-{os.getppid()}-mhaar_eps5.0_run0.npz"
    live.write_bytes(b"being written")
    ex.run_experiment(out=out, **SMALL)
    assert not (out / "tasks" / f".tmp-{dead}-mhaar_eps1.0_run0.npz").exists()
    assert live.exists()
