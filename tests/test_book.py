"""The book's chapters and table of contents are consistent; run_chapters reports failures."""

import importlib.util
import json
import os
import re
import time
from pathlib import Path

import jupytext
import pytest
import yaml

from dpbook import experiment

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
    comments = run_chapters.parameter_comments(source)
    assert comments.keys() == run_chapters.chapter_defaults(source).keys()
    assert all(comments.values()), f"a comment on what each does: {comments}"
    first = notebook.cells[0]
    assert first.cell_type == "markdown"
    assert re.match(r"\(ch-[a-z-]+\)=\n# ", first.source), "label then title"


def _chapters(tmp_path, monkeypatch, **bodies):
    """Chapters ``name.py`` in a tmp root (a parameters cell, then the body), which
    run_chapters then runs instead of the book's."""
    for name, body in bodies.items():
        (tmp_path / f"{name}.py").write_text(
            f'# %% tags=["parameters"]\nmode = "quick"\n{body}')
    monkeypatch.setattr(run_chapters, "SOURCES", tmp_path)
    monkeypatch.setattr(run_chapters, "OUTPUT", tmp_path / "out")
    monkeypatch.setattr(run_chapters, "ROOT", tmp_path)


def test_run_chapters_fails_on_a_failing_cell(tmp_path, monkeypatch, capsys):
    _chapters(tmp_path, monkeypatch, **{"98_ok": "# %%\nprint(mode)\n",
                                        "99_broken": "# %%\nraise RuntimeError('boom')\n"})
    assert run_chapters.main(["--only", "98_ok", "99", "--jobs", "1"]) == 1
    out, err = capsys.readouterr()
    assert re.search(r"98_ok\s+ok", out) and re.search(r"99_broken\s+FAILED", out)
    assert "RuntimeError: boom" in err
    assert (tmp_path / "out" / "98_ok.ipynb").exists()
    with pytest.raises(SystemExit):
        run_chapters.main(["--only", "97"])


def test_an_unknown_parameter_is_refused_with_the_chapters_list(tmp_path, monkeypatch,
                                                                capsys):
    """papermill only warns about a parameter the chapter lacks, and runs the defaults."""
    _chapters(tmp_path, monkeypatch, **{
        "98_ok": "seed = 0  # root seed\n# %%\nprint(mode)\n",
        "99_other": "eps = [1, 2]  # privacy levels\n# %%\nprint(mode)\n"})
    assert run_chapters.main(["--only", "98", "-p", "eps", "[1, 3]", "--jobs", "1"]) == 2
    err = capsys.readouterr().err
    assert err == ("run_chapters: 98_ok takes no parameter 'eps'; its parameters: mode, "
                   "seed (--list-parameters says what each does)\n")
    assert not (tmp_path / "out").exists()  # nothing ran
    assert run_chapters.main(["-p", "sed", "3"]) == 2
    assert capsys.readouterr().err == (
        "run_chapters: none of the 2 chapters takes the parameter 'sed'; their parameters: "
        "mode, seed, eps (--list-parameters says what each does)\n")
    # a name one chapter takes is given to that chapter only
    assert run_chapters.chapter_parameters(tmp_path / "98_ok.py",
                                           {"mode": "full", "eps": [1]}) == {"mode": "full"}
    assert run_chapters.main(["--only", "98", "99", "--list-parameters"]) == 0
    assert capsys.readouterr().out == (
        '98_ok:\n  -p mode "quick"  # \n  -p seed 0  # root seed\n'
        '99_other:\n  -p mode "quick"  # \n  -p eps [1, 2]  # privacy levels\n')


def test_chapter_5_lists_eps_and_runs(capsys):
    assert run_chapters.main(["--only", "05", "--list-parameters"]) == 0
    out = capsys.readouterr().out
    assert "\n  -p eps [1, 2, 5, 10]  # privacy levels" in out
    assert "\n  -p runs null  # runs per level and method" in out


def _fake_store(root, name, done, complete=False, mtime=None, **config):
    """A store as dpbook.experiment writes it: a manifest and the first ``done`` task
    files of the configuration ``config`` (make_config's arguments), and a temporary
    file being written."""
    store = root / "results" / name
    (store / "tasks").mkdir(parents=True)
    config = experiment.make_config(**config)
    tasks = experiment.config_tasks(config)
    for t in tasks[:done]:
        (store / "tasks" / t.filename).write_bytes(b"")
    (store / "tasks" / f".tmp-1-{tasks[-1].filename}").write_bytes(b"")
    manifest = store / "manifest.json"
    manifest.write_text(json.dumps({"config": config, "tasks": len(tasks),
                                    "complete": complete}))
    if mtime is not None:
        os.utime(manifest, (mtime, mtime))
    return store, tasks


def test_store_progress_reports_only_stores_being_filled(tmp_path):
    now = time.time()
    _fake_store(tmp_path, "paper", done=3)  # the paper's 360 tasks
    _fake_store(tmp_path, "done", done=4, complete=True, runs=1, eps=(1, 2, 5, 10),
                methods=["mhaar"])
    _fake_store(tmp_path, "old", done=2, mtime=now - 3600, runs=5)  # an earlier run's
    assert run_chapters.stores_being_filled(tmp_path, since=now - 60) == [("paper", 3, 360)]
    assert experiment.store_progress(tmp_path / "results" / "done") == (4, 4, True)
    assert experiment.store_progress(tmp_path / "results" / "none") is None


def test_store_progress_of_a_calibration_store(tmp_path):
    # a calibration store has no methods list (the heartbeat thread once died on it)
    from dpbook.calibration import run_calibration

    out = tmp_path / "results" / "calibration"
    run_calibration("naive", 1.0, 10, 3, out=out, progress=False)
    assert experiment.store_progress(out) == (3, 3, True)
    since = time.time() - 60
    assert run_chapters.stores_being_filled(tmp_path, since) == []  # complete
    manifest = json.loads((out / "manifest.json").read_text())
    manifest.update(tasks=5, complete=False)  # as while a run of 5 is under way
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert run_chapters.stores_being_filled(tmp_path, since) == [("calibration", 3, 5)]


def test_timing_chapters_run_alone_and_the_ledger_last(tmp_path, monkeypatch):
    names = [Path(f"{k:02d}_x.py") for k in (0, 5, 8, 9, 13)]
    assert run_chapters.split_alone(names) == (names[1:3], names[3:4], [names[4], names[0]])
    # the chapter that times itself is executed in a run of its own, one job, after the
    # others have run side by side; then the ledger (13) and the landing page (00)
    _chapters(tmp_path, monkeypatch, **{name: "# %%\nprint(mode)\n" for name in
                                        ("00_landing", "07_a", "08_b", "09_clock", "13_l")})
    monkeypatch.setattr(run_chapters, "ALONE", ("09",))
    calls = []
    monkeypatch.setattr(run_chapters, "run", lambda chapters, parameters, jobs, beat:
                        calls.append(([c.stem for c in chapters], jobs)) or [])
    assert run_chapters.main(["--mode", "full", "--jobs", "2", "--heartbeat", "0"]) == 0
    assert calls == [(["07_a", "08_b"], 2), (["09_clock"], 1), (["13_l"], 1),
                     (["00_landing"], 1)]
    calls.clear()  # in quick mode the timing chapter runs beside the others
    assert run_chapters.main(["--mode", "quick", "--jobs", "2", "--heartbeat", "0",
                              "--force"]) == 0
    assert calls == [(["07_a", "08_b", "09_clock"], 2), (["13_l"], 1), (["00_landing"], 1)]


def test_the_ledger_is_stale_when_a_chapter_it_reads_changed(tmp_path, monkeypatch):
    _chapters(tmp_path, monkeypatch, **{name: "# %%\nprint(mode)\n"
                                        for name in ("00_landing", "07_a", "13_l")})
    params = {"mode": "quick"}
    monkeypatch.setattr(run_chapters, "CLAIMS", tmp_path / "claims.json")
    assert run_chapters.main(["--jobs", "1", "--heartbeat", "0"]) == 0
    source = {n: tmp_path / f"{n}.py" for n in ("00_landing", "07_a", "13_l")}
    assert all(run_chapters.stale_reason(s, params) is None for s in source.values())
    (tmp_path / "out" / "07_a.ipynb").write_text(
        (tmp_path / "out" / "07_a.ipynb").read_text().replace("quick", "quick "))
    assert run_chapters.stale_reason(source["13_l"], params) == \
        "what it reads of the other chapters changed"
    assert run_chapters.stale_reason(source["00_landing"], params) is None
    (tmp_path / "claims.json").write_text("{}")
    assert run_chapters.stale_reason(source["00_landing"], params) == \
        "what it reads of the other chapters changed"


def test_heartbeat_names_running_chapters_and_time_left(tmp_path, monkeypatch):
    monkeypatch.setattr(run_chapters, "OUTPUT", tmp_path)
    chapters = [Path("05_four_eps.py"), Path("06_boxplots.py"), Path("07_new_family.py")]
    beat = run_chapters.Heartbeat(chapters, every=60, root=tmp_path)
    # 100 tasks: 25 runs of one method at four eps
    store, tasks = _fake_store(tmp_path, "paper", done=10, runs=25, methods=["smc-fixed"])
    t0 = beat.start_time
    assert beat.line(now=t0 + 5).startswith("  [0:05] running: none; waiting: 05_four")
    run_chapters.running_marker("05_four_eps").touch()
    run_chapters.running_marker("06_boxplots").touch()
    first = beat.line(now=t0 + 65)
    assert "[1:05] running: 05_four_eps, 06_boxplots; waiting: 07_new_family;" in first
    assert "results/paper 10/100 tasks" in first and "left" not in first
    for t in tasks[10:40]:  # 30 tasks in 180 s since first seen: 60 left take 360 s
        (store / "tasks" / t.filename).write_bytes(b"")
    beat.finished("05_four_eps")
    run_chapters.running_marker("05_four_eps").unlink()
    later = beat.line(now=t0 + 185)
    assert "running: 06_boxplots; waiting: 07_new_family;" in later
    assert "results/paper 40/100 tasks, about 6 min left at the pace of the last 3 min" in later
    for t in tasks[40:70]:  # the pace of the last 10 min only: 30 tasks in 600 s
        (store / "tasks" / t.filename).write_bytes(b"")
    assert "70/100 tasks, about 10 min left at the pace of the last 10 min" in beat.line(
        now=t0 + 785)


def _two_chapters(tmp_path, monkeypatch):
    """Chapters 98 (reads the store `store` through dpbook) and 99 in a tmp root."""
    (tmp_path / "store" / "tasks").mkdir(parents=True)
    (tmp_path / "store" / "manifest.json").write_text("{}")
    (tmp_path / "store" / "tasks" / "a.npz").write_bytes(b"1")
    _chapters(tmp_path, monkeypatch, **{
        "98_reads": "seed = 3\n# %%\nfrom dpbook.experiment.results import note_store_read\n"
                    "note_store_read('store')\n",
        "99_plain": "# %%\nprint(mode)\n"})


def _ran(capsys):
    out = capsys.readouterr().out
    return sorted(re.findall(r"^  (\d\d)_\w+\s+ok", out, re.M)), out


@pytest.mark.slow
def test_run_chapters_reexecutes_only_what_changed(tmp_path, monkeypatch, capsys):
    """What is run again and what is not; and the executed chapter's provenance record
    and hidden parameter cells (a scheduler given to a chapter that takes none is not
    recorded)."""
    _two_chapters(tmp_path, monkeypatch)
    argv = ["--jobs", "1", "--heartbeat", "0", "--scheduler", "tcp://nowhere:1"]
    assert run_chapters.main(argv) == 0
    assert _ran(capsys)[0] == ["98", "99"]
    _has_provenance_and_hidden_parameters(tmp_path)
    assert run_chapters.main(argv) == 0  # nothing changed
    ran, out = _ran(capsys)
    assert ran == [] and out.count("cached (inputs unchanged)") == 2
    with open(tmp_path / "99_plain.py", "a") as f:  # prose of one chapter
        f.write("# %% [markdown]\n# More words.\n")
    assert run_chapters.main(argv) == 0
    ran, out = _ran(capsys)
    assert ran == ["99"] and "99_plain                 to run: its source changed" in out
    (tmp_path / "store" / "tasks" / "a.npz").write_bytes(b"2")  # the store 98 read
    assert run_chapters.main(argv) == 0
    ran, out = _ran(capsys)
    assert ran == ["98"] and "the store store changed" in out
    assert run_chapters.main([*argv, "-p", "seed", "4", "--only", "98"]) == 0
    assert _ran(capsys)[0] == ["98"]
    assert run_chapters.main([*argv, "--force"]) == 0
    assert _ran(capsys)[0] == ["98", "99"]


def _has_provenance_and_hidden_parameters(tmp_path):
    nb = json.loads((tmp_path / "out" / "98_reads.ipynb").read_text())
    record = nb["metadata"]["dpbook"]
    assert record["parameters"] == {"mode": "quick", "seed": 3}  # 98 takes no scheduler
    assert set(record["stores"]) == {"store"}
    hidden = [c for c in nb["cells"] if "remove-cell" in c["metadata"].get("tags", [])]
    assert {t for c in hidden for t in c["metadata"]["tags"]} >= {"parameters",
                                                                  "injected-parameters"}
    box = "".join(nb["cells"][-1]["source"])
    assert "How this page was made" in box
    assert 'make chapter CH=98 MODE=quick ARGS="-p seed 3" && make html' in box
    assert "{download}`executed notebook (.ipynb) <98_reads.ipynb>`" in box
    assert "<../../notebooks/98_reads.py>" in box


def test_kernels_talk_over_unix_sockets(tmp_path):
    config = run_chapters.kernel_config(tmp_path)
    from jupyter_client.manager import AsyncKernelManager

    km = AsyncKernelManager(kernel_name="python3", config=config)
    assert km.transport == "ipc" and km.ip.startswith(str(tmp_path))


def _saved_png(tmp_path, fontsize):
    """A PNG as dpbook.figures saves it, whose smallest text is ``fontsize`` points."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpbook import figures

    fig, ax = plt.subplots(figsize=(4, 3))
    ax.set_xlabel("x", fontsize=fontsize)
    ax.tick_params(labelsize=12)
    ax.set_ylabel("y", fontsize=12)
    smallest = figures.smallest_text_points(fig)
    png = tmp_path / f"f{fontsize}.png"
    fig.savefig(png, dpi=figures.DPI,
                metadata={figures.MIN_TEXT_KEY: f"{smallest * figures.DPI / 72:.2f}"})
    plt.close(fig)
    return smallest, png


def test_browser_check_measures_figure_text_and_captions(tmp_path):
    smallest, png = _saved_png(tmp_path, fontsize=7)
    assert smallest == 7
    assert check_pages.smallest_text(png.read_bytes()) == pytest.approx(7 * 150 / 72, 0.01)
    ok = {"src": png.as_uri(), "natural": 600, "shown": 600, "alt": "a line plot of y against x",
          "number": "Fig. 1.1", "caption": "Fig. 1.1 " + "What the figure shows. " * 3}
    assert check_pages.figure_problems([ok]) == []  # 14.6 px
    half = {**ok, "shown": 250}  # 7 pt at 150 dpi shown at 250/600: 6.1 px
    assert "smallest text 6.1 px" in check_pages.figure_problems([half])[0]
    bare = {**ok, "number": "", "caption": "", "alt": "f7.png"}
    problems = check_pages.figure_problems([bare])
    assert any("numbered figure" in p for p in problems)
    assert any("alt text" in p for p in problems)


def test_browser_check_wants_the_provenance_box(tmp_path):
    assert check_pages.provenance_problems(None, []) == ["no provenance box"]
    nb, py = tmp_path / "a.ipynb", tmp_path / "a.py"
    nb.write_text("{}")
    py.write_text("# %%\n")
    box = "Mode: quick Parameters: seed commit abc Executed: now Re-execute: make"
    assert check_pages.provenance_problems(box, [nb.as_uri(), py.as_uri()]) == []
    assert check_pages.provenance_problems(box, [nb.as_uri()]) == ["no .py download"]
    assert "fails" in check_pages.provenance_problems(
        box, [nb.as_uri(), (tmp_path / "gone.py").as_uri()])[0]
    assert "provenance box without Re-execute" in check_pages.provenance_problems(
        box.replace("Re-execute", ""), [nb.as_uri(), py.as_uri()])


def test_every_dotted_dpbook_name_in_the_pages_resolves():
    # a module or function renamed in the package must not leave the pages behind
    root = Path(__file__).resolve().parents[1]
    pages = [*sorted((root / "book").glob("*.md")), *sorted((root / "notebooks").glob("*.py")),
             root / "README.md"]
    names = {(p.name, m) for p in pages for m in
             re.findall(r"\bdpbook(?:\.[A-Za-z_]\w*)+", p.read_text())}
    assert len(names) > 30
    bad = []
    for page, name in sorted(names):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:i]))
                break
            except ImportError:
                continue
        for attr in parts[i:]:
            obj = getattr(obj, attr, None)
        if obj is None:
            bad.append(f"{page}: {name}")
    assert not bad, "names that do not resolve: " + "; ".join(bad)


def test_chapter_code_lines_fit_the_page():
    # the code a page shows is at most 100 characters a line (ruff's E501, which the
    # chapters skip only for their cell headers, where table captions live)
    root = Path(__file__).resolve().parents[1]
    long = [f"{p.name}:{i}" for p in sorted((root / "notebooks").glob("[0-9][0-9]_*.py"))
            for i, line in enumerate(p.read_text().splitlines(), 1)
            if len(line) > 100 and not line.startswith("# %%")]
    assert not long, f"code lines longer than 100 characters: {', '.join(long)}"


def test_tables_get_the_caption_of_their_cell():
    import nbformat

    from dpbook.figures import TABLE_KEY

    def cell(source, meta=None, table=True):
        c = nbformat.v4.new_code_cell(source, metadata=meta or {})
        out = nbformat.v4.new_output("display_data",
                                     data={"text/markdown": "| a |\n|--:|\n| 1 |\n"},
                                     metadata={TABLE_KEY: True} if table else {})
        c.outputs = [out]
        return c

    nb = nbformat.v4.new_notebook(cells=[
        cell("show_table(x)", {"caption": "Two\n words.", "name": "tbl-x"}),
        cell("print(1)", table=False)])
    assert run_chapters.caption_tables(nb) == []
    md = nb.cells[0].outputs[0]["data"]["text/markdown"]
    assert md.startswith(":::{table} Two words.\n:name: tbl-x\n:align: center\n\n| a |")
    assert md.endswith(":::\n")
    assert nb.cells[1].outputs[0]["data"]["text/markdown"].startswith("| a |")  # not a table
    bad = nbformat.v4.new_notebook(cells=[cell("show_table(y)"),
                                          cell("z = 1", {"caption": "c"}, table=False)])
    problems = run_chapters.caption_tables(bad)
    assert len(problems) == 2 and "without a caption" in problems[0]
    assert "has a caption and 0 tables" in problems[1]


def _figure_cell(source, meta=None, names=("x",), fields=None):
    import nbformat

    from dpbook.figures import FIGURE_KEY, figure_caption, figure_html, figure_markdown

    c = nbformat.v4.new_code_cell(source, metadata=meta or {})
    for name in names:
        info = {"name": name, "label": f"fig-01-{name}", "path": f"../figures/01/{name}.png",
                "note": "n = 5", "stamp": "mode=quick", "fields": fields or {}}
        text = figure_caption("", info["note"], info["stamp"])
        data = {"text/markdown": figure_markdown(info["path"], info["label"], text),
                "text/html": figure_html("AAAA", text), "text/plain": text}
        c.outputs.append(nbformat.v4.new_output("display_data", data=data,
                                                metadata={FIGURE_KEY: info}))
    return c


def test_figures_get_the_caption_and_alt_text_of_their_cell(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[
        _figure_cell("save(fig, 'x', note)", {"fig_caption": "What it\n shows.",
                                              "fig_alt": "A line   rising."}),
        _figure_cell("save(fig, f'e{eps:g}', note, eps=eps)",
                     {"fig_caption": "At ε = {eps:g}.", "fig_alt": {"e2": "Two.", "e5": "Five."}},
                     names=("e2",), fields={"eps": 2.0})])
    assert run_chapters.caption_figures(nb, root=tmp_path) == []
    data = nb.cells[0].outputs[0]["data"]
    assert data["text/markdown"] == ("```{figure} ../figures/01/x.png\n:name: fig-01-x\n"
                                     ":alt: A line rising.\n:width: 100%\n\n"
                                     "What it shows. n = 5 (mode=quick).\n```\n")
    assert 'alt="A line rising."' in data["text/html"] and "AAAA" in data["text/html"]
    assert "What it shows. n = 5 (mode=quick)." in data["text/html"]
    md = nb.cells[1].outputs[0]["data"]["text/markdown"]
    assert ":alt: Two.\n" in md and "At ε = 2. n = 5 (mode=quick)." in md
    bad = nbformat.v4.new_notebook(cells=[
        _figure_cell("save(fig, 'x', note)", {"fig_caption": "Only a caption."}),
        _figure_cell("save(fig, 'y')", names=("y",)),
        _figure_cell("z = 1", {"fig_caption": "c", "fig_alt": "a"}, names=()),
        _figure_cell("save(fig, 'w')", {"fig_caption": "{eps}", "fig_alt": "a"},
                     names=("w",))])
    problems = run_chapters.caption_figures(bad, root=tmp_path)
    assert len(problems) == 4, problems
    assert "fig-01-x without fig_alt" in problems[0]
    assert "fig-01-y without fig_caption and fig_alt" in problems[1]
    assert "a figure caption or alt text and no figure" in problems[2]
    assert "fig-01-w" in problems[3] and "does not take the fields" in problems[3]


def test_figure_captions_live_in_the_cells_not_in_save_calls():
    # every save() of a chapter leaves caption and alt text to its cell's metadata
    # (# %% fig_caption="..." fig_alt="..."), which has them for every figure it makes
    import ast

    bad = []
    for path in CHAPTERS:
        for cell in jupytext.read(path).cells:
            if cell.cell_type != "code":
                continue
            source = "\n".join(line for line in cell.source.splitlines()
                               if not line.lstrip().startswith(("%", "!")))
            calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Name) and n.func.id == "save"
                     and len(n.args) >= 2]
            for call in calls:
                where = f"{path.name}: save() of line {call.lineno} of its cell"
                strings = [k.arg for k in call.keywords if k.arg in ("caption", "alt")]
                if strings:
                    bad.append(f"{where} passes {' and '.join(strings)}=")
                for key in ("fig_caption", "fig_alt"):
                    if not cell.metadata.get(key):
                        bad.append(f"{where}: its cell has no {key}")
    assert not bad, "; ".join(bad)


@pytest.mark.parametrize("script", sorted((ROOT / "benchmarks").glob("*.py")), ids=lambda p: p.stem)
def test_benchmark_scripts_import(script, monkeypatch):
    # chapter 3 imports benchmarks/bench_fisher.py: a rename in the package must not
    # leave a benchmark (or a chapter through it) behind
    import importlib.util

    monkeypatch.syspath_prepend(str(script.parent))
    spec = importlib.util.spec_from_file_location(f"_bench_{script.stem}", script)
    # a benchmark may set numba's environment at import (bench_mhaar_engine: one
    # thread); left set, numba refuses to compile anything later in this process
    before = dict(os.environ)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    finally:
        os.environ.clear()
        os.environ.update(before)
