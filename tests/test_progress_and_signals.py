"""A long latent-SMC posterior shows its progress (on a terminal
only) and names the faster method; a signal that arrives before ``main()`` installed its
handlers is answered in one line; Poisson's theta beyond what its quantile function
computes is one line naming it."""

import json
import os
import re
import signal
import subprocess
import sys

import numpy as np
import pytest

import dpbook
import dpbook.cli.posterior as cli
import dpbook.cli.summary as summary
from dpbook.cli import main


def _releases(write_csv, n):
    rng = np.random.default_rng(0)
    y = np.clip(rng.normal(50, 3, n), 40, 60) + rng.laplace(0, 4, n)
    return write_csv("y,l,r\n" + "".join(f"{v!r},40.0,60.0\n" for v in y.tolist()))


@pytest.mark.parametrize("method", [["smc"], ["smc-subset", "--subset", "5"]])
def test_a_latent_smc_shows_its_progress_on_a_terminal(write_csv, capsys, monkeypatch,
                                                       method):
    """`dpbook posterior --method smc` ran for minutes on 10^5 releases without a word."""
    monkeypatch.setattr(summary, "stderr_is_terminal", lambda: True)
    monkeypatch.setattr(summary, "PROGRESS_DELAY", 0.0)
    path = _releases(write_csv, 60)
    assert main(["posterior", "--method", *method, "--particles", "100", "--eps", "5",
                 "--json", path]) == 0
    cap = capsys.readouterr()
    assert re.search(rf"\r{method[0]}: \d+/60 releases +\d+%\|", cap.err), cap.err
    assert json.loads(cap.out)["n"] == 60  # stdout holds the JSON alone


def test_no_progress_off_a_terminal(write_csv, capsys, monkeypatch):
    monkeypatch.setattr(summary, "PROGRESS_DELAY", 0.0)
    path = _releases(write_csv, 60)
    assert main(["posterior", "--method", "smc", "--particles", "100", "--eps", "5", path,
                 "--range", "30", "70"]) == 0
    assert capsys.readouterr().err == ""


def test_beyond_a_few_thousand_releases_the_latent_smc_names_the_faster_method(
        write_csv, capsys, monkeypatch):
    """At LATENT_NOTE_N releases no note, one more and the note (the threshold lowered
    to 40 here: the decision is the same code for any threshold)."""
    assert 1000 <= cli.LATENT_NOTE_N <= 10_000  # "a few thousand"
    monkeypatch.setattr(cli, "LATENT_NOTE_N", 40)
    for n, note in ((40, False), (41, True)):
        _note_or_not(write_csv, capsys, n, note)


def _note_or_not(write_csv, capsys, n, note):
    path = _releases(write_csv, n)
    assert main(["posterior", "--method", "smc", "--particles", "30", "--eps", "5",
                 "--json", "--range", "30", "70", path]) == 0
    err = capsys.readouterr().err.splitlines()
    if note:
        assert len(err) == 1 and err[0].startswith("dpbook: note: --method smc ") \
            and "--method smc-marginal" in err[0], err
    else:
        assert err == []


_EARLY = r"""
import os, signal, sys
sys.argv = ["dpbook", "families"]  # as the dpbook script runs it
import dpbook.cli
os.kill(os.getpid(), getattr(signal, sys.argv_sig))  # before main() installs its handlers
sys.exit(dpbook.cli.main())
"""


@pytest.mark.slow
@pytest.mark.parametrize("sig, code, word", [("SIGTERM", 143, "terminated"),
                                             ("SIGINT", 130, "interrupted")])
def test_a_signal_before_main_installed_its_handlers_is_one_line(sig, code, word):
    """SIGTERM while the command line was still importing ended the process without a
    word (Ctrl-C: a traceback from inside an import)."""
    script = _EARLY.replace("sys.argv_sig", repr(sig))
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(
                           [os.path.dirname(os.path.dirname(dpbook.__file__))]
                           + [os.environ.get("PYTHONPATH", "")])})
    assert p.returncode == code and p.stderr == f"dpbook: {word}\n", (p.returncode, p.stderr)
    assert p.stdout == ""


@pytest.mark.slow
def test_importing_the_command_line_changes_no_signal_handler():
    # (SIGINT compared with what this process inherited: a shell's background job
    # starts with it ignored)
    code = ("import signal; before = [signal.getsignal(s) for s in (signal.SIGTERM, "
            "signal.SIGINT)]; import dpbook.cli; "
            "assert [signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT)] == before")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("argv", [
    ["fisher", "--eps", "1", "--a", "8", "--b", "12", "--family", "poisson", "--theta", "1e12"],
    ["best-interval", "--eps", "1", "--family", "poisson", "--theta", "1e12"]])
def test_a_poisson_theta_beyond_its_quantile_function_is_named(capsys, argv):
    """lam = 1e12: 'the result F[0][0] is not finite' and 'lims must be two finite
    numbers ... (nan, ...)', neither naming the cause."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == ("dpbook: error: the poisson(lam) family cannot locate its mass at lam = "
                   "1e+12: its quantile function is not finite there, so this theta is "
                   "outside what dpbook computes\n")


@pytest.mark.slow
def test_the_real_entry_point_answers_a_signal_at_any_moment(write_csv):
    """The real command (a latent SMC of about 20 s), SIGTERM after 0.05 to 6 s: every run
    ends with one line and exit 143, or, for a signal during Python's own start-up
    before any of dpbook runs (which takes longer on a loaded machine), with the default
    action; nothing else.  The last, at 6 s, is always past the start."""
    import time

    path = _releases(write_csv, cli.LATENT_NOTE_N)
    outcomes = []
    for delay in (0.05, 0.3, 1.0, 6.0):
        p = subprocess.Popen([sys.executable, "-m", "dpbook.cli", "posterior", "--method",
                              "smc", "--particles", "1000", "--eps", "5", path],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(delay)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)
        outcomes.append((delay, p.returncode, err))
        assert (p.returncode == 143 and err == "dpbook: terminated\n") or \
            (p.returncode == -signal.SIGTERM and err == ""), outcomes
    assert outcomes[-1][1] == 143, outcomes
