"""The curator's state file (issue 40, item 2): a SQLite record whose rows carry their
checksums.  A damaged snapshot is rebuilt from the release log, the same curator bit for
bit; any other damage and a foreign file are refused in one line; a state file of the
format before (a pickle, tests/data/curator_v1.pkl written by the code of then) is
migrated once; a user's family file is kept by its path; and kill -9 at random instants
loses no acknowledged release."""

import importlib.util
import json
import os
import pickle
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpbook.cli import main
from dpbook.cli.summary import posterior_summary
from dpbook.online.curator_state import load_curator, save_curator
from dpbook.online.streams import make_curator

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]


def _cli(capsys, *args):
    code = main(["curator", *map(str, args)])
    out = capsys.readouterr()
    return code, out.out, out.err


def _assert_same(a, b, rtol=0.0):
    """The same curator, bit for bit: releases, intervals, generators, posterior (its
    recorded summaries to ``rtol``: numpy's reductions, whose last bits depend on the
    CPU that ran them, for a fixture written on another machine)."""
    assert all(np.array_equal(u, v) for u, v in zip(a.releases(), b.releases()))
    assert a.intervals == b.intervals and a.outstanding == b.outstanding
    assert a.rng.bit_generator.state == b.rng.bit_generator.state
    pa, pb = vars(a.posterior), vars(b.posterior)
    for k in ("theta", "logw", "loglik", "u", "t", "evaluations"):
        assert np.array_equal(pa.get(k), pb.get(k)), k
    if "rng" in pa:
        assert pa["rng"].bit_generator.state == pb["rng"].bit_generator.state
    ha, hb = vars(a.posterior.history), vars(b.posterior.history)
    assert ha.keys() == hb.keys()
    for k in ha:
        if not isinstance(ha[k], list):
            assert ha[k] == hb[k], k
        elif rtol and k.startswith(("mean_", "sd_", "ess")):
            assert np.allclose(ha[k], hb[k], rtol=rtol, atol=0, equal_nan=True), k
        else:
            assert np.array_equal(ha[k], hb[k], equal_nan=True), k


def _session(method, state, n_steps=12):
    """A curator taking releases one at a time and in batches, saved after each call,
    and the same curator never saved."""
    ref = make_curator(2.0, method, n_particles=100, seed=4)
    save_curator(make_curator(2.0, method, n_particles=100, seed=4), state)
    rng = np.random.default_rng(1)
    for t in range(n_steps):
        k = 1 + t % 3
        cur = load_curator(state)
        iv = cur.publish(k)
        assert iv == ref.publish(k)
        save_curator(cur, state)
        y = rng.normal(0.3, 1.0, k)
        cur = load_curator(state)
        cur.take_many(y, [iv[0]] * k, [iv[1]] * k)
        for v in y:
            ref.take(float(v), *iv)
        if t == 5:
            cur.withdraw(*cur.publish(2), k=1)
            ref.withdraw(*ref.publish(2), k=1)
        save_curator(cur, state)
    return ref


@pytest.mark.parametrize("method", ["smc-marginal", "online-gradient"])
def test_a_damaged_or_missing_snapshot_is_rebuilt_from_the_log_bit_for_bit(method,
                                                                            tmp_path):
    state = tmp_path / "c.db"
    ref = _session(method, state)
    _assert_same(load_curator(state), ref)
    blob = state.read_bytes()
    at = blob.index(b"PK\x03\x04") + 300  # inside the snapshot's .npz,
    at += 16 * (at % 4096 < 16)  # not an overflow page's link to the next
    (tmp_path / "flip.db").write_bytes(blob[:at] + bytes([blob[at] ^ 0x10]) + blob[at + 1:])
    with sqlite3.connect(state) as con:
        assert con.execute("SELECT COUNT(*) FROM snapshots").fetchone() == (1,)
        con.execute("DELETE FROM snapshots")
    con.close()
    for path in (state, tmp_path / "flip.db"):
        back = load_curator(path)
        _assert_same(back, ref)
        # and they go on alike
        iv = back.publish(2)
        assert iv == ref.publish(2)
        back.take_many([0.1, 0.2], [iv[0]] * 2, [iv[1]] * 2)
        ref.take_many([0.1, 0.2], [iv[0]] * 2, [iv[1]] * 2)
        _assert_same(back, ref)
        save_curator(back, path)
        _assert_same(load_curator(path), ref)
        ref = _session(method, tmp_path / "again.db")


def test_bit_flips_load_the_same_curator_or_are_refused_in_one_line(tmp_path, capsys):
    """200 states, each with 1 to 4 random bytes flipped: `dpbook curator status` prints
    the status of the undamaged file (a damaged snapshot rebuilt from the log) or one
    line and exit status 2; never another posterior."""
    state = tmp_path / "c.db"
    assert _cli(capsys, "init", state, "--eps", 2, "--particles", 60, "--range", -5, 5,
                "--seed", 2)[0] == 0
    for k in (3, 2, 4):
        _, out, _ = _cli(capsys, "publish", state, "--k", k, "--json")
        iv = json.loads(out)
        rel = tmp_path / "r.csv"
        rel.write_text("y,l,r\n" + "".join(f"{0.5 * i},{iv['l']!r},{iv['r']!r}\n"
                                           for i in range(k)))
        assert _cli(capsys, "take", state, rel)[0] == 0
    code, truth, _ = _cli(capsys, "status", state, "--json")
    assert code == 0
    clean = state.read_bytes()
    rng = np.random.default_rng(40)
    loaded = refused = 0
    for i in range(200):
        blob = bytearray(clean)
        for at in rng.integers(0, len(blob), rng.integers(1, 5)):
            blob[at] ^= int(rng.integers(1, 256))
        flipped = tmp_path / f"f{i}.db"
        flipped.write_bytes(bytes(blob))
        code, out, err = _cli(capsys, "status", flipped, "--json")
        if code == 0:
            assert out == truth, f"flip {i}: loaded with another status"
            loaded += 1
        else:
            assert code == 2 and err.count("\n") == 1 and out == "", err
            refused += 1
        flipped.unlink()
    assert loaded > 50 and refused > 10, (loaded, refused)


class _RunsCode:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.mkdir, (str(self.marker),)


def test_a_foreign_damaged_or_forged_file_is_refused_in_one_line(tmp_path, capsys):
    """Text, an empty file, another program's SQLite database, a state of another
    version, a pickle that would run code when loaded, a pickled curator without its
    attributes: one line, exit status 2, nothing run."""
    from dpbook.privacy.curator import Curator

    files = {"text.db": b"not a curator state\n", "empty.db": b""}
    with sqlite3.connect(tmp_path / "other.db") as con:
        con.execute("CREATE TABLE releases (y REAL)")
        con.execute("INSERT INTO releases VALUES (1.5)")
    con.close()
    marker = tmp_path / "ran"
    files["code.pkl"] = pickle.dumps({"format": "dpbook-curator", "version": 1,
                                      "curator": _RunsCode(marker)})
    files["bare.pkl"] = pickle.dumps({"format": "dpbook-curator", "version": 1,
                                      "curator": Curator.__new__(Curator)})
    for name, blob in files.items():
        (tmp_path / name).write_bytes(blob)
    save_curator(make_curator(1.0, "online-gradient"), tmp_path / "v3.db")
    with sqlite3.connect(tmp_path / "v3.db") as con:
        con.execute("PRAGMA user_version = 3")
    con.close()
    for name, says in [("text.db", "not a dpbook curator state file"),
                       ("empty.db", "not a dpbook curator state file"),
                       ("other.db", "not a dpbook curator state file"),
                       ("code.pkl", "not a dpbook curator state file"),
                       ("bare.pkl", "not a dpbook curator state file"),
                       ("v3.db", "curator state version 3, this dpbook reads version 2")]:
        before = (tmp_path / name).read_bytes()
        code, out, err = _cli(capsys, "status", tmp_path / name)
        assert code == 2 and err.count("\n") == 1 and says in err and out == "", (name, err)
        assert (tmp_path / name).read_bytes() == before
    assert not marker.exists()


def test_a_pickle_of_the_format_before_is_migrated_once(tmp_path, capsys):
    """tests/data/curator_v1.pkl, written by `dpbook curator` before the state was SQLite
    (init, two batches, three releases, one withdrawn): the first command migrates it
    (the pickle kept beside it), the curator is the one the pickle held, and the file is
    not migrated again."""
    state = tmp_path / "state.pkl"
    shutil.copy(DATA / "curator_v1.pkl", state)
    with open(DATA / "curator_v1.pkl", "rb") as fh:
        old = pickle.load(fh)["curator"]  # our own fixture: a trusted pickle
    code, out, err = _cli(capsys, "status", state, "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["posterior"] == posterior_summary(old.posterior, old.posterior.family)
    assert status["taken"] == 3 and status["outstanding"] == [
        {"l": l, "r": r, "k": k} for (l, r), k in sorted(old.outstanding.items())]
    assert state.read_bytes()[:16] == b"SQLite format 3\x00"
    backup = tmp_path / "state.pkl.pickle-v1"
    assert backup.read_bytes() == (DATA / "curator_v1.pkl").read_bytes()
    backup.unlink()
    assert _cli(capsys, "status", state, "--json")[1] == out and not backup.exists()
    back = load_curator(state)
    old.intervals = back.intervals
    _assert_same(back, old, rtol=1e-12)  # the fixture was summarised on another CPU
    assert back.intervals == [(10.397834136655698, 10.654777743533304, 3),
                              (7.747525687456761, 7.914456238975188, 1)]
    # the posterior's seed was kept in the pickle: the log rebuilds the same posterior
    with sqlite3.connect(state) as con:
        con.execute("DELETE FROM snapshots")
    con.close()
    _assert_same(load_curator(state), old, rtol=1e-12)
    assert back.publish(1) == old.publish(1)


@pytest.mark.parametrize("method, old, new", [
    ("smc-marginal", "dpbook.marginal.ibis", "dpbook.online.ibis"),
    ("online-gradient", "dpbook.gradient", "dpbook.online.gradient")])
def test_a_pickle_naming_where_the_posteriors_lived_before_is_migrated(method, old, new,
                                                                        tmp_path):
    cur = make_curator(5.0, method=method, policy=(-3.0, 3.0), n_particles=20)
    del cur.intervals  # a curator of then
    text = pickle.dumps({"format": "dpbook-curator", "version": 1, "curator": cur},
                        protocol=0)
    assert f"{new}\n".encode() in text
    (tmp_path / "old.pkl").write_bytes(text.replace(f"{new}\n".encode(),
                                                    f"{old}\n".encode()))
    back = load_curator(tmp_path / "old.pkl")
    assert type(back.posterior) is type(cur.posterior)
    assert back.posterior.t == cur.posterior.t == 0


def test_a_family_file_is_kept_by_its_path(tmp_path, capsys, monkeypatch):
    """`curator init --family path/to/file.py:Class` (refused while the state was a
    pickle): the state names the file, each load imports it again, and a file that is
    gone is one line naming it."""
    family = tmp_path / "fam" / "hypsecant_family.py"
    family.parent.mkdir()
    shutil.copy(DATA / "hypsecant_family.py", family)
    state = tmp_path / "c.db"
    code, _, err = _cli(capsys, "init", state, "--eps", 2, "--family", f"{family}:HypSecant",
                        "--range", -5, 5, "--particles", 50)
    assert code == 0, err
    _, out, _ = _cli(capsys, "publish", state, "--k", 2, "--json")
    iv = json.loads(out)  # (a release would compile the family's likelihood: 15 s)
    for name in [m for m in sys.modules if m.startswith("dpbook_user_")]:
        monkeypatch.delitem(sys.modules, name)  # imported again, as a new process does
    code, out, err = _cli(capsys, "status", state, "--json")
    assert code == 0 and json.loads(out)["family"] == "hypsecant", err
    assert json.loads(out)["outstanding"] == [{**iv}]
    family.unlink()
    code, out, err = _cli(capsys, "status", state)
    assert code == 2 and err.count("\n") == 1 and str(family) in err and "gone" in err, err


def test_a_family_module_of_the_current_directory_is_kept_by_its_path(tmp_path, capsys,
                                                                      monkeypatch):
    """`curator init --family module:Class` with module.py in the current directory:
    the state names the file, so it loads from another directory too."""
    (tmp_path / "here").mkdir()
    shutil.copy(DATA / "hypsecant_family.py", tmp_path / "here" / "hyp_cwd_53.py")
    monkeypatch.chdir(tmp_path / "here")
    state = tmp_path / "c.db"
    code, _, err = _cli(capsys, "init", state, "--eps", 2, "--family", "hyp_cwd_53:HypSecant",
                        "--range", -5, 5, "--particles", 50)
    assert code == 0, err
    for name in [m for m in sys.modules if m.startswith("dpbook_user_")]:
        monkeypatch.delitem(sys.modules, name)  # imported again, as a new process does
    monkeypatch.chdir(tmp_path)
    code, out, err = _cli(capsys, "status", state, "--json")
    assert code == 0 and json.loads(out)["family"] == "hypsecant", err


def test_kill_9_at_random_instants_loses_no_acknowledged_release():
    """benchmarks/curator_crash.py, a few loops: every release acknowledged by a worker
    later killed with SIGKILL is in the state, which loads."""
    spec = importlib.util.spec_from_file_location("_curator_crash",
                                                  ROOT / "benchmarks" / "curator_crash.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = bench.run(loops=4, seed=3, particles=50)
    assert res["lost"] == 0 and res["unloadable"] == 0, res
    assert res["acknowledged"] > 4


def test_the_state_is_one_file_after_every_command(tmp_path, capsys):
    """A take acknowledged while another connection holds the state open (a reader, a
    second curator) is in the state file itself when the command exits, not only in its
    WAL: a copy of the file alone, as a user moves any file, keeps every release."""
    state = tmp_path / "s.db"
    assert _cli(capsys, "init", state, "--eps", "1", "--range", "0", "100")[0] == 0
    assert _cli(capsys, "publish", state, "--k", "4")[0] == 0
    l, r = load_curator(state).outstanding.popitem()[0]
    csv = tmp_path / "rel.csv"
    csv.write_text("y,l,r\n" + "".join(f"{l + 0.1 * i},{l},{r}\n" for i in range(3)))
    reader = sqlite3.connect(state)  # idle: it only keeps the WAL from being removed
    try:
        reader.execute("SELECT count(*) FROM releases").fetchall()
        code, out, err = _cli(capsys, "take", state, csv)
        assert code == 0, err
        alone = tmp_path / "moved.db"
        shutil.copy(state, alone)
        assert len(load_curator(alone).releases()[0]) == 3
    finally:
        reader.close()


def _state_with(tmp_path, capsys, k):
    """A state with ``k`` releases published on [-5, 5], and a CSV of ``k`` of them."""
    state = tmp_path / "s.db"
    assert _cli(capsys, "init", state, "--eps", 1, "--interval", -5, 5, "--range", -5, 5,
                "--particles", 50)[0] == 0
    assert _cli(capsys, "publish", state, "--k", k)[0] == 0
    csv = tmp_path / "rel.csv"
    csv.write_text("y,l,r\n" + "".join(f"{0.01 * i},-5.0,5.0\n" for i in range(k)))
    return state, csv


@pytest.mark.parametrize("fault, needle", [
    ("read-only", "cannot write the curator state: attempt to write a readonly database"),
    ("full", "cannot write the curator state: database or disk is full")])
def test_a_read_only_state_or_a_full_disk_is_one_line_and_changes_nothing(
        tmp_path, capsys, monkeypatch, fault, needle):
    """SQLite itself refuses the write: a file it opened read-only (as it does a file
    without write permission), or a file that may not grow (max_page_count, SQLite's
    own "database or disk is full")."""
    state, csv = _state_with(tmp_path, capsys, 60)
    (tmp_path / "s.db.lock").unlink()
    before = sorted(p.name for p in tmp_path.iterdir()), state.read_bytes()
    connect = sqlite3.connect

    def faulty(path, **kw):
        if fault == "read-only":
            return connect(f"file:{path}?mode=ro", uri=True, **kw)
        con = connect(path, **kw)
        con.execute(f"PRAGMA max_page_count = {con.execute('PRAGMA page_count').fetchone()[0]}")
        return con

    monkeypatch.setattr(sqlite3, "connect", faulty)
    code, out, err = _cli(capsys, "take", state, csv)
    assert code == 2 and err == f"dpbook: error: {state}: {needle}; the state is as it was\n"
    (tmp_path / "s.db.lock").unlink()
    assert (sorted(p.name for p in tmp_path.iterdir()), state.read_bytes()) == before
    monkeypatch.undo()
    assert _cli(capsys, "take", state, csv)[0] == 0  # room again: it goes on


def test_a_take_killed_after_its_acknowledgement_is_in_the_file_alone(tmp_path, capsys):
    """A `curator take` killed with SIGKILL once it has printed what it took, while another
    connection keeps the state open (as a reader does): whatever it leaves beside the
    state (a -wal or -shm in WAL mode), the file alone holds the releases it took."""
    state, csv = _state_with(tmp_path, capsys, 3)
    reader = sqlite3.connect(state)
    try:
        reader.execute("SELECT count(*) FROM releases").fetchall()
        proc = subprocess.Popen(
            [sys.executable, "-c", "import sys, time; from dpbook.cli import main; "
             "main(sys.argv[1:]); sys.stdout.flush(); time.sleep(60)", "curator", "take",
             str(state), str(csv)], stdout=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT / "src")))
        assert proc.stdout.readline().startswith("took 3 releases")
        proc.kill()
        proc.wait()
        shutil.copy(state, tmp_path / "alone.db")
    finally:
        reader.close()
    assert len(load_curator(tmp_path / "alone.db").releases()[0]) == 3
    assert len(load_curator(state).releases()[0]) == 3


@pytest.mark.slow
def test_processes_taking_at_once_lose_nothing():
    """benchmarks/curator_crash.py --contention, small: 2 processes of 10 `curator take`
    calls each on one state at once; every call succeeds, and the state holds each
    acknowledged release once and nothing else."""
    spec = importlib.util.spec_from_file_location("_curator_crash",
                                                  ROOT / "benchmarks" / "curator_crash.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    res = bench.contend(2, 10)
    assert (res["acknowledged"], res["failed"], res["lost"], res["extra"]) == (20, 0, 0, 0)
