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


def family_class(spec: str) -> type:
    """The Family subclass named by ``module:Class`` or ``path/to/file.py:Class`` (a file
    is imported once per process, as a module named after its resolved path, with its
    directory on ``sys.path`` while it runs, as ``python file.py`` has).  A module that
    is not installed is looked for in the current directory, as ``python -m`` does, and
    imported as that file.  ValueError (one line) for a wrong spec, path, module or
    class."""
    import hashlib
    import importlib.util
    import sys
    from pathlib import Path

    where, _, name = spec.rpartition(":")
    if not where or not name:
        raise ValueError("write module:Class or path/to/file.py:Class")
    if where.endswith(".py") or "/" in where or "\\" in where:
        path = Path(where)
        if path.suffix != ".py":
            raise ValueError(f"a family file is a Python file ending in .py, not {where}")
        if not path.is_file():
            raise ValueError(f"no such file {where}")
        modname = "dpbook_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        module = sys.modules.get(modname)
        if module is None:
            loader = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(loader)
            sys.modules[modname] = module
            folder = str(path.resolve().parent)
            sys.path.insert(0, folder)  # only while it runs: other imports are unchanged
            try:
                loader.loader.exec_module(module)
            except Exception as e:
                del sys.modules[modname]
                first = str(e).splitlines()[0] if str(e) else ""
                raise ValueError(f"{where} failed to run: {type(e).__name__}: {first}") from None
            finally:
                sys.path.remove(folder)
    else:
        try:
            module = importlib.import_module(where)
        except ModuleNotFoundError as e:
            file = Path(*where.split(".")).with_suffix(".py")
            if f"{where}.".startswith(f"{e.name}.") and file.is_file():
                # by its path, which a curator state records: it loads from anywhere
                return family_class(f"{file.resolve()}:{name}")
            raise ValueError(f"cannot import module {where} ({e}), nor find {file} in the "
                             "current directory") from None
        except Exception as e:  # noqa: BLE001 - whatever the module raises: one line
            first = str(e).splitlines()[0] if str(e) else ""
            raise ValueError(f"cannot import module {where} ({type(e).__name__}: {first})"
                             ) from None
    cls = getattr(module, name, None)
    if cls is None:
        raise ValueError(f"{where} defines no {name}")
    if not (isinstance(cls, type) and issubclass(cls, Family)):
        raise ValueError(f"{name} is not a dpbook Family subclass")
    return cls


def as_family(family) -> Family:
    """None -> the normal family (the paper's); a name -> get_family; else as is."""
    if family is None:
        return get_family("normal")
    if isinstance(family, str):
        return get_family(family)
    if not isinstance(family, Family):
        raise ValueError(f"family must be a name or a dpbook Family, got {family!r}")
    return family
