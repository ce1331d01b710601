"""Issue 55: a count or size beyond what SQLite (2^63 - 1) or memory holds is one line
naming the limit (``curator publish --k 1e30`` was an OverflowError from SQLite; ``--runs``
and ``--reps`` of 2^63 - 1 ran without end, building their list of tasks)."""

import argparse

import pytest

from dpbook.cli import build_parser, main
from dpbook.cli.args import UsageError, integer


def _integer_options(parser, path=()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _integer_options(sub, (*path, name))
        elif action.type is integer and action.option_strings:
            yield (*path, action.option_strings[0])


OPTIONS = sorted(set(_integer_options(build_parser())))


def test_every_count_option_is_found():
    assert {("curator", "publish", "--k"), ("experiment", "--runs"), ("calibrate", "--reps"),
            ("stream", "--batch"), ("best-interval", "--grid")} <= set(OPTIONS)


@pytest.mark.parametrize("argv", OPTIONS, ids=" ".join)
def test_a_count_above_2_63_is_refused_as_it_is_parsed(argv):
    with pytest.raises(UsageError, match=r"the largest count dpbook takes, 2\^63 - 1"):
        build_parser().parse_args([*argv, str(2 ** 63)])


def test_the_seed_takes_any_size():
    assert build_parser().parse_args(["fisher", "--eps", "1", "--a", "0", "--b", "1", "--seed",
                                      str(10 ** 40)]).seed == 10 ** 40


@pytest.mark.parametrize("argv, needle", [
    (["experiment", "--runs", str(2 ** 63 - 1), "--n", "6", "--eps", "2", "--methods",
      "smc-fixed"], "tasks would need about"),
    (["calibrate", "--method", "exact", "--eps", "1", "--reps", str(10 ** 11)],
     "replications would need about"),
    (["curator", "publish", "STATE", "--k", str(2 ** 63)], "2^63 - 1"),
    (["calibrate", "--method", "exact", "--eps", "1", "--reps", "1", "--n", str(10 ** 15)],
     "a replication of 1000000000000000 individuals would need about"),  # was a traceback
    (["experiment", "--runs", "10000", "--n", "6", "--eps", "2", "--methods", "smc-fixed",
      "--workers", str(10 ** 12)], "10000 worker processes would need about")])
def test_more_tasks_than_memory_holds_is_one_line_before_the_store(argv, needle, tmp_path,
                                                                   capsys):
    argv = [str(tmp_path / "st") if a == "STATE" else a for a in argv]
    out = tmp_path / "store"
    assert main([*argv, *(["--out", str(out)] if argv[0] != "curator" else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not out.exists()


def test_a_curator_interval_awaits_at_most_2_63_releases(tmp_path, capsys):
    """Two publishes of 2^63 - 1 for one fixed interval: the second would make its count
    of awaited releases more than SQLite's integer holds (the state's view of them then
    failed with 'integer overflow'); one line, and the state keeps the first."""
    st = str(tmp_path / "st")
    assert main(["curator", "init", st, "--eps", "1", "--prior", "paper", "--interval",
                 "0", "1"]) == 0
    assert main(["curator", "publish", st, "--k", str(2 ** 63 - 1)]) == 0
    capsys.readouterr()
    assert main(["curator", "publish", st, "--k", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "more than a state counts (2^63 - 1)" in err, err
    assert main(["curator", "status", st, "--json"]) == 0
    assert f'"k": {2 ** 63 - 1}' in capsys.readouterr().out
