"""`dpbook curator` (issue 28, item 4): the curator of a deployment behind a collection
service, one state file, each command a separate process's load, change and save."""

import json
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from dpbook.cli import main
from dpbook.cli.summary import posterior_summary
from dpbook.online.curator_state import load_curator
from dpbook.online.streams import make_curator
from dpbook.privacy.individual import seeded_release_for_simulation


def _cli(capsys, *args):
    assert main(["curator", *map(str, args)]) == 0
    return capsys.readouterr().out


def _csv(path, rows):
    path.write_text("y,l,r\n" + "".join(f"{y!r},{l!r},{r!r}\n" for y, l, r in rows))
    return path


@pytest.mark.slow
def test_a_service_s_calls_give_the_python_curator_s_numbers(tmp_path, capsys):
    """init, two published batches, their releases back late and interleaved, one
    individual who never answers: the intervals and the posterior of the same calls on
    one Curator in memory, bit for bit."""
    state, eps = tmp_path / "c.db", 2.0
    ref = make_curator(eps, "smc-marginal", n_particles=200, seed=3)
    _cli(capsys, "init", state, "--eps", eps, "--particles", 200, "--seed", 3, "--prior",
         "paper")
    first = json.loads(_cli(capsys, "publish", state, "--k", 3, "--json"))
    second = json.loads(_cli(capsys, "publish", state, "--k", 2, "--json"))
    i1, i2 = ref.publish(3), ref.publish(2)
    assert (first["l"], first["r"]) == i1 and (second["l"], second["r"]) == i2
    rng = np.random.default_rng(0)
    y = [seeded_release_for_simulation(x, *iv, eps, rng)
         for x, iv in ((0.3, i2), (1.2, i1), (-0.4, i2), (0.9, i1))]
    rows = [(y[0], *i2), (y[1], *i1), (y[2], *i2), (y[3], *i1)]
    _cli(capsys, "take", state, _csv(tmp_path / "a.csv", rows[:1]))
    _cli(capsys, "take", state, _csv(tmp_path / "b.csv", rows[1:]))
    for yt, l, r in rows:
        ref.take(yt, l, r)
    _cli(capsys, "withdraw", state, *i1)
    ref.withdraw(*i1)
    third = json.loads(_cli(capsys, "publish", state, "--json"))
    assert (third["l"], third["r"]) == ref.publish(1)
    status = json.loads(_cli(capsys, "status", state, "--json"))
    assert status["taken"] == 4
    assert status["posterior"] == posterior_summary(ref.posterior, ref.posterior.family)
    assert status["outstanding"] == [{"l": third["l"], "r": third["r"], "k": 1}]
    saved = load_curator(state)  # the releases in the order taken, as in memory
    assert all(np.array_equal(a, b) for a, b in zip(saved.releases(), ref.releases()))


def test_refusals_leave_the_state_as_it_was(tmp_path, capsys):
    state = tmp_path / "c.db"
    _cli(capsys, "init", state, "--eps", 1.0, "--particles", 50, "--interval", -1, 1,
         "--prior", "paper")
    _cli(capsys, "publish", state, "--k", 2)
    before = state.read_bytes()
    for args, needle in [
            (["init", state, "--eps", 1], "exists"),
            (["withdraw", state, -1, 1, "--k", 3], "fewer than 3"),
            (["publish", state, "--k", 0], "k must"),
            (["take", state, _csv(tmp_path / "z.csv", [(0.1, -1.0, 1.0), (0.2, -1.0, 1.0),
                                                       (0.3, -1.0, 1.0)])],
             "z.csv, row 3 (line 4): the interval [-1.0, 1.0] has 2 releases expected, "
             "and the releases before this one take them all; nothing taken"),
            (["take", state, _csv(tmp_path / "w.csv", [(0.1, -1.0, 1.0), (0.2, -2.0, 1.0)])],
             "w.csv, row 2 (line 3): the interval [-2.0, 1.0] was not published"),
            (["take", state, _csv(tmp_path / "i.csv", [(0.1, -1.0, 1.0), (np.inf, -1.0, 1.0)])],
             "i.csv, row 2 (line 3): y must be finite"),
            (["take", state, _csv(tmp_path / "v.csv", [(0.1, 1.0, -1.0)])],
             "v.csv, row 1 (line 2): interval must have l < r"),
            (["take", state, tmp_path / "none.csv"], "no such file"),
            (["withdraw", state, -2, 1], "fewer than 1"),
            (["init", tmp_path, "--eps", 1, "--force"], "is a directory"),
            (["status", tmp_path / "none.db"], "no such curator state file"),
            (["init", tmp_path / "no" / "c.db", "--eps", 1], "no such directory"),
            (["init", tmp_path / "g.db", "--eps", 1, "--method", "online-gradient",
              "--particles", 10, "--prior", "paper"], "does not apply"),
            (["init", tmp_path / "p.db", "--eps", 1], "no prior in the data's units: give "
             "--range LO HI")]:
        assert main(["curator", *map(str, args)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and needle in err, (args, err)
    (tmp_path / "cols.csv").write_text("y,lo,r\n0.1,-1,1\n")
    assert main(["curator", "take", str(state), str(tmp_path / "cols.csv")]) == 2
    assert "lacks column(s) l (header must be y,l,r)" in capsys.readouterr().err
    (tmp_path / "f.pkl").write_text("not a curator")
    assert main(["curator", "publish", str(tmp_path / "f.pkl")]) == 2
    assert "not a dpbook curator state file" in capsys.readouterr().err
    assert state.read_bytes() == before


@pytest.mark.slow
@pytest.mark.parametrize("method", ["smc-marginal", "online-gradient"])
def test_two_processes_taking_at_once_lose_nothing(tmp_path, capsys, method):
    state = tmp_path / "c.db"
    _cli(capsys, "init", state, "--eps", 1.0, "--method", method, "--interval", -5, 5,
         "--range", -5, 5)
    _cli(capsys, "publish", state, "--k", 40)
    files = [_csv(tmp_path / f"{i}.csv", [(0.1 * i + 0.01 * j, -5.0, 5.0) for j in range(20)])
             for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-m", "dpbook.cli", "curator", "take",
                               str(state), str(f)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for f in files]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    status = json.loads(_cli(capsys, "status", state, "--json"))
    assert status["taken"] == 40 and status["outstanding"] == []


def test_the_running_page_s_session_prints_what_the_page_says(tmp_path, capsys, monkeypatch):
    """The example session of the book's page Running dpbook, replayed: each
    `$ dpbook ...` line's output (or its one-line error) and the file shown by `$ cat`."""
    readme = (Path(__file__).resolve().parents[1] / "book" / "running.md").read_text()
    block = readme.split("A session, two batches")[1].split("```\n")[1]
    monkeypatch.chdir(tmp_path)
    steps = []  # (command line, the lines it prints)
    for line in block.splitlines():
        if line.startswith("$ "):
            steps.append((line[2:].split("#")[0], []))
        else:
            steps[-1][1].append(line)
    assert len(steps) == 8
    for command, shown in steps:
        argv = shlex.split(command)
        if argv[0] == "cat":
            Path(argv[1]).write_text("\n".join(shown) + "\n")
            continue
        assert argv[:2] == ["dpbook", "curator"]
        code = main(argv[1:])
        out = capsys.readouterr()
        assert (out.out if code == 0 else out.err).splitlines() == shown, command


def test_a_take_warns_of_a_prior_data_conflict_as_stream_does(tmp_path, capsys):
    """A prior stated in other units than the releases (--range 1000 1100, releases near
    50): take says so in one line after its result, as dpbook stream does; releases in
    the prior's units stay quiet."""
    state = tmp_path / "s.db"
    _cli(capsys, "init", state, "--eps", "1", "--range", "1000", "1100")
    l, r = map(float, _cli(capsys, "publish", state, "--k", "40").split())
    assert main(["curator", "take", str(state),
                 str(_csv(tmp_path / "near.csv", [(l + 0.01 * i, l, r) for i in range(20)]))]) == 0
    out = capsys.readouterr()
    assert "took 20" in out.out and "conflict" not in out.err, out.err
    assert main(["curator", "take", str(state),
                 str(_csv(tmp_path / "far.csv", [(50 + 0.1 * i, l, r) for i in range(20)]))]) == 0
    out = capsys.readouterr()
    assert "took 20" in out.out
    assert out.err.startswith("dpbook: warning: prior-data conflict") and out.err.count("\n") == 1
