"""The score of one release compiled, as the backends hand it out (``backend("score",
...)``, :mod:`dpbook.backends`): the paper model's closed form
(:mod:`dpbook.likelihood.normal_laplace`) or the engine's quadrature for any other
location-scale family (:mod:`dpbook.likelihood.compiled_quadrature`)."""

from __future__ import annotations

import numpy as np


class CompiledScore:
    """grad_theta log p(y | m, c) of one release, theta = (m, c) (Fisher's identity,
    Appendix C), for a location-scale model.

    ``kernel(y, l, r, b, m, c, ctx)`` -> (ok, d/dm, d/dc) is a numba function (b the
    noise scale (r - l)/eps) that compiled loops call with ``ctx`` (its numeric state:
    a tuple of arrays and numbers); ok False: it cannot answer at this point and
    ``fallback(y, l, r, eps, m, c)`` (numpy, two numbers) does.  Calling the object
    does both, for one release from Python."""

    def __init__(self, kernel, ctx, fallback):
        self.kernel = kernel
        self.ctx = ctx
        self.fallback = fallback

    def __call__(self, y, l, r, eps, m, c) -> np.ndarray:
        ok, g_m, g_c = self.kernel(y, l, r, (r - l) / eps, m, c, self.ctx)
        if ok:
            return np.array([g_m, g_c])
        return np.asarray(self.fallback(y, l, r, eps, m, c), float).reshape(2)
