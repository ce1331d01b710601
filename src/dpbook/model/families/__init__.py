"""Population families {P_theta}: the shipped ones and the registry.

>>> from dpbook.model.families import get_family
>>> get_family("student_t", df=3)
<family student_t(loc, scale; df=3)>

Every module of this package that defines a :class:`Family` subclass with a ``name``
is found automatically, so a new family is one new module (or, without the command
line, one object passed to the algorithms).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

from dpbook.model.families.base import Family, LocationScaleFamily

__all__ = ["Family", "LocationScaleFamily", "get_family", "available", "as_family",
           "register_family", "unregister_family"]


def _discover() -> dict:
    found = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name == "base":
            continue
        mod = importlib.import_module(f"{__name__}.{info.name}")
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if issubclass(obj, Family) and obj.__module__ == mod.__name__ and obj.name:
                found[obj.name] = obj
    return found


_REGISTRY: dict | None = None


def available() -> dict:
    """{name: Family subclass} of the shipped families (normal first)."""
    global _REGISTRY
    if _REGISTRY is None:
        reg = _discover()
        _REGISTRY = {k: reg[k] for k in sorted(reg, key=lambda k: (k != "normal", k))}
    return dict(_REGISTRY)


def register_family(cls: type) -> None:
    """Make a Family subclass defined outside this package available by its ``name``
    (``get_family``, the command line's ``--family``, the experiment's configuration)."""
    if not (isinstance(cls, type) and issubclass(cls, Family) and cls.name):
        raise ValueError("register_family takes a Family subclass with a name")
    available()
    _REGISTRY[cls.name] = cls


def unregister_family(name: str) -> None:
    """Remove a family added by :func:`register_family` (not a shipped one)."""
    cls = available().get(name)
    if cls is not None and cls.__module__.startswith(__name__ + "."):
        raise ValueError(f"{name!r} is a shipped family")
    _REGISTRY.pop(name, None)


def get_family(name: str, **options) -> Family:
    """A family object by name, with its options (e.g. df for student_t)."""
    reg = available()
    if name not in reg:
        raise ValueError(f"unknown family {name!r}; choose one of {', '.join(reg)}")
    cls = reg[name]
    unknown = set(options) - set(cls.options)
    if unknown:
        raise ValueError(f"the {name} family has no option {sorted(unknown)[0]!r}")
    return cls(**options)


def as_family(family) -> Family:
    """None -> the normal family (the paper's); a name -> get_family; else as is."""
    if family is None:
        return get_family("normal")
    if isinstance(family, str):
        return get_family(family)
    if not isinstance(family, Family):
        raise ValueError(f"family must be a name or a dpbook Family, got {family!r}")
    return family
