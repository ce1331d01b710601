"""Execute the book's chapters: the ONE execution path of dpbook.

    notebooks/NN_name.py  --jupytext-->  notebook  --papermill (-p mode ...)-->
    build/chapters/NN_name.ipynb  (read by `jupyter-book build` with execution off)

Each chapter is a jupytext percent-format script with a cell tagged ``parameters``
(``mode = "quick"`` or ``"full"``, optionally ``seed``).  The kernel is ``python3`` of
the environment running this script; the working directory of every chapter is the
repository root.  A chapter whose cells raise makes this script exit with status 1.

Usage (from anywhere; paths are resolved from this file):

    python book/tools/run_chapters.py --mode quick
    python book/tools/run_chapters.py --mode full --only 01_dp_basics -p seed 7
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

from dpbook.experiment import keep_freed_memory_env, store_progress

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ROOT / "notebooks"
OUTPUT = ROOT / "build" / "chapters"
KERNEL = "python3"
# Submission order when chapters run side by side (longest first, so no core idles at
# the end): chapters 5 and 7 run the experiments and take most of the time; chapter 6
# only reads chapter 5's store (it waits for it), so it goes last.  The results do not
# depend on the order.
FIRST = ("05", "07")
LAST = ("06",)


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


def schedule(chapters: list[Path]) -> list[Path]:
    """The chapters in submission order (see FIRST and LAST)."""
    def rank(c):
        num = c.stem.split("_", 1)[0]
        return (0, FIRST.index(num)) if num in FIRST else \
            (2, LAST.index(num)) if num in LAST else (1, int(num))
    return sorted(chapters, key=rank)


def running_marker(name: str) -> Path:
    """An empty file that exists while chapter ``name`` executes (for the heartbeat)."""
    return OUTPUT / f".{name}.running"


def execute(source: Path, parameters: dict) -> tuple[str, float, str | None]:
    """Convert and execute one chapter; return (name, seconds, error message or None)."""
    import jupytext
    import papermill
    from papermill.exceptions import PapermillExecutionError

    start = time.perf_counter()
    notebook = jupytext.read(source)
    notebook.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3",
                                       "language": "python"}
    output = OUTPUT / f"{source.stem}.ipynb"
    error = None
    marker = running_marker(source.stem)
    marker.touch()
    try:
        papermill.execute_notebook(notebook, str(output), parameters=parameters,
                                   kernel_name=KERNEL, cwd=str(ROOT), progress_bar=False)
    except PapermillExecutionError as exc:
        error = f"cell {exc.exec_count}: {exc.ename}: {exc.evalue}"
    except Exception as exc:  # kernel died, bad parameters cell, ...
        error = f"{type(exc).__name__}: {exc}"
    finally:
        marker.unlink(missing_ok=True)
    return source.stem, time.perf_counter() - start, error


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
                        help="extra parameter (value parsed as YAML, as `papermill -p`)")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1),
                        help="chapters executed in parallel (default: 2)")
    parser.add_argument("--heartbeat", type=float, default=120.0, metavar="SECONDS",
                        help="print what is still running every SECONDS (0: never; "
                             "default: 120)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    import yaml

    args = parse_args(argv)
    parameters = {"mode": args.mode}
    parameters.update({name: yaml.safe_load(value) for name, value in args.parameter})
    chapters = select(args.only)
    if not chapters:
        raise SystemExit(f"run_chapters: no chapters found in {SOURCES}")
    OUTPUT.mkdir(parents=True, exist_ok=True)
    # The venv's kernelspec first, whose argv "python" jupyter_client maps to sys.executable.
    os.environ["JUPYTER_PATH"] = os.pathsep.join(
        filter(None, [str(Path(sys.prefix) / "share" / "jupyter"), os.environ.get("JUPYTER_PATH")]))

    # glibc keeps freed memory for reuse in the kernels (and their workers): chapter 7's
    # generic SMC frees and reallocates megabyte arrays at every step, and this saves
    # 16% of its CPU time.  Results do not change.
    for name, value in keep_freed_memory_env().items():
        os.environ.setdefault(name, value)

    print(f"run_chapters: {len(chapters)} chapter(s), parameters {parameters}, "
          f"{args.jobs} in parallel -> {OUTPUT.relative_to(ROOT)}/", flush=True)
    start = time.perf_counter()
    failures = []
    for c in chapters:  # left behind by a run that was killed
        running_marker(c.stem).unlink(missing_ok=True)
    heartbeat = Heartbeat(chapters, args.heartbeat)
    if args.heartbeat > 0:
        heartbeat.start()
    if args.jobs > 1 and len(chapters) > 1:
        pool = ProcessPoolExecutor(max_workers=args.jobs)
        futures = [pool.submit(execute, c, parameters) for c in schedule(chapters)]
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
    print(f"run_chapters: total {time.perf_counter() - start:.1f} s (mode={args.mode})")
    for name, error in failures:
        print(f"run_chapters: {name} failed: {error}\n  see {OUTPUT / (name + '.ipynb')}",
              file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
