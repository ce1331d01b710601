"""dpbook: differentially private online Bayesian estimation with adaptive truncation.

A faithful, fast implementation of S. Yildirim (2023), "Differentially private
online Bayesian estimation with adaptive truncation" (the paper).

The names the book's chapters use are importable from here, e.g.
``from dpbook import SMC, exact_posterior, fisher_grid, LocationScaleFamily``; each is
imported from its subpackage on first use, so ``import dpbook`` itself stays cheap (no
numba compiling).  ``dpbook.figures`` holds the book's plotting helpers; the MHAAR
baseline is ``dpbook.mhaar.mhaar`` (a name here would shadow its subpackage).
"""

import importlib

from dpbook.environment import ensure_numba_cache

__version__ = "0.1.0"
ensure_numba_cache()  # before any of dpbook's kernels is defined

# public name -> the module it lives in (imported on first access)
_API = {
    # the model: families (Definition 2), mechanisms (eq. 2, 10)
    "dpbook.model.families": ("Family", "LocationScaleFamily", "get_family", "available",
                              "register_family"),
    "dpbook.model.checks": ("check_family",),
    "dpbook.model.mechanisms": ("clip", "release", "noise_scale", "get_mechanism"),
    # the releasing side of Algorithm 1 (the only code that sees sensitive values)
    "dpbook.privacy.population": ("Population", "normal_population", "family_population"),
    "dpbook.privacy.policies": ("FixedPolicy", "AdaptivePolicy", "ThetaGridPolicy"),
    "dpbook.privacy.individual": ("private_release", "seeded_release_for_simulation"),
    "dpbook.privacy.curator": ("Curator",),
    # the algorithms
    "dpbook.smc": ("SMC", "smc_posterior"),
    "dpbook.posterior": ("exact_posterior", "central_posterior", "GridPosterior"),
    "dpbook.fisher": ("fisher_exact", "fisher_mc", "fisher_information", "fisher_grid",
                      "best_interval", "ThetaGridIntervals"),
    "dpbook.online": ("run_online", "marginal_posterior", "OnlineGradient", "make_curator",
                      "run_stream", "warm_up"),
    # the studies: Section 6's experiment, chapter 8's calibration
    "dpbook.experiment": ("run_experiment", "ensure_results", "is_complete", "load_results",
                          "summarize", "make_config", "book_experiment"),
    "dpbook.calibration": ("run_calibration", "calibration_summary"),
}
_WHERE = {name: module for module, names in _API.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'dpbook' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted({*globals(), *__all__})
