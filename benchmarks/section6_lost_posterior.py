"""How far is each Section 6 answer from being 'lost' (dpbook.diagnostics)?

Runs the Section 6 experiment (quick or full sizes, some runs) in this process and
records, for every task, the gap in nats between the best reference point's log
posterior density and that of the method's posterior median; the check warns above
dpbook.diagnostics.LOST_MARGIN.  Usage:

    python benchmarks/section6_lost_posterior.py quick|full [RUNS] [--original-code]
"""

import sys
import tempfile

import numpy as np

import dpbook.diagnostics as diag
from dpbook.experiment import run_experiment
from dpbook.experiment.runner import BOOK_CONFIGS

gaps = []
_real = diag.posterior_gap


def _record(*a, **k):
    g = _real(*a, **k)
    gaps.append(g)
    return g


def main():
    mode = sys.argv[1]
    config = dict(BOOK_CONFIGS[mode])
    if len(sys.argv) > 2 and sys.argv[2].isdigit():
        config["runs"] = int(sys.argv[2])
    original = "--original-code" in sys.argv
    diag.posterior_gap = _record
    rows = []
    with tempfile.TemporaryDirectory() as out:
        for method in ("smc-adaptive", "smc-fixed", "mhaar") if not original else \
                ("smc-adaptive", "smc-fixed"):
            for eps in config["eps"]:
                del gaps[:]
                run_experiment(**{**config, "eps": (eps,)}, methods=(method,), workers=1,
                               progress=False, out=f"{out}/{method}-{eps}",
                               original_code=original)
                g = [x["gap"] for x in gaps]
                rows.append((method, eps, len(g), max(g), float(np.median(g))))
                print(f"{method:<13} eps {eps:>4}: {len(g)} tasks, gap max {max(g):8.3f} "
                      f"median {np.median(g):8.3f} (warns above {diag.LOST_MARGIN})",
                      flush=True)
    print("largest gap:", max(r[3] for r in rows))


if __name__ == "__main__":
    main()
