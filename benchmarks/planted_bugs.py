"""The planted-bug panel: does the test suite catch each bug of tests/planted/bugs.toml?

For each bug: copy the tracked tree to a temporary folder, replace the bug's old text
(exactly once) by its new text, run the panel's test selection there with
``pytest -x -q`` (the copy's ``src`` first on the path, numba's cache in the copy), and
report the first failing test.  A bug whose old text is missing or not unique stops the
run before any test (the panel must not rot silently when code moves).

    .venv/bin/python benchmarks/planted_bugs.py [--jobs 2] [--only NAME]... [TESTS ...]

Exit status 1 when some bug is not caught.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUGS = ROOT / "tests" / "planted" / "bugs.toml"


def load(path=BUGS):
    bugs = tomllib.loads(Path(path).read_text())["bug"]
    for bug in bugs:  # fail loudly before running anything
        text = (ROOT / bug["file"]).read_text()
        n = text.count(bug["old"])
        if n != 1:
            sys.exit(f"planted bug {bug['name']}: its old text occurs {n} times in "
                     f"{bug['file']} (expected once); update tests/planted/bugs.toml")
    return bugs


def default_tests():
    return tomllib.loads(BUGS.read_text())["panel"]["tests"]


def copy_tree(dest: Path):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           check=True, capture_output=True, text=True).stdout.split("\n")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (dest / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / f)


def run_one(bug, tests):
    with tempfile.TemporaryDirectory(prefix=f"planted-{bug['name']}-") as tmp:
        tmp = Path(tmp)
        copy_tree(tmp)
        path = tmp / bug["file"]
        path.write_text(path.read_text().replace(bug["old"], bug["new"]))
        env = dict(os.environ, PYTHONPATH=str(tmp / "src"),
                   NUMBA_CACHE_DIR=str(tmp / ".numba"))
        t0 = time.time()
        proc = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:xdist",
                               "-p", "no:cacheprovider", "-W", "ignore", *tests],
                              cwd=tmp, env=env, capture_output=True, text=True)
        seconds = time.time() - t0
        out = proc.stdout + proc.stderr
        failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out, re.M)
        # the copy must really be the one tested
        if proc.returncode not in (0, 1):
            failed = failed or [f"pytest exit status {proc.returncode}"]
        return bug, failed, seconds


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tests", nargs="*", help="pytest selection (default: the panel's)")
    ap.add_argument("--jobs", type=int, default=1, help="bugs run at once")
    ap.add_argument("--only", action="append", help="a bug to run (repeatable)")
    args = ap.parse_args(argv)
    bugs = load()
    if args.only:
        bugs = [b for b in bugs if b["name"] in args.only]
    tests = args.tests or default_tests()
    print(f"{len(bugs)} planted bugs; selection: {' '.join(tests)}", flush=True)
    missed = 0
    with ThreadPoolExecutor(args.jobs) as pool:
        for bug, failed, seconds in pool.map(lambda b: run_one(b, tests), bugs):
            caught = failed[0] if failed else "NOT CAUGHT"
            missed += not failed
            print(f"{bug['name']:<28} {seconds:6.0f} s  {caught}", flush=True)
    print(f"{len(bugs) - missed} of {len(bugs)} caught")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
