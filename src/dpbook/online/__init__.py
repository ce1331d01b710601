"""Online estimation: Algorithm 1 and the online posteriors that it drives.

* :mod:`dpbook.online.algorithm1`: Algorithm 1 (:func:`run_online`), the loop in which
  the curator (an online posterior and an interval policy) and the population meet only
  through the interval and the release;
* :mod:`dpbook.online.methods`: the online methods by name, defined once (the latent
  SMC of Algorithms 2-3, with subset rejuvenation, the marginal SMC and the online
  gradient), the adaptive policy each asks for, and the one warm-up;
* :mod:`dpbook.online.ibis`: the marginal SMC on theta for long streams (IBIS);
* :mod:`dpbook.online.gradient`: the online gradient estimate of Section 7;
* :mod:`dpbook.online.streams`: a stream of a user's own values (``dpbook stream``),
  timed runs and the limits of the misspecified model (chapters 9 and 10);
* :mod:`dpbook.online.curator_state`: a deployment's curator kept in a SQLite file.
"""

from dpbook.online.algorithm1 import OnlineRun, run_online
from dpbook.online.gradient import OnlineGradient
from dpbook.online.ibis import MarginalSMC, marginal_posterior
from dpbook.online.methods import METHODS, ONLINE_METHODS, warm_up
from dpbook.online.streams import make_curator, run_stream

__all__ = ["OnlineRun", "run_online", "MarginalSMC", "marginal_posterior",
           "OnlineGradient", "METHODS", "ONLINE_METHODS", "warm_up", "make_curator",
           "run_stream"]
