"""The versions of the algorithms whose numbers fill the stores.

A store (an experiment's, a calibration study's) is made by some algorithms; it is
stale when the numbers they produce change, not when their source text does.  Each
algorithm has a version number here; a store's configuration carries a fingerprint of
the versions of the algorithms it uses (:func:`fingerprint`), and a store with another
fingerprint is set aside and recomputed.

What keeps the versions honest is the golden test (``tests/test_golden.py``): it runs
every algorithm on small fixed inputs, through the same entry points the stores use
(the experiment's tasks, the calibration's replications, the library's functions), and
compares the outputs with those recorded in ``tests/golden/``.  The inputs are chosen to
reach the rare paths too (the ziggurat's slow path, the MH decision taken again with
``math.exp`` after the fast exponential, subset moves, the marginal SMC's delayed
acceptance).  An edit that changes no number (a docstring, a refactor that keeps the
bits) passes it and leaves every store valid; an edit that changes numbers fails it
until the version of the algorithm that changed is bumped here and the record is
regenerated (``python tests/golden/update.py``, which refuses to record new numbers
for a case whose versions did not change).

Why versions and a test rather than a hash of the source, as before: a hash of the text
made every store stale at any edit, a comment included (a 60 CPU-minute recompute of
the paper's experiment), and so kept duplicated code in place; and a hash of the
outputs computed at run time would depend on the machine: ``np.exp`` and libm may
differ in the last bit between CPUs (SIMD code paths), so the same code could give two
fingerprints, and stores written by the workers of a Dask cluster on different machines
could not be mixed.  Versions are constants: every process, on every machine, computes
the same fingerprint.  The golden test requires the recorded bits on a machine whose
floating-point functions give the recorded bits on a probe (the machine the record was
made on, which is where CI runs); on another it compares to a relative 1e-9, far below
any change of an algorithm (a new random stream or formula moves the outputs at
O(1e-3) and more) and far above the last-bit differences of ``exp``.

Groups: what the paper's stores use (:data:`CORE`); the long-stream methods
(:data:`LONG_STREAM`, only in configurations that run them); :data:`GENERIC_MODEL`, the
code paths of any family or mechanism other than the paper's normal/Laplace pair (only
in configurations of another model, so that replacing that code leaves the paper's
stores valid); :data:`CENTRAL`, the central model's calibration replications (only in
the key of their own task files: a calibration store holds any set of methods, and a
change of the central release leaves the local methods' replications in it valid).
"""

from __future__ import annotations

import hashlib
import json

#: version of each algorithm; bump one when its numbers change (see the module docstring)
VERSIONS = {
    "rng": 1,  # dpbook.rng: keyed counter streams, ziggurat, gamma, xoshiro256++
    "population": 1,  # sensitive values and privacy noise (privacy.population, mechanisms)
    "smc": 1,  # Algorithms 2-3 with subset rejuvenation; resampling
    "intervals": 1,  # Fisher information (eq. 7, Algorithm 4 / eq. 8), eq. (13), Thompson
    "mhaar": 1,  # the Section 6 baseline
    "posterior": 1,  # the exact grid posterior (5), its quantiles
    "experiment": 1,  # task seeds, task -> estimates row and trajectories (Section 6)
    # a calibration replication (chapter 8); 2: MHAAR under priors other than Section
    # 6's walks in (mu, log sigma^2) (its chains at Section 6's prior are unchanged)
    "calibration": 2,
    "marginal": 1,  # the marginal SMC on theta (IBIS) of the long streams
    "gradient": 1,  # the online gradient estimate (Section 7)
    # every family and mechanism but the normal/Laplace pair; 2: the latent SMC of a
    # location-scale family runs the compiled engine (dpbook.smc.compiled_smc); 3: the engine's
    # random-walk covariance from the compiled scores (summed in another order); 4:
    # Algorithm 4 / eq. (8) of any other model draws keyed uniforms through its ppf
    # (dpbook.fisher.mc); 5: MHAAR runs its engine (dpbook.mhaar.compiled_chain: keyed streams,
    # walk in (loc, log scale)); 6: their exact posterior runs the one grid pipeline
    # (dpbook.posterior.exact), its likelihood compiled for a location-scale family
    # (dpbook.likelihood.compiled_quadrature); 7: the marginal SMC of a location-scale family weighs
    # and moves with that engine's compiled likelihood
    # (dpbook.likelihood.compiled_quadrature); 8: the
    # Student-t family's cdf and quantiles are dpbook.model.tdist's (numba ufuncs, not
    # scipy's stdtr/stdtrit), so its SMC, MHAAR, Algorithm 4, exact posterior and
    # marginal SMC run the compiled engines; 9: but its latent SMC keeps the numpy SMC
    # (the engine draws by the quantile, 7x slower than numpy's standard_t draws)
    # 10: the compiled likelihood of eq. (7) (dpbook.likelihood.compiled_quadrature): panel ends at
    # the Gaussian noise's boundary layer in the log-likelihood too (y beyond an end by
    # d > b), a peak search, and a family without base_sf keeps its upper atom (moved:
    # posterior-generic laplace mean/quantile by <= 5e-11, marginal-generic gaussian w
    # by 1e-15); 11: the latent SMC of the Student-t runs the engine, proposing by its
    # keyed draw (StudentT.base_draw, z / sqrt(g / df)), and that of the normal family
    # with the Gaussian mechanism (or with the Laplace one only where the paper's kernel
    # does not take it) runs the engine with its compiled conjugate move
    # (Normal.engine_gibbs); the compiled likelihood cuts a tail panel spanning more
    # than a factor 3 in |z| (the Student-t's power-law tails); 12: the engine draws the
    # normal family's x_k proposals by the ziggurat from keyed words (Normal.engine_draw)
    "generic-model": 12,
    # the central model's replications (chapter 11: the curator's release and the
    # central posterior); 2: the curator sums the people the local methods of the same
    # seed see (version 1, unrecorded: other people, the replication's data seed having
    # been spawned by an unused local population first)
    "central": 2,
}

CORE = ("rng", "population", "smc", "intervals", "mhaar", "posterior")
LONG_STREAM = ("marginal", "gradient")
GENERIC_MODEL = ("generic-model",)
CENTRAL = ("central",)


def fingerprint(names, versions=None) -> str:
    """A short hash of the versions of the algorithms ``names`` (order does not matter);
    ``versions`` (default :data:`VERSIONS`) is for computing a past fingerprint."""
    unknown = [n for n in names if n not in VERSIONS]
    if unknown:
        raise ValueError(f"unknown algorithm {unknown[0]!r}; the versioned ones are "
                         f"{', '.join(VERSIONS)}")
    versions = VERSIONS if versions is None else versions
    table = {n: versions[n] for n in sorted(set(names))}
    text = json.dumps(table, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
