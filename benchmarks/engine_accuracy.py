"""The compiled likelihood of eq. (7) (dpbook.likelihood.compiled_quadrature) against scipy's
quad, one release at a time: the logistic written as a user writes it, both mechanisms, l, r = -1,
1, eps in (0.5, 2, 10, 50), c in (0.002 ... 20), m in (-30 ... 30), y inside or beyond
an end by up to 30 b (Laplace; 5 b Gaussian): 1680 cases.  Prints the worst errors of
log p and of the score (relative to 1 + |s|).

    PYTHONPATH=src .venv/bin/python benchmarks/engine_accuracy.py

Measured (the branch postengine): log p <= 3.5e-11, score <= 1.1e-6 (before it: 3.26
nats and 25 where 1 - cdf dropped the upper atom, 0.32 nats and 3e-3 where no panel
ended at the integrand's peak).  quad warns of roundoff at epsrel 1e-13 in some cases: the
score's worst case (c/b = 500) may be the reference's own limit.
"""

from __future__ import annotations

import itertools
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_engine import Logistic  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from posterior_oracle import logistic_release_quad as reference  # noqa: E402

from dpbook import backends  # noqa: E402


def main():
    warnings.simplefilter("ignore", RuntimeWarning)  # the logistic's exp overflows
    fam, rows = Logistic(), []
    for mech in ("laplace", "gaussian"):
        terms = backends.backend("loglik_terms", fam, mech)
        score = backends.backend("score", fam, mech)
        ks = (0.0, 3.0, 10.0, 30.0) if mech == "laplace" else (0.0, 2.0, 5.0)
        for eps, c, m, k, side in itertools.product(
                (0.5, 2.0, 10.0, 50.0), (0.002, 0.02, 0.2, 2.0, 20.0),
                (-30.0, -3.0, 0.0, 0.7, 3.0, 30.0), ks, (-1, 1)):
            l, r, b = -1.0, 1.0, 2.0 / eps
            y = (r + k * b) if side > 0 else (0.3 if k == 0 else l - k * b)
            lr, sr = reference(fam, y, l, r, eps, m, c, mech)
            lg = terms(np.array([y]), np.array([l]), np.array([r]), eps,
                       np.array([[m, c]]))[0, 0]
            sg = np.asarray(score(y, l, r, eps, m, c))
            rows.append((abs(lg - lr), float(np.max(np.abs(sg - sr) / (1 + np.abs(sr)))),
                         (mech, eps, c, m, y)))
    worst_l = max(rows, key=lambda t: t[0])
    worst_s = max(rows, key=lambda t: t[1])
    print(f"{len(rows)} cases; worst |log p error| {worst_l[0]:.2e} at (mech, eps, c, m, y) "
          f"= {worst_l[2]}; worst score error {worst_s[1]:.2e} at {worst_s[2]}")


if __name__ == "__main__":
    main()
