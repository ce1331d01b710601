"""Sequential Monte Carlo for the posterior (5): Algorithms 2 and 3 (Section 4).

* :mod:`dpbook.smc.resample_move`: :class:`SMC`, the one public SMC (any family and
  mechanism), and :func:`smc_posterior` for a whole released data set;
* :mod:`dpbook.smc.resampling`: systematic resampling and the ESS;
* :mod:`dpbook.smc.sweep`: the compiled MH sweep of Algorithm 3 for the shipped mechanisms;
* :mod:`dpbook.smc.paper_kernel`: the compiled backend for the normal family with the
  Laplace mechanism, which ``SMC(...)`` returns for that model (:mod:`dpbook.backends`).
"""

from dpbook.smc.resample_move import SMC, History, Particles, smc_posterior

__all__ = ["SMC", "History", "Particles", "smc_posterior"]
