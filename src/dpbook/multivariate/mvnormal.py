"""The population family X ~ N_d(mu, Sigma) with its conjugate normal-inverse-Wishart
prior, the vector analogue of Section 6's normal model.

theta = (mu_1..mu_d, sigma_1..sigma_d, rho_ij for i < j in row order): the marginal
sds and the correlations, so that a summary reads in the data's units.  A latent value
is a vector: ``event_shape = (d,)``, and the one SMC (:class:`dpbook.smc.SMC`) keeps
(N, t, d) latent paths.  Algorithm 3's move of theta given x_{1:t} is an exact draw
from the conjugate posterior NIW(m_t, kappa_t, nu_t, Psi_t) (every particle at once).

``diagonal=True`` fixes rho at 0 and gives each component Section 6's independent
N x IG prior (:class:`dpbook.model.prior.LocationScalePrior`), moved by the normal
family's Gibbs step: then the likelihood factorises given the boxes, and the posterior
of each component is a one-dimensional one (the check of chapter 14).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass

import numpy as np
from numba import njit
from scipy import special

from dpbook.model.families.base import Family
from dpbook.model.families.normal import Normal
from dpbook.model.prior import LocationScalePrior, check_range


@njit(cache=True)
def _mean_scatter(x):
    """Each particle's mean xbar (N, d) and scatter sum_k (x_k - xbar)(x_k - xbar)^T of
    its latent path x (N, t, d): two passes, one particle at a time."""
    N, t, d = x.shape
    xbar = np.zeros((N, d))
    scatter = np.zeros((N, d, d))
    for i in range(N):
        for k in range(t):
            for j in range(d):
                xbar[i, j] += x[i, k, j]
        for j in range(d):
            xbar[i, j] /= t
        for k in range(t):
            for j in range(d):
                cj = x[i, k, j] - xbar[i, j]
                for m in range(j + 1):
                    scatter[i, j, m] += cj * (x[i, k, m] - xbar[i, m])
        for j in range(d):
            for m in range(j):
                scatter[i, m, j] = scatter[i, j, m]
    return xbar, scatter


def params_dim(n_par):
    """d from the length 2d + d(d-1)/2 of theta."""
    for d in range(1, 64):
        if 2 * d + d * (d - 1) // 2 == n_par:
            return d
    raise ValueError(f"theta must have 2d + d(d-1)/2 entries (5 for d = 2), got {n_par}")


def correlation(rho, d):
    """Correlation matrices (..., d, d) from rho (..., d(d-1)/2) in row order."""
    R = np.broadcast_to(np.eye(d), rho.shape[:-1] + (d, d)).copy()
    i, j = np.triu_indices(d, 1)
    R[..., i, j] = rho
    R[..., j, i] = rho
    return R


def mvn_score(x, theta, d=None):
    """grad_theta log N(x; mu, Sigma) in the (mu, sigma, rho) coordinates, shape
    (..., 2d + d(d-1)/2); x (..., d) broadcast against theta (..., n_par).

    With z = (x - mu)/sigma, R the correlation matrix, P = R^{-1}, u = P z:
    d/dmu_j = u_j/sigma_j, d/dsigma_j = (z_j u_j - 1)/sigma_j,
    d/drho_ij = u_i u_j - P_ij (tr(P dR) and z^T P dR P z with dR = E_ij + E_ji).
    This is grad log p_theta(x) of Fisher's identity in Algorithm 4.
    """
    x = np.asarray(x, float)
    th = np.asarray(theta, float)
    d = x.shape[-1] if d is None else d
    if params_dim(th.shape[-1]) != d:
        raise ValueError(f"theta's length {th.shape[-1]} does not fit x's d = {d}")
    mu, sd, rho = th[..., :d], th[..., d:2 * d], th[..., 2 * d:]
    z = (x - mu) / sd
    if d == 2:  # the closed form of R^{-1} (the case that runs in the SMC)
        r = rho[..., 0]
        q = 1.0 / (1.0 - r * r)
        u = np.stack([(z[..., 0] - r * z[..., 1]) * q, (z[..., 1] - r * z[..., 0]) * q], -1)
        cross = (u[..., 0] * u[..., 1] + r * q)[..., None]
    else:
        P = np.linalg.inv(correlation(rho, d))
        u = (P @ z[..., None])[..., 0]
        i, j = np.triu_indices(d, 1)
        cross = u[..., i] * u[..., j] - P[..., i, j]
    parts = (u / sd, (z * u - 1.0) / sd, cross)
    lead = np.broadcast_shapes(*(q.shape[:-1] for q in parts))
    return np.concatenate([np.broadcast_to(q, lead + q.shape[-1:]) for q in parts], -1)


@dataclass(frozen=True)
class NIWPrior:
    """mu | Sigma ~ N(m0, Sigma / kappa0), Sigma ~ IW(nu0, Psi0)."""

    m0: tuple
    kappa0: float
    nu0: float
    psi0: tuple  # rows of the d x d scale matrix

    def __post_init__(self):
        d = len(self.m0)
        psi = np.asarray(self.psi0, float)
        if psi.shape != (d, d) or not np.all(np.isfinite(psi)) or not np.all(np.isfinite(self.m0)):
            raise ValueError(f"the NIW prior needs a finite mean of length d and a d x d "
                             f"scale matrix, d = {d}")
        if not (self.kappa0 > 0 and self.nu0 > d - 1):
            raise ValueError(f"the NIW prior needs kappa0 > 0 and nu0 > d - 1 = {d - 1}, "
                             f"got {self.kappa0!r}, {self.nu0!r}")
        try:
            np.linalg.cholesky(psi)
        except np.linalg.LinAlgError:
            raise ValueError("the NIW prior's scale matrix Psi0 is not positive definite") from None

    def to_dict(self) -> dict:
        """A JSON-ready description: the kind and the hyperparameters."""
        return {"kind": "normal-inverse-Wishart: mu | Sigma ~ normal(m0, Sigma / kappa0), "
                        "Sigma ~ inverse-Wishart(nu0, psi0)", **asdict(self)}


def niw_from_ranges(ranges):
    """The default prior from a public plausible range [lo_j, hi_j] per component, as
    :func:`dpbook.model.prior.prior_from_range` in one dimension: m0 the midpoints,
    nu0 = d + 1 (each sigma_j^2 ~ IG(1, psi_jj / 2), Section 6's shape 1, and every
    correlation uniform on (-1, 1)), psi_jj / 2 = ((hi_j - lo_j)/20)^2, and kappa0 so
    that mu_j's prior sd at the prior's scale is the half-width."""
    ab = np.array([check_range(*rg) for rg in ranges], float)
    w = ab[:, 1] - ab[:, 0]
    d = len(w)
    return NIWPrior(m0=tuple(ab.mean(axis=1)), kappa0=0.01, nu0=d + 1.0,
                    psi0=tuple(map(tuple, np.diag(2 * (w / 20.0) ** 2))))


class MultivariateNormal(Family):
    """X ~ N_d(mu, Sigma), theta = (mu_j, sigma_j, rho_ij); see the module docstring.

    ``prior``: an :class:`NIWPrior` (default: from the range [-10, 10] per component,
    :func:`niw_from_ranges`) or, with ``diagonal=True``, a
    :class:`~dpbook.model.prior.LocationScalePrior` shared by the components (default
    Section 6's).  ``box_score``: the score sc(.) whose best standard box the adaptive
    policy moves (:func:`dpbook.online.methods.standard_box`)."""

    name = ""  # not a --family of the one-dimensional commands
    # the box policy's score sc(.) of the Fisher matrix (Section 5), recorded with a store
    options = {"box_score": (str, "logdet", "the box policy's score: trace-mu, trace or "
                                            "logdet (dpbook.multivariate.box_fisher)")}
    SCORES = ("trace-mu", "trace", "logdet")

    def __init__(self, d=2, prior=None, diagonal=False, box_score="logdet"):
        if d != int(d) or d < 2:
            raise ValueError(f"the dimension d must be an integer >= 2, got {d!r}")
        if box_score not in self.SCORES:
            raise ValueError(f"unknown box score {box_score!r}; choose one of "
                             f"{', '.join(self.SCORES)}")
        self.box_score = box_score
        self.d, self.diagonal = int(d), bool(diagonal)
        self.pairs = () if diagonal else tuple(itertools.combinations(range(self.d), 2))
        self.params = (tuple(f"mu{j + 1}" for j in range(self.d))
                       + tuple(f"sigma{j + 1}" for j in range(self.d))
                       + tuple(f"rho{i + 1}{j + 1}" for i, j in self.pairs))
        self.positive = (False,) * self.d + (True,) * self.d + (False,) * len(self.pairs)
        self.event_shape = (self.d,)
        if prior is None:
            prior = LocationScalePrior() if diagonal else niw_from_ranges([(-10, 10)] * self.d)
        kind = LocationScalePrior if diagonal else NIWPrior
        if not isinstance(prior, kind):
            raise ValueError(f"this model's prior is a {kind.__name__}")
        if not diagonal and len(prior.m0) != self.d:
            raise ValueError(f"the prior is for d = {len(prior.m0)}, the model has d = {self.d}")
        self.prior = prior
        self._normal = Normal().with_prior(prior) if diagonal else None

    def describe(self):
        return f"{'diagonal ' if self.diagonal else ''}normal in d = {self.d}"

    def __repr__(self):
        return f"<family {self.describe()}>"

    def check_theta_arrays(self, *theta):
        super().check_theta_arrays(*theta)
        for name, v in zip(self.params[2 * self.d:], theta[2 * self.d:]):
            if not np.all(np.abs(np.asarray(v, float)) < 1):
                raise ValueError(f"{name} must lie in (-1, 1)")

    # ------------------------------------------------------------------ (mu, Sigma)
    def split(self, *theta):
        """theta's arrays -> mu (..., d) and Sigma (..., d, d)."""
        d = self.d
        mu = np.stack(np.broadcast_arrays(*theta[:d]), axis=-1)
        sd = np.stack(np.broadcast_arrays(*theta[d:2 * d]), axis=-1)
        corr = np.broadcast_to(np.eye(d), sd.shape + (d,)).copy()
        for (i, j), rho in zip(self.pairs, theta[2 * d:]):
            corr[..., i, j] = corr[..., j, i] = rho
        return mu, corr * sd[..., :, None] * sd[..., None, :]

    def join(self, mu, sigma):
        """mu (N, d), Sigma (N, d, d) -> theta (N, dim)."""
        sd = np.sqrt(np.diagonal(sigma, axis1=-2, axis2=-1))
        rho = [sigma[:, i, j] / (sd[:, i] * sd[:, j]) for i, j in self.pairs]
        return np.column_stack([mu, sd] + rho)

    # ------------------------------------------------------------------ the model
    def logpdf(self, x, *theta):
        """log N_d(x; mu, Sigma), x (..., d) against theta's arrays (...)."""
        mu, sig = self.split(*theta)
        chol = np.linalg.cholesky(sig)
        z = np.linalg.solve(chol, (np.asarray(x, float) - mu)[..., None])[..., 0]
        logdet = np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)
        return -0.5 * (z * z).sum(-1) - logdet - 0.5 * self.d * math.log(2 * math.pi)

    def sample(self, rng: np.random.Generator, *theta, size=None):
        """x = mu + L z, z ~ N(0, I_d), L the Cholesky factor of Sigma; shape size + (d,)."""
        mu, sig = self.split(*theta)
        size = mu.shape[:-1] if size is None else tuple(np.atleast_1d(size))
        z = rng.standard_normal(size + (self.d,))
        chol = np.linalg.cholesky(sig)
        x = np.empty_like(z)
        for i in range(self.d):  # x_i = mu_i + sum_j L_ij z_j, elementwise (no batched matmul)
            x[..., i] = mu[..., i] + sum(chol[..., i, j] * z[..., j] for j in range(i + 1))
        return x

    def score(self, x, *theta):
        """grad_theta log p_theta(x) (:func:`mvn_score`), the last axis the parameters."""
        th = np.stack(np.broadcast_arrays(*theta), axis=-1)
        s = mvn_score(x, th, self.d)
        return tuple(s[..., k] for k in range(s.shape[-1]))

    def affine(self, theta):
        """x = mu + L z, z ~ N(0, I_d): each particle's mu (N, d) and the Cholesky factor L
        (N, d, d) of its Sigma (what :meth:`sample` computes; the SMC's compiled sweep
        makes its proposals with it)."""
        mu, sig = self.split(*np.asarray(theta, float).T)
        return np.ascontiguousarray(mu), np.linalg.cholesky(sig)

    # ------------------------------------------------------------------ the prior
    def sample_prior(self, rng: np.random.Generator, size):
        if self.diagonal:
            th = self._normal.sample_prior(rng, size * self.d).reshape(size, self.d, 2)
            return np.concatenate([th[..., 0], th[..., 1]], axis=1)
        p = self.prior
        m0 = np.broadcast_to(np.asarray(p.m0, float), (size, self.d))
        return self._niw_draw(rng, m0, np.full(size, p.kappa0), np.full(size, p.nu0),
                              np.broadcast_to(np.asarray(p.psi0, float), (size, self.d, self.d)))

    def log_prior(self, *theta):
        """log eta(theta) in the coordinates (mu, sigma, rho) (with the Jacobian of
        Sigma -> (sigma, rho): 2^d prod_j sigma_j^d for the NIW)."""
        if self.diagonal:
            return sum(self._normal.log_prior(m, s) for m, s in
                       zip(theta[:self.d], theta[self.d:2 * self.d]))
        p, d = self.prior, self.d
        mu, sig = self.split(*theta)
        psi = np.asarray(p.psi0, float)
        chol = np.linalg.cholesky(sig)
        logdet = 2 * np.log(np.diagonal(chol, axis1=-2, axis2=-1)).sum(-1)
        inv = np.linalg.inv(sig)
        z = np.linalg.solve(chol, (mu - np.asarray(p.m0))[..., None])[..., 0]
        lp = (0.5 * p.nu0 * np.linalg.slogdet(psi)[1] - 0.5 * p.nu0 * d * math.log(2)
              - special.multigammaln(0.5 * p.nu0, d) - 0.5 * (p.nu0 + d + 1) * logdet
              - 0.5 * np.einsum("ij,...ji->...", psi, inv))
        lp = (lp + 0.5 * d * math.log(p.kappa0 / (2 * math.pi)) - 0.5 * logdet
              - 0.5 * p.kappa0 * (z * z).sum(-1))
        sd = np.stack(np.broadcast_arrays(*theta[d:2 * d]), axis=-1)
        return lp + d * math.log(2.0) + d * np.log(sd).sum(-1)

    def gibbs(self, rng: np.random.Generator, theta, x):
        """Algorithm 3 step 4 as an exact conjugate draw of theta given the latent paths
        x (N, t, d): (mu, Sigma) ~ NIW(m_t, kappa_t, nu_t, Psi_t) with kappa_t = kappa0 +
        t, nu_t = nu0 + t, m_t = (kappa0 m0 + t xbar)/kappa_t, Psi_t = Psi0 + S +
        kappa0 t/kappa_t (xbar - m0)(xbar - m0)^T (S the scatter about xbar).  Diagonal:
        the normal family's Gibbs move per component."""
        N, t = x.shape[0], x.shape[1]
        if self.diagonal:
            d = self.d
            cols = [self._normal.gibbs(rng, theta[:, [j, d + j]], x[:, :, j]) for j in range(d)]
            return np.column_stack([c[:, 0] for c in cols] + [c[:, 1] for c in cols])
        p = self.prior
        m0 = np.asarray(p.m0, float)
        xbar, scatter = _mean_scatter(np.ascontiguousarray(x))
        dev = xbar - m0
        kt = p.kappa0 + t
        psi = (np.asarray(p.psi0, float) + scatter
               + (p.kappa0 * t / kt) * dev[:, :, None] * dev[:, None, :])
        mt = (p.kappa0 * m0 + t * xbar) / kt
        return self._niw_draw(rng, mt, np.full(N, kt), np.full(N, p.nu0 + t), psi)

    def _niw_draw(self, rng, m, kappa, nu, psi):
        """theta (N, dim) with Sigma ~ IW(nu, Psi) (Bartlett: Sigma = (U A^-T)(U A^-T)^T,
        Psi = U U^T, A lower triangular with A_jj^2 ~ chi2(nu - j), A_ij ~ N(0, 1)),
        then mu ~ N(m, Sigma / kappa)."""
        N, d = m.shape
        a = np.zeros((N, d, d))
        for j in range(d):
            a[:, j, j] = np.sqrt(rng.chisquare(nu - j))
            a[:, j, :j] = rng.standard_normal((N, j))
        ua = np.linalg.cholesky(psi) @ np.linalg.inv(a).transpose(0, 2, 1)
        sigma = ua @ ua.transpose(0, 2, 1)
        z = rng.standard_normal((N, d))
        mu = m + (np.linalg.cholesky(sigma) @ z[..., None])[..., 0] / np.sqrt(kappa)[:, None]
        return self.join(mu, sigma)

    def fixed_interval(self, *theta):
        """The non-adaptive box: [mu_j - 10 sigma_j, mu_j + 10 sigma_j] per component,
        Section 6's interval for each."""
        mu, sd = np.asarray(theta[:self.d], float), np.asarray(theta[self.d:2 * self.d], float)
        return mu - 10.0 * sd, mu + 10.0 * sd

    def default_theta(self):
        return (0.0,) * self.d + (1.0,) * self.d + (0.0,) * len(self.pairs)
