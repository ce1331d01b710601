"""Chapter 7 runs on a reader's family file (-p family path/to/file.py:Class, issue 53)."""

import importlib.util
import os
from pathlib import Path

import jupytext
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTER = ROOT / "notebooks" / "07_new_family.py"
GENLOGISTIC = "tests/data/genlogistic_family.py:GenLogistic"


def _load_run_chapters():
    spec = importlib.util.spec_from_file_location(
        "run_chapters", ROOT / "book" / "tools" / "run_chapters.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_chapters = _load_run_chapters()


def _resolve(**parameters):
    """Chapter 7's code cells up to the one that resolves the family, with papermill's
    ``parameters`` set after its parameters cell; the namespace, with what it glued and
    the figure folder it chose (no figure is written)."""
    ns = {}
    for cell in jupytext.read(CHAPTER).cells:
        if cell.cell_type != "code":
            continue
        if "family_cls =" in cell.source:
            glued = {}
            ns["glue_phrase"] = glued.__setitem__
            ns["figure_saver"] = lambda chapter, **stamp: (chapter, stamp)
            exec(cell.source, ns)
            return {**ns, "glued": glued}
        exec(cell.source, ns)
        if "parameters" in cell.metadata.get("tags", []):
            ns.update(parameters)
    raise AssertionError("no cell resolves the family")


def test_the_default_keeps_the_gumbel_and_its_names():
    ns = _resolve()
    assert ns["family_cls"] is ns["Gumbel"] and ns["THETA"] == (50.0, 3.0)
    assert ns["key"] == "" and ns["save"] == ("07_new_family", {"mode": "quick", "seed": 7})
    assert "`gumbel`" in ns["glued"]["ch07-built-with"]


def test_a_family_file_with_options_and_truth_is_keyed_apart():
    ns = _resolve(family=GENLOGISTIC, family_options={"shape": 2}, truth=[50, 3])
    assert type(ns["fam"]).__name__ == "GenLogistic" and ns["fam"].shape == 2.0
    assert ns["THETA"] == (50.0, 3.0) and ns["key"].startswith("-genlogistic-")
    assert ns["save"][0] == "07_new_family" + ns["key"]
    said = ns["glued"]["ch07-built-with"]
    assert "`genlogistic`" in said and GENLOGISTIC in said and "shape = 2.0" in said
    other = _resolve(family=GENLOGISTIC, family_options={"shape": 3}, truth=[50, 3])
    assert other["key"] != ns["key"]
    assert _resolve(family=GENLOGISTIC)["THETA"] == (0.0, 1.0)  # its default_theta()


def test_a_relative_family_file_is_found_from_the_callers_directory(monkeypatch):
    monkeypatch.setenv("DPBOOK_CALLER_CWD", str(ROOT / "tests"))
    ns = _resolve(family="data/genlogistic_family.py:GenLogistic")
    assert type(ns["fam"]).__name__ == "GenLogistic"


@pytest.mark.parametrize("parameters, says", [
    (dict(family="tests/data/nowhere.py:X"), "-p family tests/data/nowhere.py:X: no such file"),
    (dict(family="dpbook.model.families.poisson:Poisson"), "is not a LocationScaleFamily"),
    (dict(family=GENLOGISTIC, family_options={"shap": 2}), "GenLogistic has no option 'shap'"),
    (dict(family=GENLOGISTIC, family_options=[2]), "-p family_options takes a mapping"),
    (dict(family=GENLOGISTIC, family_options={"shape": 99}), "shape must be in"),
    (dict(truth=[50]), "-p truth [50]: give 2 numbers"),
    (dict(truth=[50, -3]), "-p truth [50, -3]"),
])
def test_bad_parameters_are_one_line_errors(parameters, says):
    with pytest.raises(ValueError) as err:
        _resolve(**parameters)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_an_edited_family_file_makes_the_chapter_stale(tmp_path, monkeypatch):
    monkeypatch.setattr(run_chapters, "ROOT", tmp_path)
    (tmp_path / "fam.py").write_text("A = 1\n")
    parameters = {"mode": "quick", "family": "fam.py:A"}
    assert run_chapters.parameter_files(parameters) == [tmp_path / "fam.py"]
    before = run_chapters.chapter_inputs(CHAPTER, parameters)["parameters"]
    (tmp_path / "fam.py").write_text("A = 2\n")
    assert run_chapters.chapter_inputs(CHAPTER, parameters)["parameters"] != before


@pytest.mark.slow
def test_chapter_7_runs_on_a_family_file(tmp_path, monkeypatch):
    """The whole chapter in quick mode on tests/data's generalised logistic (about a
    minute): the executed notebook names the family, in its tables, figures and the
    sentence that says what the page was built with."""
    import sys

    monkeypatch.setattr(run_chapters, "OUTPUT", tmp_path)  # not the book's page
    # the venv's kernel, as run_chapters.main finds it
    monkeypatch.setenv("JUPYTER_PATH", os.pathsep.join(filter(None, [
        str(Path(sys.prefix) / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")])))
    monkeypatch.setenv("NUMBA_NUM_THREADS", os.environ.get("NUMBA_NUM_THREADS", "1"))
    parameters = {"mode": "quick", "family": GENLOGISTIC, "family_options": {"shape": 2}}
    name, seconds, error = run_chapters.execute(CHAPTER, parameters)
    assert error is None, error
    text = (tmp_path / "07_new_family.ipynb").read_text()
    assert "This page was built with** the family `genlogistic`" in text
    assert "Skipped: this page runs GenLogistic" in text
    assert "the heavy-tail measurement is the default build" in text  # not rerun
    assert "check_family on the GenLogistic family" in text
    assert "../figures/07_new_family-genlogistic-" in text
    assert "the SMC agrees with the exact posterior" in text


def test_a_posterior_beyond_the_tolerance_is_a_warning_on_the_page():
    """The SMC-versus-exact check's verdict (issue 53, 6), on made-up z values."""
    import numpy as np
    import pandas as pd
    from IPython.display import Markdown
    from scipy import stats

    cell = next(c.source for c in jupytext.read(CHAPTER).cells if "tolerance =" in c.source)
    verdict = cell[cell.index("z = posterior_check"):cell.index("show_table(posterior_check")]
    index = pd.MultiIndex.from_product([["adaptive", "fixed"], ["loc", "scale"],
                                        [0.1, 0.5, 0.9]])
    for z, warned in ((np.full(12, 2.79), False), (np.r_[np.zeros(11), 12.0], True)):
        shown = []
        exec(verdict, dict(posterior_check=pd.DataFrame({"(SMC − exact)/sd": z}, index),
                           stats=stats, size={"reruns": 5}, Markdown=Markdown,
                           display=lambda m, shown=shown: shown.append(m.data)))
        assert bool(shown) == warned
    assert shown[0].startswith("```{warning}\nWARNING: the SMC's posterior misses")
    assert "fixed scale q=0.9: 12.00 sd" in shown[0]
