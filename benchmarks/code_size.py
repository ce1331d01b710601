"""The size of the package: code lines, lines in all, and the largest modules.

A code line is a non-blank line that holds at least one token other than a comment, a
docstring or a line break (counted with ``tokenize`` and ``ast``, so a ``#`` inside a
string or a docstring's continuation lines are told apart correctly).

    python benchmarks/code_size.py [--root src/dpbook] [--threshold 800] [--top 10] [--json]
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import pathlib
import tokenize

ROOT = pathlib.Path(__file__).resolve().parents[1] / "src" / "dpbook"


def _docstring_lines(tree) -> set[int]:
    """The line numbers covered by module, class and function docstrings."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                out.update(range(first.lineno, first.end_lineno + 1))
    return out


def count(source: str) -> dict:
    """{"code": code lines, "lines": lines in all} of one module's source."""
    docs = _docstring_lines(ast.parse(source))
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
            tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER}
    code = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in skip:
            continue
        if tok.type == tokenize.STRING and tok.start[0] in docs:
            continue
        code.update(range(tok.start[0], tok.end[0] + 1))
    return {"code": len(code), "lines": len(source.splitlines())}


def measure(root: pathlib.Path) -> dict:
    modules = {str(p.relative_to(root)): count(p.read_text())
               for p in sorted(root.rglob("*.py"))}
    return {"root": str(root), "modules": modules,
            "code": sum(m["code"] for m in modules.values()),
            "lines": sum(m["lines"] for m in modules.values())}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=pathlib.Path, default=ROOT)
    ap.add_argument("--threshold", type=int, default=800,
                    help="list the modules with more lines than this (default 800)")
    ap.add_argument("--top", type=int, default=10, help="how many largest modules to list")
    ap.add_argument("--json", action="store_true", help="print everything as JSON")
    args = ap.parse_args(argv)
    if not args.root.is_dir():
        ap.error(f"--root {args.root} is not a directory")
    m = measure(args.root)
    mods = m["modules"]
    over = {k: v["lines"] for k, v in mods.items() if v["lines"] > args.threshold}
    top = sorted(mods.items(), key=lambda kv: -kv[1]["lines"])[: args.top]
    if args.json:
        print(json.dumps({**m, "threshold": args.threshold, "over_threshold": over}, indent=1))
        return 0
    print(f"{m['root']}: {len(mods)} modules, {m['code']} code lines, "
          f"{m['lines']} lines in all")
    print(f"modules over {args.threshold} lines: "
          + (", ".join(f"{k} ({v})" for k, v in over.items()) or "none"))
    print(f"the {len(top)} largest modules (lines, code lines):")
    for k, v in top:
        print(f"  {v['lines']:6d} {v['code']:6d}  {k}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
