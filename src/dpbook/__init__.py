"""dpbook: differentially private online Bayesian estimation with adaptive truncation.

A faithful, fast implementation of S. Yildirim (2023), "Differentially private
online Bayesian estimation with adaptive truncation" (the paper).
"""

__version__ = "0.1.0"
