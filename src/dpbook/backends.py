"""Backends: the one place where a compiled implementation of an algorithm is chosen.

Every algorithm of dpbook is written once for any family and mechanism (numpy, in the
algorithm's own subpackage).  For the paper's model, the normal family with the Laplace
mechanism (Section 6), compiled kernels compute the same quantities much faster.  The
public entry points (:func:`dpbook.mhaar.mhaar`,
:func:`dpbook.posterior.exact_posterior`, :mod:`dpbook.fisher`) ask :func:`backend` which
implementation to run; the command line, the experiment runner and the notebooks never
choose one themselves.

The registry is keyed by (algorithm, family class, mechanism class); a family matches
by inheritance (:func:`~dpbook.model.families.base.inherits_model`): a subclass of
:class:`~dpbook.model.families.normal.Normal` keeps its kernels unless it defines one of
the methods that make the model anew, and the mechanism's class matches exactly.  A
family whose prior is not Section
6's (``family.with_prior(...)``), except for the kernels that take the prior as an
argument (the exact posterior's and MHAAR's, called with ``prior=family.prior``) and
those it does not enter (Fisher
information, likelihood).  (The latent SMC is not chosen here: ``SMC(...)`` asks its
compiled subclasses, :meth:`dpbook.smc.SMC.for_model`.)  Targets are written as
``"module:attribute"`` and imported when first asked for, so that importing the model
never loads an algorithm.

Where no kernel is registered for the exact classes, an *engine* compiled for any model
may take the model (:data:`ENGINES`): MHAAR's (:mod:`dpbook.mhaar.compiled_chain`) and
the exact posterior's log-likelihood grid
(:mod:`dpbook.likelihood.compiled_quadrature`, also the marginal SMC's and the reliability checks'
likelihood at particles, ``loglik_particles``, and its terms release by release,
``loglik_terms``, and the score of one release, ``score``, that the online gradient of
Section 7 steps with) compile any location-scale family whose functions numba can
compile.  ``posterior_model`` is what the one grid pipeline of
:mod:`dpbook.posterior.exact` runs: the paper's model object (its closed-form
likelihood) or the engine's; ``posterior`` a whole replacement.  Algorithm 4 / eq. (8)
has one engine for every model (:mod:`dpbook.fisher.mc`): what is chosen here is only
the class of its primitives, the paper model's own draws and closed-form score
(registered) or the compiled or numpy ones of any other model (its ENGINES entry).

Adding a backend is one call of :func:`register` (the book's page "Extending dpbook").
"""

from __future__ import annotations

import functools
import importlib

from dpbook.model.families import as_family
from dpbook.model.families.base import inherits_model
from dpbook.model.families.normal import Normal
from dpbook.model.mechanisms import LaplaceMechanism, get_mechanism
from dpbook.model.prior import LocationScalePrior

ALGORITHMS = ("mhaar", "posterior", "posterior_model", "fisher_exact", "fisher_mc",
              "loglik_particles", "loglik_terms", "score")
# kernels that need no prior argument: the prior does not enter
PRIOR_FREE = ("fisher_exact", "fisher_mc", "loglik_particles", "loglik_terms", "score")
# kernels called with prior=family.prior
PRIOR_ARGUMENT = ("posterior", "posterior_model", "mhaar")

_REGISTRY: dict = {}
# Compiled engines for any model: asked, with (family, mechanism), for the class or
# function to run when no kernel is registered for the exact classes (None: the
# numpy code)
ENGINES = {"fisher_mc": "dpbook.fisher.mc_primitives:engine_class",
           "mhaar": "dpbook.mhaar.compiled_chain:engine_mhaar",
           "posterior_model": "dpbook.posterior.exact:engine_model",
           "loglik_particles": "dpbook.likelihood.compiled_quadrature:engine_loglik",
           "loglik_terms": "dpbook.likelihood.compiled_quadrature:engine_terms",
           "score": "dpbook.likelihood.compiled_quadrature:engine_score"}


def register(algorithm: str, family_cls: type, mechanism_cls: type, target) -> None:
    """Run ``target`` for ``algorithm`` when the family and mechanism are exactly these
    classes.  ``target``: the implementation, or its ``"module:attribute"`` name."""
    if algorithm not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {algorithm!r}; choose one of {', '.join(ALGORITHMS)}")
    _REGISTRY[(algorithm, family_cls, mechanism_cls)] = target


def unregister(algorithm: str, family_cls: type, mechanism_cls: type) -> None:
    """Remove a registration (the generic code runs again)."""
    _REGISTRY.pop((algorithm, family_cls, mechanism_cls), None)


def backend(algorithm: str, family=None, mechanism="laplace"):
    """The registered implementation of ``algorithm`` for this family and mechanism, or
    None (run the generic code).  ``family``: a name, a Family or None (normal).  For a
    family with a prior other than Section 6's, a kernel of ``PRIOR_ARGUMENT`` comes with
    ``prior=`` bound, and one that compiles the prior in is not used."""
    fam, mech = as_family(family), type(get_mechanism(mechanism))
    key = next((k for k in _REGISTRY if k[0] == algorithm and k[2] is mech
                and inherits_model(fam, k[1])), None)
    target = _REGISTRY.get(key)
    if isinstance(target, str):
        target = _REGISTRY[key] = _resolve(target)
    if target is None and algorithm in ENGINES:  # no kernel for these classes
        return engine(algorithm, fam, mechanism)
    prior = getattr(fam, "prior", None)
    if target is None or not isinstance(prior, LocationScalePrior) or prior.is_section6 \
            or algorithm in PRIOR_FREE:
        return target
    return functools.partial(target, prior=prior) if algorithm in PRIOR_ARGUMENT else None


def engine(algorithm: str, family=None, mechanism="laplace"):
    """What the engine of ``algorithm`` (:data:`ENGINES`) runs for this model, even
    where a kernel is registered (None: the numpy code)."""
    return _resolve(ENGINES[algorithm])(as_family(family), mechanism)


def _resolve(target):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


# the compiled kernels of the paper's model (normal family, Laplace mechanism)
for _algorithm, _target in (
    ("mhaar", "dpbook.mhaar.paper_chain:mhaar_normal_laplace"),
    ("posterior_model", "dpbook.posterior.exact:PaperModel"),  # closed-form likelihood
    ("fisher_exact", "dpbook.likelihood.normal_laplace:fisher_exact_theta"),
    ("fisher_mc", "dpbook.fisher.normal_mc:PaperEngine"),  # its draws and score: eq. (8)'s engine
    ("loglik_particles", "dpbook.likelihood.normal_laplace:loglik_particles"),
    ("loglik_terms", "dpbook.likelihood.normal_laplace:loglik_terms"),
    ("score", "dpbook.likelihood.normal_laplace:compiled_score"),  # closed form, Section 7
):
    register(_algorithm, Normal, LaplaceMechanism, _target)
