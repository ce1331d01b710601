"""A hostile user's sweep of the command line (issue 40): 100+ cheap cases of bad or
odd input to `dpbook stream`, `posterior`, `experiment`, `fisher`, `best-interval`,
`calibrate` and `curator`, each run in a process of its own (its own session, with a
timeout) and sorted into the issue's classes:

* lost data: an input file changed or removed by the run;
* silently wrong: bad input accepted (exit 0), or an answer that is not right;
* refused: good input refused (exit 2);
* tracebacks: an exit status other than 0 and 2, a traceback, or an error that is not
  one line ``dpbook: error: ...``;
* hangs: the case did not end within its timeout;
* orphans: a process of the case's session alive after it ended (or 5 s after a
  SIGKILL of the main process).

Prints one line per failing case and one summary line per class; exits 1 if any class
is non-zero.  Run: ``PYTHONPATH=src python benchmarks/hostile_sweep.py [-k WORD] [-j 2]``.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
VALUES = "x\n" + "".join(f"{5 + 2 * ((i * 7919) % 17 - 8) / 8:.3f}\n" for i in range(20))
RELEASES = "y,l,r\n" + "".join(f"{5 + ((i * 31) % 13 - 6) / 2:.3f},0,10\n" for i in range(20))
CLASSES = ("lost data", "silently wrong", "refused", "tracebacks", "hangs", "orphans")


def median_in(lo, hi, param="mu"):
    """An answer check: the JSON posterior's median of ``param`` within [lo, hi]."""
    def check(out, d):
        res = json.loads(out)
        part = res.get("posterior") or res.get("estimate")
        v = part[param]["median"] if isinstance(part[param], dict) else part[param]
        return lo <= v <= hi
    return check


def fisher_ok(out, d):
    import numpy as np

    F = np.array(json.loads(out)["F"])
    return bool(np.all(np.isfinite(F)) and np.allclose(F, F.T) and
                np.all(np.linalg.eigvalsh(F) > 0))


def interval_ok(out, d):
    res = json.loads(out)
    return res["a"] < res["b"] and res["score"] > 0


def releases_written(name, n=20):
    def check(out, d):
        lines = (d / name).read_text().splitlines()
        return lines[0] == "y,l,r" and len(lines) == n + 1
    return check


def case(name, argv, expect="error", files=None, outputs=(), check=None, timeout=60,
         kill_after=None, sig=signal.SIGKILL, warns=None, env=None, stdout=None):
    """One case: ``argv`` after ``dpbook`` ({d}: the case's directory, its working
    directory); ``expect`` 'ok' (exit 0, ``check(stdout, dir)`` true), 'error' (exit 2,
    one line) or 'either' (0 or 2); ``warns``: a text its stderr must hold; ``files``
    {name: str, bytes or callable(dir)} made first; ``outputs``: files the run may
    change; ``kill_after``: send ``sig`` to the main process after that many seconds
    and look for survivors 5 s later (SIGKILL: 'killed'; SIGTERM or SIGINT: it must
    end with status 143 or 130 and one line); ``env``: variables set (None: unset, and
    ``cwd_gone``: the working directory removed as the case starts); ``stdout``
    'closed' (a pipe whose reader has gone: exit 141, nothing on stderr) or 'full'
    (/dev/full)."""
    return dict(name=name, argv=argv, expect=expect, files=files or {}, outputs=outputs,
                check=check, timeout=timeout, kill_after=kill_after, sig=sig, warns=warns,
                env=env or {}, stdout=stdout)


V = {"v.csv": VALUES}
R = {"rel.csv": RELEASES}
STREAM = ["stream", "v.csv", "--column", "x", "--eps", "1", "--range", "0", "10",
          "--particles", "40"]
POST = ["posterior", "rel.csv", "--eps", "1", "--range", "0", "10"]
FISHER = ["fisher", "--eps", "1", "--a", "-1", "--b", "1"]
BEST = ["best-interval", "--eps", "1", "--grid", "5"]
EXP = ["experiment", "--out", "out", "--runs", "1", "--n", "6", "--particles", "20",
       "--eps", "2", "--workers", "1", "--no-progress"]
CAL = ["calibrate", "--method", "exact", "--eps", "1", "--n", "5", "--reps", "3",
       "--grid", "16", "--out", "cal", "--workers", "1", "--no-progress"]
INIT = ["curator", "init", "st", "--eps", "1", "--range", "0", "10", "--particles", "40"]


def sub(base, flag, *values):
    """``base`` with the value(s) of ``flag`` replaced."""
    i = base.index(flag)
    return base[:i + 1] + list(values) + base[i + 1 + len(values):]


def _values(text):
    return {"v.csv": text}


def _fifo(d):
    os.mkfifo(d / "v.csv")


def _unreadable(d):
    (d / "v.csv").write_text(VALUES)
    (d / "v.csv").chmod(0)


def _symlink(d):
    (d / "real.csv").write_text(VALUES)
    (d / "v.csv").symlink_to(d / "real.csv")


def _subdir(d):
    (d / "v.csv").mkdir()


def _readonly_dir(d):
    (d / "ro").mkdir()
    (d / "ro").chmod(0o500)


def _curator_state(d):
    subprocess.run([sys.executable, "-m", "dpbook.cli", *INIT], cwd=d, env=_env(),
                   capture_output=True, timeout=120, check=True)


def _forged(key, change):
    """A curator state whose meta record ``key`` is ``change``d, checksum recomputed."""
    def make(d):
        import sqlite3

        _curator_state(d)
        con = sqlite3.connect(d / "st")
        text = json.dumps(change(json.loads(con.execute(
            "SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])))
        sha = hashlib.sha256(json.dumps(["meta", key, text]).encode()).hexdigest()
        con.execute("UPDATE meta SET value = ?, sha256 = ? WHERE key = ?", (text, sha, key))
        con.commit()
        con.close()
    return make


def _read_only_install(d):
    """dpbook copied where no __pycache__ can be made (each is a file)."""
    import shutil

    shutil.copytree(SRC / "dpbook", d / "ro" / "dpbook",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for p in [d / "ro" / "dpbook", *(d / "ro" / "dpbook").rglob("*")]:
        if p.is_dir():
            (p / "__pycache__").touch()


BOOL_FAMILY = """
import numpy as np
from scipy import special
from dpbook.model.families import LocationScaleFamily
class Flag(LocationScaleFamily):
    name = "flag"
    options = {"flag": (bool, False, "a bool option")}
    def __init__(self, flag=False):
        self.flag = flag
    def base_logpdf(self, z): return -z - 2 * np.log1p(np.exp(-z))
    def base_dlogpdf(self, z): return -1 + 2 * special.expit(-z)
    def base_cdf(self, z): return special.expit(z)
    def base_sf(self, z): return special.expit(-z)
    def base_ppf(self, q): return np.log(q) - np.log1p(-q)
    def base_sample(self, rng, size=None): return self.base_ppf(rng.uniform(size=size))
"""


GOOD_FAMILY = (SRC.parent / "tests" / "data" / "good_family.py").read_text()
# issue 55, item 4: a family file's body after GOOD_FAMILY, each a one-line error
HOSTILE_FAMILIES = {
    "sys.exit(0) at import": "sys.exit(0)",
    "syntax error": "def (",
    "exception at import": "raise RuntimeError('boom')",
    "no base_cdf": "class C(Good):\n    base_cdf = LocationScaleFamily.base_cdf",
    "no base_ppf": "class C(Good):\n    base_ppf = LocationScaleFamily.base_ppf",
    "no default_theta": "class C(Family):\n    name, params, positive = 'c', ('a',), (False,)",
    "NaN logpdf": "class C(Good):\n    def base_logpdf(self, z): return np.nan * z",
    "inf logpdf": "class C(Good):\n    def base_logpdf(self, z): return np.inf + z",
    "NaN cdf": "class C(Good):\n    def base_cdf(self, z): return np.nan * z",
    "cdf of wrong shape": "class C(Good):\n    def base_cdf(self, z): return np.zeros(3)",
    "decreasing cdf": "class C(Good):\n    def base_cdf(self, z): return special.expit(-z)",
    "ppf outside support": "class C(Good):\n    def base_ppf(self, q): return 0 * q + 5.0",
    "method raises": "class C(Good):\n    def base_ppf(self, q): return 1 / 0",
    "method fails later": "class C(Good):\n    def base_dlogpdf(self, z):\n"
                          "        return {}['late'] if np.size(z) > 7 else np.tanh(z)",
    "method exits later": "class C(Good):\n    def base_dlogpdf(self, z):\n"
                          "        return sys.exit(0) if np.size(z) > 7 else np.tanh(z)",
    "method runs forever": "class C(Good):\n    def base_ppf(self, q):\n"
                           "        while True: pass",
    "options a list": "class C(Good):\n    options = ['shape']",
    "option named 1": "class C(Good):\n    options = {1: (float, 1.0, 'x')}",
    "option clashes": "class C(Good):\n    options = {'eps': (float, 1.0, 'x')}\n"
                      "    def __init__(self, eps=1.0): pass",
    "__init__ without option": "class C(Good):\n    options = {'shape': (float, 1.0, 'x')}",
    "__init__ needs more": "class C(Good):\n    def __init__(self, k): pass",
}


def _changed_family(argv):
    """A curator state or experiment store made with fam.py, then fam.py edited."""
    def make(d):
        (d / "fam.py").write_text(GOOD_FAMILY + "class C(Good):\n    pass\n")
        subprocess.run([sys.executable, "-m", "dpbook.cli", *argv, "--family", "fam.py:C"],
                       cwd=d, env=_env(), capture_output=True, timeout=120, check=True)
        (d / "fam.py").write_text(GOOD_FAMILY + "SCALE = 2\nclass C(Good):\n    pass\n")
    return make


def _gz(data):
    return gzip.compress(data.encode())


# ------------------------------------------------ issue 55, items 2-4 (branch diag)
def diagnosed(name, tripped):
    """An answer check: the JSON (its last line) records the diagnostic ``name`` with its
    threshold, and a warning exactly when ``tripped``."""
    def check(out, d):
        diag = json.loads(out.strip().splitlines()[-1])["diagnostics"]
        quiet = all(v["warning"] is None for k, v in diag.items() if k != name)
        return (diag[name]["warning"] is not None) == tripped and quiet and (
            "floor" in diag[name] or "ceiling" in diag[name])
    return check


def _first(*argvs):
    """Files made by running dpbook commands in the case's directory first."""
    def make(d):
        for a in argvs:
            subprocess.run([sys.executable, "-m", "dpbook.cli", *a], cwd=d, env=_env(),
                           capture_output=True, timeout=180, check=True)
    return make


NUL = b"\0" * 200_000  # past a head of valid CSV longer than the 4 KB first read
NUL_RELEASES = (RELEASES + "5,0,10\n" * 2000).encode() + NUL
NUL_VALUES = (VALUES + "5\n" * 3000).encode() + NUL
TINY = ["curator", "init", "st", "--eps", "1", "--range", "0", "10", "--particles", "2",
        "--interval", "0", "10"]
BIG = str(10 ** 12)
def _published(k):
    """A curator state of a fixed interval [0, 10] with ``k`` releases published, and
    rel.csv holding ``k`` of them."""
    state = _first(INIT + ["--interval", "0", "10"], ["curator", "publish", "st", "--k", str(k)])

    def make(d):
        state(d)
        (d / "rel.csv").write_text("y,l,r\n" + "".join(f"{i % 10},0,10\n" for i in range(k)))
    return make


# SQLite's own refusals, injected at the connection (a root user writes any file): a
# state opened read-only, and a state that may not grow (max_page_count: "database or
# disk is full"); PYTHONPATH's sitecustomize.py is imported at start-up
_SQLITE_FAULT = {
    "read-only state": "return connect(f'file:{path}?mode=ro', uri=True, **kw)",
    "full disk": "con = connect(path, **kw)\n    con.execute('PRAGMA max_page_count = ' + "
                 "str(con.execute('PRAGMA page_count').fetchone()[0]))\n    return con"}


def _sqlite_fault(how):
    return {"inject/sitecustomize.py": "import sqlite3\nconnect = sqlite3.connect\n\n\n"
            f"def faulty(path, **kw):\n    {_SQLITE_FAULT[how]}\n\n\nsqlite3.connect = faulty\n"}


def _stopped_calibration(d):
    """The store of a calibration stopped (Ctrl-C) before its first replication."""
    code = ("import sys, dpbook.calibration.study as s\nfrom dpbook.cli import main\n"
            "def stop(spec):\n    raise KeyboardInterrupt\n"
            "s.run_replication = stop\nsys.exit(main(sys.argv[1:]))")
    subprocess.run([sys.executable, "-c", code, *CAL], cwd=d, env=_env(),
                   capture_output=True, timeout=120)


CASES = [
    # ---------------------------------------------------------------- stream: good
    case("stream good", STREAM + ["--json"], "ok", V, check=median_in(2, 8)),
    case("stream released", STREAM + ["--json", "--released", "out.csv"], "ok", V,
         outputs=("out.csv",), check=releases_written("out.csv")),
    case("stream CRLF", STREAM + ["--json"], "ok", _values(VALUES.replace("\n", "\r\n")),
         check=median_in(2, 8)),
    case("stream UTF-8 BOM", STREAM + ["--json"], "ok", {"v.csv": "\ufeff" + VALUES},
         check=median_in(2, 8)),
    case("stream gzip", ["stream", "v.csv.gz", *STREAM[2:], "--json"], "ok",
         {"v.csv.gz": _gz(VALUES)}, check=median_in(2, 8)),
    case("stream unicode path", ["stream", "données ü/ß v.csv", *STREAM[2:], "--json"],
         "ok", {"données ü/ß v.csv": VALUES}, check=median_in(2, 8)),
    case("stream absolute path", ["stream", "{d}/v.csv", *STREAM[2:], "--json"], "ok", V,
         check=median_in(2, 8)),
    case("stream symlink input", STREAM + ["--json"], "ok", {"x": _symlink},
         check=median_in(2, 8)),
    case("stream one value", STREAM + ["--json"], "ok", _values("x\n5\n"),
         check=median_in(0, 10)),
    case("stream identical values", STREAM + ["--json"], "ok",
         _values("x\n" + "5\n" * 20), check=median_in(2, 8)),
    case("stream spaces in cells", STREAM + ["--json"], "ok",
         _values("x\n" + "".join(f" {v} \n" for v in VALUES.split()[1:])),
         check=median_in(2, 8)),
    case("stream quoted numbers", STREAM + ["--json"], "ok",
         _values("x\n" + "".join(f'"{v}"\n' for v in VALUES.split()[1:])),
         check=median_in(2, 8)),
    case("stream exponent and plus", STREAM + ["--json"], "ok",
         _values("x\n" + "+5e0\n0.4e1\n6E0\n" * 6), check=median_in(2, 8)),
    case("stream two columns", STREAM + ["--json"], "ok",
         _values("id,x\n" + "".join(f"{i},{v}\n" for i, v in
                                    enumerate(VALUES.split()[1:]))),
         check=median_in(2, 8)),
    case("stream missing skip", STREAM + ["--json", "--missing", "skip"], "ok",
         _values(VALUES + "\n5\n"), check=median_in(2, 8)),
    case("stream batch > n", STREAM + ["--json", "--batch", "1000"], "ok", V,
         check=median_in(2, 8)),
    case("stream fixed interval", STREAM + ["--json", "--interval", "0", "10"], "ok", V,
         check=median_in(2, 8)),
    case("stream latent smc", STREAM + ["--json", "--method", "smc"], "ok", V,
         check=median_in(2, 8)),
    case("stream online gradient", ["stream", "v.csv", "--column", "x", "--eps", "1",
                                    "--range", "0", "10", "--method", "online-gradient",
                                    "--json"], "ok", V),
    case("stream eps 1e5", STREAM + ["--json", "--eps", "1e5"], "ok", V,
         check=median_in(4, 6)),
    case("stream data far outside range", STREAM + ["--json"], "ok",
         _values("x\n" + "1e6\n" * 10), check=median_in(0, 1e7)),
    case("stream poisson counts", ["stream", "v.csv", "--column", "x", "--eps", "2",
                                   "--family", "poisson", "--interval", "0", "4000",
                                   "--range", "0", "4000", "--particles", "40", "--json"],
         "ok", _values("x\n" + "".join(f"{2000 + 3 * i}\n" for i in range(20))),
         check=median_in(1000, 3000, "lam")),
    case("stream prior variance 1e-250", sub(STREAM, "--range", "0", "10")[:6]
         + ["--prior-loc", "5", "1e-250", "--particles", "40", "--json"], "ok", V,
         check=median_in(4.9, 5.1), warns="prior too narrow"),
    case("stream poisson narrow gamma", ["stream", "v.csv", "--column", "x", "--eps", "1",
                                         "--family", "poisson", "--interval", "0", "20",
                                         "--range", "9.999999", "10.000001", "--json"],
         "ok", _values("x\n3\n12\n7\n"), check=median_in(9.99, 10.01, "lam"),
         warns="prior too narrow"),
    # ---------------------------------------------------------------- stream: bad numbers
    *[case(f"stream --eps {e!r}", sub(STREAM, "--eps", e), "error", V)
      for e in ("-1", "0", "nan", "inf", "-inf", "1e300", "1e-300", "1,5", "", "0x10",
                "1_0", "True", "٣")],
    *[case(f"stream --particles {p}", sub(STREAM, "--particles", p), "error", V)
      for p in ("0", "-5", "1.5", "1e10", "10000000000", "nan")],
    case("stream --particles 1", sub(STREAM, "--particles", "1"), "either", V),
    case("stream --seed -1", STREAM + ["--seed", "-1"], "error", V),
    case("stream --seed 2**200", STREAM + ["--seed", str(2 ** 200)], "either", V),
    case("stream --batch 0", STREAM + ["--batch", "0"], "error", V),
    case("stream --interval 5 5", STREAM + ["--interval", "5", "5"], "error", V),
    case("stream --interval 10 0", STREAM + ["--interval", "10", "0"], "error", V),
    case("stream --interval nan 1", STREAM + ["--interval", "nan", "1"], "error", V),
    case("stream --interval huge", STREAM + ["--interval", "-1e300", "1e300"], "error", V),
    case("stream --range 10 0", sub(STREAM, "--range", "10", "0"), "error", V),
    case("stream --range inf", sub(STREAM, "--range", "0", "inf"), "error", V),
    case("stream --prior-loc var -1", STREAM[:6] + ["--prior-loc", "0", "-1"] + STREAM[9:],
         "error", V),
    case("stream --prior-loc var 0", STREAM[:6] + ["--prior-loc", "0", "0"] + STREAM[9:],
         "error", V),
    case("stream --prior-scale2 0 1", STREAM + ["--prior-scale2", "0", "1"], "error", V),
    case("stream --family nosuch", STREAM + ["--family", "nosuch"], "error", V),
    case("stream --family /etc/passwd:X", STREAM + ["--family", "/etc/passwd:X"], "error", V),
    case("stream --df 0", STREAM + ["--family", "student_t", "--df", "0"], "error", V),
    case("stream --column ''", ["stream", "v.csv", "--column", "", *STREAM[4:]], "error", V),
    case("stream smc-subset no --subset", STREAM + ["--method", "smc-subset"], "error", V),
    case("stream --subset 0", STREAM + ["--method", "smc-subset", "--subset", "0"],
         "error", V),
    case("stream no prior", ["stream", "v.csv", "--column", "x", "--eps", "1"], "error", V),
    # ---------------------------------------------------------------- stream: bad files
    case("stream empty file", STREAM, "error", _values("")),
    case("stream header only", STREAM, "error", _values("x\n")),
    case("stream missing column", STREAM, "error", _values("y\n1\n2\n")),
    case("stream duplicate columns", STREAM, "error", _values("x,x\n1,9\n2,8\n")),
    case("stream nan cell", STREAM, "error", _values("x\n1\nnan\n3\n")),
    case("stream NA cell", STREAM, "error", _values("x\n1\nNA\n3\n")),
    case("stream inf cell", STREAM, "error", _values("x\n1\ninf\n3\n")),
    case("stream Infinity cell", STREAM, "error", _values("x\n1\nInfinity\n3\n")),
    case("stream 1e308 cell", STREAM, "error", _values("x\n1\n1e308\n3\n")),
    case("stream decimal comma", STREAM, "error", _values('x\n1\n"12,5"\n3\n')),
    case("stream extra fields", STREAM, "error", _values("x\n1\n2,3\n3\n")),
    case("stream blank line", STREAM, "error", _values("x\n1\n\n3\n")),
    case("stream text cell", STREAM, "error", _values("x\n1\nabc\n3\n")),
    case("stream bool cell", STREAM, "error", _values("x\n1\nTrue\n3\n")),
    case("stream underscore cell", STREAM, "error", _values("x\n1\n1_000\n3\n")),
    case("stream hex cell", STREAM, "error", _values("x\n1\n0x1F\n3\n")),
    case("stream arabic digits", STREAM, "error", _values("x\n1\n٣\n3\n")),
    case("stream NUL bytes", STREAM, "error", {"v.csv": b"x\n1\n2\x00\n3\n"}),
    case("stream UTF-16", STREAM + ["--json"], "either",
         {"v.csv": VALUES.encode("utf-16")}, check=median_in(2, 8)),
    case("stream latin-1 header", ["stream", "v.csv", "--column", "é", *STREAM[4:]],
         "either", {"v.csv": "é\n1\n2\n".encode("latin-1")}),
    case("stream binary garbage", STREAM, "error", {"v.csv": bytes(range(256)) * 40}),
    case("stream 1 MB line", STREAM, "error", _values("x\n1\n" + "9" * 1_000_000 + "\n")),
    case("stream 1 MB header", STREAM, "error", _values("x" * 1_000_000 + "\n1\n")),
    case("stream broken gzip", ["stream", "v.csv.gz", *STREAM[2:]], "error",
         {"v.csv.gz": _gz(VALUES)[:30]}),
    case("stream nonexistent", ["stream", "nope.csv", *STREAM[2:]], "error"),
    case("stream directory", STREAM, "error", {"x": _subdir}),
    case("stream FIFO", STREAM, "error", {"x": _fifo}, timeout=30),
    case("stream unreadable", STREAM, "either" if os.geteuid() == 0 else "error",
         {"x": _unreadable}),
    case("stream /dev/zero", ["stream", "/dev/zero", *STREAM[2:]], "error", timeout=30),
    case("stream --released = input", STREAM + ["--released", "v.csv"], "error", V),
    case("stream --released = input (abs)", STREAM + ["--released", "{d}/v.csv"], "error",
         V),
    case("stream --released /dev/null", STREAM + ["--released", "/dev/null"], "error", V),
    case("stream --released /dev/full", STREAM + ["--released", "/dev/full"], "error", V),
    case("stream --released a directory", STREAM + ["--released", "."], "error", V),
    case("stream --released no dir", STREAM + ["--released", "no/such/dir/o.csv"],
         "error", V),
    case("stream --released read-only dir", STREAM + ["--released", "ro/o.csv"],
         "either" if os.geteuid() == 0 else "error", {**V, "x": _readonly_dir},
         outputs=("ro/o.csv",)),
    case("stream --released ''", STREAM + ["--released", ""], "error", V),
    case("stream poisson fractions", ["stream", "v.csv", "--column", "x", "--eps", "1",
                                      "--family", "poisson", "--interval", "0", "10",
                                      "--range", "0", "10"], "error",
         _values("x\n1.5\n2\n")),
    case("stream poisson negative", ["stream", "v.csv", "--column", "x", "--eps", "1",
                                     "--family", "poisson", "--interval", "0", "10",
                                     "--range", "0", "10"], "error", _values("x\n-3\n2\n")),
    case("stream poisson 3e10", ["stream", "v.csv", "--column", "x", "--eps", "1",
                                 "--family", "poisson", "--interval", "0", "6e10",
                                 "--range", "0", "6e10", "--particles", "30"], "error",
         _values("x\n" + "3e10\n" * 5)),
    case("stream --released symlink to input", STREAM + ["--released", "link.csv"],
         "error", {**V, "x": lambda d: (d / "link.csv").symlink_to(d / "v.csv")}),
    case("stream --released unicode name", STREAM + ["--json", "--released", "é ü.csv"],
         "ok", V, outputs=("é ü.csv",), check=releases_written("é ü.csv")),
    case("stream unicode column", ["stream", "v.csv", "--column", "größe", *STREAM[4:],
                                   "--json"], "ok", _values(VALUES.replace("x", "größe", 1)),
         check=median_in(2, 8)),
    case("stream newline in file name", ["stream", "a\nb.csv", *STREAM[2:], "--json"], "ok",
         {"a\nb.csv": VALUES}, check=median_in(2, 8)),
    case("stream gaussian mechanism", STREAM + ["--json", "--mechanism", "gaussian"], "ok",
         V, check=median_in(2, 8)),
    case("stream student_t df 1e300", STREAM + ["--family", "student_t", "--df", "1e300"],
         "either", V),
    case("stream student_t df 1e-3", STREAM + ["--family", "student_t", "--df", "1e-3"],
         "either", V),
    case("stream --batch 1e12", STREAM + ["--batch", "1000000000000"], "either", V),
    case("stream --eps 2e6", sub(STREAM, "--eps", "2e6"), "error", V),
    case("stream --eps 1e-5", sub(STREAM, "--eps", "1e-5"), "error", V),
    case("stream SIGTERM", sub(STREAM, "--particles", "300") + [
        "--method", "smc", "--released", "out.csv"], "signalled",
         _values("x\n" + "5\n4\n6\n" * 1000), kill_after=6, timeout=60, sig=signal.SIGTERM),
    # ---------------------------------------------------------------- posterior
    case("posterior exact", POST + ["--method", "exact", "--json"], "ok", R,
         check=median_in(3, 7)),
    case("posterior smc", POST + ["--method", "smc", "--particles", "40", "--json"], "ok",
         R, check=median_in(3, 7)),
    case("posterior mhaar", POST + ["--method", "mhaar", "--iters", "200", "--json"], "ok",
         R, check=median_in(2, 8)),
    case("posterior smc-marginal", POST + ["--method", "smc-marginal", "--particles", "40",
                                           "--json"], "ok", R, check=median_in(3, 7)),
    case("posterior columns reordered", POST + ["--method", "exact", "--json"], "ok",
         {"rel.csv": "r,y,l\n" + "".join(f"10,{v.split(',')[0]},0\n"
                                         for v in RELEASES.split()[1:])},
         check=median_in(3, 7)),
    case("posterior l >= r", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l,r\n1,0,10\n2,5,5\n"}),
    case("posterior y nan", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l,r\n1,0,10\nnan,0,10\n"}),
    case("posterior missing r", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l\n1,0\n"}),
    case("posterior duplicate y", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l,r,y\n1,0,10,3\n"}),
    case("posterior header only", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l,r\n"}),
    case("posterior empty", POST + ["--method", "exact"], "error", {"rel.csv": ""}),
    case("posterior --eps -2", ["posterior", "rel.csv", "--eps", "-2", "--range", "0",
                                "10", "--method", "exact"], "error", R),
    case("posterior --iters 0", POST + ["--method", "mhaar", "--iters", "0"], "error", R),
    case("posterior --iters 1e12", POST + ["--method", "mhaar", "--iters",
                                           "1000000000000"], "error", R),
    case("posterior --particles 0", POST + ["--method", "smc", "--particles", "0"],
         "error", R),
    case("posterior y 1e300", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l,r\n1e300,0,10\n"}),
    case("posterior interval 1e-12 wide", POST + ["--method", "exact"], "error",
         {"rel.csv": "y,l,r\n5,5,5.000000000001\n"}),
    case("posterior poisson huge", ["posterior", "rel.csv", "--eps", "1", "--family",
                                    "poisson", "--range", "0", "2e10", "--method",
                                    "smc-marginal", "--particles", "30"], "error",
         {"rel.csv": "y,l,r\n1e10,0,2e10\n1.1e10,0,2e10\n"}),
    case("posterior UTF-16", POST + ["--method", "exact", "--json"], "either",
         {"rel.csv": RELEASES.encode("utf-16")}, check=median_in(3, 7)),
    case("posterior NUL", POST + ["--method", "exact"], "error",
         {"rel.csv": b"y,l,r\n1,0,10\x00\n"}),
    # ---------------------------------------------------------------- fisher
    case("fisher good", FISHER + ["--json"], "ok", check=fisher_ok),
    case("fisher mc", FISHER + ["--method", "mc", "--M", "50", "--K", "20", "--json"],
         "ok", check=fisher_ok),
    case("fisher a > b", ["fisher", "--eps", "1", "--a", "1", "--b", "-1"], "error"),
    case("fisher a nan", ["fisher", "--eps", "1", "--a", "nan", "--b", "1"], "error"),
    case("fisher b inf", ["fisher", "--eps", "1", "--a", "0", "--b", "inf"], "error"),
    case("fisher eps 0", ["fisher", "--eps", "0", "--a", "-1", "--b", "1"], "error"),
    case("fisher sigma < 0", FISHER + ["--theta", "0", "-1"], "error"),
    case("fisher theta 1e300", FISHER + ["--theta", "1e300", "1"], "error"),
    case("fisher one theta", FISHER + ["--theta", "0"], "error"),
    case("fisher --M 0", FISHER + ["--method", "mc", "--M", "0"], "error"),
    case("fisher --M 1e12", FISHER + ["--method", "mc", "--M", "1000000000000"], "error"),
    case("fisher --K -1", FISHER + ["--method", "mc", "--K", "-1"], "error"),
    case("fisher poisson huge", ["fisher", "--eps", "1", "--family", "poisson", "--theta",
                                 "1e11", "--a", "0", "--b", "2e11"], "error"),
    case("fisher poisson good", ["fisher", "--eps", "1", "--family", "poisson", "--theta",
                                 "20", "--a", "5", "--b", "40", "--json"], "ok",
         check=fisher_ok),
    case("fisher t df nan", FISHER + ["--family", "student_t", "--df", "nan"], "error"),
    case("fisher eps 1e-4", sub(FISHER, "--eps", "1e-4") + ["--json"], "ok",
         check=fisher_ok),
    case("fisher eps 1e6", sub(FISHER, "--eps", "1e6") + ["--json"], "ok", check=fisher_ok),
    case("fisher student_t df 0.5", FISHER + ["--family", "student_t", "--df", "0.5",
                                             "--json"], "ok", check=fisher_ok),
    case("fisher --M 1 --K 1", FISHER + ["--method", "mc", "--M", "1", "--K", "1"],
         "either"),
    case("fisher a 1e300", ["fisher", "--eps", "1", "--a", "-1e300", "--b", "1e300"],
         "error"),
    case("fisher laplace gaussian", FISHER + ["--family", "laplace", "--mechanism",
                                             "gaussian", "--json"], "ok", check=fisher_ok),
    # ---------------------------------------------------------------- best-interval
    case("best-interval good", BEST + ["--json"], "ok", check=interval_ok),
    case("best-interval grid 0", BEST[:-1] + ["0"], "error"),
    case("best-interval grid -3", BEST[:-1] + ["-3"], "error"),
    case("best-interval grid 1e9", BEST[:-1] + ["1000000000"], "error"),
    case("best-interval lims reversed", BEST + ["--lims", "3", "-3"], "error"),
    case("best-interval eps nan", ["best-interval", "--eps", "nan"], "error"),
    case("best-interval score foo", BEST + ["--score", "foo"], "error"),
    case("best-interval poisson", ["best-interval", "--eps", "1", "--family", "poisson",
                                   "--theta", "20", "--grid", "5", "--json"], "ok",
         check=interval_ok),
    case("best-interval lims huge", BEST + ["--lims", "-1e300", "1e300"], "error"),
    case("best-interval eps 1e-4", sub(BEST, "--eps", "1e-4") + ["--json"], "ok",
         check=interval_ok),
    # ---------------------------------------------------------------- experiment
    case("experiment good", EXP + ["--methods", "smc-fixed"], "ok", outputs=("out",),
         timeout=180),
    case("experiment --runs 0", sub(EXP, "--runs", "0"), "error"),
    case("experiment --n 0", sub(EXP, "--n", "0"), "error"),
    case("experiment --eps -1", sub(EXP, "--eps", "-1"), "error"),
    case("experiment --workers 0", sub(EXP, "--workers", "0"), "error"),
    case("experiment --methods nosuch", EXP + ["--methods", "nosuch"], "error"),
    case("experiment --out is a file", EXP + ["--methods", "smc-fixed"], "error",
         {"out": "not a directory\n"}),
    case("experiment --theta 0 -1", EXP + ["--theta", "0", "-1"], "error"),
    case("experiment --particles 1e10", sub(EXP, "--particles", "10000000000"), "error"),
    case("experiment SIGKILL", sub(sub(sub(sub(EXP, "--n", "300"), "--workers", "2"),
                                       "--runs", "200"), "--particles", "300")
         + ["--methods", "smc-fixed"], "killed", outputs=("out",), kill_after=8,
         timeout=120),
    case("experiment --theta nan 1", EXP + ["--theta", "nan", "1"], "error"),
    case("experiment --out unicode", sub(EXP, "--out", "résultats ü") + ["--methods",
                                                                         "smc-fixed"],
         "ok", outputs=("résultats ü",), timeout=180),
    case("experiment SIGINT", sub(sub(sub(sub(EXP, "--n", "300"), "--workers", "2"),
                                      "--runs", "200"), "--particles", "300")
         + ["--methods", "smc-fixed"], "signalled", outputs=("out",), kill_after=8,
         timeout=60, sig=signal.SIGINT),
    # ---------------------------------------------------------------- calibrate
    case("calibrate good", CAL, "ok", outputs=("cal",), timeout=180),
    case("calibrate --reps 0", sub(CAL, "--reps", "0"), "error"),
    case("calibrate --n -1", sub(CAL, "--n", "-1"), "error"),
    case("calibrate --interval 1 0", CAL + ["--interval", "1", "0"], "error"),
    case("calibrate --eps nan", sub(CAL, "--eps", "nan"), "error"),
    case("calibrate --grid 1e9", sub(CAL, "--grid", "1000000000"), "error"),
    case("calibrate SIGKILL", sub(sub(sub(sub(CAL, "--method", "smc-fixed"), "--n", "40"),
                                      "--reps", "400"), "--workers", "2")
         + ["--particles", "40"], "killed", outputs=("cal",), kill_after=8, timeout=120),
    case("calibrate --interval huge", CAL + ["--interval", "-1e300", "1e300"], "error"),
    case("calibrate --prior-loc 0 -1", CAL + ["--prior-loc", "0", "-1"], "error"),
    case("calibrate SIGTERM", sub(sub(sub(sub(CAL, "--method", "smc-fixed"), "--n", "40"),
                                      "--reps", "400"), "--workers", "2")
         + ["--particles", "40"], "signalled", outputs=("cal",), kill_after=8, timeout=60,
         sig=signal.SIGTERM),
    # ---------------------------------------------------------------- curator (CLI only)
    case("curator init", INIT, "ok", outputs=("st", "st.lock")),
    case("curator init twice", INIT, "error", {"x": _curator_state}),
    case("curator init --eps -1", sub(INIT, "--eps", "-1"), "error"),
    case("curator init --particles 1e10", sub(INIT, "--particles", "10000000000"), "error"),
    case("curator init state /dev/null", ["curator", "init", "/dev/null", *INIT[3:]],
         "error"),
    case("curator init state is a dir", INIT, "error", {"x": lambda d: (d / "st").mkdir()}),
    case("curator publish missing", ["curator", "publish", "nope"], "error"),
    case("curator status garbage", ["curator", "status", "st"], "error",
         {"st": os.urandom(4000)}),
    case("curator status empty", ["curator", "status", "st"], "error", {"st": b""}),
    case("curator take garbage csv", ["curator", "take", "st", "rel.csv"], "error",
         {"x": _curator_state, "rel.csv": "y,l,r\nabc,0,1\n"}, outputs=("st", "st.lock")),
    case("curator take unpublished", ["curator", "take", "st", "rel.csv"], "error",
         {"x": _curator_state, "rel.csv": "y,l,r\n1,0,1\n"}, outputs=("st", "st.lock")),
    case("curator publish K 0", ["curator", "publish", "st", "0"], "error",
         {"x": _curator_state}, outputs=("st", "st.lock")),
    case("curator withdraw unknown", ["curator", "withdraw", "st", "1", "0", "1"], "error",
         {"x": _curator_state}, outputs=("st", "st.lock")),
    # ---------------------------------------------------------------- issue 55
    *[case(f"55: closed pipe: {' '.join(a[:2])}{' --json' * js}", a + ["--json"] * js, "closed",
           {**V, **R, **({"x": _curator_state} if a[0] == "curator" else {})},
           outputs=("st", "st.lock", "out", "cal"), stdout="closed", timeout=180)
      for a in (["families"], FISHER, BEST, POST + ["--method", "exact"], STREAM,
                EXP + ["--methods", "smc-fixed"], CAL, ["curator", "status", "st"])
      for js in (False, True)],
    *[case(f"55: full device: {' '.join(a[:2])}", a, "error", {**V, "x": _curator_state},
           outputs=("st", "st.lock"), stdout="full")
      for a in (["families", "--json"], FISHER, STREAM, INIT[:3] + ["--force"] + INIT[3:])],
    *[case(f"55: NUMBA_NUM_THREADS={t}", FISHER, "error", env={"NUMBA_NUM_THREADS": t})
      for t in ("0", "-1", "x")],
    case("55: NUMBA_NUM_THREADS=1000", FISHER + ["--json"], "ok", check=fisher_ok,
         env={"NUMBA_NUM_THREADS": "1000"}),
    case("55: working directory removed", ["families"], "error", env={"cwd_gone": True}),
    *[case(f"55: read-only install, {what}", FISHER + ["--family", "student_t", "--json"], "ok",
           {"x": _read_only_install}, check=fisher_ok, timeout=180,
           env={"PYTHONPATH": "{d}/ro", **e})
      for what, e in (("NUMBA_CACHE_DIR uncreatable", {"NUMBA_CACHE_DIR": "/proc/no/x",
                                                        "HOME": "/proc/no"}),
                      ("HOME unset", {"HOME": None, "XDG_CACHE_HOME": ""}),
                      ("TMPDIR unwritable", {"TMPDIR": "/proc/no", "HOME": "/proc/no"}))],
    *[case(f"55: experiment manifest {text}", EXP + ["--methods", "smc-fixed"], "error",
           {"out/manifest.json": text}, outputs=("out",))
      for text in ("[1, 2]", '"x"', "null", "{}", '{"config": []}')],
    *[case(f"55: calibrate manifest {text}", CAL, "error", {"cal/manifest.json": text},
           outputs=("cal",)) for text in ("[1, 2]", "3")],
    *[case(f"55: curator meta {key} {how}", ["curator", "status", "st"], "error",
           {"x": _forged(key, change)}, outputs=("st", "st.lock"))
      for key, how, change in (("config", "a list", lambda v: [v]),
                               ("head", "a string", lambda v: "x"),
                               ("config", "without family",
                                lambda v: {k: x for k, x in v.items() if k != "family"}))],
    case("55: curator publish --k 1e30", ["curator", "publish", "st", "--k", str(10 ** 30)],
         "error", {"x": _curator_state}, outputs=("st", "st.lock")),
    case("55: curator publish --k 2^63-1", ["curator", "publish", "st", "--k", str(2 ** 63 - 1)],
         "ok", {"x": _curator_state}, outputs=("st", "st.lock")),
    case("55: experiment --runs 2^63-1", sub(EXP, "--runs", str(2 ** 63 - 1)), "error"),
    case("55: calibrate --reps 1e11", sub(CAL, "--reps", str(10 ** 11)), "error"),
    case("55: stream --particles 2^63", sub(STREAM, "--particles", str(2 ** 63)), "error", V),
    *[case(f"55: bool family option {text}", FISHER + ["--family", "fam.py:Flag", "--flag", text,
                                                   "--json"], "ok", {"fam.py": BOOL_FAMILY},
           check=lambda out, d, want=want: json.loads(out)["family_options"] == {"flag": want})
      for text, want in (("false", False), ("False", False), ("0", False), ("true", True))],
    case("55: bool family option maybe", FISHER + ["--family", "fam.py:Flag", "--flag", "maybe"],
         "error", {"fam.py": BOOL_FAMILY}),
    *[case(f"55: family {what}", FISHER + ["--family", "fam.py:C"], "error",
           {"fam.py": GOOD_FAMILY + body + "\n"}, timeout=90)
      for what, body in HOSTILE_FAMILIES.items()],
    case("55: family NaN logpdf on stream", STREAM + ["--family", "fam.py:C"], "error",
         {**V, "fam.py": GOOD_FAMILY + HOSTILE_FAMILIES["NaN logpdf"]}),
    case("55: family good", FISHER + ["--family", "fam.py:C", "--json"], "ok",
         {"fam.py": GOOD_FAMILY + "class C(Good):\n    pass\n"}, check=fisher_ok),
    *[case(f"55: family file changed under a curator state{ok}",
           ["curator", "status", "st", *ok.split()], "ok" if ok else "error",
           {"x": _changed_family(INIT)}, outputs=("st", "st.lock"))
      for ok in ("", " --family-changed-ok")],
    case("55: family file changed under an experiment store", EXP + [
        "--methods", "smc-fixed", "--family", "fam.py:C"], "error",
         {"x": _changed_family(EXP + ["--methods", "smc-fixed"])}, outputs=("out",)),
    # ------------------------------------------------ issue 55, items 2-4 (branch diag)
    # item 3: a run beyond its diagnostic's threshold warns, naming the option; the JSON
    # records the diagnostic and the warning; an ordinary run records it and is quiet
    *[case(f"55: diag posterior {m} {' '.join(o)}", POST + ["--method", m, *o, "--json"],
           "ok", R, warns=w, check=diagnosed(k, True))
      for m, o, k, w in (("smc", ["--particles", "4"], "ess", "--particles"),
                         ("smc-subset", ["--subset", "2", "--particles", "4"], "ess",
                          "--particles"),
                         ("smc-marginal", ["--particles", "2"], "ess", "--particles"),
                         ("mhaar", ["--iters", "20"], "chain_ess", "--iters"),
                         ("mhaar", ["--iters", "100"], "chain_ess", "--iters"))],
    case("55: diag posterior mhaar frozen (eps 1e6)", sub(POST, "--eps", "1e6") + [
        "--method", "mhaar", "--iters", "2000", "--json"], "ok", R, warns="accepted none",
         check=lambda out, d: json.loads(out)["diagnostics"]["acceptance"]["value"] == 0),
    *[case(f"55: diag posterior {' '.join(o)} quiet", POST + ["--method", *o, "--json"], "ok",
           R, check=diagnosed(k, False), timeout=120)
      for o, k in ((["smc"], "ess"), (["smc-subset", "--subset", "5"], "ess"),
                   (["smc-marginal"], "ess"), (["mhaar"], "chain_ess"),
                   (["online-gradient"], "stalled_steps"))],
    *[case(f"55: diag stream {' '.join([m, *o])} --particles {p}", sub(STREAM, "--particles", p) + [
        "--method", m, *o, "--json"], "ok", V, warns="--particles", check=diagnosed("ess", True))
      for m, p, o in (("smc", "3", []), ("smc-marginal", "2", []),
                      ("smc-subset", "3", ["--subset", "2"]))],
    case("55: diag stream online-gradient stalled", sub(STREAM[:-2], "--eps", "5") + [
        "--method", "online-gradient", "--interval", "40", "60", "--json"], "ok",
         V, warns="--method smc-marginal", check=diagnosed("stalled_steps", True)),
    case("55: diag stream online-gradient quiet", STREAM[:-2] + [
        "--method", "online-gradient", "--json"], "ok", V,
         check=diagnosed("stalled_steps", False)),
    *[case(f"55: diag curator {a[1]} with 2 particles", a, "ok",
           {**R, "x": _first(TINY, ["curator", "publish", "st", "--k", "20"], *pre)},
           outputs=("st", "st.lock"), warns="--particles", check=diagnosed("ess", True))
      for a, pre in ((["curator", "take", "st", "rel.csv", "--json"], ()),
                     (["curator", "status", "st", "--json"],
                      (["curator", "take", "st", "rel.csv"],)))],
    case("55: diag curator take quiet", ["curator", "take", "st", "rel.csv", "--json"], "ok",
         {**R, "x": _first(sub(TINY, "--particles", "200"),
                           ["curator", "publish", "st", "--k", "20"])},
         outputs=("st", "st.lock"), check=diagnosed("ess", False)),
    # item 4: a calibration store records its family file's sha256
    case("55: calibrate family file", CAL + ["--family", "fam.py:C", "--json"], "ok",
         {"fam.py": GOOD_FAMILY + "class C(Good):\n    pass\n"}, outputs=("cal",),
         check=lambda out, d: len(json.loads((d / "cal" / "manifest.json").read_text())[
             "config"]["family_sha256"]) == 64, timeout=180),
    *[case(f"55: family file changed under a calibration store{ok}",
           CAL + ["--family", "fam.py:C", *ok.split()], "ok" if ok else "error",
           {"x": _changed_family(CAL)}, outputs=("cal",), timeout=180)
      for ok in ("", " --family-changed-ok")],
    # item 2: counts and sizes beyond memory or SQLite, one line before any store
    *[case(f"55: count {what}", a, "error", {**V, **R})
      for what, a in (
          ("posterior smc --particles 1e12", POST + ["--method", "smc", "--particles", BIG]),
          ("posterior smc-marginal --particles 1e12",
           POST + ["--method", "smc-marginal", "--particles", BIG]),
          ("posterior mhaar --iters 1e12", POST + ["--method", "mhaar", "--iters", BIG]),
          ("stream --particles 1e12", sub(STREAM, "--particles", BIG)),
          ("experiment --n 1e12", sub(EXP, "--n", BIG)),
          ("experiment --particles 1e12", sub(EXP, "--particles", BIG)),
          ("experiment --mhaar-iters 1e12", EXP + ["--mhaar-iters", BIG]),
          ("calibrate --n 1e15", sub(CAL, "--n", str(10 ** 15))),
          ("calibrate --particles 1e12",
           sub(CAL, "--method", "smc-fixed") + ["--particles", BIG]),
          ("calibrate --mhaar-iters 1e12", sub(CAL, "--mhaar-iters", BIG)
           if "--mhaar-iters" in CAL else sub(CAL, "--method", "mhaar") + [
               "--mhaar-iters", BIG]),
          ("fisher mc --M 1e12", FISHER + ["--method", "mc", "--M", BIG]),
          ("fisher mc --K 1e12", FISHER + ["--method", "mc", "--K", BIG]),
          ("best-interval --grid 1e9", sub(BEST, "--grid", str(10 ** 9))),
          ("experiment --workers 1e12, 10^4 tasks",
           sub(sub(EXP, "--runs", "10000"), "--workers", BIG) + ["--methods", "smc-fixed"]),
          ("calibrate --workers 1e12, 10^4 tasks",
           sub(sub(CAL, "--reps", "10000"), "--workers", BIG)))],
    *[case(f"55: count curator {what}", a, "error",
           {"x": _first(INIT[:-2] + ["--interval", "0", "1"], pre)}, outputs=("st", "st.lock"))
      for what, a, pre in (
          ("publish past a state's 2^63 - 1", ["curator", "publish", "st", "--k", "1"],
           ["curator", "publish", "st", "--k", str(2 ** 63 - 1)]),
          ("withdraw --k 1e12 of 5", ["curator", "withdraw", "st", "0", "1", "--k", BIG],
           ["curator", "publish", "st", "--k", "5"]))],
    *[case(f"55: count beyond n is good: stream {' '.join(o)}", STREAM + [*o, BIG, "--json"],
           "ok", V, check=median_in(2, 8))
      for o in (["--batch"], ["--method", "smc-subset", "--subset"])],
    # item 2: a file that stops being text past its first kilobytes, in bounded memory
    *[case(f"55: input NUL past the head: {what}", a, "error", f)
      for what, a, f in (
          ("posterior", POST + ["--method", "exact"], {"rel.csv": NUL_RELEASES}),
          ("posterior .gz", ["posterior", "rel.csv.gz", *POST[2:], "--method", "exact"],
           {"rel.csv.gz": gzip.compress(NUL_RELEASES + NUL * 50)}),
          ("stream", STREAM, {"v.csv": NUL_VALUES}),
          ("stream .xz", ["stream", "v.csv.xz", *STREAM[2:]],
           {"v.csv.xz": __import__("lzma").compress(NUL_VALUES)}))],
    case("55: input NUL past the head: curator take", ["curator", "take", "st", "rel.csv"],
         "error", {"x": _curator_state, "rel.csv": NUL_RELEASES}, outputs=("st", "st.lock")),
    case("55: input long valid text is read", POST + ["--method", "exact", "--json"], "ok",
         {"rel.csv": RELEASES + "5,0,10\n" * 20000}, check=median_in(4, 6)),
    # the curator's state under faults: one line, the state byte for byte as it was
    *[case(f"55: {how}: curator {' '.join(a)}", ["curator", *a], "error",
           {"x": _published(60), **_sqlite_fault(how)}, outputs=("st.lock",),
           env={"PYTHONPATH": "{d}/inject" + os.pathsep + str(SRC)})
      for how in _SQLITE_FAULT
      for a in (["take", "st", "rel.csv"], ["publish", "st", "--k", "2"],
                ["withdraw", "st", "0", "10", "--k", "2"], INIT[1:] + ["--force"])
      if how == "read-only state" or a[0] == "take"],
    case("55: read-only state: curator status", ["curator", "status", "st", "--json"], "ok",
         {"x": _published(3), **_sqlite_fault("read-only state")}, outputs=("st.lock",),
         env={"PYTHONPATH": "{d}/inject" + os.pathsep + str(SRC)}),
    # an output that fails after the state changed: a full device is one line saying
    # what changed; a closed pipe ends quietly with 141 (its reader chose not to read)
    *[case(f"55: {out} stdout after a change: curator {a[0]}", ["curator", *a],
           "error" if out == "full" else "closed", {"x": _published(3)},
           outputs=("st", "st.lock"), stdout=out)
      for out in ("full", "closed")
      for a in (["take", "st", "rel.csv"], ["publish", "st", "--k", "2"],
                ["withdraw", "st", "0", "10", "--k", "1"])],
    # SIGHUP as SIGTERM: one line, status 129, no process left; a stopped store resumes
    case("55: stream SIGHUP", sub(STREAM, "--particles", "300") + [
        "--method", "smc", "--released", "out.csv"], "signalled",
         _values("x\n" + "5\n4\n6\n" * 3000), kill_after=6, timeout=60, sig=signal.SIGHUP),
    case("55: experiment SIGHUP", sub(sub(EXP, "--runs", "40"), "--n", "100"), "signalled",
         outputs=("out",), kill_after=8, timeout=60, sig=signal.SIGHUP),
    case("55: calibrate SIGHUP", sub(sub(sub(sub(CAL, "--method", "smc-fixed"), "--n", "40"),
                                         "--reps", "4000"), "--workers", "2")
         + ["--particles", "40"], "signalled", outputs=("cal",), kill_after=8, timeout=60,
         sig=signal.SIGHUP),
    case("55: calibrate rerun after a stop before its first replication", CAL + ["--json"],
         "ok", {"x": _stopped_calibration}, outputs=("cal",),
         check=lambda out, d: json.loads(out)["reps"] == 3),
]


def _env(extra=None, d=""):
    env = dict(os.environ, NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1")
    # absolute: a relative entry (PYTHONPATH=src) is Python's own fatal error in a case
    # whose working directory is gone
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), *(os.path.abspath(e) for e in env.get(
        "PYTHONPATH", "").split(os.pathsep) if e)])
    for k, v in (extra or {}).items():
        if v is None:
            env.pop(k, None)
        elif k != "cwd_gone":
            env[k] = v.replace("{d}", str(d))
    return env


def _output(how):
    """The case's stdout: a pipe read here, or one whose reader has gone, or /dev/full."""
    if how == "closed":
        r, w = os.pipe()
        os.close(r)
        return w
    return os.open("/dev/full", os.O_WRONLY) if how == "full" else subprocess.PIPE


def _snapshot(d: Path) -> dict:
    out = {}
    for p in d.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                out[str(p.relative_to(d))] = hashlib.sha256(p.read_bytes()).hexdigest()
        except OSError:
            out[str(p.relative_to(d))] = "unreadable"
    return out


def _session(sid: int) -> list[int]:
    """Live processes of session ``sid`` (zombies excluded)."""
    pids = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(p.name))
    return pids


def _kill(pids):
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_case(c) -> dict:
    with tempfile.TemporaryDirectory(prefix="hostile-") as tmp:
        d = Path(tmp)
        for name, content in c["files"].items():
            if callable(content):
                content(d)
                continue
            (d / name).parent.mkdir(parents=True, exist_ok=True)
            (d / name).write_bytes(content if isinstance(content, bytes) else
                                   content.encode())
        before = _snapshot(d)
        argv = [a.replace("{d}", str(d)) for a in c["argv"]]
        t0 = time.monotonic()
        gone = d / "gone"
        if "cwd_gone" in c["env"]:
            gone.mkdir()
        out_fd = _output(c["stdout"])
        proc = subprocess.Popen([sys.executable, "-m", "dpbook.cli", *argv], cwd=d,
                                env=_env(c["env"], d), stdout=out_fd,
                                stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True, text=True, errors="replace",
                                preexec_fn=(lambda: (os.chdir(gone), os.rmdir(gone)))
                                if "cwd_gone" in c["env"] else None)
        if out_fd != subprocess.PIPE:
            os.close(out_fd)
        hang = False
        try:
            out, err = proc.communicate(timeout=c["kill_after"] or c["timeout"])
        except subprocess.TimeoutExpired:
            if c["kill_after"]:
                proc.send_signal(c["sig"])
                try:
                    out, err = proc.communicate(timeout=c["timeout"])
                except subprocess.TimeoutExpired:
                    hang = True
                    _kill([proc.pid, *_session(proc.pid)])
                    out, err = proc.communicate()
                time.sleep(5)
            else:
                hang = True
                _kill([proc.pid, *_session(proc.pid)])
                out, err = proc.communicate()
        seconds = time.monotonic() - t0
        time.sleep(0.3)
        survivors = _session(proc.pid)
        _kill(survivors)
        for p in d.rglob("*"):  # let the cleanup remove what a case made read-only
            if p.is_dir() and not p.is_symlink():
                p.chmod(0o700)
        after = _snapshot(d)
        problems = []
        rc, lines = proc.returncode, err.strip().splitlines()
        errors = [s for s in lines if not s.startswith("dpbook: warning:")
                  and "resource_tracker" not in s and "warnings.warn(" not in s]
        lost = [k for k, h in before.items() if after.get(k) != h and
                not any(k == o or k.startswith(o + "/") for o in c["outputs"])]
        if lost:
            problems.append(("lost data", f"changed or removed: {lost}"))
        if hang:
            problems.append(("hangs", f"no end within {c['timeout']} s"))
        if survivors:
            problems.append(("orphans", f"{len(survivors)} process(es) survived"))
        if c["kill_after"] and not hang and rc in (0, 2):
            print(f"note: {c['name']} ended (exit {rc}) before its signal", flush=True)
        elif c["kill_after"] and c["sig"] != signal.SIGKILL and not hang and (
                rc != 128 + c["sig"] or "Traceback" in err or len(errors) != 1):
            problems.append(("tracebacks", f"exit {rc} after {c['sig'].name}: "
                                           f"{err.strip()[-300:]}"))
        out = out or ""
        if c["expect"] == "closed" and not hang:
            if rc != 141 or err.strip():
                problems.append(("tracebacks", f"closed pipe: exit {rc}: {err.strip()[-300:]}"))
        elif not hang and not c["kill_after"]:
            if "Traceback" in err or rc not in (0, 2):
                problems.append(("tracebacks", f"exit {rc}: {err.strip()[-300:]}"))
            elif rc == 2 and (len(errors) != 1 or not errors[0].startswith("dpbook: error:")):
                problems.append(("tracebacks", f"error not one line: {err.strip()[:300]}"))
            elif rc == 0 and c["expect"] == "error":
                problems.append(("silently wrong", f"accepted: {out.strip()[:200]}"))
            elif rc == 2 and c["expect"] == "ok":
                problems.append(("refused", err.strip()[:300]))
            elif rc == 0 and c["warns"] and c["warns"] not in err:
                problems.append(("silently wrong", f"no warning {c['warns']!r}"))
            elif rc == 0 and c["check"] is not None:
                try:
                    good = c["check"](out, d)
                except Exception as e:  # noqa: BLE001 - any failure of the check
                    good, out = False, f"{type(e).__name__}: {e}; {out[:200]}"
                if not good:
                    problems.append(("silently wrong", f"wrong answer: {out.strip()[:300]}"))
        return dict(name=c["name"], rc=rc, seconds=seconds, problems=problems,
                    stderr=err.strip()[:200])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-k", default="", help="run the cases whose name contains this")
    ap.add_argument("-j", type=int, default=2, help="cases run at once (default 2)")
    ap.add_argument("-v", action="store_true", help="one line per case")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if args.k in c["name"]]
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.j) as pool:
        results = list(pool.map(run_case, cases))
    counts = dict.fromkeys(CLASSES, 0)
    for r in results:
        for cls, text in r["problems"]:
            counts[cls] += 1
            print(f"FAIL [{cls}] {r['name']}: {text}")
        if args.v and not r["problems"]:
            print(f"ok   {r['name']} (exit {r['rc']}, {r['seconds']:.1f} s) {r['stderr'][:120]}")
    print(f"{len(cases)} cases in {time.monotonic() - t0:.0f} s")
    for cls in CLASSES:
        print(f"{cls}: {counts[cls]}")
    return 1 if any(counts.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
