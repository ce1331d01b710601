"""Has a sampler found the posterior?  A cheap reference check.

A Monte Carlo posterior (MHAAR's chain, the latent SMC's or the marginal SMC's particles)
can report a place it never left instead of the posterior: a chain started at the
releases' moment guess when the releases lie far outside their intervals (releases near
1e11 through [40, 60]: MHAAR reported mu = 1e11, the exact posterior's median is 111),
or particles drawn from the prior that no release ever tells apart because every one of
them is clipped at the same end (the SMC then returns the prior).

The check: the unnormalised log posterior density log eta(theta) + sum_t log
p(y_t | theta), with the likelihood of each release exact (closed form for the paper's
normal/Laplace pair, quadrature otherwise), at the method's answer (its coordinatewise
posterior median) and at a few reference points that cost nothing to find:

* the releases' moment guess (``family.guess``, where MHAAR starts);
* the prior's median (coordinatewise, of 512 prior draws from a fixed seed);
* for a location-scale family, the guess with its location moved into the range of the
  intervals [min l, max r] (releases far outside their intervals say only that the
  values lie beyond an end);
* the best point of a short climb (Nelder-Mead, at most 200 likelihood evaluations, 60
  by quadrature) of the log posterior from the best of these and from the answer itself:
  releases near 1e6 through [-5, 5] put the posterior at mu ~ 72 (the prior's pull
  against the clipped values), where none of the points above is.

If a reference point's log density exceeds the answer's by more than
:data:`LOST_MARGIN` nats (a density ratio of e^20 = 5e8), the answer lies where the
posterior has almost no mass and the method has not found the posterior.  The margin is
wide: a posterior median sits within a few nats of the posterior's highest density
(about d/2 for a Gaussian posterior of d parameters, a nat more for the skewed posterior
of a scale), so a 20-nat deficit is a median more than six posterior standard deviations
from the mode.  On the paper's Section 6 configuration the deficit of every method is
below zero or a few nats (tests/test_diagnostics.py), so the check stays quiet there.

It draws no random numbers from the method's streams (the prior draws have their own
fixed seed): the methods' outputs are unchanged.  Cost: the likelihood at a few hundred
points: milliseconds for the paper's model, a tenth of a second for 1000 releases of
another location-scale family (compiled quadrature, after compiling once per process),
about ten seconds by numpy quadrature (a family that does not compile).

A sampler can also be right about a posterior that the prior has put in the wrong place:
a prior in other units than the data (Section 6's N(0, 10^4) on incomes near 40,000).
:func:`prior_data_conflict` checks the prior against the public releases, and the
warning above names the prior when the posterior's reference point lies outside the
prior's central 99.9% interval (:func:`prior_note`).
"""

from __future__ import annotations

import contextlib
import math
import warnings

import numpy as np

from dpbook.validation import ReliabilityWarning

LOST_MARGIN = 20.0  # nats: a reference point this much more probable than the answer
PRIOR_DRAWS = 512
_BLOCK = 4096  # releases per block of the quadrature likelihood sum


def log_likelihood(theta, y, l, r, eps, family, mechanism, compiled=...) -> np.ndarray:
    """sum_t log p(y_t | theta_i) for each row theta_i of ``theta`` (k, d): the compiled
    kernel of the paper's model (:func:`dpbook.likelihood.normal_laplace.
    loglik_particles`) or of the engine for another location-scale family
    (:func:`dpbook.likelihood.compiled_quadrature.engine_loglik`), else numpy quadrature with the
    releases in blocks of ``_BLOCK``
    (also the marginal SMC's likelihood, which passes the kernel it looked up once as
    ``compiled``; None: quadrature)."""
    from dpbook.backends import backend
    from dpbook.likelihood import quadrature

    theta = np.ascontiguousarray(theta, dtype=float)
    if compiled is ...:
        compiled = backend("loglik_particles", family, mechanism)
    if compiled is not None:
        return compiled(y, l, r, eps, theta)
    out = np.zeros(theta.shape[0])
    cols = tuple(theta[:, j:j + 1] for j in range(theta.shape[1]))
    for start in range(0, len(y), _BLOCK):
        ys, ls, rs = (v[None, start:start + _BLOCK] for v in (y, l, r))
        out += quadrature.log_density(ys, ls, rs, eps, cols, family,
                                      mechanism).sum(axis=1)
    return out


def log_posterior(theta, y, l, r, eps, family, mechanism) -> np.ndarray:
    """The unnormalised log posterior density at each row of ``theta`` (k, d); -inf where
    it cannot be evaluated (outside the parameter space, or not finite)."""
    theta = np.atleast_2d(np.asarray(theta, dtype=float))
    out = np.full(theta.shape[0], -math.inf)
    ok = np.isfinite(theta).all(axis=1)
    pos = np.array(family.positive, dtype=bool)
    ok &= (theta[:, pos] > 0).all(axis=1)
    if not ok.any():
        return out
    th = theta[ok]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            lp = np.asarray(family.log_prior(*th.T), float) + log_likelihood(
                th, y, l, r, eps, family, mechanism)
        except (ValueError, FloatingPointError, OverflowError, ZeroDivisionError):
            # a point the likelihood cannot be computed at: one at a time, to keep the
            # others
            lp = np.array([_one(t, y, l, r, eps, family, mechanism) for t in th])
    out[ok] = np.where(np.isfinite(lp), lp, -math.inf)
    return out


def _one(theta, y, l, r, eps, family, mechanism) -> float:
    try:
        return float(np.asarray(family.log_prior(*theta), float)
                     + log_likelihood(theta[None, :], y, l, r, eps, family, mechanism)[0])
    except (ValueError, FloatingPointError, OverflowError, ZeroDivisionError):
        return -math.inf


def reference_points(y, l, r, eps, family, mechanism) -> dict:
    """{name: theta} of the reference points of the module docstring."""
    refs = {}
    with contextlib.suppress(ValueError, NotImplementedError):
        guess = np.array(family.guess(y, l, r, eps, mechanism), dtype=float)
        refs["the releases' moment guess"] = guess
        if family.location_scale:
            inside = guess.copy()
            inside[0] = min(max(guess[0], float(np.min(l))), float(np.max(r)))
            if inside[0] != guess[0]:
                refs["the moment guess moved into the intervals"] = inside
    with contextlib.suppress(ValueError, NotImplementedError):
        draws = np.asarray(family.sample_prior(np.random.default_rng(0), PRIOR_DRAWS), float)
        refs["the prior's median"] = np.median(draws.reshape(PRIOR_DRAWS, -1), axis=0)
    return refs


def posterior_gap(answer, y, l, r, eps, family, mechanism):
    """How much more probable the best reference point is than ``answer`` (a theta, the
    method's posterior median), under the posterior: a dict with the reference's
    ``name`` and ``theta``, the ``gap`` in nats (log density of the reference minus
    that of the answer; inf when the answer's density is 0) and the two log densities;
    None when no reference point has a finite density."""
    from dpbook.model.families import as_family

    family = as_family(family)
    y, l, r = (np.ascontiguousarray(v, dtype=float) for v in (y, l, r))
    refs = reference_points(y, l, r, eps, family, mechanism)
    if not refs:
        return None
    names = list(refs)
    pts = np.vstack([np.asarray(answer, dtype=float).reshape(1, -1)]
                    + [refs[k].reshape(1, -1) for k in names])
    lp = log_posterior(pts, y, l, r, eps, family, mechanism)
    # climb the log posterior from the best reference and from the answer (a few
    # hundred likelihood evaluations): a mode the references only point towards
    starts = [1 + int(np.argmax(lp[1:]))] + ([0] if math.isfinite(lp[0]) else [])
    for i in starts:
        if not math.isfinite(lp[i]):
            continue
        th, val = _climb(pts[i], lp[i], y, l, r, eps, family, mechanism)
        if val > lp[i]:
            names.append(f"a mode of the posterior (climbed from "
                         f"{'its median' if i == 0 else names[i - 1]})")
            pts = np.vstack([pts, th[None, :]])
            lp = np.append(lp, val)
    best = int(np.argmax(lp[1:]))
    if not math.isfinite(lp[1 + best]):
        return None  # no reference to compare with
    return {"name": names[best], "theta": tuple(float(v) for v in pts[1 + best]),
            "gap": float(lp[1 + best] - lp[0]), "log_posterior_answer": float(lp[0]),
            "log_posterior_reference": float(lp[1 + best])}


CLIMB_EVALS = 200  # likelihood evaluations of one climb (the compiled likelihood)
CLIMB_EVALS_QUADRATURE = 60  # ... by quadrature (about 0.07 s each for 1000 releases)


def _climb(theta, value, y, l, r, eps, family, mechanism):
    """Nelder-Mead on the log posterior from ``theta`` (log coordinates for positive
    parameters): (theta, log posterior) at the best point found."""
    from scipy.optimize import minimize

    from dpbook.backends import backend

    pos = np.array(family.positive, dtype=bool)
    phi0 = np.where(pos, np.log(np.where(pos, theta, 1.0)), theta)

    def to_theta(phi):
        return np.where(pos, np.exp(np.minimum(phi, 700.0)), phi)

    def f(phi):
        v = log_posterior(to_theta(phi)[None, :], y, l, r, eps, family, mechanism)[0]
        return -v if math.isfinite(v) else 1e300

    evals = CLIMB_EVALS if backend("loglik_particles", family, mechanism) is not None \
        else CLIMB_EVALS_QUADRATURE
    step = np.where(pos, 0.5, np.maximum(0.05 * np.abs(phi0), 1.0))
    simplex = np.vstack([phi0] + [phi0 + step[j] * np.eye(phi0.size)[j]
                                  for j in range(phi0.size)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        res = minimize(f, phi0, method="Nelder-Mead",
                       options={"maxfev": evals, "initial_simplex": simplex,
                                "xatol": 1e-6, "fatol": 1e-3})
    if not math.isfinite(res.fun) or -res.fun <= value:
        return theta, value
    return to_theta(res.x), float(-res.fun)


def lost_posterior(answer, y, l, r, eps, family, mechanism, margin=LOST_MARGIN):
    """The :func:`posterior_gap` of ``answer`` when its gap exceeds ``margin`` nats (the
    method has not found the posterior), else None."""
    gap = posterior_gap(answer, y, l, r, eps, family, mechanism)
    return gap if gap is not None and gap["gap"] > margin else None


def describe_lost(method: str, params, answer, lost, prior=None) -> str:
    """The one-line warning for a ``lost_posterior`` result; ``prior``: a
    :func:`prior_note` (the prior, not the sampler, is the likely cause)."""
    at = ", ".join(f"{p} = {v:.4g}" for p, v in zip(params, answer))
    ref = ", ".join(f"{p} = {v:.4g}" for p, v in zip(params, lost["theta"]))
    gap = "infinitely" if math.isinf(lost["gap"]) else f"{lost['gap']:.3g} nats"
    fix = (f"the likely cause is the prior, not the sampler: {prior}" if prior else
           "use the exact posterior (or more iterations or particles)")
    return (f"{method} has not found the posterior: its median ({at}) is {gap} less "
            f"probable under the posterior than {lost['name']} ({ref}); its summary "
            f"describes where it stayed, not the posterior: {fix}")


def check_found(method: str, answer, y, l, r, eps, family, mechanism, stacklevel=3):
    """:func:`lost_posterior`, and a one-line :class:`ReliabilityWarning` when the answer
    is lost; returns the ``lost_posterior`` result (None when all is well)."""
    from dpbook.model.families import as_family

    family = as_family(family)
    try:
        lost = lost_posterior(answer, y, l, r, eps, family, mechanism)
    except NotImplementedError:
        # a family without what the release density needs (base_cdf, say) runs the
        # samplers all the same; only this check cannot be made
        return None
    if lost is not None:
        # the posterior's better point far out in the prior's tail: the data pull against
        # the prior (an answer far out with the reference inside is the sampler's fault)
        note = prior_note(family, lost["theta"])
        warnings.warn(describe_lost(method, family.params, answer, lost, note),
                      ReliabilityWarning, stacklevel=stacklevel)
    return lost


# ------------------------------------------------------------------ can the run be trusted?
ESS_FLOOR = 10  # SMC: a final effective sample size below this is too few for a summary
CHAIN_ESS_FLOOR = 5  # MHAAR: kept samples worth fewer independent draws (a parameter's)
ACCEPT_FLOOR = 0.01  # MHAAR: acceptance of the kept iterations (its steps aim at 0.1)
STALL_CEILING = 0.5  # online gradient: share of steps that left the estimate unmoved
_QUIET = []  # inside quiet_diagnostics(): recorded, not warned of


@contextlib.contextmanager
def quiet_diagnostics():
    """Within, :func:`check_reliability` records its diagnostics without a warning: the
    replications of a study (the experiment's, a calibration's), which the study judges
    together (chapter 8 measures, on purpose, MHAAR chains too short to mix)."""
    _QUIET.append(1)
    try:
        yield
    finally:
        _QUIET.pop()


def check_reliability(post, method: str, stacklevel=2) -> dict:
    """The stated diagnostics of a sampler's or estimator's run, each with its threshold,
    as ``post.reliability`` = {name: {"value", "floor" or "ceiling", "warning"}}, and a
    one-line :class:`ReliabilityWarning` naming the option to change for each beyond its
    threshold (the same text as "warning"; None when within).  It reads the run only:
    no number changes.

    * SMC, subset SMC, marginal SMC (``post.w``): the final effective sample size of the
      weights, floor :data:`ESS_FLOOR` (``--particles``);
    * MHAAR (``post.accepted``): the acceptance rate of the kept iterations, floor
      :data:`ACCEPT_FLOOR`, and the kept chain's effective sample size (Geyer's, its
      smallest over the parameters), floor :data:`CHAIN_ESS_FLOOR` (``--iters``).  The
      floors sit below the book's short chains (5000 iterations of 200 releases: ESS
      9-70, acceptance 0.05-0.10);
    * the online gradient (``post.u0``): the share of its steps after which the estimate
      had not moved (to 1e-9 of its scale), ceiling :data:`STALL_CEILING`
      (``--method``: a posterior method)."""
    checks = []
    if hasattr(post, "accepted"):
        acc, ess_chain = post.acceptance_kept, float(np.min(post.ess()))
        fix = "its posterior summary is not reliable here; raise n_iter (--iters)"
        checks = [("acceptance", acc, "floor", ACCEPT_FLOOR,
                   f"{method} accepted {'none' if acc == 0 else f'{acc:.2%}'} of its last "
                   f"{post.n_kept} proposals (floor {ACCEPT_FLOOR:.0%}): {fix} or use the "
                   f"exact posterior"),
                  ("chain_ess", ess_chain, "floor", CHAIN_ESS_FLOOR,
                   f"{method}'s {post.n_kept} kept samples are worth {ess_chain:.1f} "
                   f"independent draws (effective sample size; floor {CHAIN_ESS_FLOOR}): "
                   f"{fix}")]
    elif hasattr(post, "u0"):
        h, (p0, p1) = post.history, post.params
        m = np.r_[post.u0[0], getattr(h, f"mean_{p0}")]
        with np.errstate(all="ignore"):
            lc = np.r_[post.u0[1], np.log(getattr(h, f"mean_{p1}"))]
            still = ((np.abs(np.diff(m)) <= 1e-9 * np.exp(lc[:-1]))
                     & (np.abs(np.diff(lc)) <= 1e-9))
        if still.size:
            start = ", ".join(f"{v:.4g}" for v in (post.u0[0], math.exp(post.u0[1])))
            what = (f"never moved from its start ({start})" if still.all() else
                    f"did not move at {still.sum()} of its {still.size} steps")
            checks = [("stalled_steps", float(still.mean()), "ceiling", STALL_CEILING,
                       f"the online gradient {what} (stalled steps: ceiling "
                       f"{STALL_CEILING:.0%}): the releases carried no information at its "
                       f"estimates (clipped at one end of intervals far from them); its "
                       f"output is not an estimate: use a posterior method (--method "
                       f"smc-marginal)")]
    elif getattr(getattr(post, "history", None), "ess", None):
        e = float(post.history.ess[-1])
        note = prior_note(post.family, post.quantile(0.5)) if e < ESS_FLOOR else None
        what = ("collapsed onto one particle" if e < 1.5 else
                f"rest on fewer than {ESS_FLOOR} particles")
        checks = [("ess", e, "floor", ESS_FLOOR,
                   f"{method}'s weights {what} (final ESS {e:.2f} of {len(post.w)}): its "
                   f"posterior summary is not reliable here; "
                   + (f"the likely cause is the prior: {note}" if note else
                      "raise n_particles (--particles) or use the exact posterior"))]
    post.reliability = {}
    for name, value, side, bound, text in checks:
        bad = value < bound if side == "floor" else value > bound
        if bad and not _QUIET:
            warnings.warn(text, ReliabilityWarning, stacklevel=stacklevel + 1)
        post.reliability[name] = {"value": value, side: bound,
                                  "warning": text if bad else None}
    return post.reliability


# ------------------------------------------------------------------ prior-data conflict
CONFLICT_LEVEL = 0.999  # central prior interval a posterior median must fall in
CONFLICT_P = 0.001  # smallest prior-predictive p-value of the mean release not warned of
CONFLICT_SIMS = 20_000  # simulated data sets: p near 0.001 has Monte Carlo sd 2.2e-4
CONFLICT_RELEASES = 2000  # releases whose mean is simulated (a random subset beyond)
NARROW = 1e-4  # n I_X v0 below this: the data cannot move the prior (narrow_prior)
_SIM_BLOCK = 2_000_000  # simulated releases held in memory at once
_FIRST_BLOCK = 1000  # simulated data sets a block


def describe_prior(family) -> str:
    """The family's prior in one phrase, for a warning."""
    prior = getattr(family, "prior", None)
    if prior is not None and hasattr(prior, "describe"):
        return f"the prior {prior.describe(family.params)}"
    return f"the {family.name} family's prior"


def prior_quantiles(family, q, draws=20_000):
    """Marginal prior quantiles, shape (len(q), d): the prior object's (``scipy.stats``),
    else those of ``draws`` prior draws (a fixed seed)."""
    prior = getattr(family, "prior", None)
    if prior is not None and hasattr(prior, "quantiles"):
        return np.asarray(prior.quantiles(q), float)
    th = np.asarray(family.sample_prior(np.random.default_rng(0), draws), float)
    return np.quantile(th.reshape(draws, -1), q, axis=0)


def prior_note(family, *thetas):
    """Where a theta in ``thetas`` (a posterior's point) lies outside the prior's central
    99.9% interval of a parameter: a phrase naming the prior and saying what to do, for
    a warning that would otherwise blame the sampler; else None."""
    tail = (1.0 - CONFLICT_LEVEL) / 2
    try:
        lims = prior_quantiles(family, [tail, 1.0 - tail])
    except (ValueError, NotImplementedError):
        return None
    for theta in thetas:
        for j, (name, v) in enumerate(zip(family.params, np.ravel(theta))):
            if not lims[0, j] <= v <= lims[1, j]:
                return (f"{name} = {v:.4g} lies outside the central 99.9% interval "
                        f"[{lims[0, j]:.4g}, {lims[1, j]:.4g}] of {describe_prior(family)}; "
                        f"state a prior in the data's units (a plausible range of the "
                        f"values), and check it with prior_data_conflict")
    return None


def mean_release_pvalue(family, y, l, r, eps, mechanism="laplace", seed=0,
                        sims=CONFLICT_SIMS):
    """The two-sided prior-predictive p-value of the mean release: ``sims`` data sets
    drawn as theta ~ eta, x_t ~ P_theta, y_t = T_{l_t}^{r_t}(x_t) + (r_t - l_t)/eps V_t
    with the realised intervals (eq. 10); p = 2 min(#{T <= mean y} + 1, #{T >= mean y}
    + 1) / (sims + 1), capped at 1.  The simulation stops early once p cannot end below
    :data:`CONFLICT_P` (p is then that of the data sets drawn): a data set the prior
    covers costs a block of 1000.  Beyond :data:`CONFLICT_RELEASES` releases the mean is
    that of a random subset of that many (from the same seed), which bounds the cost at
    ``sims`` x 2000 draws and keeps the p-value valid.  Uses only the public releases (no
    privacy cost)."""
    from dpbook.model.mechanisms import clip, get_mechanism, noise_scale

    y, l, r = (np.asarray(v, float).ravel() for v in (y, l, r))
    mech = get_mechanism(mechanism)
    rng = np.random.default_rng(seed)
    if y.size > CONFLICT_RELEASES:  # a random subset: still a valid p-value, bounded cost
        keep = np.sort(rng.choice(y.size, CONFLICT_RELEASES, replace=False))
        y, l, r = y[keep], l[keep], r[keep]
    b = noise_scale(l, r, eps)
    t_obs = float(np.mean(y))
    below = above = done = 0
    block = max(1, min(_FIRST_BLOCK, _SIM_BLOCK // max(y.size, 1)))
    # stop once min(below, above) + 1 >= CONFLICT_P (sims + 1) / 2: the full run's p
    # could no longer fall below CONFLICT_P (the counts only grow), so the warning is the
    # same; the p returned is then that of the simulations made
    while done < sims and 2.0 * (min(below, above) + 1) < CONFLICT_P * (sims + 1):
        k = min(block, sims - done)
        theta = np.asarray(family.sample_prior(rng, k), float).reshape(k, -1)
        theta = theta[np.isfinite(theta).all(axis=1)]  # a gamma draw of 0: c = inf
        x = family.sample(rng, *family.theta_args(theta), size=(len(theta), y.size))
        t = np.mean(clip(x, l, r) + b * mech.sample(rng, size=x.shape), axis=1)
        below += int(np.sum(t <= t_obs))
        above += int(np.sum(t >= t_obs))
        done += len(theta)
        if len(theta) == 0:
            break
    return min(1.0, 2.0 * (min(below, above) + 1) / (done + 1))


def prior_data_conflict(family, y, l, r, eps, mechanism="laplace", medians=None, seed=0,
                        sims=CONFLICT_SIMS) -> list:
    """One-line warnings (an empty list when there is none) that the prior and the
    released data disagree, naming the prior as the cause:

    * a posterior median in ``medians`` ({parameter name: value}, optional) outside the
      prior's central 99.9% interval of that parameter;
    * the prior-predictive p-value of the mean release below 0.001
      (:func:`mean_release_pvalue`, with the realised intervals, two-sided);
    * a prior too narrow for n releases to move it (:func:`narrow_prior`, with
      ``medians``).

    It reads only the public releases (y, l, r, eps), never sensitive values, so it costs
    no privacy.  ``sims`` = 20,000 simulated data sets (n draws of x and of the noise
    each, n at most 2000, in blocks, from ``numpy.random.default_rng(seed)``): a p-value
    near 0.001 has Monte Carlo sd sqrt(0.001 x 0.999 / 20000) = 2.2e-4."""
    from dpbook.model.families import as_family
    from dpbook.validation import check_eps, check_observations

    family = as_family(family)
    y, l, r = check_observations(y, l, r)
    eps = check_eps(eps)
    out = []
    what = describe_prior(family)
    if medians:
        unknown = [k for k in medians if k not in family.params]
        if unknown:
            raise ValueError(f"unknown parameter {unknown[0]!r} in medians; the {family.name} "
                             f"family has {', '.join(family.params)}")
        tail = (1.0 - CONFLICT_LEVEL) / 2
        lims = prior_quantiles(family, [tail, 1.0 - tail])
        for name, value in medians.items():
            lo, hi = lims[:, family.params.index(name)]
            if not lo <= float(value) <= hi:
                out.append(f"prior-data conflict: the posterior median of {name} ({value:.4g}) "
                           f"lies outside the central 99.9% interval [{lo:.4g}, {hi:.4g}] of "
                           f"{what}: the prior, not the sampler, is at odds with the data; "
                           f"state a prior in the data's units (a plausible range of the "
                           f"values)")
        out += narrow_prior(family, y.size, medians, seed)
    p = mean_release_pvalue(family, y, l, r, eps, mechanism, seed, sims)
    if p < CONFLICT_P:
        out.append(f"prior-data conflict: the mean release ({np.mean(y):.4g}) has "
                   f"prior-predictive p-value {p:.2g} < {CONFLICT_P:g} under {what} (with "
                   f"the realised intervals): the prior does not cover the data's units; "
                   f"state a prior in the data's units (a plausible range of the values)")
    return out


def narrow_prior(family, n, medians, seed=0, draws=4000) -> list:
    """One-line warnings naming each parameter theta_j whose prior is so narrow that n
    releases cannot move it: n I_jj v_j < NARROW, with v_j the prior's variance (from its
    interquartile range, (IQR / 1.349)^2) and I_jj the Fisher information of one
    unreleased value X about theta_j at the posterior ``medians`` (E[score^2] over
    ``draws`` draws of X).  A release is a function of X and independent noise, so it
    carries no more information than X (data processing), and the posterior's precision
    is at most 1/v_j + n I_jj: its sd is the prior's to within NARROW / 2, and its median
    moves by at most ~sqrt(NARROW) prior sd per sd of disagreement."""
    try:
        theta = [float(medians[p]) for p in family.params]
        v0 = (np.diff(prior_quantiles(family, [0.25, 0.75]), axis=0)[0] / 1.349) ** 2
        rng = np.random.default_rng(seed)
        with np.errstate(all="ignore"):
            x = family.sample(rng, *theta, size=draws)
            info = [float(np.mean(np.square(s))) for s in family.score(x, *theta)]
    except (KeyError, NotImplementedError, ValueError):
        return []  # no median of every parameter, or a family without what this needs
    sd = [f"{math.sqrt(v):.3g}" if v > 0 else "0 (to double precision)" for v in v0]
    return [f"prior too narrow: {describe_prior(family)} gives {p} a prior sd of {s}, "
            f"which {n} releases cannot move (n x Fisher information x prior variance = "
            f"{n * i * v:.2g} < {NARROW:g}): the posterior of {p} is its prior; widen the "
            f"prior of {p}"
            for p, v, i, s in zip(family.params, v0, info, sd) if n * i * v < NARROW]
