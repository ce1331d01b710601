"""Sequential Monte Carlo for the posterior (5): Algorithms 2 and 3 (Section 4).

* :mod:`dpbook.smc.resample_move`: :class:`SMC`, the one public SMC (any family and
  mechanism), and :func:`smc_posterior` for a whole released data set;
* :mod:`dpbook.smc.resampling`: systematic resampling and the ESS;
* :mod:`dpbook.smc.sweep`: the compiled MH sweep of Algorithm 3 for the shipped mechanisms;
* :mod:`dpbook.smc.compiled_smc`: the same algorithm compiled for every location-scale
  family, the paper's normal model included, which ``SMC(...)`` returns for them.
"""

from dpbook.smc import compiled_smc  # noqa: E402,F401,I001  (the engine: SMC.for_model)
from dpbook.smc.resample_move import SMC, History, Particles, smc_posterior

__all__ = ["SMC", "History", "Particles", "smc_posterior"]
