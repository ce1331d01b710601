"""The Fisher information of one released value and the choice of interval (Section 5).

* :func:`fisher_exact` (eq. 7) and :func:`fisher_information`:
  :mod:`dpbook.fisher.exact_information`;
* :func:`fisher_mc` (eq. 8 with Algorithm 4), one engine for every family and
  mechanism: :mod:`dpbook.fisher.mc` (the paper model's own draws and closed-form
  score: :mod:`dpbook.fisher.normal_mc`);
* :func:`fisher_grid`, :func:`best_interval` (eq. 9, 11-13) and
  :class:`ThetaGridIntervals`: :mod:`dpbook.fisher.truncation`;
* result types :class:`FisherEstimate`, :class:`FisherGrid`: :mod:`dpbook.fisher.estimates`.
"""

from dpbook.fisher.estimates import FisherEstimate, FisherGrid
from dpbook.fisher.exact_information import fisher_exact, fisher_information
from dpbook.fisher.mc import fisher_mc
from dpbook.fisher.truncation import ThetaGridIntervals, best_interval, fisher_grid

__all__ = ["FisherEstimate", "FisherGrid", "fisher_exact", "fisher_information", "fisher_mc",
           "fisher_grid", "best_interval", "ThetaGridIntervals"]
