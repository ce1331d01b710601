"""Input that is accepted but means something else, tracebacks on faults, processes
left behind, and unhelpful messages.  Every bad input gives one
line naming the problem (exit status 2 and ``dpbook: error: ...`` on the command line,
ValueError in Python).  Examples are generated (hypothesis, derandomised) where a
generator fits: API argument types, option values, CSV cells."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpbook.cli import main

SETTINGS = settings(derandomize=True, deadline=None, database=None, max_examples=25,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.function_scoped_fixture])

Y, L, R = np.array([0.3, -0.2, 1.4]), -np.ones(3), np.ones(3)

# numbers that float() takes but that mean something else: a boolean is not the number
# 1, a complex number would lose its imaginary part, digits of other scripts are not
# what a CSV reader or most other tools read (dpbook reads ASCII numerals only)
non_ascii_digits = st.text(st.characters(categories=["Nd"], exclude_characters="0123456789"),
                           min_size=1, max_size=3)
not_real = st.one_of(
    st.booleans(), st.sampled_from([np.bool_(True), np.bool_(False)]),
    st.complex_numbers(allow_nan=False, allow_infinity=False, max_magnitude=10),
    st.builds(np.complex128, st.floats(0.5, 5)),
    non_ascii_digits)


def _api_calls():
    from dpbook.fisher import best_interval, fisher_exact, fisher_mc
    from dpbook.mhaar import mhaar
    from dpbook.model.mechanisms import release
    from dpbook.online import OnlineGradient, marginal_posterior
    from dpbook.posterior import exact_posterior
    from dpbook.smc import smc_posterior

    return {
        "exact_posterior": lambda eps: exact_posterior(Y, L, R, eps),
        "smc_posterior": lambda eps: smc_posterior(Y, L, R, eps, n_particles=20),
        "mhaar": lambda eps: mhaar(Y, L, R, eps, n_iter=50),
        "marginal_posterior": lambda eps: marginal_posterior(Y, L, R, eps, n_particles=20),
        "fisher_exact": lambda eps: fisher_exact(-1.0, 1.0, eps),
        "fisher_mc": lambda eps: fisher_mc(-1.0, 1.0, eps, M=5, K=5, rng=0),
        "best_interval": lambda eps: best_interval(eps, grid=3),
        "OnlineGradient": lambda eps: OnlineGradient(eps),
        "release": lambda eps: release(Y, -1.0, 1.0, eps, 0),
    }


@pytest.mark.parametrize("entry", list(_api_calls()))
@SETTINGS
@given(bad=not_real)
def test_eps_that_is_not_a_real_number_is_refused(entry, bad):
    """eps=True ran as eps = 1, eps=2+0j as 2, eps='٥' as 5."""
    with pytest.raises(ValueError, match="^eps must be"):
        _api_calls()[entry](bad)


@SETTINGS
@given(bad=not_real, where=st.sampled_from(["y", "l", "r"]), pos=st.integers(0, 2))
def test_data_that_are_not_real_numbers_are_refused(bad, where, pos):
    """A complex y kept its real part (with only numpy's ComplexWarning); a boolean
    counted as 0 or 1."""
    from dpbook.posterior import exact_posterior

    cols = {"y": list(Y), "l": list(L), "r": list(R)}
    cols[where][pos] = bad
    with pytest.raises(ValueError, match=f"{where}|interval"):
        exact_posterior(cols["y"], cols["l"], cols["r"], 1.0)


@pytest.mark.parametrize("values", [np.array([True, False, True]), Y + 0j, Y + 1j,
                                    [0.3, True, 1.4], [0.3, 1j, 1.4]])
def test_whole_arrays_of_booleans_or_complex_numbers_are_refused(values):
    from dpbook.smc import smc_posterior

    with pytest.raises(ValueError, match="^y must be"):
        smc_posterior(values, L, R, 1.0, n_particles=20)


@pytest.mark.parametrize("family, theta", [("normal", (True, 1.0)), ("normal", (0.0, 1 + 0j)),
                                           ("poisson", (np.bool_(True),)),
                                           ("laplace", ("\u0663", 1.0))])
def test_theta_that_is_not_a_real_number_is_refused(family, theta):
    from dpbook.model.families import get_family

    with pytest.raises(ValueError, match="must be"):
        get_family(family).check_theta(*theta)


def _seeded_calls():
    from dpbook.fisher import best_interval
    from dpbook.mhaar import mhaar
    from dpbook.online import marginal_posterior
    from dpbook.privacy.population import family_population, normal_population
    from dpbook.smc import SMC, smc_posterior

    return {
        "smc_posterior": lambda s: smc_posterior(Y, L, R, 1.0, n_particles=20, seed=s),
        "smc_posterior generic": lambda s: smc_posterior(Y, L, R, 1.0, n_particles=20,
                                                         seed=s, generic=True),
        "SMC laplace family": lambda s: SMC(1.0, "laplace", n_particles=20, seed=s),
        "mhaar": lambda s: mhaar(Y, L, R, 1.0, n_iter=50, seed=s),
        "mhaar generic": lambda s: mhaar(Y, L, R, 1.0, n_iter=50, seed=s, generic=True),
        "marginal_posterior": lambda s: marginal_posterior(Y, L, R, 1.0, n_particles=20,
                                                           seed=s),
        "best_interval mc": lambda s: best_interval(1.0, method="mc", grid=3, M=5, K=5,
                                                    seed=s),
        "normal_population": lambda s: normal_population(5, 0.0, 1.0, 1.0, seed=s),
        "family_population": lambda s: family_population("laplace", (0.0, 1.0), 5, 1.0,
                                                         seed=s),
    }


bad_seeds = st.one_of(st.floats(allow_nan=True).filter(lambda v: v != int(v) if
                                                        np.isfinite(v) else True),
                      st.integers(max_value=-1), st.booleans(), st.text(max_size=3),
                      st.complex_numbers(max_magnitude=5), st.just([1.5]))


@pytest.mark.parametrize("entry", list(_seeded_calls()))
@SETTINGS
@given(bad=bad_seeds)
def test_a_bad_seed_is_a_value_error_naming_seed(entry, bad):
    """seed=1.5 raised numpy's TypeError, seed=-1 a message without the argument's
    name, seed=True ran as seed 1."""
    with pytest.raises(ValueError, match="^seed must be"):
        _seeded_calls()[entry](bad)


def test_a_family_without_a_primitive_names_the_class_and_the_method():
    """A Family subclass without sample_prior raised NotImplementedError with an empty
    message."""
    from dpbook.model.families import Family, LocationScaleFamily
    from dpbook.model.mechanisms import Mechanism
    from dpbook.privacy.policies import Policy
    from dpbook.smc import smc_posterior

    class Bare(Family):
        name = "bare"
        params = ("a",)
        positive = (False,)

        def logpdf(self, x, a):
            return -0.5 * (x - a) ** 2

    with pytest.raises(NotImplementedError,
                       match=r"^Bare does not define sample_prior\(\).*subclass of Family"):
        smc_posterior(Y, L, R, 1.0, family=Bare(), n_particles=10)

    class Shapeless(LocationScaleFamily):
        name = "shapeless"

    with pytest.raises(NotImplementedError, match=r"^Shapeless does not define base_cdf\(\)"):
        Shapeless().cdf(0.5, 0.0, 1.0)
    with pytest.raises(NotImplementedError, match=r"^Mute does not define cdf\(\)"):
        type("Mute", (Mechanism,), {})().cdf(0.0, 1.0)
    with pytest.raises(NotImplementedError, match=r"^Idle does not define next_interval"):
        type("Idle", (Policy,), {})().next_interval(None, None)


def _cli_error(capsys, *args) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpbook: error: ") and err.count("\n") == 1, err
    return err


# ----------------------------------------------------------------------- CSV cells
ROWS = [["0.3", "-1", "1"], ["-0.2", "-1", "1"], ["1.4", "-1", "1"]]
bad_cells = st.one_of(
    st.sampled_from(["True", "false", "TRUE", " True "]).map(lambda c: (c, "boolean")),
    st.sampled_from(["", " ", "  "]).map(lambda c: (c, "is empty")),
    non_ascii_digits.map(lambda c: (c, "ASCII digits")),
    st.sampled_from(["1+2j", "x", "NA", "nan", "1_000", "0x10", "--1"]).map(
        lambda c: (c, "non-number")))


@SETTINGS
@given(cell=bad_cells, row=st.integers(0, 2), col=st.integers(0, 2))
def test_a_bad_csv_cell_is_named_by_line_and_column(tmp_path_factory, capsys, cell, row, col):
    """A cell True read as 1 (when its whole column was booleans), an empty cell was
    'a non-number np.float64(nan)', digits of other scripts read as a non-number."""
    text, needle = cell
    rows = [list(r) for r in ROWS]
    rows[row][col] = text
    path = tmp_path_factory.mktemp("csv") / "d.csv"
    path.write_text("y,l,r\n" + "".join(",".join(r) + "\n" for r in rows))
    err = _cli_error(capsys, "posterior", "--method", "exact", "--eps", "1", str(path))
    assert f"line {row + 2}: column {'ylr'[col]}" in err and needle in err, err


def test_a_column_of_booleans_is_refused(write_csv, capsys):
    path = write_csv("y,l,r\nTrue,-1,1\nFalse,-1,1\n")
    assert "holds the boolean 'True'" in _cli_error(capsys, "posterior", "--method", "exact",
                                                    "--eps", "1", path)


@SETTINGS
@given(spell=st.lists(st.sampled_from([lambda v: v, lambda v: f" {v} ", lambda v: f"+{v}"
                                       if not v.startswith("-") else v,
                                       lambda v: f"{v}.0" if "." not in v else v + "0"]),
                      min_size=9, max_size=9))
def test_ascii_numbers_written_differently_read_the_same(tmp_path_factory, spell):
    """The cell check (of every command that reads releases) accepts every ASCII spelling
    pandas reads, with the same numbers."""
    from dpbook.data import read_releases

    cells = [c for r in ROWS for c in r]
    odd = [",".join(f(c) for f, c in zip(spell[3 * i:3 * i + 3], cells[3 * i:3 * i + 3]))
           for i in range(3)]
    path = tmp_path_factory.mktemp("csv") / "d.csv"
    path.write_text("y,l,r\n" + "\n".join(odd) + "\n")
    (y, l, r), skipped = read_releases(path, "error")
    assert skipped == 0
    assert np.array_equal(np.stack([y, l, r], 1), np.array(ROWS, float))


@pytest.mark.parametrize("header, twice", [("y,l,r,y", "y"), ("l,y,l,r", "l"),
                                           ("y,l,r,r,r", "r")])
def test_a_repeated_column_is_refused(write_csv, capsys, header, twice):
    """A repeated header name silently used the first column."""
    n = header.count(",") + 1
    path = write_csv(header + "\n" + ",".join(["0.5"] * (n - 2) + ["0", "1"]) + "\n")
    err = _cli_error(capsys, "posterior", "--method", "exact", "--eps", "1", path)
    assert f"column {twice} appears" in err


# -------------------------------------------------------------------- option values
NUMERIC_OPTIONS = [
    (["fisher", "--a", "-1", "--b", "1"], "--eps"), (["fisher", "--eps", "1", "--b", "1"], "--a"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc"], "--M"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc"], "--seed"),
    (["best-interval", "--eps", "1"], "--grid"),
    (["experiment", "--out", "UNUSED"], "--runs"), (["calibrate", "--method", "exact"], "--eps"),
]


@pytest.mark.parametrize("args, option", NUMERIC_OPTIONS)
@SETTINGS
@given(digits=non_ascii_digits)
def test_option_values_in_other_scripts_are_refused(capsys, args, option, digits):
    """--eps ５ ran as eps = 5: Python's float() reads every script's digits.  dpbook
    reads ASCII numerals only, in options as in CSV cells (README)."""
    err = _cli_error(capsys, *args, option, digits)
    assert f"argument {option}:" in err and "ASCII" in err


@pytest.mark.parametrize("args, needle", [
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc", "--seed", "-1"],
     "argument --seed: a seed must be an integer >= 0"),
    (["posterior", "--method", "smc", "--eps", "1", "DATA", "--seed", "-3"], "argument --seed"),
    (["experiment", "--seed", "-1", "--out", "UNUSED"], "argument --seed"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc", "--M", "1"],
     "M must be at least 2"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc", "--K", "1"],
     "K must be at least 2"),
    (["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc", "--M", "0"],
     "M must be at least 2"),
    (["best-interval", "--eps", "1", "--method", "mc", "--M", "1", "--grid", "3"],
     "M must be at least 2"),
])
def test_messages_name_the_option_and_the_rule(write_csv, capsys, args, needle):
    """--seed -1 said 'expected non-negative integer'; --M 1 was 'the result se[0][0] is
    not finite'."""
    args = [write_csv("y,l,r\n0.3,-1,1\n") if a == "DATA" else a for a in args]
    assert needle in _cli_error(capsys, *args)


def test_monte_carlo_sizes_below_two_are_refused_in_python():
    from dpbook.fisher import best_interval, fisher_mc

    for kw in ({"M": 1}, {"K": 1}):
        with pytest.raises(ValueError, match="must be at least 2"):
            fisher_mc(-1.0, 1.0, 1.0, rng=0, **{"M": 5, "K": 5, **kw})
        with pytest.raises(ValueError, match="must be at least 2"):
            fisher_mc(-1.0, 1.0, 1.0, family="laplace", rng=0, **{"M": 5, "K": 5, **kw})
        with pytest.raises(ValueError, match="must be at least 2"):
            best_interval(1.0, method="mc", grid=3, **{"M": 5, "K": 5, **kw})


UNUSED = [
    (["posterior", "--method", "exact", "--particles", "500"], "--particles", "--method exact"),
    (["posterior", "--method", "exact", "--seed", "3"], "--seed", "--method exact"),
    (["posterior", "--method", "online-gradient", "--seed", "0"], "--seed", "online-gradient"),
    (["posterior", "--method", "mhaar", "--particles", "500"], "--particles", "mhaar"),
    (["posterior", "--method", "smc", "--iters", "500"], "--iters", "--method smc"),
    (["posterior", "--method", "smc-marginal", "--subset", "5"], "--subset", "smc-marginal"),
    (["fisher", "--a", "-1", "--b", "1", "--M", "50"], "--M", "--method exact"),
    (["fisher", "--a", "-1", "--b", "1", "--seed", "1"], "--seed", "--method exact"),
    (["best-interval", "--K", "50"], "--K", "--method exact"),
    (["best-interval", "--theta", "0", "1"], "--theta", "location-scale family normal"),
    (["experiment", "--methods", "mhaar", "--particles", "50"], "--particles",
     "--methods mhaar"),
    (["experiment", "--methods", "smc-fixed", "--mhaar-iters", "50"], "--mhaar-iters",
     "--methods smc-fixed"),
    (["experiment", "--methods", "smc-fixed,mhaar", "--interval-method", "mc"],
     "--interval-method", "--methods mhaar,smc-fixed"),
]


@pytest.mark.parametrize("args, option, what", UNUSED)
def test_an_option_the_method_ignores_is_refused(write_csv, tmp_path, capsys, args, option,
                                                 what):
    """--particles with --method exact passed without a word (and changed nothing)."""
    extra = {"posterior": ["--eps", "1", write_csv("y,l,r\n0.3,-1,1\n")],
             "fisher": ["--eps", "1"], "best-interval": ["--eps", "1"],
             "experiment": ["--eps", "1", "--runs", "1", "--n", "5", "--out",
                            str(tmp_path / "store")]}[args[0]]
    err = _cli_error(capsys, *args, *extra)
    assert f"{option} does not apply to {what}" in err or (
        option in err and "does not apply" in err and what in err), err
    assert not (tmp_path / "store").exists()


def test_a_subset_of_n_or_more_is_the_smc_and_says_so(write_csv, capsys):
    """The rule for --subset M >= n: every latent value is moved at every step (Algorithm
    3), the numbers of --method smc bit for bit; the text output says so."""
    import json

    path = write_csv("y,l,r\n0.3,-1,1\n-0.2,-1,1\n1.4,-1,1\n")
    base = ["posterior", "--eps", "2", "--particles", "100", path]
    outs = []
    for m in (["--method", "smc"], ["--method", "smc-subset", "--subset", "3"],
              ["--method", "smc-subset", "--subset", "1000"]):
        assert main([*base, *m, "--json"]) == 0
        res = json.loads(capsys.readouterr().out)
        outs.append(res["posterior"])
    assert outs[0] == outs[1] == outs[2]
    assert main([*base, "--method", "smc-subset", "--subset", "1000"]) == 0
    assert "--subset 1000 >= n = 3: every latent value was moved" in capsys.readouterr().out
    assert main([*base, "--method", "smc-subset", "--subset", "2"]) == 0
    assert "every latent value" not in capsys.readouterr().out


@pytest.mark.parametrize("command", [["experiment", "--eps", "1", "--runs", "1", "--n", "5"],
                                     ["calibrate", "--method", "exact", "--eps", "1"]])
@pytest.mark.parametrize("out", ["", " "])
def test_an_empty_store_path_is_refused(tmp_path, monkeypatch, capsys, command, out):
    """--out '' wrote the store into the current directory."""
    monkeypatch.chdir(tmp_path)
    err = _cli_error(capsys, *command, "--out", out, "--no-progress")
    assert "--out must name a directory" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out", ["", "  ", None, 3])
def test_an_empty_store_path_is_refused_in_python(tmp_path, monkeypatch, out):
    from dpbook.calibration import run_calibration
    from dpbook.experiment import run_experiment

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="^out must"):
        run_experiment(eps=[1.0], runs=1, n=5, out=out, progress=False)
    with pytest.raises(ValueError, match="^out must"):
        run_calibration(["exact"], [1.0], [5], 1, out=out, progress=False)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------- the store
TINY = dict(eps=[1.0], runs=1, n=5, particles=10, methods="smc-fixed", workers=1,
            progress=False)


def test_a_store_file_that_cannot_be_replaced_is_named(tmp_path, capsys):
    """A store file os.replace cannot replace (here a directory in its place; an
    immutable file, below) was a 21-line PermissionError traceback."""
    from dpbook.experiment import run_experiment

    out, name = tmp_path / "store", "estimates.parquet"
    (out / name / "inside").mkdir(parents=True)
    with pytest.raises(ValueError, match=f"^cannot write {out / name}: "):
        run_experiment(out=out, **TINY)
    err = _cli_error(capsys, "experiment", "--eps", "1", "--runs", "1", "--n", "5",
                     "--particles", "10", "--methods", "smc-fixed", "--workers", "1",
                     "--no-progress", "--out", str(out))
    assert f"cannot write {out / name}" in err
    assert not list(out.rglob(".tmp-*"))


def test_an_immutable_store_file_is_named(tmp_path, capsys, monkeypatch):
    """The error os.replace gives for an immutable file (EPERM), simulated; and, where
    this test may set the immutable flag (root with chattr), the real thing."""
    import os
    import shutil
    import subprocess

    from dpbook.experiment import run_experiment, store

    out = tmp_path / "store"
    run_experiment(out=out, **TINY)
    real = os.replace

    def refuse(src, dst):
        if str(dst).endswith("manifest.json"):
            raise PermissionError(1, "Operation not permitted")
        return real(src, dst)

    monkeypatch.setattr(store.os, "replace", refuse)
    with pytest.raises(ValueError, match="manifest.json: Operation not permitted$"):
        run_experiment(out=out, **TINY)
    monkeypatch.setattr(store.os, "replace", real)
    chattr = shutil.which("chattr")
    if os.geteuid() != 0 or chattr is None or subprocess.run(
            [chattr, "+i", str(out / "estimates.parquet")]).returncode != 0:
        return
    try:
        err = _cli_error(capsys, "experiment", "--eps", "1", "--runs", "1", "--n", "5",
                         "--particles", "10", "--methods", "smc-fixed", "--workers", "1",
                         "--no-progress", "--out", str(out))
        assert f"cannot write {out / 'estimates.parquet'}: Operation not permitted" in err
    finally:
        subprocess.run([chattr, "-i", str(out / "estimates.parquet")])


@pytest.mark.parametrize("content, needle", [
    (np.random.default_rng(0).bytes(700), r"not a dpbook task file \(not a zip archive"),
    (b"\x80\x04\x95" + bytes(40), "a pickle of Python objects"),
    (b"PK\x03\x04" + bytes(40), "unreadable")])
def test_a_foreign_task_file_is_called_what_it_is(tmp_path, content, needle):
    """Random bytes were reported as 'pickled Python objects'."""
    from dpbook.experiment import Task
    from dpbook.experiment.store import read_task

    path = tmp_path / "t.npz"
    path.write_bytes(content)
    with pytest.raises(ValueError, match=needle):
        read_task(path, Task("smc-fixed", 1.0, 0), "0" * 16)


# ---------------------------------------------------------------- signals and warnings
def _group(pgid: int) -> list[str]:
    """The processes of process group ``pgid`` still running (not zombies)."""
    import subprocess

    ps = subprocess.run(["ps", "-eo", "pid=,pgid=,stat=,args="], capture_output=True,
                        text=True).stdout
    return [line for line in ps.splitlines()
            if line.split()[1] == str(pgid) and not line.split()[2].startswith("Z")]


@pytest.mark.slow
def test_sigterm_stops_the_experiment_and_leaves_nothing_running(tmp_path):
    """SIGTERM to `dpbook experiment` exited 143 but left two pool workers and the
    resource tracker running ('5 leaked semaphores')."""
    import os
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "store"
    cmd = [sys.executable, "-m", "dpbook.cli", "experiment", "--eps", "1", "--runs", "24",
           "--n", "400", "--particles", "400", "--methods", "smc-fixed", "--workers", "2",
           "--no-progress", "--out", str(out)]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "NUMBA_NUM_THREADS": "1"},
                         start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not list(out.glob("tasks/*.npz")) and time.monotonic() < deadline:
            assert p.poll() is None, p.stderr.read()
            time.sleep(0.2)
        assert len(_group(p.pid)) >= 3, "the pool is not running"  # main, 2 workers
        p.send_signal(signal.SIGTERM)
        err = p.communicate(timeout=60)[1]
        assert p.returncode == 143, err
        assert err.startswith("dpbook: terminated; the results stored so far are kept in "
                              + str(out)) and err.count("\n") == 1, err
        deadline = time.monotonic() + 10
        while _group(p.pid) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert _group(p.pid) == []
    finally:
        for line in _group(p.pid):
            os.kill(int(line.split()[0]), signal.SIGKILL)


_TWICE = r"""
import os, signal, sys
import dpbook.experiment.runner as runner
import dpbook.experiment.store as store
from dpbook.cli import main

run_task, write = runner.run_task, store.write_estimates
def task(spec):  # Ctrl-C during the second task, as `timeout -s INT` sends it
    if spec["run"] == 1:
        os.kill(os.getpid(), signal.SIGINT)
    return run_task(spec)
def estimates(out, df):  # the same signal again, delivered while cleaning up
    os.kill(os.getpid(), signal.SIGINT)
    write(out, df)
runner.run_task, runner.write_estimates = task, estimates
sys.exit(main(["experiment", "--eps", "1", "--runs", "3", "--n", "20", "--particles", "20",
               "--methods", "smc-fixed", "--workers", "1", "--no-progress",
               "--out", sys.argv[1]]))
"""


@pytest.mark.slow
def test_a_repeated_sigint_does_not_break_the_clean_up(tmp_path):
    """SIGINT delivered twice (as `timeout` does: to the process and to its group) was a
    39-line 'RuntimeError: release unlocked lock'; the second one is now ignored while
    the first is handled, so the clean-up (the table, the manifest) completes."""
    import json
    import subprocess
    import sys

    out = tmp_path / "store"
    p = subprocess.run([sys.executable, "-c", _TWICE, str(out)], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 130, p.stderr
    assert p.stderr.count("\n") == 1 and "interrupted; the results stored so far are kept" \
        in p.stderr, p.stderr
    assert (out / "estimates.parquet").exists()
    session = json.loads((out / "manifest.json").read_text())["sessions"][-1]
    assert "finished" in session


@pytest.mark.parametrize("argv", [["fisher", "--eps", "1", "--a", "-1", "--b", "1"],
                                  ["posterior", "--method", "exact", "--eps", "1", "DATA"]])
def test_ctrl_c_of_a_command_that_stores_nothing_says_only_interrupted(
        write_csv, capsys, monkeypatch, argv):
    """'the results stored so far are kept' was printed after Ctrl-C of any command."""
    import dpbook.fisher
    import dpbook.posterior

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(dpbook.fisher, "fisher_information", stop)
    monkeypatch.setattr(dpbook.posterior, "exact_posterior", stop)
    argv = [write_csv("y,l,r\n0.3,-1,1\n") if a == "DATA" else a for a in argv]
    assert main(argv) == 130
    assert capsys.readouterr().err == "dpbook: interrupted\n"


@pytest.mark.parametrize("argv", [
    ["fisher", "--eps", "1", "--a", "8", "--b", "12", "--family", "poisson", "--theta", "1e12"],
    ["best-interval", "--eps", "1", "--family", "poisson", "--theta", "1e12"]])
def test_an_error_is_one_line_without_numeric_warnings_before_it(capsys, argv):
    """Poisson --theta 1e12 printed two numpy warnings before its one-line error."""
    _cli_error(capsys, *argv)


def test_numeric_warnings_of_a_command_that_succeeds_come_once_at_the_end(capsys,
                                                                           monkeypatch):
    import warnings

    import dpbook.fisher

    real = dpbook.fisher.fisher_information

    def noisy(*a, **k):
        for _ in range(3):
            warnings.warn("overflow encountered in exp", RuntimeWarning, stacklevel=1)
        return real(*a, **k)

    monkeypatch.setattr(dpbook.fisher, "fisher_information", noisy)
    assert main(["fisher", "--eps", "1", "--a", "-1", "--b", "1"]) == 0
    cap = capsys.readouterr()
    assert cap.err == "dpbook: warning: overflow encountered in exp\n" and "F_mumu" in cap.out


@pytest.mark.parametrize("family", ["normal", "laplace", "poisson"])
@SETTINGS
@given(bad=not_real, which=st.integers(0, 1))
def test_theta_of_the_fisher_information_must_be_real(family, bad, which):
    """The compiled normal/Laplace Fisher information took theta = (0, 1+0j) to numpy,
    a TypeError."""
    from dpbook.fisher import fisher_exact, fisher_mc

    theta = [5.0, 1.0] if family != "poisson" else [5.0]
    theta[min(which, len(theta) - 1)] = bad
    with pytest.raises(ValueError, match="must be"):
        fisher_exact(-1.0, 1.0, 1.0, theta=tuple(theta), family=family)
    with pytest.raises(ValueError, match="must be"):
        fisher_mc(-1.0, 1.0, 1.0, theta=tuple(theta), family=family, M=5, K=5, rng=0)


def test_seed_sequences_take_lists_of_ints_as_numpy_does():
    # the chapters key their streams with [seed, key, ...]; numpy's SeedSequence takes
    # such entropy, and so must every dpbook function that makes one from a seed
    from dpbook.privacy.population import normal_population
    from dpbook.validation import seed_sequence

    ss = seed_sequence([2023, 0])
    assert (ss.generate_state(4) == np.random.SeedSequence([2023, 0]).generate_state(4)).all()
    a = normal_population(5, 0.0, 1.0, 1.0, seed=[7, 1])
    b = normal_population(5, 0.0, 1.0, 1.0, seed=[7, 1])
    assert [a.release(-9, 9) for _ in range(5)] == [b.release(-9, 9) for _ in range(5)]
    for bad in ([], [1, -1], [1.5], [True]):
        with pytest.raises(ValueError, match="seed"):
            seed_sequence(bad)
    from dpbook.smc import SMC

    for generic in (False, True):  # the compiled SMC and the numpy one
        a = SMC(1.0, n_particles=8, n_max=2, seed=[2023, 3], generic=generic)
        b = SMC(1.0, n_particles=8, n_max=2, seed=np.random.SeedSequence([2023, 3]),
                generic=generic)
        for s in (a, b):
            s.update(0.5, -1.0, 1.0)
        assert np.array_equal(a.theta, b.theta)


@pytest.mark.parametrize("command", [
    ["stream", "missing.csv", "--column", "x", "--range", "0", "10"],
    ["posterior", "missing.csv"],
    ["fisher", "--a", "-1", "--b", "1"],
    ["best-interval"],
    ["experiment", "--out", "missing-store"],
    ["calibrate", "--out", "missing-store"],
    ["curator", "init", "missing.db", "--range", "0", "10"],
])
def test_every_command_refuses_a_bad_eps_before_its_input(capsys, command):
    for bad in ("0", "-1", "nan", "1e9"):
        msg = _cli_error(capsys, *command, "--eps", bad)
        assert msg.startswith("dpbook: error: argument --eps: eps must be"), msg
