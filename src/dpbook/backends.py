"""Backends: the one place where a compiled implementation of an algorithm is chosen.

Every algorithm of dpbook is written once for any family and mechanism (numpy, in the
algorithm's own subpackage).  For the paper's model, the normal family with the Laplace
mechanism (Section 6), compiled kernels compute the same quantities much faster.  The
public entry points (:class:`dpbook.smc.SMC`, :func:`dpbook.mhaar.mhaar`,
:func:`dpbook.posterior.exact_posterior`, :mod:`dpbook.fisher`) ask :func:`backend` which
implementation to run; the command line, the experiment runner and the notebooks never
choose one themselves.

The registry is keyed by (algorithm, family class, mechanism class), matched exactly:
a subclass of :class:`~dpbook.model.families.normal.Normal` (another prior, say) is not
the model the kernel implements, so it runs the generic code.  Targets are written as
``"module:attribute"`` and imported when first asked for, so that importing the model
never loads an algorithm.

Adding a backend is one call of :func:`register` (see "Extending dpbook" in the README).
"""

from __future__ import annotations

import importlib

from dpbook.model.families import as_family
from dpbook.model.families.normal import Normal
from dpbook.model.mechanisms import LaplaceMechanism, get_mechanism

ALGORITHMS = ("smc", "mhaar", "posterior", "fisher_exact", "fisher_mc", "fisher_grid",
              "loglik_particles")

_REGISTRY: dict = {}


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
    None (run the generic code).  ``family``: a name, a Family or None (normal)."""
    key = (algorithm, type(as_family(family)), type(get_mechanism(mechanism)))
    target = _REGISTRY.get(key)
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        target = getattr(importlib.import_module(module), attr)
        _REGISTRY[key] = target
    return target


def is_compiled(family=None, mechanism="laplace") -> bool:
    """Whether the SMC of this model runs a registered (compiled) backend."""
    return backend("smc", family, mechanism) is not None


# the compiled kernels of the paper's model (normal family, Laplace mechanism)
for _algorithm, _target in (
    ("smc", "dpbook.smc.normal_laplace:NormalLaplaceSMC"),
    ("mhaar", "dpbook.mhaar.normal_laplace:mhaar_normal_laplace"),
    ("posterior", "dpbook.posterior.normal_laplace:exact_posterior_normal_laplace"),
    ("fisher_exact", "dpbook.likelihood.normal_laplace:fisher_exact_theta"),
    ("fisher_mc", "dpbook.fisher.normal_mc:fisher_mc_theta"),
    ("fisher_grid", "dpbook.fisher.normal_mc:fisher_grid"),
    ("loglik_particles", "dpbook.likelihood.normal_laplace:loglik_particles"),
):
    register(_algorithm, Normal, LaplaceMechanism, _target)
