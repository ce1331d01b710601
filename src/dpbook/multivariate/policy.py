"""The box policy: Section 5.1's Thompson sampling for a vector (issue 54)."""

from __future__ import annotations

import numpy as np

from dpbook.multivariate.release import check_box
from dpbook.privacy.policies import Policy


class BoxPolicy(Policy):
    """Thompson sampling and eq. (11) per component: theta ~ the posterior (Step 1 of
    Section 5.1), then l_j = mu_j + a_j sigma_j, r_j = mu_j + b_j sigma_j, (a, b) the
    standard box (:func:`dpbook.multivariate.box_fisher.best_box`).  This moves and scales
    each component as Theorem 3 does one; it is exact for a shift and a common scale,
    and an approximation otherwise (chapter 14 measures what it loses)."""

    name = "adaptive"

    def __init__(self, a, b):
        self.a, self.b = check_box(a, b)

    def next_interval(self, posterior, rng: np.random.Generator):
        th = np.asarray(posterior.thompson_draw(rng), float)
        d = self.a.size
        mu, sd = th[:d], th[d:2 * d]
        return mu + self.a * sd, mu + self.b * sd
