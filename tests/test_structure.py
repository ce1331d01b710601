"""The package's architecture, checked from the source (ast): the rules of the layout.

1. The model (``dpbook.model``) imports no algorithm (only the utilities validation
   and vmath below it).
2. No import cycles between dpbook's modules.
3. No module imports another module's underscore names.
4. The privacy boundary: only the population, the online loop (Algorithm 1, which is
   handed a population) and the runners that build populations (the experiment's
   tasks, the calibration study, ``dpbook.online.streams.run_stream`` for a user's
   values) import ``dpbook.privacy.population``; every other module sees releases only.
5. Layers: a module imports only from its own layer or the layers below it
   (:data:`LAYERS`, from the utilities up to the book's figures and the command line).
6. The two sides of Algorithm 1 meet only in ``dpbook.online``: the releasing side
   (``dpbook.privacy``: population, individuals, curator, policies) imports no
   algorithm, and the algorithms (likelihood to posterior) import nothing of privacy.
   The imports that once ran back up the layers stay gone (named in
   :data:`GONE`).
7. The online methods are named once, in ``dpbook.online.methods``: no other module
   writes a tuple, list or set of their names, or defines a warm-up.
8. Names and sizes (issue 38): no module name is used twice in the package
   (``__init__.py`` aside); ``mhaar``, ``posterior`` and ``fisher`` import nothing from
   ``smc`` (what they share, the family compiler, the mechanisms' codes and the keyed
   streams, lives below them in ``model``, ``rng`` and ``likelihood``); ``model`` names
   no algorithm, not even in a string or a comment; no module is over 800 lines.
"""

import ast
import pathlib

import dpbook

SRC = pathlib.Path(dpbook.__file__).parent
MODULES = {}  # dotted name -> path
for path in sorted(SRC.rglob("*.py")):
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    MODULES[name] = path


def _imports(name, path):
    """(imported module, imported name or None) for every import in the module."""
    tree = ast.parse(path.read_text())
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for a in node.names:
                sub = f"{base}.{a.name}"
                out.append((sub, None) if sub in MODULES else (base, a.name))
    return out


def _dpbook_deps(name, path):
    return {m for m, _ in _imports(name, path) if m in MODULES and m != name}


def test_there_are_modules_to_check():
    assert {"dpbook.model.mechanisms", "dpbook.smc.resample_move",
            "dpbook.backends"} <= set(MODULES)


def test_model_imports_no_algorithm():
    for name, path in MODULES.items():
        if name.startswith("dpbook.model"):
            # the utilities below (validation; vmath's elementary functions, which the
            # Student-t's compiled primitives use; rng's keyed generators, which its
            # base_draw draws from) are not algorithms
            bad = {m for m in _dpbook_deps(name, path)
                   if not m.startswith(("dpbook.model", "dpbook.validation", "dpbook.vmath",
                                        "dpbook.numba_cache",
                                        "dpbook.rng"))}
            assert not bad, f"{name} imports {sorted(bad)}"


def test_no_import_cycles():
    graph = {n: _dpbook_deps(n, p) for n, p in MODULES.items()}
    # a package's __init__ re-exports its modules: an edge into a package is an edge to
    # the module that holds the name, so cycles through __init__ re-exports are skipped
    packages = {n for n, p in MODULES.items() if p.name == "__init__.py"}
    state = {}

    def visit(node, stack):
        state[node] = 1
        for dep in graph[node]:
            if dep in packages and node.startswith(dep + "."):
                continue
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep, stack + [dep])
        state[node] = 2

    for n in graph:
        if n not in state:
            visit(n, [n])


def test_no_underscore_imports_across_modules():
    for name, path in MODULES.items():
        for mod, imported in _imports(name, path):
            if mod.startswith("dpbook") and imported is not None:
                assert not imported.startswith("_") or imported == "__version__", \
                    f"{name} imports {mod}.{imported}"


def test_privacy_boundary_whole_package():
    allowed = {"dpbook.privacy.population", "dpbook.online.algorithm1",
               "dpbook.experiment.tasks", "dpbook.privacy",
               "dpbook.calibration.replication", "dpbook.online.streams"}
    seen = 0
    for name, path in MODULES.items():
        deps = {m for m, _ in _imports(name, path)}
        seen += 1
        if name not in allowed:
            assert "dpbook.privacy.population" not in deps, \
                f"{name} imports the population (it may only see releases)"
    assert seen == len(MODULES) > 30


# The layers of the package, lowest first: a module may import from its own layer and
# those below.  The algorithms do not know the online loop (Algorithm 1) that drives
# them, nor the runners that store their results, nor the book.
LAYERS = (
    {"dpbook", "dpbook.validation", "dpbook.rng", "dpbook.versions", "dpbook.data",
     "dpbook.vmath", "dpbook.parallel", "dpbook.numba_cache", "dpbook.environment"},  # utilities
    {"dpbook.model", "dpbook.multivariate.mvnormal", "dpbook.multivariate.release"},  # Sections
    # 2-4's model, and the vector's (issue 54)
    {"dpbook.privacy", "dpbook.multivariate.policy"},  # the releasing side: population,
    # individuals, curator, policies
    {"dpbook.backends", "dpbook.likelihood", "dpbook.diagnostics"},  # what the algorithms
    # evaluate, and the check of their answers against it
    {"dpbook.smc", "dpbook.mhaar", "dpbook.fisher", "dpbook.posterior",
     "dpbook.multivariate.box_fisher"},  # the algorithms
    {"dpbook.online"},  # Algorithm 1, its online posteriors by name (the long streams'
    # marginal SMC and online gradient among them), the streams
    {"dpbook.experiment", "dpbook.calibration", "dpbook.multivariate.sbc"},  # runners
    # and stores
    {"dpbook.figures", "dpbook.cli"},  # the book's figures, the command line
)


def _layer(name):
    for i, layer in enumerate(LAYERS):
        if name in layer or any(name.startswith(p + ".") for p in layer - {"dpbook"}):
            return i
    raise AssertionError(f"{name} is in no layer of LAYERS: add it there")


def test_modules_import_only_downwards():
    for name, path in MODULES.items():
        for dep in _dpbook_deps(name, path):
            assert _layer(dep) <= _layer(name), \
                f"{name} (layer {_layer(name)}) imports {dep} (layer {_layer(dep)})"


ALGORITHMS = ("dpbook.backends", "dpbook.likelihood", "dpbook.diagnostics", "dpbook.smc",
              "dpbook.mhaar", "dpbook.fisher", "dpbook.posterior")
# (importer prefix, imported prefix) pairs that once ran back up the layers (issue 24)
GONE = (("dpbook.privacy", "dpbook.smc"), ("dpbook.smc", "dpbook.privacy"),
        ("dpbook.experiment", "dpbook.figures"))


def _within(name, prefixes):
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_privacy_and_the_algorithms_meet_only_in_online():
    for name, path in MODULES.items():
        deps = _dpbook_deps(name, path)
        if _within(name, ("dpbook.privacy",)):
            bad = {d for d in deps if _within(d, ALGORITHMS)}
            assert not bad, f"{name} (the releasing side) imports {sorted(bad)}"
        if _within(name, ALGORITHMS):
            bad = {d for d in deps if _within(d, ("dpbook.privacy",))}
            assert not bad, f"{name} (an algorithm) imports {sorted(bad)}"
    for low, high in GONE:
        for name, path in MODULES.items():
            if _within(name, (low,)):
                assert not {d for d in _dpbook_deps(name, path) if _within(d, (high,))}, \
                    f"{name} imports {high} again"
    # Algorithm 1 lives with the online posteriors, not in privacy
    assert "dpbook.online.algorithm1" in MODULES and "dpbook.privacy.online" not in MODULES
    assert _layer("dpbook.online.ibis") > _layer("dpbook.smc") > _layer("dpbook.privacy")


def test_the_online_methods_are_named_once():
    from dpbook.online.methods import NAMES

    names = set(NAMES)
    for name, path in MODULES.items():
        if name == "dpbook.online.methods":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                assert "warm" not in node.name, \
                    f"{name}:{node.lineno} defines {node.name}: use dpbook.online.warm_up"
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                found = {e.value for e in node.elts if isinstance(e, ast.Constant)} & names
                assert len(found) < 2, \
                    f"{name}:{node.lineno} lists online methods {sorted(found)}: read " \
                    f"them from dpbook.online.methods"


def test_no_module_name_twice():
    seen = {}
    for name, path in MODULES.items():
        if path.name != "__init__.py":
            seen.setdefault(path.name, []).append(name)
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, f"module names used more than once: {twice}"


def test_no_smc_imports_from_the_other_algorithms():
    for name, path in MODULES.items():
        if _within(name, ("dpbook.mhaar", "dpbook.posterior", "dpbook.fisher")):
            bad = {d for d in _dpbook_deps(name, path) if _within(d, ("dpbook.smc",))}
            assert not bad, f"{name} imports {sorted(bad)}: move what it needs below smc"


def test_model_names_no_algorithm():
    import re

    algorithms = ALGORITHMS + ("dpbook.online", "dpbook.experiment", "dpbook.calibration",
                               "dpbook.figures", "dpbook.cli")
    pattern = re.compile("|".join(re.escape(a) + r"\b" for a in algorithms))
    for name, path in MODULES.items():
        if _within(name, ("dpbook.model",)):
            found = pattern.findall(path.read_text())
            assert not found, f"{name} names {sorted(set(found))}"


MAX_LINES = 800
# no exception since cli.py became the package dpbook/cli/
TOO_LONG_EXCEPTED = set()


def test_no_module_over_800_lines():
    for name, path in MODULES.items():
        n = len(path.read_text().splitlines())
        if name not in TOO_LONG_EXCEPTED:
            assert n <= MAX_LINES, f"{name} has {n} lines (at most {MAX_LINES}): split it"
