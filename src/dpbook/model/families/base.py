"""The family interface: what the estimators need to know about P_theta.

The paper's method needs, for a population family {P_theta} (Section 4, p_theta):

* the log density (or mass) log p_theta(x) and its score grad_theta log p_theta(x)
  (Algorithm 3 step 4 and Algorithm 4 step 4);
* a sampler x ~ P_theta (Algorithm 2 step 3, the independent MH proposal of
  Algorithm 3, Algorithm 4 step 2);
* the cdf, for the probability that X is clipped (exact quadrature references);
* a prior eta(theta) (eq. 5) and an MCMC move for theta given x_{1:t}
  (Algorithm 3 step 4): random-walk MH by default, a conjugate Gibbs draw where the
  family provides one;
* for a location-scale family (Definition 2) the base distribution g, so that the
  best interval is computed once (Theorem 3, eq. 11-13).

Conventions (as in ``scipy.stats``): parameters are passed positionally after x, as
arrays that broadcast against x; ``rng`` is a ``numpy.random.Generator`` passed in
explicitly.  A particle system holds theta as an (N, d) array; ``theta_args(theta)``
turns it into the positional arguments, shaped (N, 1) to broadcast against (N, t)
latent paths.

A new family subclasses :class:`Family` (or :class:`LocationScaleFamily`, which needs
only the base distribution) in a module of its own: a module dropped into this
package is found by :func:`dpbook.model.families.get_family` without touching any other
module, and a family object defined anywhere (chapter 7 defines one in the notebook)
can be passed to every algorithm directly.  Families with settings that are not
estimated (the degrees of freedom of the Student-t) declare them in ``options``
and take them as keyword arguments.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math

import numpy as np

from dpbook.model.prior import SECTION6, LocationScalePrior
from dpbook.validation import MAX_ABS, missing_method, refuse_not_real

# The primitives that take theta after one leading argument (x, q, u or rng): each
# subclass's own definitions are wrapped so that theta is checked before they run.
_PRIMITIVES = ("logpdf", "score", "sample", "cdf", "sf", "ppf", "cdf_grad", "from_latent")


def _theta_checked(fn):
    @functools.wraps(fn)
    def method(self, first, *theta, **kwargs):
        self.check_theta_arrays(*theta)
        return fn(self, first, *theta, **kwargs)

    method.theta_checked = True
    return method


class Family:
    """A parametric population family {P_theta}; subclass and fill in the model.

    Class attributes
    ----------------
    name : the name used on the command line (``--family NAME``).
    params : parameter names, e.g. ("mu", "sigma").
    positive : for each parameter, whether it must be > 0 (such parameters are
        moved on the log scale by the random-walk MH move).
    discrete : True if the support is the integers (logpdf is then a log pmf).
    location_scale : True for Definition 2 families, theta = (m, c).
    """

    name = ""
    params: tuple = ()
    positive: tuple = ()
    discrete = False
    location_scale = False
    options: dict = {}  # fixed settings: {name: (type, default, help)}
    summary = ""  # one line for `dpbook families`

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in _PRIMITIVES:
            fn = cls.__dict__.get(name)
            if callable(fn) and not getattr(fn, "theta_checked", False):
                setattr(cls, name, _theta_checked(fn))

    def check_theta_arrays(self, *theta):
        """Check theta as ``scipy.stats`` does its parameters, elementwise over arrays:
        ValueError naming the first parameter that is not finite, or not > 0 where the
        family needs it positive.  Every primitive (logpdf, score, sample, cdf, sf, ppf,
        cdf_grad, from_latent) runs it first."""
        if len(theta) != self.dim:
            raise ValueError(f"the {self.name} family has {self.dim} parameter(s) "
                             f"({', '.join(self.params)}), got {len(theta)}")
        for name, pos, v in zip(self.params, self.positive, theta):
            try:
                a = np.asarray(v, dtype=float)
            except (TypeError, ValueError):
                raise ValueError(f"{name} must be a number, got {v!r}") from None
            ok = np.isfinite(a) & (a > 0) if pos else np.isfinite(a)
            if not ok.all():
                bad = a[~ok].flat[0] if a.ndim else a
                kind = "a positive finite" if pos else "a finite"
                raise ValueError(f"{name} of the {self.name} family must be {kind} number, "
                                 f"got {float(bad)!r}")

    # ------------------------------------------------------------------ the model
    def logpdf(self, x, *theta):
        """log p_theta(x), vectorised (log pmf for a discrete family)."""
        raise missing_method(self, "logpdf")

    def score(self, x, *theta):
        """grad_theta log p_theta(x): a tuple with one array per parameter."""
        raise missing_method(self, "score")

    def sample(self, rng: np.random.Generator, *theta, size=None):
        """x ~ P_theta; ``size`` as in numpy (None: the broadcast shape of theta)."""
        raise missing_method(self, "sample")

    def cdf(self, x, *theta):
        """P_theta(X <= x)."""
        raise missing_method(self, "cdf")

    def sf(self, x, *theta):
        """P_theta(X > x) (override for accuracy in the upper tail)."""
        return 1.0 - self.cdf(x, *theta)

    def ppf(self, q, *theta):
        """The quantile function (used for quadrature ranges and default intervals)."""
        raise missing_method(self, "ppf")

    def cdf_grad(self, x, *theta):
        """grad_theta P_theta(X <= x) (the clipped masses' score in Fisher's identity).

        Default: central finite differences of :meth:`cdf`; families override it with
        the closed form where there is one.
        """
        out = []
        base = [np.asarray(t, float) for t in theta]
        for j, t in enumerate(base):
            h = 1e-6 * np.maximum(1.0, np.abs(t))
            up = list(base)
            dn = list(base)
            up[j] = t + h
            dn[j] = t - h
            out.append((self.cdf(x, *up) - self.cdf(x, *dn)) / (2 * h))
        return tuple(out)

    def latent_sample(self, rng: np.random.Generator, size):
        """Draws u of a theta-free latent variable with x = from_latent(u, theta) ~ P_theta
        (MHAAR's parameterisation).  Default: u ~ U(0, 1) and the quantile function."""
        return rng.random(size)

    def from_latent(self, u, *theta):
        return self.ppf(u, *theta)

    # ------------------------------------------------------------------ the prior
    def log_prior(self, *theta):
        """log eta(theta), a density w.r.t. Lebesgue measure on theta as named."""
        raise missing_method(self, "log_prior")

    def sample_prior(self, rng: np.random.Generator, size):
        """theta ~ eta as a (size, d) array."""
        raise missing_method(self, "sample_prior")

    def with_prior(self, prior=None, **hyper):
        """A copy of this family with another prior, for a family whose prior is a prior
        object (attribute ``prior``): an object of the same class, or its hyperparameters
        by name (the others keep this family's values; for a location-scale family
        loc_mean, loc_var, scale2_shape, scale2_scale)."""
        kind = type(getattr(self, "prior", None))
        if not dataclasses.is_dataclass(kind):
            raise ValueError(f"the {self.name} family has no prior object to replace: "
                             f"override log_prior and sample_prior")
        if prior is None:
            prior = dataclasses.replace(self.prior, **hyper)
        elif hyper or not isinstance(prior, kind):
            raise ValueError(f"give a {kind.__name__} or hyperparameters by name, not both")
        out = copy.copy(self)
        out.prior = prior
        return out

    def gibbs(self, rng: np.random.Generator, theta, x):
        """A conjugate draw theta ~ p(theta | x_{1:t}) for every particle, or None.

        theta: (N, d); x: (N, t) latent paths.  Returning None (the default) makes
        the SMC use a random-walk MH move (Algorithm 3, step 4) instead.
        """
        return None

    # ------------------------------------------------------------------ helpers
    @property
    def dim(self) -> int:
        return len(self.params)

    def theta_args(self, theta):
        """(N, d) particles -> d arrays of shape (N, 1), the positional parameters."""
        theta = np.asarray(theta, float)
        return tuple(theta[:, j : j + 1] for j in range(theta.shape[1]))

    def check_theta(self, *theta):
        """theta as a tuple of floats; ValueError naming a bad parameter."""
        if len(theta) != self.dim:
            raise ValueError(f"the {self.name} family has {self.dim} parameters "
                             f"({', '.join(self.params)}), got {len(theta)}")
        out = []
        for name, pos, v in zip(self.params, self.positive, theta):
            refuse_not_real(name, v)
            try:
                f = float(v)
            except (TypeError, ValueError):
                f = float("nan")
            if not math.isfinite(f) or (pos and f <= 0):
                kind = "a positive finite" if pos else "a finite"
                raise ValueError(f"{name} must be {kind} number, got {v!r}")
            lo = 1.0 / MAX_ABS if pos else -MAX_ABS
            if not lo <= f <= MAX_ABS:
                raise ValueError(f"{name} must lie in [{lo:g}, {MAX_ABS:g}] (rescale the "
                                 f"data), got {v!r}")
            out.append(f)
        return tuple(out)

    def guess(self, y, l, r, eps, mechanism):
        """A rough theta from released data (starts MHAAR, centres posterior grids)."""
        raise missing_method(self, "guess")

    def fixed_interval(self, *theta):
        """The non-adaptive comparison interval [l_c, r_c] for true theta (Section 6
        uses [mu - 10 sigma, mu + 10 sigma] for the normal)."""
        lo, hi = self.ppf(1e-6, *theta), self.ppf(1 - 1e-6, *theta)
        pad = 0.5 * (hi - lo)
        return float(lo - pad), float(hi + pad)

    def interval_lims(self, *theta):
        """Range of the (l, r) grid searched for eq. (9) at theta (non-location-scale)."""
        return float(self.ppf(1e-3, *theta)), float(self.ppf(1 - 1e-3, *theta))

    def support(self, *theta, tail=1e-14):
        """(lo, hi) outside which P_theta has mass below ``tail`` on each side."""
        return self.ppf(tail, *theta), self.ppf(1 - tail, *theta)

    def default_theta(self):
        """The theta used by the command line when none is given."""
        raise missing_method(self, "default_theta")

    def describe(self) -> str:
        prior = getattr(self, "prior", None)
        extra = "" if prior is None or prior == getattr(type(self), "prior", None) else \
            f"; prior {prior.describe(self.params)}"
        return f"{self.name}({', '.join(self.params)}){extra}"

    def __repr__(self):
        return f"<family {self.describe()}>"


# below this 1 - cdf keeps fewer than ~10 digits (1e-16/S): the default base_sf
# integrates the upper tail instead
SF_SWITCH = 1e-6
# upper_tail's panel ends in decay lengths of g at z: 1/4, 1/2, then doubling to 2^60
# (an exponential tail is resolved in its first ~10 panels, a power law by the doubling:
# 8 nodes a panel give S to 8e-13 for the logistic, normal, Gumbel, Laplace and
# Student-t df >= 1, 1e-9 for df 0.5, whose mass beyond 2^60 decay lengths is left out)
SF_ENDS = np.concatenate([[0.0, 0.25, 0.5], 2.0 ** np.arange(61)])
SF_GL = np.polynomial.legendre.leggauss(8)


# the methods that define a family's model: what a compiled path for a family class
# computes in its own way, and so what a subclass must not override to keep that path
MODEL_METHODS = ("base_logpdf", "base_dlogpdf", "base_cdf", "base_sf", "base_ppf",
                 "base_sample", "logpdf", "score", "sample", "cdf", "sf", "ppf", "cdf_grad",
                 "latent_sample", "from_latent", "gibbs")


def inherits_model(family, cls) -> bool:
    """Whether ``family`` is ``cls``'s model: an instance of it (or of a subclass) whose
    class defines none of :data:`MODEL_METHODS` anew (a subclass that adds options, a
    name or a prior keeps ``cls``'s compiled paths; one that changes the density does
    not)."""
    return isinstance(family, cls) and all(owner(family, m) is owner(cls, m)
                                           for m in MODEL_METHODS)


def owner(family, name):
    """The class in the MRO of ``family`` (a family or its class) that defines ``name``:
    what a compiled path asks before it takes a family, so that a subclass inherits a
    fast path for the methods it does not override and loses it for those it does."""
    cls = family if isinstance(family, type) else type(family)
    return next((c for c in cls.__mro__ if name in vars(c)), None)


def upper_tail(logpdf, z):
    """int_z^inf exp(logpdf(t)) dt for an array z: Gauss-Legendre panels (8 nodes)
    starting at z with ends z + lam SF_ENDS, lam = the decay length of g at z (the
    slope of logpdf over h = 1e-4 max(1, |z|)), or max(1, |z|) where g does not
    decrease there."""
    z = np.asarray(z, dtype=float)
    h = 1e-4 * np.maximum(1.0, np.abs(z))
    with np.errstate(all="ignore"):
        k = (np.asarray(logpdf(z), float) - np.asarray(logpdf(z + h), float)) / h
    lam = np.where((k > 0) & np.isfinite(k), 1.0 / np.where(k > 0, k, 1.0),
                   np.maximum(1.0, np.abs(z)))
    x, w = SF_GL
    a = z[..., None, None] + lam[..., None, None] * SF_ENDS[:-1, None]
    half = 0.5 * lam[..., None, None] * np.diff(SF_ENDS)[:, None]
    with np.errstate(all="ignore"):
        v = np.exp(np.asarray(logpdf(a + half * (1.0 + x)), float))
    return np.sum(np.nan_to_num(v, nan=0.0, posinf=0.0) * half * w, axis=(-2, -1))


class LocationScaleFamily(Family):
    """Definition 2: p(x; m, c) = g((x - m)/c)/c.  Subclasses give the base g only.

    Required: ``base_logpdf(z)``, ``base_dlogpdf(z)`` (d/dz log g), ``base_cdf(z)``,
    ``base_ppf(q)``, ``base_sample(rng, size)``.  The prior (attribute ``prior``, a
    :class:`~dpbook.model.prior.LocationScalePrior`) is that of Section 6,
    m ~ N(0, 10^4) and c^2 ~ IG(1, 1), unless :meth:`with_prior` gave another; theta is
    moved by random-walk MH unless a subclass overrides :meth:`gibbs`.
    """

    params = ("loc", "scale")
    positive = (False, True)
    location_scale = True
    # False: the latent SMC runs its numpy code without trying its compiled form (which
    # needs base_logpdf and base_ppf that numba compiles, and draws every proposal by
    # base_ppf, or by base_draw where the family has one)
    compiled_smc = True
    # a subclass may define base_draw(self, state) -> (state, z), z ~ g drawn from the
    # compiled engine's keyed SplitMix64 state with dpbook.rng (uniform, normal,
    # gamma_any): the engine then proposes with it instead of base_ppf (a quantile
    # without a closed form is slow: the Student-t's); with it, base_draw_pair(self, u, v)
    # -> z ~ g from two uniforms, or nan for a rejection (then base_draw is called), lets
    # the engine draw the proposals of a sweep in one vectorised loop
    base_draw = None
    base_draw_pair = None
    prior: LocationScalePrior = SECTION6

    # base distribution g (theta = (0, 1)); numpy or math code on floats and arrays,
    # reading only numbers stored on self, compiles with numba (the fast paths)
    def base_logpdf(self, z):
        """log g(z), the base density at theta = (0, 1), elementwise over an array z.
        Required; logpdf(x, m, c) = base_logpdf((x - m)/c) - log c (Definition 2).
        Used by the SMC's weights, the exact posterior and MHAAR."""
        raise missing_method(self, "base_logpdf")

    def base_dlogpdf(self, z):
        """d/dz log g(z), elementwise.  Required: the score of (m, c) follows from it,
        -d/c and -(1 + z d)/c, and gives the Fisher information (eq. 7, Algorithm 4)."""
        raise missing_method(self, "base_dlogpdf")

    def base_cdf(self, z):
        """G(z) = P(Z <= z) for Z ~ g, elementwise.  Required: the mass of the lower
        clipped atom at l (eq. 7) and, with base_sf, the likelihood of a release."""
        raise missing_method(self, "base_cdf")

    def base_sf(self, z):
        """S(z) = P(Z > z), the upper clipped atom's mass (eq. 7): 1 - base_cdf where that
        keeps its digits (S >= ``SF_SWITCH``), else the integral of exp(base_logpdf) over
        (z, inf) (:func:`upper_tail`), so that S does not round to 0 where it is the
        atom (the logistic's 1 - cdf is 0 past z ~ 37).  Override with a closed form;
        the compiled likelihood compiles this same rule from the compiled base_logpdf
        and base_cdf."""
        z = np.asarray(z, dtype=float)
        s = np.asarray(1.0 - np.asarray(self.base_cdf(z), dtype=float))
        far = s < SF_SWITCH
        if np.any(far):
            s = np.array(np.broadcast_to(s, np.broadcast_shapes(s.shape, z.shape)))
            s[far] = upper_tail(self.base_logpdf, np.broadcast_to(z, s.shape)[far])
        return s

    def base_ppf(self, q):
        """G^{-1}(q), the base quantile function, elementwise for q in (0, 1).
        Required: the latent SMC and MHAAR propose by it, and it sets quadrature ranges
        and default intervals."""
        raise missing_method(self, "base_ppf")

    def base_sample(self, rng, size=None):
        """Draws z ~ g from a numpy ``Generator`` (``size`` as in numpy).  Required: the
        simulated populations and the numpy samplers draw with it."""
        raise missing_method(self, "base_sample")

    # the family, by shifting and scaling
    def logpdf(self, x, m, c):
        return self.base_logpdf((x - m) / c) - np.log(c)

    def score(self, x, m, c):
        z = (x - m) / c
        d = self.base_dlogpdf(z)
        return -d / c, -(1.0 + z * d) / c

    def sample(self, rng, m, c, size=None):
        if size is None:
            size = np.broadcast(np.asarray(m), np.asarray(c)).shape
        return m + c * self.base_sample(rng, size)

    def latent_sample(self, rng, size):
        """z ~ g, so that x = m + c z (Definition 2)."""
        return self.base_sample(rng, size)

    def from_latent(self, z, m, c):
        return m + c * z

    def cdf(self, x, m, c):
        return self.base_cdf((x - m) / c)

    def sf(self, x, m, c):
        return self.base_sf((x - m) / c)

    def ppf(self, q, m, c):
        return m + c * self.base_ppf(q)

    def cdf_grad(self, x, m, c):
        z = (x - m) / c
        g = np.exp(self.base_logpdf(z))
        return -g / c, -z * g / c

    def log_prior(self, m, c):
        return self.prior.log_density(m, c)

    def sample_prior(self, rng, size):
        return self.prior.sample(rng, size)

    def guess(self, y, l, r, eps, mechanism):
        """(mean y, sqrt(var y - noise variance)) scaled to the base's spread."""
        from dpbook.model.mechanisms import get_mechanism, noise_scale

        y = np.asarray(y, float)
        noise = float(np.mean(get_mechanism(mechanism).variance(noise_scale(l, r, eps))))
        v = float(np.var(y)) if y.size > 1 else 1.0
        spread = math.sqrt(max(v - noise, 1e-4 * max(v, 1e-8)))
        base_sd = (self.base_ppf(0.8413447460685429) - self.base_ppf(0.15865525393145707)) / 2
        return float(np.median(y)), spread / base_sd

    def fixed_interval(self, m, c):
        """[m - 10 c, m + 10 c], the non-adaptive interval of Section 6."""
        return float(m - 10.0 * c), float(m + 10.0 * c)

    def default_theta(self):
        return 0.0, 1.0
