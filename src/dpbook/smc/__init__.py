"""Sequential Monte Carlo for the posterior (5): Algorithms 2 and 3 (Section 4).

* :mod:`dpbook.smc.resample_move`: :class:`SMC`, the one public SMC (any family and
  mechanism), and :func:`smc_posterior` for a whole released data set;
* :mod:`dpbook.smc.resampling`: systematic resampling and the ESS;
* :mod:`dpbook.smc.sweep`: the compiled MH sweep of Algorithm 3 for the shipped mechanisms;
* :mod:`dpbook.smc.paper_kernel`: the compiled kernel of the normal family with the
  Laplace mechanism, which ``SMC(...)`` returns for that model;
* :mod:`dpbook.smc.compiled_smc`: the compiled engine of any other location-scale
  family whose functions compile (``SMC.for_model`` chooses).
"""

from dpbook.smc import compiled_smc, paper_kernel  # noqa: F401  (SMC.for_model's)
from dpbook.smc.resample_move import SMC, History, Particles, smc_posterior

__all__ = ["SMC", "History", "Particles", "smc_posterior"]
