"""What every sub-command shares: the parser that fails in one line, the number types,
the check that an option applies, and the printing of a result (text or JSON)."""

from __future__ import annotations

import argparse
import json
import math
import re

JSON_HELP = "print the result as JSON"


class Parser(argparse.ArgumentParser):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # "-1e308" is a number, not an option (argparse knows only "-1" and "-1.5")
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

    def error(self, message):  # one line, no usage dump
        raise UsageError(message)


class UsageError(Exception):
    """A command line that cannot run: one line, exit status 2."""


def _ascii(text):
    """Python's float() and int() read the digits of every script ('\u0665' as 5); dpbook
    reads ASCII numerals only, as its CSV reader does (see the README)."""
    if not text.isascii():
        raise argparse.ArgumentTypeError(f"{text!r} is not written with ASCII digits "
                                         f"(dpbook reads ASCII numerals only)")


def finite_float(text):
    v = any_float(text)
    if not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return v


def _parser(convert, what):
    """An argparse type: ``convert`` of an ASCII text, or an error naming ``what``."""

    def parse(text):
        _ascii(text)
        try:
            if "_" in text:  # float('1_0') is 10: a typo read as another number
                raise ValueError
            return convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None

    return parse


any_float = _parser(float, "a number")
_int = _parser(int, "an integer")


def eps(text):
    """--eps, checked as it is parsed (:func:`dpbook.validation.check_eps`): every command
    refuses a bad one before it reads its input."""
    from dpbook.validation import check_eps  # numpy: after the environment's check

    try:
        return check_eps(any_float(text))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
MAX_COUNT = 2 ** 63 - 1  # SQLite's largest integer (a curator keeps its counts there)


def integer(text):
    """A count or a size (every integer option but the seed): at most 2^63 - 1; beyond,
    it was an OverflowError where SQLite or numpy took it, or a run that never ended."""
    v = _int(text)
    if v > MAX_COUNT:
        raise argparse.ArgumentTypeError(f"{text} is above the largest count dpbook takes, "
                                         f"2^63 - 1 = {MAX_COUNT}")
    return v


def boolean(text):
    """A family's option declared bool (argparse's type=bool read 'false' as True)."""
    v = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}.get(
        text.strip().lower())
    if v is None:
        raise argparse.ArgumentTypeError(f"not true or false: {text!r}")
    return v


def seed(text):
    v = _int(text)  # any size: numpy's SeedSequence takes it
    if v < 0:
        raise argparse.ArgumentTypeError(f"a seed must be an integer >= 0, got {text!r}")
    return v


def add_missing_argument(p):
    p.add_argument("--missing", choices=("error", "skip"), default="error",
                   help="a row with an empty cell (or a blank line): an error (default) "
                        "or skipped; the output says how many rows were skipped")


def only_where_used(args, what, options):
    """Options that change nothing for this run must not pass without a word: each of
    ``options``, {dest: (default, used, users)}, left unset takes its default; given on
    the command line where ``used`` is False, it is a one-line error naming the option,
    ``what`` it does not apply to (e.g. '--method exact') and ``users``, what it is
    for.  (The parser's defaults are None, so a value given equal to the default counts
    as given.)"""
    for dest, (default, used, users) in options.items():
        if getattr(args, dest) is None:
            setattr(args, dest, default)
        elif not used:
            raise UsageError(f"--{dest.replace('_', '-')} does not apply to {what} "
                             f"(it is for {users})")


def nonfinite(value, path=""):
    """The first non-finite number in a (nested) result, as 'name', or None."""
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = ((f"[{i}]", v) for i, v in enumerate(value))
    else:
        return path or "a value" if isinstance(value, float) and not math.isfinite(value) \
            else None
    for k, v in items:
        bad = nonfinite(v, f"{path}{k}" if str(k).startswith("[") else
                        (f"{path}.{k}" if path else str(k)))
        if bad:
            return bad
    return None


def print_result(result: dict, as_json: bool, lines):
    bad = nonfinite(result)
    if bad:  # a last safety net: dpbook never prints NaN or inf
        raise ValueError(f"the result {bad} is not finite: this input is outside what "
                         f"dpbook computes reliably (see the supported ranges in the "
                         f"error messages of nearby inputs)")
    print(json.dumps(result) if as_json else "\n".join(lines))
