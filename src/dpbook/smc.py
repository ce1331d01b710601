"""Sequential Monte Carlo for the posterior (5): Algorithms 2 and 3 of the paper.

Resample-move SMC (Gilks & Berzuini, 2001) for the normal model of Section 6:
X ~ N(mu, sigma^2), mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1), released values
y_t = T_{l_t}^{r_t}(x_t) + (r_t - l_t) V_t, V_t ~ Laplace(1/eps).  Each particle
carries theta = (mu, sigma) and its own latent path x_{1:t}.

One call of :meth:`SMC.update` is Algorithm 2 at time t:

1. resampling (systematic) according to the weights of time t-1;
2. rejuvenation with Algorithm 3: an independent Metropolis-Hastings move on every
   x_k, k < t, proposing from P_theta so that the acceptance ratio is the Laplace
   likelihood ratio, followed by a Gibbs move on theta (mu | sigma, x then
   sigma^2 | mu, x; both conditionals are conjugate), which is an MH move with
   acceptance probability one;
3. propagation x_t ~ P_theta;
4. weighting w_t proportional to Laplace(y_t - T(x_t); (r_t - l_t)/eps).

The estimator sees only (y, l, r, eps): it never touches the population.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numba import njit, prange

from . import rng as _rng
from .validation import check_count, check_eps, check_finite, check_interval

# Section 6 priors: mu ~ N(MU0, MU_VAR), sigma^2 ~ IG(SIG_SHAPE, SIG_SCALE)
MU0 = 0.0
MU_VAR = 1.0e4
SIG_SHAPE = 1.0
SIG_SCALE = 1.0

# purposes of the random streams (second key component)
_P_INIT, _P_MOVE, _P_RESAMPLE = 1, 2, 3


@njit(cache=True)
def _init_particles(key, mu, sig):
    """theta^(i) ~ eta: mu ~ N(0, 10^4), sigma^2 ~ IG(1, 1) (Section 6)."""
    for i in range(mu.shape[0]):
        s = _rng.stream_key(key, _P_INIT, i)
        s, z = _rng.normal(s)
        mu[i] = MU0 + math.sqrt(MU_VAR) * z
        s, g = _rng.gamma(s, SIG_SHAPE)
        sig[i] = math.sqrt(SIG_SCALE / g)


@njit(cache=True)
def _systematic(key, t, w, out):
    """Systematic resampling of indices 0..N-1 with normalised weights w."""
    n = w.shape[0]
    s = _rng.stream_key(key, _P_RESAMPLE, t)
    s, u = _rng.uniform(s)
    cum = w[0] * n
    j = 0
    for i in range(n):
        pos = u + i
        while cum < pos and j < n - 1:
            j += 1
            cum += w[j] * n
        out[i] = j


@njit(parallel=True, cache=True)
def _move_propagate_weight(key, t, anc, x_old, x_new, mu, sig, y, l, r, invb, logw, acc):
    """Algorithm 2 steps 2-4 for every particle, given resampled ancestors ``anc``.

    Step 2 is Algorithm 3 with an independent proposal q(x'|x) = p_theta(x'), so the
    MH ratio reduces to Laplace(y_k - T(x'_k)) / Laplace(y_k - T(x_k)); then the Gibbs
    update of (mu, sigma^2) given x_{1:t-1}.
    """
    n_part = mu.shape[0] // 2  # theta arrays hold current | next
    for i in prange(n_part):
        s = _rng.stream_key(key, t * 4 + _P_MOVE, i)
        a = anc[i]
        m = mu[a]
        sg = sig[a]
        src = x_old[a]
        dst = x_new[i]
        s1 = 0.0
        s2 = 0.0
        nacc = 0
        for k in range(t):
            xc = src[k]
            s, z = _rng.normal(s)
            xp = m + sg * z
            lk = l[k]
            rk = r[k]
            cc = min(max(xc, lk), rk)
            cp = min(max(xp, lk), rk)
            d = (abs(y[k] - cc) - abs(y[k] - cp)) * invb[k]  # log MH ratio
            s, u = _rng.uniform(s)
            # accept iff u < exp(d); exp(d) >= 1 + d decides most cases (always when
            # d >= 0) and exp(d) <= 1/(1 - d) rejects most others without calling exp
            ok = u < 1.0 + d
            if not ok and u * (1.0 - d) < 1.0:
                ok = u < math.exp(d)
            if ok:
                xc = xp
                nacc += 1
            dst[k] = xc
            s1 += xc
            s2 += xc * xc
        if t > 0:
            # Gibbs: mu | sigma, x  ~ N(v (MU0/MU_VAR + s1/sigma^2), v)
            v = 1.0 / (1.0 / MU_VAR + t / (sg * sg))
            s, z = _rng.normal(s)
            m = v * (MU0 / MU_VAR + s1 / (sg * sg)) + math.sqrt(v) * z
            # sigma^2 | mu, x ~ IG(SHAPE + t/2, SCALE + sum (x - mu)^2 / 2)
            ss = max(s2 - 2.0 * m * s1 + t * m * m, 0.0)
            s, g = _rng.gamma(s, SIG_SHAPE + 0.5 * t)
            sg = math.sqrt((SIG_SCALE + 0.5 * ss) / g)
        acc[i] = nacc
        # propagation: x_t ~ N(mu, sigma^2)
        s, z = _rng.normal(s)
        xt = m + sg * z
        dst[t] = xt
        ct = min(max(xt, l[t]), r[t])
        logw[i] = -abs(y[t] - ct) * invb[t]
        _store(mu, sig, i, m, sg, n_part)


@njit(inline="always")
def _store(mu, sig, i, m, sg, n_part):
    # new theta values go to the second half of the doubled arrays
    mu[n_part + i] = m
    sig[n_part + i] = sg


@dataclass
class SMCHistory:
    """What the SMC records: posterior means every step, particles every ``every`` steps."""

    mean_mu: list = field(default_factory=list)
    mean_sigma: list = field(default_factory=list)
    sd_mu: list = field(default_factory=list)
    sd_sigma: list = field(default_factory=list)
    ess: list = field(default_factory=list)
    acceptance: list = field(default_factory=list)
    snapshot_t: list = field(default_factory=list)
    snapshot_mu: list = field(default_factory=list)
    snapshot_sigma: list = field(default_factory=list)
    snapshot_w: list = field(default_factory=list)


class SMC:
    """Online posterior of theta = (mu, sigma) given (y_t, l_t, r_t), t = 1, 2, ...

    Parameters
    ----------
    eps : privacy parameter of the Laplace mechanism.
    n_particles : N (paper: 1000).
    n_max : capacity of the latent paths (number of observations that will come).
    seed : int or numpy SeedSequence; the same seed gives bit-identical output for any
        number of threads.
    every : particles are recorded every ``every``-th step (paper Figure 2: 20).
    """

    def __init__(self, eps, n_particles=1000, n_max=1000, seed=0, every=20):
        self.eps = check_eps(eps)
        self.N = check_count("number of particles", n_particles, 2)
        self.n_max = check_count("n_max", n_max, 1)
        self.every = check_count("every", every, 1)
        self._key = np.uint64(_rng.seed_to_key(seed))
        N = self.N
        self._x = [np.zeros((N, self.n_max)), np.zeros((N, self.n_max))]
        self._theta = np.zeros((2, 2 * N))  # rows mu, sigma; cols: current | next
        _init_particles(self._key, self._theta[0, :N], self._theta[1, :N])
        self.w = np.full(N, 1.0 / N)
        self._y = np.zeros(self.n_max)
        self._l = np.zeros(self.n_max)
        self._r = np.zeros(self.n_max)
        self._invb = np.zeros(self.n_max)
        self._anc = np.arange(N, dtype=np.int64)
        self._acc = np.zeros(N, dtype=np.int64)
        self._logw = np.zeros(N)
        self.t = 0
        self.history = SMCHistory()

    @property
    def mu(self):
        return self._theta[0, : self.N]

    @property
    def sigma(self):
        return self._theta[1, : self.N]

    def update(self, y, l, r):
        """Algorithm 2 at time t: absorb one released value y with its interval [l, r]."""
        y = float(check_finite("y", y))
        l, r = check_interval(l, r)
        l, r = float(l), float(r)
        t = self.t
        if t >= self.n_max:
            raise ValueError(f"SMC was built for n_max={self.n_max} observations")
        self._y[t], self._l[t], self._r[t] = y, l, r
        self._invb[t] = self.eps / (r - l)
        N = self.N
        if t > 0:
            _systematic(self._key, t, self.w, self._anc)
        else:
            self._anc[:] = np.arange(N)
        x_old, x_new = self._x
        _move_propagate_weight(self._key, t, self._anc, x_old, x_new, self._theta[0],
                               self._theta[1], self._y, self._l, self._r, self._invb,
                               self._logw, self._acc)
        self._theta[:, :N] = self._theta[:, N:]
        self._x = [x_new, x_old]
        lw = self._logw - self._logw.max()
        w = np.exp(lw)
        self.w = w / w.sum()
        self.t = t + 1
        self._record(t)

    def _record(self, t):
        h, w = self.history, self.w
        mu, sig = self.mu, self.sigma
        m_mu, m_sig = float(w @ mu), float(w @ sig)
        h.mean_mu.append(m_mu)
        h.mean_sigma.append(m_sig)
        h.sd_mu.append(math.sqrt(max(float(w @ (mu - m_mu) ** 2), 0.0)))
        h.sd_sigma.append(math.sqrt(max(float(w @ (sig - m_sig) ** 2), 0.0)))
        h.ess.append(float(1.0 / (w @ w)))
        h.acceptance.append(float(self._acc.sum() / (t * self.N)) if t > 0 else float("nan"))
        if (t + 1) % self.every == 0:
            h.snapshot_t.append(t + 1)
            h.snapshot_mu.append(mu.copy())
            h.snapshot_sigma.append(sig.copy())
            h.snapshot_w.append(w.copy())

    def thompson_draw(self, rng: np.random.Generator):
        """Step 1 of Section 5.1: theta^(i) with probability w^(i)."""
        i = rng.choice(self.N, p=self.w)
        return float(self.mu[i]), float(self.sigma[i])

    def summary(self):
        h = self.history
        return {"mu": {"mean": h.mean_mu[-1], "sd": h.sd_mu[-1]},
                "sigma": {"mean": h.mean_sigma[-1], "sd": h.sd_sigma[-1]}}


def smc_posterior(y, l, r, eps, n_particles=1000, seed=0):
    """Run SMC over a whole released data set (y, l, r) in time order; return the SMC."""
    from .validation import check_observations

    y, l, r = check_observations(y, l, r)
    smc = SMC(eps, n_particles=n_particles, n_max=len(y), seed=seed)
    for t in range(len(y)):
        smc.update(y[t], l[t], r[t])
    return smc
