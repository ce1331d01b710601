"""Online estimation: Algorithm 1 and the online posteriors that it drives.

* :mod:`dpbook.online.algorithm`: Algorithm 1 (:func:`run_online`), the loop in which
  the curator (an online posterior and an interval policy) and the population meet only
  through the interval and the release;
* :mod:`dpbook.online.methods`: the online methods by name, defined once (the latent
  SMC of Algorithms 2-3, with subset rejuvenation, the marginal SMC and the online
  gradient), the adaptive policy each asks for, and the one warm-up;
* :mod:`dpbook.online.ibis`: the marginal SMC on theta for long streams (IBIS);
* :mod:`dpbook.online.gradient`: the online gradient estimate of Section 7;
* :mod:`dpbook.online.streams`: a stream of a user's own values (``dpbook stream``),
  timed runs and the limits of the misspecified model (chapters 9 and 10).

The names below are imported when first used, so that reading the method names
(:mod:`dpbook.online.methods`, as the command line does) loads no algorithm.
"""

import importlib

_HOME = {"OnlineRun": "algorithm", "run_online": "algorithm", "MarginalSMC": "ibis",
         "marginal_posterior": "ibis", "OnlineGradient": "gradient",
         "make_curator": "streams", "run_stream": "streams", "ONLINE_METHODS": "methods",
         "METHODS": "methods", "warm_up": "methods"}
__all__ = list(_HOME)


def __getattr__(name):
    if name in _HOME:
        return getattr(importlib.import_module(f"dpbook.online.{_HOME[name]}"), name)
    raise AttributeError(f"module 'dpbook.online' has no attribute {name!r}")
