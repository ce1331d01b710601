"""--family (a shipped family by name, or a user's class by ``module:Class`` or
``path/to/file.py:Class``), the families' options, --mechanism, and the prior: --range,
--prior paper, --prior-loc / --prior-scale2."""

from __future__ import annotations

import argparse
import sys
import warnings

from dpbook.cli.args import Parser, UsageError, boolean, finite_float, integer

# the time a user's family file has to import, and each of its methods to return on a few
# points (dpbook.model.checks.probe_family): a loop that never ends hung dpbook
USER_CODE_SECONDS = 30.0
FAMILY_HELP = ("population family: {names} (default normal), or a Family subclass of "
               "your own as module:Class or path/to/file.py:Class, whose own options "
               "(its class's 'options') then follow, listed by --help after --family")


def add_family_arguments(p):
    """--family, the families' options (e.g. --df) and --mechanism on a sub-command."""
    from dpbook.model.families import available
    from dpbook.model.mechanisms import available_mechanisms

    fams = available()
    p.add_argument("--family", default="normal", metavar="NAME",
                   help=FAMILY_HELP.format(names=", ".join(fams)))
    for opt, declared in _shipped_options().items():
        _add_option(p, opt, *declared)
    p.add_argument("--mechanism", choices=available_mechanisms(), default="laplace",
                   help="privacy mechanism (default laplace)")


def _shipped_options() -> dict:
    from dpbook.model.families import available

    out = {}
    for cls in available().values():
        for opt, declared in cls.options.items():
            out.setdefault(opt, declared)
    return out


def _add_option(p, opt, typ, default, text):
    p.add_argument(f"--{opt.replace('_', '-')}", dest=f"family_opt_{opt}", default=None,
                   metavar=opt.upper(),
                   type={float: finite_float, int: integer, bool: boolean}.get(typ, typ),
                   help=f"{text} (default {default})")


def _parsers(parser):
    """The parser and its sub-commands' parsers, nested ones (curator init) too."""
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(s): s for s in action.choices.values()}.values():
                yield from _parsers(sub)


def add_user_family_options(parser, argv=None):
    """The options of a user's family (its class's ``options``, e.g. a shape) on the
    sub-commands that take --family: a first pass reads --family alone; when it names a
    class (``module:Class``, ``path/to/file.py:Class``), the class is imported and its
    options are added to those sub-commands before the command line is parsed, so that
    ``--help`` after ``--family`` lists them.  An option that clashes with one of
    dpbook's own, or is not declared as (type, default, help), is a UsageError."""
    pre = Parser(add_help=False)
    pre.add_argument("--family")
    spec = pre.parse_known_args(argv)[0].family
    if not spec or ":" not in spec:
        return
    cls, shipped = user_family(spec), _shipped_options()
    for sub in _parsers(parser):
        if sub.get_default("family") is None:
            continue
        sub.set_defaults(family_class=cls)
        for opt, declared in cls.options.items():
            if opt in shipped:
                continue
            try:
                _add_option(sub, opt, *declared)
            except argparse.ArgumentError:
                raise UsageError(f"--family {spec}: its option {opt!r} clashes with "
                                 f"dpbook's own --{opt.replace('_', '-')}") from None
            except (TypeError, ValueError):
                raise UsageError(f"--family {spec}: options maps a name to (type, default, "
                                 f"help), not {opt!r} to {declared!r}") from None


def user_family(spec: str) -> type:
    """The Family subclass named by ``module:Class`` or ``path/to/file.py:Class``
    (:func:`dpbook.model.families.family_class`).  Its module is pickled by value
    (cloudpickle), so the experiment's worker processes and Dask workers receive the
    class itself and need neither the file nor a ``__main__`` guard in a wrapper script.
    UsageError (one line) for a wrong path, module or class."""
    import cloudpickle

    from dpbook.model.checks import time_limit
    from dpbook.model.families import family_class

    try:
        with time_limit(USER_CODE_SECONDS, "its import"):
            cls = family_class(spec)
    except ValueError as e:
        raise UsageError(f"--family {spec}: {e}") from None
    if not cls.__module__.startswith("dpbook."):
        cloudpickle.register_pickle_by_value(sys.modules[cls.__module__])
    return cls


def user_code_error(e: BaseException) -> str | None:
    """One line for an exception raised in a user's family while dpbook ran it (a
    method that fails on inputs the load-time probe did not try, or one that it lacks):
    the class, the method and the error; None for an error of dpbook's own code, whose
    traceback is kept."""
    from dpbook.model.families import Family

    where = None
    tb = e.__traceback__
    while tb is not None:  # the innermost frame of a method of a user's family
        obj = tb.tb_frame.f_locals.get("self")
        if isinstance(obj, Family) and not type(obj).__module__.startswith("dpbook.") and (
                isinstance(e, NotImplementedError) or
                not tb.tb_frame.f_globals.get("__name__", "").startswith("dpbook.")):
            where = obj, tb.tb_frame.f_code.co_name
        tb = tb.tb_next
    if where is None:
        return None
    obj, method = where
    file = getattr(sys.modules.get(type(obj).__module__), "__file__", None)
    name = f"the family {type(obj).__name__}" + (f" of {file}" if file else "")
    if isinstance(e, NotImplementedError):
        return f"{name}: {e}"
    if isinstance(e, SystemExit):
        return f"{name}: its {method} called sys.exit({e.code!r})"
    first = str(e).splitlines()[0] if str(e) else ""
    return f"{name}: its {method} raised {type(e).__name__}: {first}"


def family_from_args(args):
    """The Family object and mechanism name chosen on the command line."""
    from dpbook.model.families import get_family

    opts = {k[len("family_opt_"):]: v for k, v in vars(args).items()
            if k.startswith("family_opt_") and v is not None}
    if ":" not in args.family:
        try:
            return get_family(args.family, **opts), args.mechanism
        except ValueError as e:
            if str(e).startswith("unknown family"):
                raise UsageError(f"{e}, or module:Class or path/to/file.py:Class") from None
            raise
    cls = getattr(args, "family_class", None) or user_family(args.family)
    unknown = set(opts) - set(getattr(cls, "options", {}))
    if unknown:
        raise UsageError(f"--{sorted(unknown)[0].replace('_', '-')} is not an option of "
                         f"{args.family}")
    from dpbook.model.checks import probe_family, time_limit

    try:
        with time_limit(USER_CODE_SECONDS, f"{cls.__name__}()"):
            family = cls(**opts)
    except ValueError:  # a value its __init__ refuses, in its own words
        raise
    except Exception as e:  # noqa: BLE001 - whatever the user's code raises: one line
        first = str(e).splitlines()[0] if str(e) else ""
        raise UsageError(f"--family {args.family}: {cls.__name__}() raised "
                         f"{type(e).__name__}: {first}") from None
    try:  # before any use: its methods on a few points (milliseconds)
        probe_family(family, seconds=USER_CODE_SECONDS)
    except ValueError as e:
        raise UsageError(f"--family {args.family}: {e}") from None
    return family, args.mechanism


def add_prior_arguments(p, with_range=True, per_column=False):
    """The prior's options; ``per_column``: --range once per column (``dpbook stream
    --columns``), a list of [LO, HI]."""
    if with_range:
        p.add_argument("--range", type=finite_float, nargs=2, default=None,
                       metavar=("LO", "HI"), action="append" if per_column else None,
                       help="the plausible range of the values, public information you "
                            "state (never computed from the data): it sets the prior in "
                            "the data's units, location ~ N((LO+HI)/2, ((HI-LO)/2)^2), "
                            "scale^2 ~ IG(1, ((HI-LO)/20)^2) (a Poisson: a Gamma with mean "
                            "(LO+HI)/2 and sd (HI-LO)/2), and so the first interval"
                            + ("; with --columns, one --range per column, in their order "
                               "(a normal-inverse-Wishart prior)" * per_column))
        p.add_argument("--prior", choices=("paper",), default=None,
                       help="paper: Section 6's prior, for data in its units")
    p.add_argument("--prior-loc", type=finite_float, nargs=2, default=None,
                   metavar=("MEAN", "VAR"), help="prior of the location: N(MEAN, VAR) "
                   "(Section 6's: 0 10000)")
    p.add_argument("--prior-scale2", type=finite_float, nargs=2, default=None,
                   metavar=("SHAPE", "SCALE"), help="prior of the squared scale: "
                   "IG(SHAPE, SCALE) (Section 6's: 1 1)")


def prior_hyperparameters(args) -> dict:
    """The prior's hyperparameters that --prior-loc / --prior-scale2 set (by name, as
    LocationScalePrior takes them); empty when neither is given."""
    hyper = {}
    if getattr(args, "prior_loc", None) is not None:
        hyper.update(loc_mean=args.prior_loc[0], loc_var=args.prior_loc[1])
    if getattr(args, "prior_scale2", None) is not None:
        hyper.update(scale2_shape=args.prior_scale2[0], scale2_scale=args.prior_scale2[1])
    return hyper


NO_PRIOR = ("no prior in the data's units: give --range LO HI (the plausible range of "
            "the values, public knowledge), --prior-loc/--prior-scale2, or --prior paper "
            "(Section 6's, for values near 0 with spread near 1)")


def prior_from_args(family, args, unstated=None):
    """The family with the prior the command line states: --prior-loc / --prior-scale2
    (location-scale families), else --prior paper (the family's own, Section 6's), else
    --range (:func:`dpbook.model.prior.prior_from_range`).  The prior is fixed here,
    before any value is read.  With none of them, ``unstated="refuse"`` is a UsageError
    (a wrong prior spends the privacy budget for nothing); else the family's own prior
    is kept (``dpbook posterior`` then warns, :func:`warn_if_no_prior`)."""
    from dpbook.model.prior import prior_from_range

    hyper = prior_hyperparameters(args)
    paper = getattr(args, "prior", None) == "paper"
    rng = getattr(args, "range", None)
    if hyper and paper:
        raise UsageError("give --prior paper or --prior-loc/--prior-scale2, not both")
    if rng is not None and (hyper or paper):  # one of them would be ignored
        raise UsageError("give --range or an explicit prior (--prior paper, --prior-loc, "
                         "--prior-scale2), not both")
    if hyper:
        if not family.location_scale:
            raise UsageError(f"--prior-loc and --prior-scale2 set the prior of a "
                             f"location-scale family, not of {family.name}")
        return family.with_prior(**hyper)
    if paper:
        return family
    if rng is not None:
        return prior_from_range(family, *rng)
    if unstated == "refuse":
        raise UsageError(f"{NO_PRIOR}: a prior in the wrong units spends the privacy "
                         f"budget for nothing")
    return family


def warn_if_no_prior(args):
    """After ``dpbook posterior`` (post-processing of public releases, no budget spent):
    a warning when no prior was stated."""
    if not (prior_hyperparameters(args) or args.prior or args.range is not None):
        from dpbook.validation import ReliabilityWarning

        warnings.warn(f"{NO_PRIOR}; the family's own prior was used", ReliabilityWarning,
                      stacklevel=2)


def prior_record(family):
    """The prior in a JSON output: ``prior.to_dict()``, else its description."""
    prior = getattr(family, "prior", None)
    if prior is None:
        return None
    if hasattr(prior, "to_dict"):
        return prior.to_dict()
    return {"kind": prior.describe(family.params) if hasattr(prior, "describe") else
            repr(prior)}
