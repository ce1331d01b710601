"""Copy a chapter under a new name, ready to edit and publish (``make new-chapter``).

    python book/tools/new_chapter.py my_cauchy --from 07

writes notebooks/NN_my_cauchy.py (NN: the next free chapter number, or the one NAME
starts with) from the chapter FROM, with the keys that would make the two collide
renamed: the page label (``(ch-new-family)=`` becomes ``(ch-my-cauchy)=``), the figure
folder (the chapter's file name, build/figures/NN_my_cauchy*), its experiment stores
and glue keys (``chFF`` becomes ``chNN``) and its table and figure labels (``tbl-FF-``
becomes ``tbl-NN-``); and lists the copy in _toc.yml after the last numbered chapter, so
that ``make chapter CH=NN`` and ``make html`` publish it.  References to other
chapters' labels are left as they are.  An existing chapter of that name or number is
never overwritten.  Exit status 2, with one line, on a bad name.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def fail(message):
    print(f"new_chapter: {message}", file=sys.stderr)
    raise SystemExit(2)


def new_chapter(name: str, source: str = "07", root: Path = ROOT) -> Path:
    """Write the copy and its _toc.yml entry under ``root``; return the copy's path."""
    notebooks, toc = root / "notebooks", root / "_toc.yml"
    chapters = sorted(notebooks.glob("[0-9][0-9]_*.py"))
    hits = [c for c in chapters if source in (c.stem, c.stem[:2])]
    if len(hits) != 1:
        fail(f"no chapter {source!r}; choose from {', '.join(c.stem[:2] for c in chapters)}")
    old = hits[0]
    m = re.fullmatch(r"(?:(\d\d)_)?([a-z][a-z0-9_]*)", name)
    if not m:
        fail(f"NAME must be lower-case letters, digits and _ (e.g. my_cauchy), got {name!r}")
    num = m[1] or f"{max(int(c.stem[:2]) for c in chapters) + 1:02d}"
    stem = f"{num}_{m[2]}"
    taken = [c.stem for c in chapters if c.stem[:2] == num or c.stem[3:] == m[2]]
    if taken:
        fail(f"notebooks/{taken[0]}.py exists; choose another NAME")
    text = old.read_text()
    label = re.search(r"^# \((ch-[A-Za-z0-9_-]+)\)=", text, re.M)
    if not label:
        fail(f"{old.name} has no page label '# (ch-...)=' to rename")
    ff = old.stem[:2]
    text = re.sub(rf"\b{re.escape(label[1])}\b", "ch-" + m[2].replace("_", "-"), text)
    text = text.replace(old.stem, stem)
    text = re.sub(rf"\bch{ff}(?=[-{{\"'])", f"ch{num}", text)
    text = re.sub(rf"\b(tbl|fig)-{ff}-", rf"\1-{num}-", text)
    lines = toc.read_text().splitlines(keepends=True)
    entries = [i for i, line in enumerate(lines)
               if re.match(r"\s*- file: build/chapters/\d\d_", line)]
    first_part = [i for i in entries if i < min(
        (j for j, line in enumerate(lines) if "- caption:" in line and j > entries[0]),
        default=len(lines))]
    last = first_part[-1]
    indent = lines[last][: len(lines[last]) - len(lines[last].lstrip())]
    lines.insert(last + 1, f"{indent}- file: build/chapters/{stem}\n")
    new = notebooks / f"{stem}.py"
    new.write_text(text)
    toc.write_text("".join(lines))
    return new


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("name", help="the new chapter's name, e.g. my_cauchy (or 14_my_cauchy)")
    ap.add_argument("--from", dest="source", default="07",
                    help="the chapter to copy, by number or name (default 07)")
    ap.add_argument("--root", type=Path, default=ROOT,
                    help="the repository to work in (default: this one)")
    args = ap.parse_args(argv)
    new = new_chapter(args.name, args.source, args.root)
    num = new.stem[:2]
    print(f"wrote {new.relative_to(args.root)} and its _toc.yml entry; edit it, then\n"
          f"  make chapter CH={num} MODE=quick && make html")


if __name__ == "__main__":
    main()
