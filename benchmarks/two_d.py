"""Chapter 14's experiment (issue 54): adaptive truncation in two dimensions.

X_t ~ N_2(mu, Sigma) with theta = THETA, the latent SMC with the NIW prior of the
public range PRIOR_RANGE per component; the adaptive box (Thompson sampling, the
standard box of the score log det F moved and scaled per component), the same with the
score trace-mu, and the fixed box [mu_j - 10 sigma_j, mu_j + 10 sigma_j], on the same
data seeds, at eps 1, 2, 5 and 10; and, on other data
of the same population, two independent one-dimensional runs (the normal model with the
same range's prior, adaptive) that split eps in half, one per component.  Every
configuration is an experiment store under results/ (``ensure_results``): a rerun
resumes or loads.  Chapter 14 calls :func:`measure` and shows :func:`table`; from the
repository root,

    NUMBA_NUM_THREADS=1 python benchmarks/two_d.py [--mode full] [--workers 2]

prints the tables.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pandas as pd

from dpbook import ensure_results
from dpbook.model.families.normal import Normal
from dpbook.model.prior import prior_from_range
from dpbook.multivariate.mvnormal import MultivariateNormal, niw_from_ranges

ROOT = Path(__file__).resolve().parents[1]
THETA = (50.0, 20.0, math.sqrt(10.0), 2.0, 0.6)  # mu1, mu2, sigma1, sigma2, rho12
PARAMS = ("mu1", "mu2", "sigma1", "sigma2", "rho12")
PRIOR_RANGE = (-100.0, 100.0)
EPS = (1.0, 2.0, 5.0, 10.0)
SIZES = {"quick": dict(n=100, particles=200, runs=10),
         "full": dict(n=300, particles=400, runs=30)}
DESIGNS = ("adaptive", "trace-mu", "fixed", "split")
BOOT = 2000
LEVEL = 0.95


def model(score="logdet"):
    return MultivariateNormal(2, prior=niw_from_ranges([PRIOR_RANGE] * 2), box_score=score)


def store(name, mode, seed, root=ROOT):
    return root / "results" / f"ch14-{name}-{mode}-seed{seed}"


def measure(mode="quick", seed=0, root=ROOT, workers=None, scheduler=None):
    """Run or load the stores; one row per (design, eps, run) with each parameter's
    posterior mean (``<p>_hat``), truth and quartiles; design one of adaptive, fixed (the
    2-D model) and split (the 1-D runs at eps/2, columns mu1, sigma1 from component 1's
    run and mu2, sigma2 from component 2's, runs paired by index only)."""
    size = SIZES[mode]
    kw = dict(progress=False, workers=workers, scheduler=scheduler, seed=seed,
              quartiles=True, **size)
    two, _ = ensure_results(store("2d", mode, seed, root), family=model(), theta=THETA,
                            eps=list(EPS), methods=["smc-adaptive", "smc-fixed"], **kw)
    two["design"] = two["method"].str.replace("smc-", "", regex=False)
    trace, _ = ensure_results(store("2d-tracemu", mode, seed, root), family=model("trace-mu"),
                              theta=THETA, eps=list(EPS), methods=["smc-adaptive"], **kw)
    two = pd.concat([two, trace.assign(design="trace-mu")], ignore_index=True)
    one = prior_from_range(Normal(), *PRIOR_RANGE)
    parts = []
    for j in (0, 1):
        est, _ = ensure_results(store(f"split-c{j + 1}", mode, seed, root), family=one,
                                mu=THETA[j], sigma=THETA[2 + j], eps=[e / 2 for e in EPS],
                                methods=["smc-adaptive"], **kw)
        names = {c: c.replace("mu", f"mu{j + 1}").replace("sigma", f"sigma{j + 1}")
                 for c in est.columns}
        parts.append(est.assign(eps=2 * est["eps"]).rename(columns=names)
                     .set_index(["eps", "run"]))
    split = parts[0].join(parts[1][[c for c in parts[1] if c.startswith(("mu2", "sigma2"))]])
    split = split.reset_index().assign(design="split", seconds=parts[0]["seconds"].values
                                       + parts[1]["seconds"].values)
    return pd.concat([two, split], ignore_index=True)


def _rmse(e):
    return float(np.sqrt(np.mean(np.square(e))))


def _boot_diff(a, b, paired, rng, boot=BOOT, level=LEVEL):
    """RMSE(a) - RMSE(b) and its percentile bootstrap interval (runs resampled together
    when paired, apart otherwise)."""
    n, m = len(a), len(b)
    i = rng.integers(0, n, (boot, n))
    k = i if paired else rng.integers(0, m, (boot, m))
    d = np.sqrt(np.mean(a[i] ** 2, axis=1)) - np.sqrt(np.mean(b[k] ** 2, axis=1))
    lo, hi = np.quantile(d, [(1 - level) / 2, (1 + level) / 2])
    return _rmse(a) - _rmse(b), float(lo), float(hi)


def table(rows, seed=0):
    """Per (eps, parameter): RMSE and bias of each design's posterior median, and RMSE
    differences (adaptive is log det's) with
    their bootstrap intervals: adaptive - fixed (paired), adaptive - split (unpaired;
    the split runs do not estimate rho)."""
    rng = np.random.default_rng(seed)
    out = []
    for eps, g in rows.groupby("eps"):
        err = {d: g[g.design == d].sort_values("run") for d in DESIGNS}
        for p in PARAMS:
            # the posterior median: sigma's posterior has infinite variance under clipping
            e = {d: (v[f"{p}_q50"] - v[f"{p}_true"]).to_numpy() for d, v in err.items()
                 if f"{p}_q50" in v and v[f"{p}_q50"].notna().all() and len(v)}
            row = {"eps": eps, "param": p, "runs": len(e["adaptive"])}
            for d, v in e.items():
                row[f"{d} RMSE"], row[f"{d} bias"] = _rmse(v), float(np.mean(v))
            row["adaptive - fixed"], row["af lo"], row["af hi"] = _boot_diff(
                e["adaptive"], e["fixed"], True, rng)
            if "trace-mu" in e:
                row["adaptive - trace-mu"], row["at lo"], row["at hi"] = _boot_diff(
                    e["adaptive"], e["trace-mu"], True, rng)
            if "split" in e:
                row["adaptive - split"], row["as lo"], row["as hi"] = _boot_diff(
                    e["adaptive"], e["split"], False, rng)
            out.append(row)
    return pd.DataFrame(out).set_index(["eps", "param"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=tuple(SIZES), default="quick")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=None)
    a = ap.parse_args()
    pd.set_option("display.width", 200)
    print(table(measure(a.mode, a.seed, workers=a.workers)).round(3).to_string())


if __name__ == "__main__":
    main()
