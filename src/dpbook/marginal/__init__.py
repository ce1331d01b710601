"""Posteriors for long streams (chapter 9): the marginal SMC on theta (IBIS), whose
cost grows about as n log n instead of the n^2 of Algorithms 2-3."""

from dpbook.marginal.ibis import MarginalSMC, marginal_posterior

__all__ = ["MarginalSMC", "marginal_posterior"]
