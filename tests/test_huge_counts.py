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
    (["curator", "publish", "STATE", "--k", str(2 ** 63)], "2^63 - 1")])
def test_more_tasks_than_memory_holds_is_one_line_before_the_store(argv, needle, tmp_path,
                                                                   capsys):
    argv = [str(tmp_path / "st") if a == "STATE" else a for a in argv]
    out = tmp_path / "store"
    assert main([*argv, *(["--out", str(out)] if argv[0] != "curator" else [])]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err
    assert not out.exists()
