"""Generic (numpy) MHAAR: seconds per 1000 iterations for a few families and mechanisms.

    .venv/bin/python benchmarks/bench_mhaar_generic.py

The compiled normal/Laplace kernel has its own benchmark (bench_mhaar.py).  One process,
the numba threads of the machine; compare runs side by side, never across days.
"""

import time

import numpy as np

from dpbook.mhaar import mhaar


def bench(n=1000, n_aux=20, n_iter=300, cases=None):
    """Seconds per 1000 iterations for a few families and mechanisms (n, N as given)."""
    from dpbook.model.families import get_family
    from dpbook.model.mechanisms import release

    cases = cases or [("normal", "laplace"), ("student_t", "laplace"),
                      ("poisson", "laplace"), ("normal", "gaussian")]
    out = {}
    for name, mech in cases:
        fam = get_family(name)
        rng = np.random.default_rng(1)
        theta = fam.default_theta()
        x = fam.sample(rng, *theta, size=n)
        lc, rc = fam.fixed_interval(*theta)
        yy = release(x, lc, rc, 2.0, rng, mechanism=mech)
        mhaar(yy, lc, rc, 2.0, family=fam, mechanism=mech, n_iter=20, n_aux=n_aux, generic=True)
        t = time.perf_counter()
        mhaar(yy, lc, rc, 2.0, family=fam, mechanism=mech, n_iter=n_iter, n_aux=n_aux,
              generic=True)
        out[f"{name}/{mech}"] = 1000 * (time.perf_counter() - t) / n_iter
    return out


if __name__ == "__main__":
    for case, sec in bench().items():
        print(f"{case:20s} {sec:6.2f} s per 1000 iterations (n = 1000, N = 20)")
