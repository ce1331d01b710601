"""Count the non-blank, non-comment lines of the chapters' code cells at git revisions
(parameter cells excluded), with and without the lines of figure captions and alt text
(``caption=`` / ``alt=`` arguments and their string continuation lines; since issue #26
they live in the cells' headers, ``# %% fig_caption=... fig_alt=...``, and count as
none).  The measure of issue #17 ("the chapters' code cells are shorter than before").

    .venv/bin/python book/tools/count_code.py 2da9203 HEAD
"""

import subprocess
import sys
from pathlib import Path

import jupytext

ROOT = Path(__file__).resolve().parents[2]


def count(rev: str, path: str):
    """(code lines, caption/alt lines) of one chapter at ``rev``, or None if absent."""
    text = subprocess.run(["git", "show", f"{rev}:{path}"], capture_output=True, text=True,
                          cwd=ROOT).stdout
    if not text:
        return None
    nb = jupytext.reads(text, fmt="py:percent")
    lines = [line.strip() for c in nb.cells if c.cell_type == "code"
             and "parameters" not in c.metadata.get("tags", [])
             for line in c.source.splitlines()
             if line.strip() and not line.strip().startswith("#")]
    captions, inside = 0, False
    for line in lines:
        if line.startswith(("caption=", "alt=")):
            captions, inside = captions + 1, True
        elif inside and line.startswith(('"', "'", 'f"', "f'")):
            captions += 1
        else:
            inside = False
    return len(lines), captions


def main(revs):
    files = sorted(p.relative_to(ROOT).as_posix()
                   for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    for rev in revs:
        cells, total, bare = [], 0, 0
        for path in files:
            res = count(rev, path)
            name = Path(path).stem[:2]
            if res is None:
                cells.append(f"{name}: -")
                continue
            cells.append(f"{name}: {res[0]} ({res[0] - res[1]})")
            total, bare = total + res[0], bare + res[0] - res[1]
        print(f"{rev}: " + " | ".join(cells)
              + f" | total {total} (without caption/alt lines: {bare})")


if __name__ == "__main__":
    main(sys.argv[1:] or ["HEAD"])
