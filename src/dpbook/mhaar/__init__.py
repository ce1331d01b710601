"""MHAAR, the batch MCMC baseline of Section 6 (Alparslan & Yildirim 2022, Algorithm 8).

* :mod:`dpbook.mhaar.algorithm`: :func:`mhaar`, the one public sampler (any family and
  mechanism, numpy), and its result :class:`MHAARResult`;
* :mod:`dpbook.mhaar.normal_laplace`: the compiled backend for the normal family with the
  Laplace mechanism, which :func:`mhaar` runs for that model (:mod:`dpbook.backends`);
* :mod:`dpbook.mhaar.simd`: the explicit-vector LLVM helpers of that backend.
"""

from dpbook.mhaar.algorithm import MHAARResult, batch_means_se, effective_sample_size, mhaar

__all__ = ["mhaar", "MHAARResult", "batch_means_se", "effective_sample_size"]
