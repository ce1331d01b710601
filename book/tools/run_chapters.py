"""Execute the book's chapters: the ONE execution path of dpbook.

    notebooks/NN_name.py  --jupytext-->  notebook  --papermill (-p mode ...)-->
    build/chapters/NN_name.ipynb  (read by `jupyter-book build` with execution off)

Each chapter is a jupytext percent-format script with a cell tagged ``parameters``
(``mode = "quick"`` or ``"full"``, optionally ``seed`` and others, each with a comment
saying what it does; ``--list-parameters`` prints them).  A ``-p`` name that no chosen
chapter takes is refused (exit status 2); each chapter gets the ones it takes.  The
kernel is ``python3`` of the environment running this script; the working directory of
every chapter is the repository root.  A chapter whose cells raise makes this script
exit with status 1.

A chapter is executed only when one of its inputs changed since the notebook in
build/chapters/ was made (``--force``: always).  Its inputs are its source, its
parameters, the package (src/dpbook, benchmarks/, requirements.txt, pyproject.toml and
this script) and the content of every experiment store it read (dpbook.experiment
appends each store it loads to ``$DPBOOK_STORE_LOG``).  Their SHA-256 hashes are kept in
the executed notebook (``metadata.dpbook``).  jupyter-cache, Jupyter Book's own cache,
keys a notebook by its code cells only: it would not see the papermill parameters, the
package or the stores.

After a chapter runs, its papermill parameter cells are hidden from the page and a
provenance box (mode, parameters, version and commit, when and how long, the command to
re-execute it, downloads of the notebook and its source) is appended to it.

Usage (from the repository root, with the environment that `make setup` makes):

    .venv/bin/python book/tools/run_chapters.py --mode quick
    .venv/bin/python book/tools/run_chapters.py --mode full --only 01_dp_basics -p seed 7
    .venv/bin/python book/tools/run_chapters.py --only 05 --list-parameters
    make chapter CH=03 MODE=quick ARGS="-p seed 7" && make html
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

try:
    from dpbook.experiment import STORE_LOG, keep_freed_memory_env, store_progress
except ModuleNotFoundError as exc:  # run with a Python that lacks the book's environment
    raise SystemExit(
        f"run_chapters: {exc.name!r} is not installed for {sys.executable}.  Run "
        "`make setup` once, then `.venv/bin/python book/tools/run_chapters.py ...` "
        "(or `make chapter CH=03 MODE=quick`).") from None

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "notebooks"
OUTPUT = ROOT / "build" / "chapters"
KERNEL = "python3"
# Submission order when chapters run side by side (longest first, so no core idles at
# the end).  Full mode: chapter 5 computes the paper's experiment and chapter 7 starts
# beside it; chapter 12's batched streams start when a slot frees and keep both cores
# busy to the end (book/running.md).  Quick mode: chapters 10-12 take longest; chapter 9
# goes late, its timed streams being the most slowed by a chapter beside them.  Chapter
# 6 only reads chapter 5's store (it waits for it), so it goes last.  The results do not
# depend on the order.
FIRST = {"full": ("05", "07"), "quick": ("10", "12", "11", "07", "05")}
LAST = ("06",)
# Chapters that time their own computations (chapter 9's cost against n) run after the
# others, one at a time, so that no other chapter shares the cores while they measure;
# in full mode only (quick mode's streams are too short for their slopes to decide
# anything, and the ledger leaves them to the full build).
ALONE = ("09",)
# Chapters that read what the others computed run after all of them, in this order: the
# ledger of the paper's claims (13) reads their stores and glued numbers, the landing
# page (00) the ledger's counts.  Each is stale when what it reads changed.
FINAL = ("13", "00")
CLAIMS = ROOT / "build" / "claims.json"


def all_chapters() -> list[Path]:
    return sorted(SOURCES.glob("[0-9][0-9]_*.py"))


def select(only: list[str] | None) -> list[Path]:
    chapters = all_chapters()
    if not only:
        return chapters
    chosen = []
    for name in only:
        stem = Path(name).stem
        hits = [c for c in chapters if c.stem == stem or c.stem.split("_", 1)[0] == stem]
        if len(hits) != 1:
            names = ", ".join(c.stem for c in chapters)
            raise SystemExit(f"run_chapters: no unique chapter {name!r}; choose from {names}")
        chosen += hits
    return chosen


def schedule(chapters: list[Path], mode: str = "full") -> list[Path]:
    """The chapters in submission order (see FIRST and LAST)."""
    first = FIRST.get(mode, FIRST["full"])
    def rank(c):
        num = c.stem.split("_", 1)[0]
        return (0, first.index(num)) if num in first else \
            (2, LAST.index(num)) if num in LAST else (1, int(num))
    return sorted(chapters, key=rank)


def split_alone(chapters: list[Path], alone_ones=ALONE) -> tuple[list[Path], list[Path],
                                                                 list[Path]]:
    """(the chapters that may run side by side, those that run alone (``alone_ones``),
    those that run last in FINAL's order: see ALONE and FINAL)."""
    def num(c):
        return c.stem.split("_", 1)[0]

    alone = [c for c in chapters if num(c) in alone_ones]
    final = sorted((c for c in chapters if num(c) in FINAL), key=lambda c: FINAL.index(num(c)))
    return [c for c in chapters if c not in alone and c not in final], alone, final


def running_marker(name: str) -> Path:
    """An empty file that exists while chapter ``name`` executes (for the heartbeat)."""
    return OUTPUT / f".{name}.running"


def kernel_config(folder: Path):
    """nbclient configuration for a kernel that talks over Unix sockets in ``folder``.

    Over TCP, two kernels starting at once can pick the same free port and one dies
    with ``ZMQError: Address already in use``; sockets in a private folder cannot
    collide (and no "running over TCP without encryption" warning is printed)."""
    from traitlets.config import Config

    return Config({"KernelManager": {"transport": "ipc", "ip": str(folder / "kernel")}})


# Parameters that choose where the work runs, not what it computes (the results are the
# same bit for bit on any executor): not part of a chapter's cache key.
EXECUTOR_PARAMETERS = ("scheduler",)


def chapter_parameters(source: Path, parameters: dict) -> dict:
    """The ``parameters`` that the chapter takes: a run of several chapters gives each
    only its own (``main`` refuses a name that none of them takes)."""
    takes = chapter_defaults(source)
    return {k: v for k, v in parameters.items() if k in takes}


def unknown_parameters(chapters: list[Path], parameters: dict) -> str | None:
    """The one-line refusal of a parameter that none of ``chapters`` takes (papermill
    would only warn and run the defaults), listing theirs; None if all are taken."""
    takes = {k: None for c in chapters for k in chapter_defaults(c)}
    unknown = [k for k in parameters if k not in takes and k not in EXECUTOR_PARAMETERS]
    if not unknown:
        return None
    names = ", ".join(map(repr, unknown))
    who = f"{chapters[0].stem} takes no parameter {names}; its" if len(chapters) == 1 else \
        f"none of the {len(chapters)} chapters takes the parameter {names}; their"
    return (f"run_chapters: {who} parameters: {', '.join(takes)} "
            "(--list-parameters says what each does)")


def execute(source: Path, parameters: dict) -> tuple[str, float, str | None]:
    """Convert and execute one chapter; return (name, seconds, error message or None).

    On success the notebook gets its provenance box and its cache record."""
    parameters = chapter_parameters(source, parameters)
    import jupytext
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    start = time.perf_counter()
    started = datetime.datetime.now(datetime.UTC)
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3",
                                       "language": "python"}
    notebook.metadata.pop("dpbook", None)
    output = OUTPUT / f"{source.stem}.ipynb"
    inputs = chapter_inputs(source, parameters)  # before the chapter runs
    error = None
    marker = running_marker(source.stem)
    marker.touch()
    sockets = Path(tempfile.mkdtemp(prefix="dpbook-kernel-"))
    log = OUTPUT / f".{source.stem}.stores"
    log.unlink(missing_ok=True)
    os.environ[STORE_LOG] = str(log)  # this process runs one chapter at a time
    try:
        papermill.execute_notebook(notebook, str(output), parameters=parameters,
                                   kernel_name=KERNEL, cwd=str(ROOT), progress_bar=False,
                                   config=kernel_config(sockets))
    except PapermillExecutionError as exc:
        error = f"cell {exc.exec_count}: {exc.ename}: {exc.evalue}"
    except Exception as exc:  # kernel died, bad parameters cell, ...
        error = f"{type(exc).__name__}: {exc}"
    finally:
        os.environ.pop(STORE_LOG, None)
        marker.unlink(missing_ok=True)
        shutil.rmtree(sockets, ignore_errors=True)
    seconds = time.perf_counter() - start
    if error is None:
        stores = sorted(set(log.read_text().split())) if log.exists() else []
        record = {"inputs": inputs,
                  "stores": {repo_relative(s): store_hash(Path(s)) for s in stores},
                  "store_work": {repo_relative(s): store_work(Path(s)) for s in stores},
                  "parameters": {**chapter_defaults(source), **parameters},
                  "executed": started.strftime("%Y-%m-%d %H:%M UTC"),
                  "seconds": round(seconds, 1), "code": code_version()}
        nb = nbformat.read(output, as_version=4)
        problems = finish(nb, source, record)
        if problems:
            error = "; ".join(problems)
            nb.metadata.pop("dpbook", None)  # not a finished chapter: it runs again
        nbformat.write(nb, output)
    log.unlink(missing_ok=True)
    return source.stem, seconds, error


# ---- the cached rebuild ----------------------------------------------------------------

def _sha(*chunks: bytes) -> str:
    h = hashlib.sha256()
    for c in chunks:
        h.update(hashlib.sha256(c).digest())
    return h.hexdigest()


def _tree_hash(files) -> str:
    """Hash of the files' paths (relative to ROOT) and contents."""
    files = sorted(files)
    return _sha(*(repo_relative(f).encode() + b"\0" + f.read_bytes() for f in files))


def package_files() -> list[Path]:
    """The files every chapter depends on, besides its own source."""
    src = [p for p in (ROOT / "src" / "dpbook").rglob("*") if p.is_file()
           and "__pycache__" not in p.parts and p.suffix in (".py", ".json", ".toml")]
    return [*src, *(ROOT / "benchmarks").glob("*.py"), ROOT / "requirements.txt",
            ROOT / "pyproject.toml", Path(__file__).resolve()]


def parameter_files(parameters: dict) -> list[Path]:
    """The files that string parameters name (``path/to/file.py`` or
    ``path/to/file.py:Class``, from the root or the current directory, as chapter 7's
    ``family``): their content is an input of the chapter, as its source is."""
    found = []
    for value in parameters.values():
        if not isinstance(value, str):
            continue
        where = value.rpartition(":")[0] if re.search(r"\.py:\w+$", value) else value
        for base in (ROOT, Path.cwd()):
            if where and (base / where).is_file():
                found.append(base / where)
                break
    return found


def chapter_inputs(source: Path, parameters: dict) -> dict:
    """SHA-256 of each input of a chapter except the stores it reads."""
    what = {k: v for k, v in chapter_parameters(source, parameters).items()
            if k not in EXECUTOR_PARAMETERS}
    inputs = {"source": _sha(source.read_bytes()),
              "parameters": _sha(json.dumps(what, sort_keys=True).encode(),
                                 *(f.read_bytes() for f in parameter_files(what))),
              "package": _tree_hash(f for f in package_files() if f.exists())}
    num = source.stem.split("_", 1)[0]
    if num in FINAL:  # what it reads of the other chapters (see FINAL)
        read = [CLAIMS] if num == "00" else [
            c for c in OUTPUT.glob("*.ipynb") if c.stem.split("_", 1)[0] not in FINAL]
        inputs["chapters"] = _tree_hash(f for f in read if f.exists())
        inputs["source"] = _sha(source.read_bytes(), *(
            f.read_bytes() for f in sorted((ROOT / "book").glob("*.py")) if num == "13"))
    return inputs


def repo_relative(path) -> str:
    """``path`` relative to the repository root where it is inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def store_hash(store: Path) -> str | None:
    """Hash of an experiment store's content: its manifest and task files (not the
    Parquet table rebuilt from them, nor locks and temporary files); None if absent."""
    store = store if store.is_absolute() else ROOT / store
    manifest = store / "manifest.json"
    if not manifest.exists():
        return None
    tasks = [p for p in (store / "tasks").glob("*") if p.is_file() and
             not p.name.startswith(".")]
    return _sha(manifest.read_bytes(), _tree_hash(tasks).encode())


def store_work(store: Path) -> tuple[int, float]:
    """(tasks, seconds of computing) recorded in a store's estimates table."""
    import pandas as pd

    try:
        seconds = pd.read_parquet(store / "estimates.parquet", columns=["seconds"])["seconds"]
    except Exception:  # noqa: BLE001 - no table: nothing to report
        return 0, 0.0
    return len(seconds), float(seconds.sum())


def cache_record(output: Path) -> dict | None:
    try:
        return json.loads(output.read_text())["metadata"]["dpbook"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def stale_reason(source: Path, parameters: dict, inputs: dict | None = None) -> str | None:
    """Why chapter ``source`` must be executed, or None if its notebook is up to date."""
    record = cache_record(OUTPUT / f"{source.stem}.ipynb")
    if record is None or "inputs" not in record:
        return "not executed yet"
    inputs = chapter_inputs(source, parameters) if inputs is None else inputs
    for name, what in (("source", "its source changed"),
                       ("parameters", "its parameters (or a file they name) changed"),
                       ("package", "the package or the environment changed"),
                       ("chapters", "what it reads of the other chapters changed")):
        if record["inputs"].get(name) != inputs.get(name):
            return what
    for store, digest in record.get("stores", {}).items():
        if store_hash(Path(store)) != digest:
            return f"the store {store} changed"
    return None


# ---- provenance ------------------------------------------------------------------------

def parameters_cell(source: Path) -> str:
    """The source of the chapter's cell tagged ``parameters``."""
    import jupytext

    return next(c.source for c in jupytext.read(source).cells
                if "parameters" in c.metadata.get("tags", []))


def chapter_defaults(source: Path) -> dict:
    """The values the chapter's ``parameters`` cell assigns (plain literals)."""
    namespace: dict = {}
    exec(parameters_cell(source), namespace)  # a parameters cell assigns literals only
    return {k: v for k, v in namespace.items() if not k.startswith("__")}


def parameter_comments(source: Path) -> dict[str, str]:
    """Each parameter's comment: the one on the line of its assignment in the cell."""
    import ast
    import io
    import tokenize

    cell = parameters_cell(source)
    comments = {t.start[0]: t.string.lstrip("#").strip() for t in
                tokenize.generate_tokens(io.StringIO(cell).readline)
                if t.type == tokenize.COMMENT}
    return {target.id: comments.get(node.lineno, "") for node in ast.parse(cell).body
            if isinstance(node, ast.Assign) for target in node.targets}


def list_parameters(chapters: list[Path]) -> str:
    """Each chapter's parameters with their defaults and comments (--list-parameters)."""
    lines = []
    for c in chapters:
        comments = parameter_comments(c)
        lines.append(f"{c.stem}:")
        lines += [f"  -p {k} {json.dumps(v)}  # {comments.get(k, '')}"
                  for k, v in chapter_defaults(c).items()]
    return "\n".join(lines)


def code_version() -> dict:
    """dpbook version and git commit of the checkout, with ``-dirty`` if modified."""
    from dpbook import __version__
    from dpbook.figures import commit

    return {"dpbook": __version__, "commit": commit(ROOT) or None}


def rerun_command(name: str, parameters: dict) -> str:
    number = name.split("_", 1)[0]
    # each value quoted for the shell, then escaped for the double quotes of ARGS="..."
    extra = " ".join(
        f"-p {k} " + re.sub(r'([\\"`])', r"\\\1",
                            shlex.quote(v if isinstance(v, str) else json.dumps(v)))
        for k, v in parameters.items() if k != "mode" and k not in EXECUTOR_PARAMETERS)
    args = f' ARGS="{extra}"' if extra else ""
    return f"make chapter CH={number} MODE={parameters.get('mode', 'quick')}{args} && make html"


def provenance_markdown(source: Path, record: dict) -> str:
    params = record["parameters"]
    code = record["code"]
    shown = ", ".join(f"`{k} = {v!r}`" for k, v in params.items())
    commit = f"commit `{code['commit']}`" if code["commit"] else "not a git checkout"
    rows = [("Mode", f"`{params.get('mode')}`"),
            ("Parameters", shown),
            ("Code", f"dpbook {code['dpbook']}, {commit}"),
            ("Executed", f"{record['executed']}, in {record['seconds']:.0f} s"),
            ("Re-execute", f"`{rerun_command(source.stem, params)}`"),
            ("Download", f"{{download}}`executed notebook (.ipynb) <{source.stem}.ipynb>`, "
                         f"{{download}}`source (jupytext .py) "
                         f"<../../notebooks/{source.name}>`")]
    for store, (tasks, seconds) in record.get("store_work", {}).items():
        rows.insert(4, ("Experiment store", f"`{store}`, read by this chapter: its {tasks} "
                                            f"tasks took {seconds:.0f} s of computing "
                                            "when they ran"))
    items = "\n".join(f"* **{k}:** {v}" for k, v in rows)
    return ("```{admonition} How this page was made\n:class: dpbook-provenance\n\n"
            f"{items}\n```\n")


def caption_tables(nb) -> list[str]:
    """Wrap every table output (dpbook.figures.show_table) in a numbered MyST table
    directive with the caption and label of its cell's metadata (``# %% caption="..."
    name="tbl-..."`` in the chapter source; ``{field}`` placeholders take the values of
    show_table's keyword arguments, if it had any); the problems found: a table without
    a caption, a caption without a table."""
    from dpbook.figures import TABLE_KEY

    problems = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        caption, name = cell.metadata.get("caption"), cell.metadata.get("name")
        tables = [o for o in cell.get("outputs", [])
                  if o.get("metadata", {}).get(TABLE_KEY) and "text/markdown" in o.get("data", {})]
        where = _where(cell)
        if tables and not caption:
            problems.append(f"a table without a caption in {where}")
        if caption and len(tables) != 1:
            problems.append(f"{where} has a caption and {len(tables)} tables")
        if not caption or len(tables) != 1:
            continue
        fields = tables[0]["metadata"][TABLE_KEY]
        if isinstance(fields, dict):  # show_table(df, family="Gumbel"): "... {family} ..."
            try:
                caption = caption.format(**fields)
            except (KeyError, IndexError, ValueError) as exc:
                problems.append(f"{where}: its caption does not take the fields "
                                f"{sorted(fields)} ({exc!r})")
                continue
        label = f":name: {name}\n" if name else ""
        body = tables[0]["data"]["text/markdown"]
        tables[0]["data"]["text/markdown"] = \
            f":::{{table}} {' '.join(caption.split())}\n{label}:align: center\n\n{body}:::\n"
    return problems


def _where(cell) -> str:
    first = cell.source.strip().splitlines()[:1]
    return f"the cell starting {first[0][:50]!r}" if first else "an empty cell"


def caption_figures(nb, root: Path | None = None) -> list[str]:
    """Give every figure output (dpbook.figures.figure_saver) the caption and alt text
    of its cell's metadata (``# %% fig_caption="..." fig_alt="..."`` in the chapter
    source; in a cell that makes several figures, each value may map figure names to
    texts; ``{field}`` placeholders take the values of save()'s keyword arguments, and a
    literal brace is doubled): a numbered MyST figure whose caption is the cell's
    caption, the computed note and the stamp, with the alt text (also written into the
    PNG, found under ``root``, default build/chapters, as its "Description").  Returns
    the problems found: a figure without a caption or alt text, a figure caption
    without a figure."""
    import re

    from dpbook.figures import (
        FIGURE_KEY,
        describe_png,
        figure_caption,
        figure_html,
        figure_markdown,
    )

    root = OUTPUT if root is None else root
    problems = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        texts = {"caption": cell.metadata.get("fig_caption"),
                 "alt": cell.metadata.get("fig_alt")}
        figures = [o for o in cell.get("outputs", [])
                   if o.get("metadata", {}).get(FIGURE_KEY)]
        if any(texts.values()) and not figures:
            problems.append(f"{_where(cell)} has a figure caption or alt text and no figure")
        for out in figures:
            info = out["metadata"][FIGURE_KEY]
            found, missing = {}, []
            for key, value in texts.items():
                value = value.get(info["name"]) if isinstance(value, dict) else value
                if not isinstance(value, str) or not value.strip():
                    missing.append(f"fig_{key}")
                    continue
                try:
                    found[key] = " ".join(value.format(**info.get("fields", {})).split())
                except (KeyError, IndexError, ValueError) as exc:
                    problems.append(f"figure {info['label']}: its fig_{key} does not take "
                                    f"the fields {sorted(info['fields'])} ({exc!r})")
            if missing:
                problems.append(f"figure {info['label']} without {' and '.join(missing)} "
                                f"in the metadata of {_where(cell)}")
            if len(found) < len(texts):
                continue
            caption = figure_caption(found["caption"], info["note"], info["stamp"])
            data = out["data"]
            data["text/markdown"] = figure_markdown(info["path"], info["label"], caption,
                                                    found["alt"])
            image = re.search(r'base64,([^"]*)"', data.get("text/html", ""))
            if image:
                data["text/html"] = figure_html(image.group(1), caption, found["alt"])
            data["text/plain"] = caption
            png = root / info["path"]
            if png.exists():
                describe_png(png, found["alt"])
    return problems


def finish(nb, source: Path, record: dict):
    """Hide papermill's parameter cells from the page, caption its tables
    (:func:`caption_tables`) and figures (:func:`caption_figures`), append the
    provenance box and keep the cache record in the notebook's metadata.  Returns the
    tables' and figures' problems."""
    import nbformat

    for cell in nb.cells:
        tags = cell.metadata.get("tags", [])
        if ("parameters" in tags or "injected-parameters" in tags) and \
                "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    problems = caption_tables(nb) + caption_figures(nb)
    box = nbformat.v4.new_markdown_cell(provenance_markdown(source, record))
    box.metadata["tags"] = ["dpbook-provenance"]
    nb.cells.append(box)
    nb.metadata["dpbook"] = record
    return problems


def stores_being_filled(root: Path, since: float) -> list[tuple[str, int, int]]:
    """(name, tasks done, tasks in all) of every experiment store under ``root/results``
    that is incomplete and whose manifest was written at or after ``since`` (a store
    that a chapter of this run is filling)."""
    found = []
    for manifest in sorted((root / "results").glob("*/manifest.json")):
        try:
            if manifest.stat().st_mtime < since:
                continue
        except OSError:  # being replaced right now: next time
            continue
        progress = store_progress(manifest.parent)
        if progress is not None and not progress[2]:
            found.append((manifest.parent.name, *progress[:2]))
    return found


class Heartbeat(threading.Thread):
    """Every ``every`` seconds, one line: elapsed time, the chapters running and waiting,
    and the progress of the experiment stores being filled, with the time left at the
    pace of the last ``window`` seconds (the full book runs for more than half an hour
    with nothing else to show; its pace doubles once the other chapters are done)."""

    def __init__(self, chapters, every, root=None, window=600.0):
        super().__init__(daemon=True)
        self.pending = [c.stem for c in chapters]
        self.every = every
        self.root = ROOT if root is None else root
        self.window = window
        self.start_time = time.time()
        self.seen = {}  # store name -> [(time, tasks done), ...]
        self.stopped = threading.Event()

    def finished(self, name):
        self.pending.remove(name)

    def line(self, now=None):
        now = time.time() if now is None else now
        minutes, seconds = divmod(int(now - self.start_time), 60)
        pending = list(self.pending)  # the main thread removes finished chapters
        running = [c for c in pending if running_marker(c).exists()]
        waiting = [c for c in pending if c not in running]
        parts = [f"  [{minutes}:{seconds:02d}] running: {', '.join(running) or 'none'}"]
        if waiting:
            parts.append(f"waiting: {', '.join(waiting)}")
        for name, done, total in stores_being_filled(self.root, self.start_time):
            seen = self.seen.setdefault(name, [])
            # pace since the last sample at least `window` old (else the first sample)
            old = [k for k, (t, _) in enumerate(seen) if t <= now - self.window]
            del seen[:old[-1] if old else 0]
            text = f"results/{name} {done}/{total} tasks"
            if seen and done > seen[0][1] and now > seen[0][0]:
                t0, done0 = seen[0]
                left = (total - done) * (now - t0) / (done - done0)
                text += (f", about {left / 60:.0f} min left at the pace of the last "
                         f"{(now - t0) / 60:.0f} min")
            seen.append((now, done))
            parts.append(text)
        return "; ".join(parts)

    def run(self):
        while not self.stopped.wait(self.every):
            print(self.line(), flush=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("quick", "full"), default="quick",
                        help="passed to every chapter as the papermill parameter `mode`")
    parser.add_argument("--only", nargs="+", metavar="CHAPTER",
                        help="chapters to run, e.g. 01_dp_basics or 01 (default: all)")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[],
                        metavar=("NAME", "VALUE"),
                        help="extra parameter (value parsed as YAML, as `papermill -p`); "
                             "a name no chosen chapter takes is refused")
    parser.add_argument("--list-parameters", action="store_true",
                        help="print the chosen chapters' parameters, their defaults and "
                             "what each does, and exit")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help="Dask scheduler (tcp://host:8786) for the chapters that run "
                             "an experiment (those with a `scheduler` parameter)")
    parser.add_argument("--force", action="store_true",
                        help="execute the chapters even if their inputs did not change")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="chapters executed in parallel (default: 2)")
    parser.add_argument("--heartbeat", type=float, default=120.0, metavar="SECONDS",
                        help="print what is still running every SECONDS (0: never; "
                             "default: 120)")
    return parser.parse_args(argv)


def one_numba_thread():
    """Give the chapters run side by side one numba thread each (a NUMBA_NUM_THREADS the
    user set wins): with a thread per core in each, their parallel loops wait on threads
    the other chapter holds.  The results do not depend on the thread count; a chapter
    that runs alone (ALONE) keeps every core."""
    os.environ.setdefault("NUMBA_NUM_THREADS", "1")


def run(chapters, parameters, jobs, heartbeat_every) -> list[tuple[str, str]]:
    """Execute ``chapters``, print one line per chapter; return the failures."""
    failures = []
    for c in chapters:  # left behind by a run that was killed
        running_marker(c.stem).unlink(missing_ok=True)
    heartbeat = Heartbeat(chapters, heartbeat_every)
    if heartbeat_every > 0:
        heartbeat.start()
    if jobs > 1 and len(chapters) > 1:
        pool = ProcessPoolExecutor(max_workers=jobs, initializer=one_numba_thread)
        futures = [pool.submit(execute, c, parameters)
                   for c in schedule(chapters, parameters.get("mode"))]
        results = (f.result() for f in as_completed(futures))
    else:
        pool, results = None, (execute(c, parameters) for c in chapters)
    for name, seconds, error in results:
        heartbeat.finished(name)
        status = "FAILED" if error else "ok"
        print(f"  {name:<24} {status:<6} {seconds:7.1f} s", flush=True)
        if error:
            failures.append((name, error))
    heartbeat.stopped.set()
    if pool is not None:
        pool.shutdown()
    return failures


def main(argv=None) -> int:
    import yaml

    args = parse_args(argv)
    parameters = {"mode": args.mode}
    parameters.update({name: yaml.safe_load(value) for name, value in args.parameter})
    if args.scheduler:
        parameters["scheduler"] = args.scheduler
    chapters = select(args.only)
    if not chapters:
        raise SystemExit(f"run_chapters: no chapters found in {SOURCES}")
    if args.list_parameters:
        print(list_parameters(chapters))
        return 0
    refusal = unknown_parameters(chapters, parameters)
    if refusal:
        print(refusal, file=sys.stderr)
        return 2
    OUTPUT.mkdir(parents=True, exist_ok=True)
    # The venv's kernelspec first, whose argv "python" jupyter_client maps to sys.executable.
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(Path(sys.prefix) / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")]))

    # glibc keeps freed memory for reuse in the kernels (and their workers): chapter 7's
    # generic SMC frees and reallocates megabyte arrays at every step, and this saves
    # 16% of its CPU time.  Results do not change.
    for name, value in keep_freed_memory_env().items():
        os.environ.setdefault(name, value)

    # a chapter's kernel runs in the root: a relative file a parameter names may be
    # relative to the directory this was started in (chapter 7's family file)
    os.environ["DPBOOK_CALLER_CWD"] = os.getcwd()

    start = time.perf_counter()

    def stale(candidates, quiet=False):
        found = []
        for c in candidates:
            reason = "--force" if args.force else stale_reason(c, parameters)
            if reason is None:
                if not quiet:
                    print(f"  {c.stem:<24} cached (inputs unchanged)", flush=True)
            else:
                found.append(c)
                print(f"  {c.stem:<24} to run: {reason}", flush=True)
        return found

    print(f"run_chapters: {len(chapters)} chapter(s), parameters {parameters}, "
          f"{args.jobs} in parallel -> {OUTPUT.relative_to(ROOT)}/", flush=True)
    together, alone, final = split_alone(chapters, ALONE if args.mode == "full" else ())
    todo = stale(together + alone)
    failures = run([c for c in todo if c in together], parameters, args.jobs,
                   args.heartbeat) if set(todo) & set(together) else []
    # A chapter that was up to date may read a store that a chapter just run rewrote.
    later = stale([c for c in together if c not in todo], quiet=True) if todo else []
    if later:
        failures += run(later, parameters, args.jobs, args.heartbeat)
    if set(todo) & set(alone):  # on idle cores (ALONE)
        failures += run([c for c in todo if c in alone], parameters, 1, args.heartbeat)
    for c in final:  # what they read is known only now (FINAL)
        if stale([c]):
            todo.append(c)
            failures += run([c], parameters, 1, args.heartbeat)
    print(f"run_chapters: total {time.perf_counter() - start:.1f} s (mode={args.mode}, "
          f"{len(todo) + len(later)} executed, "
          f"{len(chapters) - len(todo) - len(later)} cached)")
    for name, error in failures:
        print(f"run_chapters: {name} failed: {error}\n  see {OUTPUT / (name + '.ipynb')}",
              file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
