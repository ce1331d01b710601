"""The book's chapters and table of contents are consistent; run_chapters reports failures."""

import importlib.util
import re
from pathlib import Path

import jupytext
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "book" / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


run_chapters = _load("run_chapters")
check_pages = _load("check_pages")
CHAPTERS = run_chapters.all_chapters()


def test_every_chapter_is_in_the_toc_and_vice_versa():
    toc = check_pages.toc_pages()
    listed = [p.split("/")[-1] for p in toc if p.startswith(check_pages.CHAPTER_PREFIX)]
    assert listed == [c.stem for c in CHAPTERS]
    for page in toc:
        if not page.startswith(check_pages.CHAPTER_PREFIX):
            assert (ROOT / f"{page}.md").exists(), page


def test_config_never_executes_and_keeps_chapters():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "off"
    excluded = config["exclude_patterns"]
    assert not any(check_pages.CHAPTER_PREFIX.startswith(p.rstrip("/*") + "/") or
                   p.rstrip("/*") in ("build", "build/chapters") for p in excluded)
    for folder in ("src", "tests", ".venv", "notebooks", "benchmarks", "results"):
        assert folder in excluded


@pytest.mark.parametrize("source", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_has_parameters_cell(source):
    notebook = jupytext.read(source)
    tagged = [c for c in notebook.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell tagged `parameters`"
    assert re.search(r'^mode\s*=\s*"quick"', tagged[0].source, re.M)
    first = notebook.cells[0]
    assert first.cell_type == "markdown"
    assert re.match(r"\(ch-[a-z-]+\)=\n# ", first.source), "label then title"


def test_run_chapters_fails_on_a_failing_cell(tmp_path, monkeypatch, capsys):
    (tmp_path / "98_ok.py").write_text('# %% tags=["parameters"]\nmode = "quick"\n'
                                       "# %%\nprint(mode)\n")
    (tmp_path / "99_broken.py").write_text('# %% tags=["parameters"]\nmode = "quick"\n'
                                           "# %%\nraise RuntimeError('boom')\n")
    monkeypatch.setattr(run_chapters, "SOURCES", tmp_path)
    monkeypatch.setattr(run_chapters, "OUTPUT", tmp_path / "out")
    monkeypatch.setattr(run_chapters, "ROOT", tmp_path)
    assert run_chapters.main(["--only", "98_ok", "99", "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    assert re.search(r"98_ok\s+ok", out) and re.search(r"99_broken\s+FAILED", out)
    assert "RuntimeError: boom" in err
    assert (tmp_path / "out" / "98_ok.ipynb").exists()
    with pytest.raises(SystemExit):
        run_chapters.main(["--only", "97"])
