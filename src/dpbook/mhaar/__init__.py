"""MHAAR, the batch MCMC baseline of Section 6 (Alparslan & Yildirim 2022, Algorithm 8).

* :mod:`dpbook.mhaar.sampler`: :func:`mhaar`, the one public sampler, and its result
  :class:`MHAARResult`;
* :mod:`dpbook.mhaar.compiled_chain`: the sampler for any family and mechanism, compiled for a
  location-scale family whose ``base_ppf`` compiles;
* :mod:`dpbook.mhaar.paper_chain`: the paper's kernel (normal family, Laplace
  mechanism) and :mod:`dpbook.mhaar.simd`, its explicit-vector LLVM helpers.
"""

from dpbook.mhaar.sampler import MHAARResult, batch_means_se, effective_sample_size, mhaar

__all__ = ["mhaar", "MHAARResult", "batch_means_se", "effective_sample_size"]
