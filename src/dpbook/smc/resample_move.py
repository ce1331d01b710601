"""Sequential Monte Carlo for the posterior (5): Algorithms 2 and 3 of the paper.

:class:`SMC` is the one public SMC, for any population family {P_theta} (a
:class:`dpbook.model.families.Family`) and any additive mechanism (Laplace or Gaussian
noise; Section 7: "all that changes throughout is the conditional distribution of Y_t
given x_t, theta, s_t, eps").  It is the resample-move SMC of Gilks & Berzuini (2001),
written here with numpy, vectorised over particles and time.  For the paper's model
(normal family, Laplace mechanism) ``SMC(...)`` returns the compiled backend
:class:`dpbook.smc.paper_kernel.NormalLaplaceSMC`, a subclass with the same interface
and the same algorithm in one fused kernel; for another location-scale family whose
functions compile, :class:`dpbook.smc.compiled_smc.CompiledSMC` (:meth:`SMC.for_model`).

The estimator sees only the releases (y_t, l_t, r_t) and eps: it never touches the
population.
"""

from __future__ import annotations

import math

import numpy as np

from dpbook.diagnostics import check_reliability
from dpbook.model.families import as_family
from dpbook.model.mechanisms import KIND, check_mechanism, clip, get_mechanism
from dpbook.smc.resampling import ess, systematic, thompson_index
from dpbook.smc.sweep import (
    PARALLEL_MIN,
    log_weights,
    log_weights_vec,
    mh_sweep_parallel,
    mh_sweep_serial,
    mh_sweep_vec,
)
from dpbook.validation import (
    check_count,
    check_eps,
    check_finite,
    check_memory,
    check_observations,
    check_release,
    check_seed,
)

# Optimal random-walk scaling for a d-dimensional Gaussian target (Roberts, Gelman &
# Gilks 1997), applied to the particles' covariance as in Chopin (2002).
_RW_SCALE2 = 2.38**2
_INFO_SAMPLE = 128  # particles averaged for the information matrix of the RW proposal


class History:
    """What :class:`SMC` records: for every parameter p, ``mean_<p>`` and ``sd_<p>``
    every step and ``snapshot_<p>`` (particles) every ``every`` steps; and ``ess``,
    ``acceptance`` (x moves), ``theta_acceptance``, ``snapshot_t``, ``snapshot_w``."""

    def __init__(self, params):
        self.params = tuple(params)
        for p in self.params:
            setattr(self, f"mean_{p}", [])
            setattr(self, f"sd_{p}", [])
            setattr(self, f"snapshot_{p}", [])
        self.ess = []
        self.acceptance = []
        self.theta_acceptance = []
        self.snapshot_t = []
        self.snapshot_w = []

    def __repr__(self):
        return f"<History {self.params}, {len(self.ess)} steps>"

    def snapshot(self, t):
        """The weighted particles recorded at time t, as a :class:`Particles`."""
        if t not in self.snapshot_t:
            raise ValueError(f"no snapshot at t = {t}; snapshots: {self.snapshot_t}")
        j = self.snapshot_t.index(t)
        theta = np.column_stack([getattr(self, f"snapshot_{p}")[j] for p in self.params])
        return Particles(theta, self.snapshot_w[j], self.params)


def check_subset(subset):
    """None (move every x_k, Algorithm 3) or the number m >= 1 of latent values moved per
    step (subset rejuvenation, Section 4); ValueError otherwise."""
    if subset is None:
        return None
    return check_count("subset (latent values moved per step)", subset, 1)


def subset_draw(rng, t, m):
    """The m indices k < t whose x_k are moved at time t: a uniform random subset, drawn
    independently of the particles (so each move keeps the posterior invariant), sorted."""
    return np.sort(rng.choice(t, m, replace=False))


def check_smc_memory(n_particles, n_max, size=1):
    """ValueError before allocating an SMC that cannot fit: it keeps the latent paths
    x_{1:t} of every particle twice (before and after the move), ``size`` numbers each."""
    check_memory(f"an SMC with {n_particles} particles for {n_max} individuals",
                 8 * (size + 1) * n_particles * n_max + 400 * n_particles + 64 * n_max)


class ParticlePosterior:
    """What a weighted-particle posterior of theta offers the interval policies and the
    summaries: ``thompson_draw``, ``quantile`` and ``summary`` from ``theta`` (N, d),
    the normalised weights ``w``, ``params`` and ``history`` (:class:`SMC`, and the
    marginal SMC of :mod:`dpbook.online.ibis`)."""

    def _columns(self):
        """The particles' parameters, one (N,) array per parameter."""
        return [self.theta[:, j] for j in range(len(self.params))]

    def thompson_draw(self, rng: np.random.Generator):
        """Step 1 of Section 5.1: theta^(i) with probability w^(i), as a tuple of floats."""
        i = thompson_index(self.w, rng)
        return tuple(float(v) for v in self.theta[i])

    def quantile(self, q):
        """Marginal quantiles of the weighted particles (the smallest particle value whose
        cumulative weight reaches q): shape (d,) for a scalar q, (len(q), d) otherwise."""
        qa = np.asarray(q, dtype=float)
        if not np.all((qa >= 0) & (qa <= 1)):
            raise ValueError("quantile levels must lie in [0, 1]")
        cols = []
        for col in self._columns():
            order = np.argsort(col, kind="stable")
            cw = np.cumsum(self.w[order])
            idx = np.searchsorted(cw, qa.ravel() * cw[-1], side="left")
            cols.append(col[order][np.minimum(idx, len(col) - 1)])
        out = np.stack(cols, axis=-1)
        return out[0] if qa.ndim == 0 else out.reshape(qa.shape + (len(cols),))

    def _moments(self):
        """Weighted posterior means and sds of the parameters, (d,) arrays."""
        w, th = self.w, self.theta
        m = w @ th
        return m, np.sqrt(np.maximum(w @ (th - m) ** 2, 0.0))

    def summary(self):
        """{param: {"mean", "sd"}} of the current weighted particles."""
        h = self.history
        return {p: {"mean": getattr(h, f"mean_{p}")[-1], "sd": getattr(h, f"sd_{p}")[-1]}
                for p in self.params}


class Particles(ParticlePosterior):
    """A weighted particle cloud of theta (a snapshot of an SMC, say): ``quantile``,
    ``mean``, ``sd``, ``thompson_draw``."""

    def __init__(self, theta, w, params):
        self.theta = np.asarray(theta, float).reshape(len(w), len(params))
        w = np.asarray(w, float)
        self.w, self.params = w / w.sum(), tuple(params)

    def mean(self):
        return self._moments()[0]

    def sd(self):
        return self._moments()[1]

    def summary(self):
        return {p: {"mean": float(m), "sd": float(v)} for p, m, v in zip(self.params,
                                                                           *self._moments())}

    def frame(self):
        """The cloud in long form: one row per particle and parameter (param, value,
        weight)."""
        import pandas as pd

        return pd.concat([pd.DataFrame({"param": p, "value": self.theta[:, j], "weight": self.w})
                          for j, p in enumerate(self.params)], ignore_index=True)


class SMC(ParticlePosterior):
    """Online posterior (5) of theta given (y_t, l_t, r_t), t = 1, 2, ..., any family.

    One :meth:`update` is Algorithm 2 at time t:

    1. systematic resampling with the weights of time t-1 (not at t = 0);
    2. rejuvenation with Algorithm 3, targeting the posterior at time t-1:
       (i) for every k < t an independent MH move of x_k with proposal x'_k ~ P_theta,
       so the acceptance ratio is the mechanism's likelihood ratio
       g_b(y_k - T(x'_k)) / g_b(y_k - T(x_k)), b = (r_k - l_k)/eps;
       (ii) a move of theta with invariant law p(theta | x_{1:t-1}), proportional to
       eta(theta) prod_k p_theta(x_k): ``family.gibbs`` where it gives a conjugate
       draw, else random-walk MH (step 4 of Algorithm 3) in unconstrained coordinates
       (log theta_j for the family's positive parameters, with the log-Jacobian).
       The random walk is Gaussian with covariance (2.38^2/d) Sigma computed from the
       weighted particles of time t-1 (adaptive, in the style of Chopin 2002):
       Sigma = (C^-1 + J)^-1 with C their weighted covariance (in those coordinates)
       and J the weighted average of their latent paths' empirical Fisher information
       (see ``_rw_chol``).  C alone, the plain Chopin choice, is the spread of the
       *marginal* posterior, far wider than the move's target p(theta | x) when the
       noise dominates (acceptance ~0.2% measured at eps = 1, against ~40% with J).
       Sigma depends only on the past and is fixed within the time step, so every
       move is a valid MH move for the target; ``n_theta_moves`` moves are made (of
       either kind);
    3. propagation x_t ~ P_theta;
    4. weighting w_t proportional to g_b(y_t - T(x_t)), b = (r_t - l_t)/eps (eq. 5).

    A family with ``event_shape`` (d,) (:mod:`dpbook.multivariate`) has vector latent
    values released through boxes: T clips each component, g_b is the product of the
    components' noise densities with b = Delta / eps (Delta the box's sensitivity,
    :func:`dpbook.multivariate.release.box_scale`), and the same four steps run on
    (N, t, d) paths (Section 3: "the truncation approach can be applied to each
    component").

    Parameters
    ----------
    eps : privacy parameter.
    family : a family name, a :class:`dpbook.model.families.Family`, or None (normal).
    mechanism : 'laplace' or 'gaussian' (or a Mechanism object).
    n_particles : N.
    n_max : capacity of the latent paths (number of observations that will come).
    seed : int or numpy SeedSequence of the numpy Generator that draws everything, in
        a fixed order, so the same seed gives bit-identical output.
    every : particles are recorded every ``every``-th step.
    n_theta_moves : theta moves per time step.
    generic : True runs this numpy code even where a compiled subclass takes the model
        (to check one against the other).
    subset : None (default) moves every x_k, k < t, as Algorithm 3 does; an integer m
        moves a uniform random subset of m of them at each step (the others are kept):
        the subset rejuvenation that Section 4 suggests: O(N m) MH moves per step
        instead of O(N t) (the paths are still copied from the ancestors after
        resampling, an O(N t) memory pass).  Any m >= t is the full algorithm, bit for
        bit.

    The result of ``SMC(...)`` is always an :class:`SMC`: this class, or the compiled
    subclass that takes the family and mechanism (:meth:`for_model`).

    Latent paths are an (N, n_max) array; the MH moves of all x_k, k < t, of all
    particles are one vectorised step (cost O(N t) per update, O(N n^2) in all): the
    proposals and Exp(1) variates are numpy draws; the accept/reject sweep with the
    resampling gather is one compiled loop for the shipped mechanisms, numpy on
    ``Mechanism.logpdf`` for any other (the same algorithm and the same draws).
    """

    # the compiled subclasses (those defining ``takes``), asked in this order: kernels
    # for some models first, then those marked ``general`` (the engine)
    _compiled = []
    general = False

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if "takes" in vars(cls):
            SMC._compiled.append(cls)
            SMC._compiled.sort(key=lambda c: c.general)  # stable: else as defined

    @classmethod
    def for_model(cls, family=None, mechanism="laplace"):
        """The class ``SMC(eps, family, mechanism)`` is: the first compiled subclass whose
        ``takes(family, mechanism)`` is true, else SMC.  Each asks the family what it
        inherits (the class that defines its density, quantile or Gibbs move), so a
        subclass of a family keeps the family's compiled paths unless it overrides them."""
        fam = as_family(family)
        return next((c for c in SMC._compiled if c.takes(fam, mechanism)), SMC)

    def __new__(cls, eps=None, family=None, mechanism="laplace", *args, generic=False, **kw):
        # copy and pickle call __new__ without arguments and keep the class
        if cls is SMC and eps is not None and not generic:
            cls = SMC.for_model(family, mechanism)
        return super().__new__(cls)

    def __init__(self, eps, family=None, mechanism="laplace", n_particles=1000, n_max=1000,
                 seed=0, every=20, n_theta_moves=1, generic=False, subset=None):
        self.eps = check_eps(eps)
        self.subset = check_subset(subset)
        self.family = as_family(family)
        self.mechanism = check_mechanism(mechanism)
        self._mech = get_mechanism(mechanism)
        self.params = tuple(self.family.params)
        self.N = check_count("number of particles", n_particles, 2)
        self.n_max = check_count("n_max", n_max, 1)
        self.every = check_count("every", every, 1)
        self.n_theta_moves = check_count("n_theta_moves", n_theta_moves, 1)
        # a latent value of shape event_shape: () for the paper's families, (d,) for a
        # vector (dpbook.multivariate), whose release is its box's
        self._shape = tuple(getattr(self.family, "event_shape", ()))
        check_smc_memory(self.N, self.n_max, math.prod(self._shape))
        self._seed = check_seed(seed)
        self._rng = np.random.default_rng(seed)
        self._pos = np.array(self.family.positive, dtype=bool)
        self.w = np.full(self.N, 1.0 / self.N)
        self._kind = KIND.get(type(self._mech), -1)
        if self._shape and not hasattr(self.family, "affine"):
            self._kind = -1  # a vector's compiled sweep makes its proposals x = mu + L z
        self._invb = np.ones(self.n_max)
        self._lnorm = np.zeros(self.n_max)  # log g_b(0)
        self._y = np.zeros((self.n_max,) + self._shape)
        self._l = np.zeros((self.n_max,) + self._shape)
        self._r = np.zeros((self.n_max,) + self._shape)
        self._b = np.ones(self.n_max)
        self.t = 0
        self.history = History(self.params)
        self._allocate()

    def _allocate(self):
        """The initial particles theta ~ eta and the latent paths (their log-likelihoods
        log g_b(y_k - T(x_k)) beside them); two buffers each, so that resampling and the
        MH sweep write the new paths without a gather copy."""
        N, d = self.N, self.family.dim
        self.theta = np.asarray(self.family.sample_prior(self._rng, N), float).reshape(N, d)
        self._x = [np.zeros((N, self.n_max) + self._shape) for _ in range(2)]
        self._ll = [np.zeros((N, self.n_max)), np.zeros((N, self.n_max))]

    # ------------------------------------------------------------------ helpers
    def paths(self):
        """The latent paths x_{1:t} of the N particles as an (N, t) array (a copy)."""
        return self._x[0][:, : self.t].copy()

    def releases(self):
        """(y, l, r) of the t releases seen so far (copies)."""
        t = self.t
        return self._y[:t].copy(), self._l[:t].copy(), self._r[:t].copy()

    def _loglik(self, x, k0, k1):
        """log g_b(y_k - T(x_k)) for the columns k0..k1-1 of x (the noise factor of (5))."""
        return self._noise(x, slice(k0, k1))

    def _noise(self, x, k):
        """log g_b(y_k - T(x_k)) for the releases k (a slice or indices), summed over a
        vector's components (independent noise of one scale b_k)."""
        b = self._b[k]
        if self._shape:
            b = b.reshape(b.shape + (1,) * len(self._shape))
        out = self._mech.logpdf(self._y[k] - clip(x, self._l[k], self._r[k]), b)
        return out.sum(axis=tuple(range(-len(self._shape), 0))) if self._shape else out

    def _to_free(self, theta):
        phi = theta.copy()
        with np.errstate(divide="ignore", invalid="ignore"):
            phi[:, self._pos] = np.log(theta[:, self._pos])
        return phi

    def _from_free(self, phi):
        theta = phi.copy()
        with np.errstate(over="ignore"):
            theta[:, self._pos] = np.exp(phi[:, self._pos])
        return theta

    def _rw_chol(self, theta, w, x):
        """Cholesky factor of the random-walk covariance (2.38^2/d) Sigma_rw, computed from
        the weighted particles of time t-1 (before resampling), in unconstrained phi.

        Sigma_rw = (C^-1 + J)^-1: C is the weighted covariance of the particles (the
        marginal posterior spread, Chopin 2002) and J the weighted average over particles
        of the empirical Fisher information sum_k s_k s_k^T of their latent paths
        (s_k = grad_phi log p_theta(x_k)).  The move's target is the conditional
        p(theta | x_{1:t-1}), which is much narrower than the marginal posterior when
        the noise dominates; J brings the scale down to it, while C keeps the matrix
        well defined for small t (J has rank <= t).  J is averaged over _INFO_SAMPLE
        particles picked deterministically at evenly spaced points of the weights' cdf
        (a stratified sample of the weighted particles: no random draw, and a cost
        independent of N).
        """
        phi = self._to_free(theta)
        d = phi.shape[1]
        c = phi - w @ phi
        cov = (c * w[:, None]).T @ c
        cov = cov + 1e-12 * (1.0 + np.abs(np.diag(cov)).max()) * np.eye(d)
        m = min(self.N, _INFO_SAMPLE)
        idx = np.minimum(np.searchsorted(np.cumsum(w), (np.arange(m) + 0.5) / m), self.N - 1)
        info = self._information(theta[idx], x[idx])
        prec = np.linalg.inv(cov) + info
        sig = np.linalg.inv(prec) * (_RW_SCALE2 / d)
        sig = 0.5 * (sig + sig.T)
        ridge = 1e-12 * (1.0 + np.abs(np.diag(sig)).max())
        for _ in range(12):
            try:
                return np.linalg.cholesky(sig + ridge * np.eye(d))
            except np.linalg.LinAlgError:
                ridge *= 100.0
        return math.sqrt(ridge) * np.eye(d)

    def _information(self, th, x):
        """J of :meth:`_rw_chol`: the average over the rows of ``th`` (m, d) of
        sum_k s_k s_k^T, s_k = grad_phi log p_theta(x_k) for the latent row x[i]
        (non-finite scores count as 0)."""
        fam = self.family
        d = th.shape[1]
        with np.errstate(all="ignore"):
            s = np.stack([np.broadcast_to(g, x.shape) for g in
                          fam.score(x, *fam.theta_args(th))])
            s = np.where(self._pos[:, None, None], s * th.T[:, :, None], s)
        s = np.where(np.isfinite(s), s, 0.0)
        info = np.empty((d, d))
        for a in range(d):
            for b in range(a + 1):
                info[a, b] = info[b, a] = (s[a] * s[b]).sum() / th.shape[0]
        return info

    def _log_target(self, theta, phi, x):
        """log eta(theta) + sum_k log p_theta(x_k) + log-Jacobian, in unconstrained phi."""
        fam = self.family
        with np.errstate(all="ignore"):
            lp = np.asarray(fam.log_prior(*theta.T), float)
            if x.shape[1]:
                # proposals outside the parameter space (a scale that under- or
                # overflowed) have target 0; the family is asked only about the others
                ok = np.isfinite(theta).all(axis=1) & (theta[:, self._pos] > 0).all(axis=1)
                safe = np.where(ok[:, None], theta, self.theta) if not ok.all() else theta
                lp = lp + np.where(ok, fam.logpdf(x, *fam.theta_args(safe)).sum(axis=1),
                                   -np.inf)
            lp = lp + phi[:, self._pos].sum(axis=1)
        return np.where(np.isnan(lp), -np.inf, lp)

    def _move_theta(self, x, prev):
        """Algorithm 3 step 4: n_theta_moves moves of theta given x; acceptance rate.
        ``prev``: (theta, w, x) of time t-1, for the random walk's covariance."""
        N = self.N
        acc = 0.0
        chol = cur = None
        for _ in range(self.n_theta_moves):
            new = self.family.gibbs(self._rng, self.theta, x)
            if new is not None:
                self.theta = np.asarray(new, float).reshape(self.theta.shape)
                acc += 1.0
                cur = None
                continue
            if chol is None:  # only families without a Gibbs move need it
                chol = self._rw_chol(*prev)
            phi = self._to_free(self.theta)
            if cur is None:
                cur = self._log_target(self.theta, phi, x)
            phip = phi + self._rng.standard_normal(phi.shape) @ chol.T
            thp = self._from_free(phip)
            prop = self._log_target(thp, phip, x)
            e = self._rng.standard_exponential(N)
            ok = prop - cur > -e  # u < exp(prop - cur) with u = exp(-e)
            self.theta[ok] = thp[ok]
            cur = np.where(ok, prop, cur)
            acc += ok.mean()
        return acc / self.n_theta_moves

    # ------------------------------------------------------------------ Algorithm 2
    def update(self, y, l, r):
        """Algorithm 2 at time t: absorb one released value y with its interval [l, r]."""
        t = self.t
        if self._shape:
            from dpbook.multivariate.release import box_scale, check_box

            if t >= self.n_max:
                raise ValueError(f"SMC was built for n_max={self.n_max} observations")
            l, r = check_box(l, r, *self._shape)
            y = check_finite("y", y).reshape(self._shape)
            b = box_scale(l, r, self.eps, self._mech)
        else:
            y, l, r = check_release(y, l, r, t, self.n_max)
            b = (r - l) / self.eps
        self._y[t], self._l[t], self._r[t] = y, l, r
        self._b[t] = b
        self._invb[t] = 1.0 / b
        self._lnorm[t] = float(self._mech.logpdf(0.0, b))
        fam, rng, N = self.family, self._rng, self.N
        x_acc = th_acc = float("nan")
        if t > 0:
            prev = (self.theta, self.w, self._x[0][:, :t])  # the sweep leaves them intact
            # 1. resampling
            anc = systematic(rng, self.w)
            self.theta = self.theta[anc]
            # 2. rejuvenation (Algorithm 3): independent MH of every x_k, k < t (or of a
            # subset of them), with proposal P_theta, which cancels: the ratio is the
            # likelihood ratio only ...
            x_old, x_new = self._x
            ll_old, ll_new = self._ll
            if self.subset is not None and self.subset < t:
                n_acc, moved = self._move_subset(anc, subset_draw(rng, t, self.subset))
            else:
                n_acc, moved = self._move_all(anc), t  # Algorithm 3 as written
            self._x = [x_new, x_old]
            self._ll = [ll_new, ll_old]
            x_acc = n_acc / (N * moved)
            # ... then theta given x_{1:t-1}
            th_acc = float(self._move_theta(x_new[:, :t], prev))
        # 3. propagation x_t ~ P_theta
        xt = np.asarray(fam.sample(rng, *fam.theta_args(self.theta), size=(N, 1)), float)
        xt = np.ascontiguousarray(xt[:, 0])
        self._x[0][:, t] = xt
        # 4. weighting
        if self._kind >= 0:
            logw = np.empty(N)
            (log_weights_vec if self._shape else log_weights)(
                self._kind, xt, y, l, r, self._invb[t], self._lnorm[t], logw)
        else:
            logw = self._loglik(xt[:, None], t, t + 1)[:, 0]
        self._ll[0][:, t] = logw
        w = np.exp(logw - logw.max())
        self.w = w / w.sum()
        self.t = t + 1
        self._record(t, x_acc, th_acc)

    def _move_all(self, anc):
        """Step 2(i) for every x_k, k < t, from the ancestors ``anc``: accepted moves."""
        fam, rng, N, t = self.family, self._rng, self.N, self.t
        (x_old, x_new), (ll_old, ll_new) = self._x, self._ll
        if self._kind >= 0 and self._shape:
            # a vector x = mu + L z (the family's affine map): the proposals are made in
            # the compiled sweep from the same standard normals its sample would draw
            mu, chol = fam.affine(self.theta)
            z = rng.standard_normal((N, t) + self._shape)
            e = rng.standard_exponential((N, t))
            return mh_sweep_vec(self._kind, anc, x_old, ll_old, x_new, ll_new, mu, chol, z, e,
                                self._y, self._l, self._r, self._invb, self._lnorm)
        xp = np.asarray(fam.sample(rng, *fam.theta_args(self.theta), size=(N, t)), float)
        e = rng.standard_exponential((N, t))
        if self._kind >= 0 and not self._shape:
            sweep = mh_sweep_parallel if N * t >= PARALLEL_MIN else mh_sweep_serial
            return sweep(self._kind, anc, x_old, ll_old, x_new, ll_new,
                         np.ascontiguousarray(xp), e, self._y, self._l, self._r,
                         self._invb, self._lnorm)
        x, ll = x_old[anc, :t], ll_old[anc, :t]
        llp = self._loglik(xp, 0, t)
        ok = llp - ll > -e  # u < exp(llp - ll) with u = exp(-e)
        x_new[:, :t] = np.where(self._each(ok), xp, x)
        ll_new[:, :t] = np.where(ok, llp, ll)
        return int(ok.sum())

    def _move_subset(self, anc, ks):
        """Step 2(i) for the x_k with k in ``ks`` only (subset rejuvenation); the other
        x_k are copied from the ancestors.  Returns (accepted moves, len(ks))."""
        fam, rng, N, t = self.family, self._rng, self.N, self.t
        xp = np.asarray(fam.sample(rng, *fam.theta_args(self.theta), size=(N, ks.size)),
                        float)
        e = rng.standard_exponential((N, ks.size))
        (x_old, x_new), (ll_old, ll_new) = self._x, self._ll
        x, ll = x_old[anc, :t], ll_old[anc, :t]
        llp = self._noise(xp, ks)
        ok = llp - ll[:, ks] > -e
        x[:, ks] = np.where(self._each(ok), xp, x[:, ks])
        ll[:, ks] = np.where(ok, llp, ll[:, ks])
        x_new[:, :t], ll_new[:, :t] = x, ll
        return int(ok.sum()), ks.size

    def _each(self, ok):
        """An (N, t) decision broadcast over a latent value's components."""
        return ok.reshape(ok.shape + (1,) * len(self._shape))

    def _record(self, t, x_acc, th_acc):
        h, w = self.history, self.w
        m, sd = self._moments()
        for j, p in enumerate(self.params):
            getattr(h, f"mean_{p}").append(float(m[j]))
            getattr(h, f"sd_{p}").append(float(sd[j]))
        h.ess.append(ess(w))
        h.acceptance.append(x_acc)
        h.theta_acceptance.append(th_acc)
        if (t + 1) % self.every == 0:
            h.snapshot_t.append(t + 1)
            for p, col in zip(self.params, self._columns()):
                getattr(h, f"snapshot_{p}").append(col.copy())
            h.snapshot_w.append(w.copy())

    def __repr__(self):
        return (f"<{type(self).__name__} {self.family.describe()}, {self.mechanism} mechanism, "
                f"N={self.N}, t={self.t}>")


def smc_posterior(y, l, r, eps, family=None, mechanism="laplace", n_particles=1000, seed=0,
                  generic=False, subset=None, progress=None):
    """Run the SMC over a released data set (y, l, r) in time order; return the SMC
    (``subset``: latent values moved per step, see :class:`SMC`; ``progress``: an
    object whose ``update(1)`` is called after each release, a tqdm bar say)."""
    y, l, r = check_observations(y, l, r)
    smc = SMC(eps, family, mechanism, n_particles=n_particles, n_max=len(y), seed=seed,
              generic=generic, subset=subset)
    for t in range(len(y)):
        smc.update(y[t], l[t], r[t])
        if progress is not None:
            progress.update(1)
    check_reliability(smc, "the SMC", stacklevel=3)
    check_particles(smc, y, l, r, "the SMC", stacklevel=3)
    return smc


def check_particles(post, y, l, r, method, stacklevel=2):
    """``post.lost``: None, or where the weighted particles of ``post`` (an SMC or a
    marginal SMC after the releases y, l, r) stayed when they have not found the
    posterior (:func:`dpbook.diagnostics.check_found`, which warns in one line): for
    example particles drawn from the prior that no release told apart, every release
    clipped at the same end for all of them."""
    from dpbook.diagnostics import check_found

    if getattr(post.family, "event_shape", ()):  # its reference points are scalar
        post.lost = None
        return None
    post.lost = check_found(method, post.quantile(0.5), y, l, r, post.eps, post.family,
                            post.mechanism, stacklevel=stacklevel + 1)
    return post.lost
