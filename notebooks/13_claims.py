# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (ch-claims)=
# # Does the paper hold?
#
# This page is the ledger of {cite:t}`yildirim2023adaptive`: one row per statement of
# the paper, with the numbers this build computed for it, the rule that decides it and
# the verdict.  Nothing on it is typed: the page runs after the other chapters and reads
# the package, the experiment stores and the numbers the chapters computed, so a change
# of the code that flips a verdict shows here without anyone editing the page.
#
# A verdict is one of
#
# * **holds**: the rule is met; where the rule is a statistical test that did not
#   reject, only if the test had 80% power against the smallest effect the rule names
#   (each such rule states it);
# * **does not reproduce**: the paper's number is not this build's; the row shows both
#   and what the difference costs ({ref}`reproduction-notes` says where and why);
# * **does not hold**: the rule is broken;
# * **inconclusive**: the data of this build cannot decide (at the paper's 30 runs, some
#   differences are within the Monte Carlo noise; a test that did not reject had too
#   little power to say "holds");
# * **not checked in this mode**: the quick build's stores are not the paper's setting
#   (5 runs of 200 individuals instead of 30 of 1000), or a chapter it reads did not run.
#   The numbers are still shown; `make book` (the full build) decides them.
#
# Theorems get "holds" when they are *numerically consistent* on the points checked,
# which is not a proof; their two sides are computed by different code (`book/audit.py`
# computes in the original coordinates what dpbook computes in the standard ones).  A
# statement with several parts (Figure 3: four ε, two parameters, two competitors) is
# decided cell by cell; the p-values of its cells are adjusted by Holm's method within
# the statement, never across statements.  Statements about the authors' code and
# dpbook's own claims are counted apart from the paper's.  Every rule can fail: each
# kind of statement has a negative control in `tests/test_ledger.py` (a planted defect
# that flips its verdict).  The ledger's code is `book/ledger.py` (the page,
# `claims.json`, the `check` and `compare` commands), `book/claims.py` (one function per
# statement) and `book/audit.py` (the independent references).

# %% tags=["parameters"]
mode = "quick"  # "quick" or "full": which stores (and chapters' numbers) are read

# %% tags=["hide-input"]
import json
import sys

import pandas as pd
from IPython.display import Markdown, display

from dpbook.figures import figure_saver, glue_phrase, repo_root

sys.path.insert(0, str(repo_root() / "book"))
import ledger  # noqa: E402 - the book's own code, beside this page

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
save = figure_saver("13_claims", mode=mode)
L = ledger.build(mode)
OUT = repo_root() / "build" / "claims.json"
OUT.write_text(json.dumps(L, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
counts = pd.DataFrame(ledger.counts(L)).T
glue_phrase("tally", ledger.tally(L) + ".")
print(f"{mode} mode, commit {L['commit']}; stores read:", *L["stores"], sep="\n  ")

# %% [markdown]
# {glue:md}`tally`  The ledger is also a file, {download}`claims.json <../claims.json>`: one
# object per statement with its rule, parameters, evidence (value, Monte Carlo error,
# sample size) and verdict, with the mode, the commit and each store's fingerprint.
# `python book/ledger.py compare OLD.json NEW.json` lists the rules and the verdicts that
# changed between two builds.

# %% tags=["hide-input"] fig_caption="The verdicts of this build, by kind of statement; the last two bars count the statements about the authors' code and dpbook's own claims, outside the paper's tally." fig_alt="Horizontal stacked bars, one per kind of statement (theorems, privacy, algorithms, Section 5, Section 6, cost, the authors' code, beyond the paper), split into the numbers of statements that hold, do not reproduce, do not hold, are inconclusive or are not checked in this mode."
COLOURS = {"holds": "#4c9a2a", "does not reproduce": "#e67e22",
           "does not hold": "#c0392b", "inconclusive": "#e6b800",
           "not checked in this mode": "#bbbbbb"}
shown = counts.loc[[c for c in ledger.CATEGORIES if counts.loc[c].sum()][::-1]]
ax = shown[list(ledger.VERDICTS)].plot.barh(stacked=True, color=COLOURS, figsize=(7.5, 3.6),
                                            width=0.7)
for bars in ax.containers:
    ax.bar_label(bars, labels=[f"{int(w)}" if w else "" for w in bars.datavalues],
                 label_type="center", fontsize="small")
ax.set(xlabel="", ylabel="")
ax.legend(ncol=3, fontsize="small", frameon=False, loc="lower center",
          bbox_to_anchor=(0.45, 1.0))
save(ax.figure, "verdicts", f"{mode} mode, commit {L['commit']}")

# %% [markdown]
# ## The paper's statements
#
# Each statement gives its place in the paper, how this build checks it (the page that
# shows it; {ref}`paper-in-code` names the tests), the rule as the code applies it, the
# numbers that decide it, and the verdict.

# %% tags=["hide-input"]
MARK = {v: f"**{v}**" for v in ledger.VERDICTS}


def number(e):
    v = e["value"]
    text = (str(v) if isinstance(v, (bool, str)) or v is None else
            f"{v:,}" if isinstance(v, int) else f"{v:.4g}")
    if e.get("se") is not None:
        text += f" ± {e['se']:.2g}"
    return text + (f" (n = {e['n']:,})" if e.get("n") is not None else "")


def md(text):
    return text.replace("*", r"\*")  # b* is a name here, not emphasis


def block(c):
    lines = [f"**{md(c['claim'])}**", "",
             f"Verdict: {MARK[c['verdict']]}"
             + (" (numerically consistent)" if c["category"] == "Theorems"
                and c["verdict"] == "holds" else "")
             + f" · {c['paper_ref']} · shown in "
             f"{{ref}}`{c['chapter']}`",
             "", f"* *Check:* {md(c['check'])}.", f"* *Rule:* {md(c['rule']['text'])}."]
    lines += [f"* {md(k)}: {number(e)}" for k, e in c["evidence"].items()]
    if c["note"]:
        lines.append(f"* *Note:* {c['note']}.")
    if c["cells"]:
        lines += ["", "| cell | verdict | numbers |", "|---|---|---|"]
        lines += [f"| {x['cell']} | {MARK[x['verdict']]} | "
                  + "; ".join(f"{md(k)}: {number(e)}" for k, e in x["evidence"].items())
                  + " |"
                  for x in c["cells"]]
    return "\n".join(lines) + "\n"


def show(category):
    display(Markdown("\n".join(block(c) for c in L["claims"] if c["category"] == category)))


# %% [markdown]
# ### Theorems

# %% tags=["remove-input"]
show("Theorems")

# %% [markdown]
# ### Privacy
#
# Theorem 2 is checked on the release that Algorithm 1 calls, with values inside, at and
# far outside the interval, and audited from a million releases at each of two
# neighbouring inputs: a release that forgets to clip or scales its noise by the wrong
# width fails both (`tests/test_ledger.py`).

# %% tags=["remove-input"]
show("Privacy")

# %% [markdown]
# ### Algorithms

# %% tags=["remove-input"]
show("Algorithms")

# %% [markdown]
# ### Section 5: adaptive truncation

# %% tags=["remove-input"]
show("Section 5")

# %% [markdown]
# ### Section 6: numerical results

# %% tags=["remove-input"]
show("Section 6")

# %% [markdown]
# ### Cost

# %% tags=["remove-input"]
show("Cost")

# %% [markdown]
# ## The authors' code
#
# Statements about the authors' code rather than the paper: they are not counted among
# the paper's statements ({ref}`notes-authors-code`).

# %% tags=["remove-input"]
show("The authors' code")

# %% [markdown]
# ## Beyond the paper
#
# Claims dpbook makes of its own, not the paper's: the calibration of the posteriors
# and MHAAR's coverage ({ref}`ch-calibration`), and the central release's posteriors
# ({ref}`ch-local-vs-central`).

# %% tags=["remove-input"]
show("Beyond the paper")
