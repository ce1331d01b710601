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
           "register_family", "unregister_family", "family_sha256"]


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
                module.__dpbook_sha256__ = hashlib.sha256(path.read_bytes()).hexdigest()
                loader.loader.exec_module(module)
            except (Exception, SystemExit) as e:  # a sys.exit() in the file ended dpbook
                del sys.modules[modname]
                raise ValueError(f"{where} failed to run: {_one_line(e)}") from None
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
        except (Exception, SystemExit) as e:  # whatever the module raises: one line
            raise ValueError(f"cannot import module {where} ({_one_line(e)})") from None
    cls = getattr(module, name, None)
    if cls is None:
        raise ValueError(f"{where} defines no {name}")
    if not (isinstance(cls, type) and issubclass(cls, Family)):
        raise ValueError(f"{name} is not a dpbook Family subclass")
    _check_options(cls)
    return cls


def _one_line(e: BaseException) -> str:
    if isinstance(e, SystemExit):
        return f"it called sys.exit({e.code!r})"
    first = str(e).splitlines()[0] if str(e) else ""
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


def _check_options(cls):
    """A user's class's ``options`` is {name: (type, default, help)}, names that are
    keywords of its ``__init__`` (the command line makes options of them and passes
    them on): otherwise a ValueError here, not an AttributeError or a TypeError later."""
    opts = cls.options
    if not isinstance(opts, dict):
        raise ValueError(f"{cls.__name__}.options must be a dict {{name: (type, default, "
                         f"help)}}, not {type(opts).__name__}")
    for k, v in opts.items():
        if not (isinstance(k, str) and k.isidentifier()):
            raise ValueError(f"{cls.__name__}.options: the name {k!r} is not an identifier")
        if not (isinstance(v, tuple) and len(v) == 3 and callable(v[0])):
            raise ValueError(f"{cls.__name__}.options maps {k!r} to {v!r}, not to (type, "
                             f"default, help)")
    try:
        inspect.signature(cls).bind(**{k: v[1] for k, v in opts.items()})
    except TypeError as e:  # a missing argument, or a declared option it does not take
        raise ValueError(f"{cls.__name__}.__init__ does not match its declared options "
                         f"({', '.join(opts) or 'none'}): {e}") from None
    except ValueError:  # no signature to read (a class built in C): left to the call
        pass


def family_sha256(cls) -> str | None:
    """The sha256 of the file that defines a family class imported from a file or a
    module (as first imported: what a curator state or an experiment store records, so
    that a changed file is not used silently); None for dpbook's own families and for a
    class of ``__main__`` or without a file."""
    import hashlib
    import sys

    module = sys.modules.get(getattr(cls, "__module__", ""))
    path = getattr(module, "__file__", None)
    if module is None or not path or module.__name__ == "__main__" or \
            module.__name__.startswith("dpbook."):
        return None
    if getattr(module, "__dpbook_sha256__", None) is None:
        try:
            module.__dpbook_sha256__ = hashlib.sha256(open(path, "rb").read()).hexdigest()
        except OSError:
            return None
    return module.__dpbook_sha256__


def as_family(family) -> Family:
    """None -> the normal family (the paper's); a name -> get_family; else as is."""
    if family is None:
        return get_family("normal")
    if isinstance(family, str):
        return get_family(family)
    if not isinstance(family, Family):
        raise ValueError(f"family must be a name or a dpbook Family, got {family!r}")
    return family
