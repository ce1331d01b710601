"""`make new-chapter` (book/tools/new_chapter.py, issue 53 item 2): the copy of a chapter
with its keys renamed and its entry in _toc.yml, made in a copy of the repository's
notebooks/ and _toc.yml (the real ones are never touched)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "book" / "tools"))
import new_chapter  # noqa: E402


@pytest.fixture
def tree(tmp_path):
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    shutil.copy(ROOT / "_toc.yml", tmp_path / "_toc.yml")
    return tmp_path


def test_new_chapter_renames_every_key_and_lists_the_copy(tree):
    last = max(int(p.name[:2]) for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.py"))
    new = new_chapter.new_chapter("my_cauchy", "07", tree)
    num = f"{last + 1:02d}"
    assert new == tree / "notebooks" / f"{num}_my_cauchy.py"
    old, text = (ROOT / "notebooks" / "07_new_family.py").read_text(), new.read_text()
    assert "# (ch-my-cauchy)=" in text and "ch-new-family" not in text
    assert f'figure_saver("{num}_my_cauchy" + key' in text and "07_new_family" not in text
    assert f'f"ch{num}{{key}}-{{mode}}-seed{{seed}}"' in text
    assert f'glue_phrase("ch{num}-built-with"' in text
    labels = re.findall(r'name="(tbl-\d\d-[a-z-]+)"', text)
    assert labels and all(t.startswith(f"tbl-{num}-") for t in labels)
    assert len(labels) == len(re.findall(r'name="tbl-07-', old))
    assert "{ref}`ch-smc`" in text  # other chapters' labels are left alone
    toc = (tree / "_toc.yml").read_text().splitlines()
    entry = f"      - file: build/chapters/{num}_my_cauchy"
    assert toc.count(entry) == 1
    # in the numbered part, after its last chapter, before the next part
    at = toc.index(entry)
    assert toc[at - 1].startswith("      - file: build/chapters/")
    assert "caption" in toc[at + 1]
    assert (ROOT / "_toc.yml").read_text().count("my_cauchy") == 0


def test_new_chapter_refuses_taken_or_bad_names_with_one_line(tree):
    new_chapter.new_chapter("20_mine", "07", tree)
    toc = (tree / "_toc.yml").read_text()
    for args in (["mine"], ["20_other"], ["Bad-Name"], ["ok", "--from", "99"]):
        proc = subprocess.run([sys.executable, str(ROOT / "book/tools/new_chapter.py"),
                               *args, "--root", str(tree)], capture_output=True, text=True)
        assert proc.returncode == 2, (args, proc.stderr)
        assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert (tree / "_toc.yml").read_text() == toc  # nothing written
