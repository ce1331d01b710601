"""The environment is pinned in one place (requirements.txt); environment.yml mirrors it."""

import os
import re
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?==([^\s;#]+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_lines():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [s for s in (line.strip() for line in lines) if s and not s.startswith("#")]


def _pins() -> dict[str, str]:
    return {_norm(m.group(1)): m.group(3) for m in map(PIN.match, _requirement_lines())}


def test_requirements_are_exact_pins():
    bad = [line for line in _requirement_lines() if not PIN.match(line)]
    assert not bad, f"requirements.txt lines that are not exact '==' pins: {bad}"
    names = [_norm(PIN.match(line).group(1)) for line in _requirement_lines()]
    assert len(names) == len(set(names)), "duplicate packages in requirements.txt"
    assert "dpbook" not in names and "pip" not in names and "setuptools" not in names


def test_requirements_cover_runtime_book_and_test_tools():
    pins = _pins()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime = [_norm(re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0]) for d in project["dependencies"]]
    tools = ["jupyter-book", "papermill", "jupytext", "ipykernel", "matplotlib", "seaborn",
             "sphinxcontrib-bibtex", "pytest", "pytest-xdist", "ruff", "selenium", "pyyaml"]
    missing = [name for name in runtime + tools if name not in pins]
    assert not missing, f"not pinned in requirements.txt: {missing}"


def test_environment_yml_mirrors_requirements():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    deps = env["dependencies"]
    conda = [d for d in deps if isinstance(d, str)]
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "python=3.11" in conda
    assert "pip" in conda
    assert "-r requirements.txt" in pip and "-e ." in pip
    # Pins live in requirements.txt only; any pin repeated here must agree with it.
    pins = _pins()
    for entry in pip + conda[1:]:
        m = re.match(r"^([A-Za-z0-9._-]+)\s*=?=\s*([^\s=]+)$", entry)
        if m and _norm(m.group(1)) not in ("python", "pip"):
            assert pins.get(_norm(m.group(1))) == m.group(2), f"{entry} disagrees with pins"


IN_ENV = sys.prefix != sys.base_prefix or "CONDA_PREFIX" in os.environ


@pytest.mark.skipif(not IN_ENV, reason="not running inside a virtual or conda environment")
def test_installed_versions_match_pins():
    pins = _pins()
    wrong = {}
    for name, version in pins.items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            wrong[name] = (version, None)
            continue
        if installed != version:
            wrong[name] = (version, installed)
    assert not wrong, f"installed differs from requirements.txt (pinned, installed): {wrong}"
