"""The ledger of the paper's claims: each statement of the paper, the numbers this build
computes for it, the rule that decides it and the verdict ("Does the paper hold?").

Every number comes from the package, the experiment stores or the executed chapters
when the ledger is built (notebooks/13_claims.py, after the other chapters); nothing is
typed.  A claim is a function registered with :func:`claim`; it returns a
:class:`Result`.  Statements with several parts (Fig. 3: 16 cells) give one cell each,
Holm-adjusted within the statement.  The ledger is written to ``build/claims.json``.

    python book/ledger.py check build/claims.json       # parses, every claim decided
    python book/ledger.py compare OLD.json NEW.json     # rules and verdicts that changed
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import sys
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HOLDS, NOT_REPRODUCED, FAILS = "holds", "does not reproduce", "does not hold"
UNDECIDED, NOT_CHECKED = "inconclusive", "not checked in this mode"
VERDICTS = (HOLDS, NOT_REPRODUCED, FAILS, UNDECIDED, NOT_CHECKED)
CATEGORIES = ("Theorems", "Privacy", "Algorithms", "Section 5", "Section 6", "Cost",
              "The authors' code", "Beyond the paper")
# the groups outside the paper's tally: statements about the authors' code, and dpbook's own
NOT_THE_PAPER = ("The authors' code", "Beyond the paper")
SCHEMA = 2
# what each schema allowed (schema 1: "holds with a departure", no Privacy and no group
# of the authors' code), so that `check` and `compare` read the ledgers of older builds
SCHEMAS = {1: (("holds", "holds with a departure", "does not hold", "inconclusive",
                "not checked in this mode"),
               ("Theorems", "Algorithms", "Section 5", "Section 6", "Cost",
                "Beyond the paper")),
           2: (VERDICTS, CATEGORIES)}
# the paper's Section 6 numbers (the claims under test, not results of this build)
PAPER_EPS = (1.0, 2.0, 5.0, 10.0)
PAPER_B = {1.0: 0.06, 2.0: 0.12, 5.0: 0.54, 10.0: 0.96}


def ev(value, se=None, n=None) -> dict:
    """One piece of evidence: a value with its Monte Carlo error and sample size."""
    def plain(v):  # numpy scalars as Python numbers (for JSON)
        return v.item() if hasattr(v, "item") else v

    return {"value": plain(value), "se": plain(se), "n": plain(n)}


@dataclass
class Result:
    verdict: str
    evidence: dict
    parameters: dict = field(default_factory=dict)
    cells: list = field(default_factory=list)  # [{"cell", "verdict", "evidence"}]
    note: str = ""


@dataclass
class Claim:
    id: str
    paper_ref: str
    claim: str
    category: str
    chapter: str  # the book page (its MyST label) that shows it
    check: str  # how this build checks it
    rule: str  # text, formatted with the parameters (the rule's and the result's)
    params: dict = field(default_factory=dict)  # the rule's parameters, passed to the check
    verdict: str = NOT_CHECKED
    evidence: dict = field(default_factory=dict)
    cells: list = field(default_factory=list)
    note: str = ""


REGISTRY: list[tuple[Claim, object]] = []


def claim(**meta):
    """Register a check ``fn(ctx, **params) -> Result`` for the claim described by
    ``meta`` (the fields of :class:`Claim`); its rule is rendered from the same
    ``params`` the check receives."""
    def register(fn):
        REGISTRY.append((Claim(**meta), fn))
        return fn
    return register


def holm(p) -> np.ndarray:
    """Holm's step-down adjusted p-values."""
    p = np.asarray(p, float)
    order = np.argsort(p)
    adj = np.maximum.accumulate((len(p) - np.arange(len(p))) * p[order])
    out = np.empty_like(p)
    out[order] = np.minimum(adj, 1.0)
    return out


def all_verdict(cells) -> str:
    """A statement holds when every cell holds, fails when one fails, does not reproduce
    when one does not (and none fails), else is undecided."""
    verdicts = [c["verdict"] for c in cells]
    for v in (FAILS, NOT_REPRODUCED):
        if v in verdicts:
            return v
    if verdicts and all(v == HOLDS for v in verdicts):
        return HOLDS
    return NOT_CHECKED if verdicts and all(v == NOT_CHECKED for v in verdicts) else UNDECIDED


class NotInBuild(Exception):
    """What a check reads was not computed in this build (the check is then not
    checked, with this exception's text as its note)."""


class Context:
    """What the checks read: the mode, seeded generators, the stores and the chapters.
    Each reader raises :class:`NotInBuild` for what this build did not compute."""

    def __init__(self, mode="quick", root=ROOT, stores=None):
        if mode not in ("quick", "full"):
            raise ValueError(f"mode must be 'quick' or 'full', got {mode!r}")
        self.mode, self.root = mode, Path(root)
        self.full_only = mode != "full"  # quick mode's stores are not the paper's setting
        self.fingerprints = {}
        self._stores = dict(stores or {})

    def rng(self, name) -> np.random.Generator:
        return np.random.default_rng([20231, zlib.crc32(name.encode())])

    def _results(self, name: str) -> Path:
        return self.root / "results" / name

    def store(self, name, what="the Section 6 store"):
        """(estimates, trajectories) of the experiment store ``name``: 'paper' (Section
        6's, results/paper or results/quick) or 'original-code'."""
        if name not in self._stores:
            from dpbook.experiment import load_results

            base = "paper" if self.mode == "full" else "quick"
            path = self._results(base if name == "paper" else f"{base}-{name}")
            try:
                self._stores[name] = load_results(path)
            except ValueError:
                raise NotInBuild(what) from None
            self.fingerprints[str(path.relative_to(self.root))] = fingerprint(path)
        return self._stores[name]

    def calibration(self, name="calibration", suffix="", what="chapter 8's calibration store"):
        """The replications of a calibration study's store (``results/<name>`` in full
        mode, ``results/<name>-quick<suffix>`` in quick mode)."""
        key = name + suffix
        if key not in self._stores:
            import pandas as pd

            from dpbook.experiment.results import note_store_read

            path = self._results(name + ("" if self.mode == "full" else "-quick") + suffix)
            if not (path / "estimates.parquet").exists():
                raise NotInBuild(what)
            self._stores[key] = pd.read_parquet(path / "estimates.parquet")
            note_store_read(path)
            self.fingerprints[str(path.relative_to(self.root))] = fingerprint(path)
        return self._stores[key]

    def glued(self, chapter: str, key: str) -> float:
        """A number a chapter glued (myst-nb) when it ran in this mode."""
        absent = NotInBuild(f"chapter {int(chapter[:2])}")
        try:
            notebook = json.loads((self.root / "build" / "chapters" / f"{chapter}.ipynb")
                                  .read_text())
            if notebook["metadata"]["dpbook"]["parameters"]["mode"] != self.mode:
                raise absent
            for cell in notebook["cells"]:
                for out in cell.get("outputs", []):
                    book = out.get("metadata", {}).get("scrapbook", {})
                    if book.get("name") == key:
                        return float(out["data"][book.get("mime_prefix", "") + "text/plain"])
        except (OSError, ValueError, KeyError):
            pass
        raise absent


def fingerprint(path: Path) -> str:
    """SHA-256 of a store's manifest and task files' names and sizes."""
    h = hashlib.sha256((path / "manifest.json").read_bytes())
    for p in sorted((path / "tasks").glob("*")):
        h.update(f"{p.name}:{p.stat().st_size}".encode())
    return h.hexdigest()[:16]


def build(mode="quick", root=ROOT, stores=None, only=None) -> dict:
    """Run every registered check; the ledger as a dict (the content of claims.json)."""
    from claims import REGISTRY as registry  # the checks, registered as they are defined

    from dpbook import __version__
    from dpbook.figures import commit

    ctx = Context(mode, root, stores)
    rows = []
    for meta, fn in registry:
        if only and meta.id not in only:
            continue
        try:
            res = fn(ctx, **meta.params)
        except NotInBuild as e:
            res = Result(NOT_CHECKED, {}, note=f"not in this build: {e}")
        if res.verdict not in VERDICTS:
            raise ValueError(f"claim {meta.id}: unknown verdict {res.verdict!r}")
        values = {**meta.params, **res.parameters}
        row = {**asdict(meta), "verdict": res.verdict, "evidence": res.evidence,
               "cells": res.cells, "note": res.note,
               "rule": {"text": render(meta.rule, values), "parameters": values},
               "check": render(meta.check, values)}
        del row["params"]
        rows.append(row)
    return {"schema": SCHEMA, "mode": mode, "commit": commit(root) or None,
            "dpbook": __version__,
            "built": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "stores": ctx.fingerprints, "claims": rows}


class _Unknown:
    def __format__(self, spec):
        return "N"


class _Values(dict):
    def __missing__(self, key):
        return _Unknown()


def render(text: str, values: dict) -> str:
    """``text`` with its ``{name:spec}`` fields filled from ``values`` ("N" where a
    value is known only once the check has run on its data, and it did not)."""
    return text.format_map(_Values(values))


def counts(ledger: dict) -> dict:
    """{category: {verdict: count}} of the paper's claims and of dpbook's own (a ledger of
    any schema in :data:`SCHEMAS`)."""
    verdicts, categories = SCHEMAS.get(ledger.get("schema"), SCHEMAS[SCHEMA])
    out = {cat: dict.fromkeys(verdicts, 0) for cat in categories}
    for c in ledger["claims"]:
        out[c["category"]][c["verdict"]] += 1
    return out


# a verdict as the verb of "n statements ...", singular and plural
_VERBS = {HOLDS: ("holds", "hold"), NOT_REPRODUCED: ("does not reproduce",
                                                     "do not reproduce"),
          FAILS: ("does not hold", "do not hold"),
          UNDECIDED: ("is inconclusive", "are inconclusive"),
          NOT_CHECKED: ("is not checked in this mode", "are not checked in this mode")}


def tally(ledger: dict) -> str:
    """The paper's statements by verdict in a sentence: "Of the paper's 20 statements
    that this build checks, 10 hold, 1 does not hold, ..." (statements about the
    authors' code and dpbook's own claims apart)."""
    paper = [c["verdict"] for c in ledger["claims"] if c["category"] not in NOT_THE_PAPER]
    parts = [f"{n} *{_VERBS[v][n != 1]}*" for v in VERDICTS if (n := paper.count(v))]
    return f"Of the paper's {len(paper)} statement{'s' * (len(paper) != 1)} that this " \
        "build checks, " \
        + ", ".join(parts) + f" ({ledger['mode']} mode)"


def check(ledger: dict) -> list[str]:
    """Problems of a ledger: an unknown schema, unknown verdicts or categories (of its
    schema), claims without a rule."""
    problems = []
    if ledger.get("schema") not in SCHEMAS:
        problems.append(f"schema {ledger.get('schema')!r}, expected one of "
                        f"{', '.join(map(str, SCHEMAS))}")
    verdicts, categories = SCHEMAS.get(ledger.get("schema"), SCHEMAS[SCHEMA])
    ids = [c.get("id") for c in ledger.get("claims", [])]
    if len(set(ids)) != len(ids):
        problems.append("repeated claim ids")
    for c in ledger.get("claims", []):
        if c.get("verdict") not in verdicts:
            problems.append(f"{c.get('id')}: verdict {c.get('verdict')!r}")
        if c.get("category") not in categories:
            problems.append(f"{c.get('id')}: category {c.get('category')!r}")
        if not c.get("rule", {}).get("text") or not c.get("paper_ref"):
            problems.append(f"{c.get('id')}: no rule or paper reference")
    if not ids:
        problems.append("no claims")
    return problems


def compare(old: dict, new: dict) -> list[str]:
    """Lines on what changed between two ledgers (of any schemas): the schema, claims
    added or removed, rules, then verdicts and categories."""
    a = {c["id"]: c for c in old["claims"]}
    b = {c["id"]: c for c in new["claims"]}
    lines = [f"added: {k}" for k in b if k not in a] + [f"removed: {k}" for k in a if k not in b]
    if old.get("schema") != new.get("schema"):
        lines.insert(0, f"schema: {old.get('schema')} -> {new.get('schema')}")
    both = [k for k in b if k in a]  # in the new ledger's order (the output is stable)
    for k in both:
        ra, rb = a[k]["rule"], b[k]["rule"]
        if ra != rb:
            what = ("text", "parameters")[ra["text"] == rb["text"]]
            lines.append(f"rule changed: {k}: {ra[what]!r} -> {rb[what]!r}")
    for k in both:
        if a[k]["verdict"] != b[k]["verdict"]:
            lines.append(f"verdict changed: {k}: {a[k]['verdict']} -> {b[k]['verdict']}")
        if a[k].get("category") != b[k].get("category"):
            lines.append(f"category changed: {k}: {a[k].get('category')} -> "
                         f"{b[k].get('category')}")
    order = ("schema", "added", "removed", "rule")
    return sorted(lines, key=lambda s: next((i for i, w in enumerate(order)
                                             if s.startswith(w)), len(order)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="a ledger parses and decides every claim").add_argument("file")
    cmp_ = sub.add_parser("compare", help="rules and verdicts changed between two ledgers")
    cmp_.add_argument("old")
    cmp_.add_argument("new")
    args = p.parse_args(argv)
    try:
        if args.command == "check":
            ledger = json.loads(Path(args.file).read_text())
            problems = check(ledger)
            for line in problems:
                print(f"{args.file}: {line}", file=sys.stderr)
            if not problems:
                total = sum(sum(v.values()) for v in counts(ledger).values())
                print(f"{args.file}: {total} claims, each with a verdict")
            return 1 if problems else 0
        lines = compare(json.loads(Path(args.old).read_text()),
                        json.loads(Path(args.new).read_text()))
    except (OSError, ValueError, KeyError) as exc:
        print(f"ledger: {exc}", file=sys.stderr)
        return 2
    print("\n".join(lines) if lines else "no rule or verdict changed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
