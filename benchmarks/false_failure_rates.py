"""False-failure rates of the suite's statistical tests, measured over seeds 0-19.

Each statistical test states in its docstring the rate at which it fails with correct
code (over random seeds) and the smallest error it detects; this script measures the
rate by running the test's own check with other seeds (the tests themselves run one
seed, so the suite stays fast):

* ``mhaar``: tests/test_mhaar_family.py::test_matches_exact_posterior (MHAAR against
  the exact grid posterior), every case, the chain's seed over the seeds (the releases
  fixed, as in the test);
* ``fisher-mc``: tests/test_fisher.py::test_mc_agrees_with_exact (eq. 8 with Algorithm 4
  against eq. 7), its cases over the seeds; ``--all`` also runs the slow, non-paper ones
  (the paper's model only by default: the closed form, cheap).  Cases the se refuses
  (``larger K``, at the smallest noise scales) are counted apart.

    NUMBA_NUM_THREADS=1 PYTHONPATH=src python benchmarks/false_failure_rates.py \\
        [fisher-mc] [mhaar] [--all] [--seeds 20]

Exit status 1 when the failures exceed the test's stated budget (fisher-mc: 3 failures
of the paper-model checks, Poisson(0.1 expected) with P = 1.5e-4; mhaar: 3 of 160,
Poisson(0.16 expected) with P = 6e-4).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def fisher_mc(seeds, every_case):
    import test_fisher as tf

    cases = [c for c in tf.MC_CASES if every_case or c[:3] == tf._PAPER]
    failed, refused = [], []
    for c in cases:
        t0 = time.perf_counter()
        bad = 0
        for seed in range(seeds):
            try:
                if not tf._mc_within_tolerance(*c, seed=seed)[0]:
                    failed.append((c, seed))
                    bad += 1
            except ValueError as e:  # the se refused at the smallest noise scales
                assert "larger K" in str(e), e
                refused.append((c, seed))
        print(f"{c[0]}-{c[1]} {c[3]} M={c[4]} K={c[5]} share={c[6]}: {bad} of {seeds} "
              f"failed ({time.perf_counter() - t0:.1f} s)", flush=True)
    n = len(cases) * seeds
    print(f"fisher-mc: {len(failed)} failed, {len(refused)} refused of {n} checks")
    for c, seed in failed:
        print("  failed:", c, "seed", seed)
    return len(failed) < 3


def mhaar(seeds, every_case):
    import test_mhaar_family as tm

    failed = []
    for name, mech in tm.CASES:
        t0 = time.perf_counter()
        bad = 0
        for seed in range(seeds):
            try:
                tm.check_against_exact(name, mech, seed)
            except AssertionError as e:
                failed.append((name, mech, seed, str(e)[:200]))
                bad += 1
        print(f"{name}-{mech}: {bad} of {seeds} failed ({time.perf_counter() - t0:.1f} s)",
              flush=True)
    print(f"mhaar: {len(failed)} failed of {len(tm.CASES) * seeds} checks")
    for f in failed:
        print("  failed:", *f)
    return len(failed) <= 2


CHECKS = {"fisher-mc": fisher_mc, "mhaar": mhaar}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("checks", nargs="*", default=list(CHECKS), choices=list(CHECKS))
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--all", action="store_true", help="every case, the slow ones too")
    a = ap.parse_args(argv)
    ok = all([CHECKS[name](a.seeds, a.all) for name in a.checks])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
