"""The README's quick start, run as a newcomer would: its commands print what it shows."""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def quick_start() -> str:
    return README.split("## Quick start")[1].split("\n## ")[0]


def sessions() -> list[tuple[str, list[str]]]:
    """(command, the lines the README shows it printing) of each `$ ` line of the quick
    start's console blocks."""
    steps = []
    for block in re.findall(r"```console\n(.*?)```", quick_start(), re.S):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            else:
                steps[-1][1].append(line)
    return steps


def same_text(printed: str, shown: str) -> bool:
    """Equal words and numbers, digit for digit, except a rounding residue of an exact
    zero (such as 1e-17), which may differ from one machine to another."""
    if NUMBER.sub("#", printed) != NUMBER.sub("#", shown):
        return False
    return all(a == b or max(abs(float(a)), abs(float(b))) < 1e-12
               for a, b in zip(NUMBER.findall(printed), NUMBER.findall(shown)))


def test_the_readme_is_short_and_its_quick_start_sets_up_and_puts_dpbook_on_path():
    assert len(README.splitlines()) <= 150
    assert "make setup" in quick_start() and "source .venv/bin/activate" in quick_start()
    assert len(sessions()) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("command, shown", sessions(), ids=lambda v: str(v)[:40])
def test_each_quick_start_command_prints_what_the_readme_shows(command, shown):
    argv = shlex.split(command)
    assert argv[0] == "dpbook"
    script = Path(sys.executable).with_name("dpbook")  # the installed command itself
    out = subprocess.run([str(script), *argv[1:]], capture_output=True, text=True,
                         cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr
    printed = out.stdout.rstrip("\n").splitlines()
    assert len(printed) == len(shown), out.stdout
    for p, s in zip(printed, shown):
        assert same_text(p, s), (p, s)


def test_the_comparison_catches_a_changed_number_or_word():
    assert same_text("F = 0.242478   G = -1.02864e-17", "F = 0.242478   G = 3e-18")
    assert not same_text("F = 0.242478", "F = 0.242479")
    assert not same_text("F = 0.242478", "G = 0.242478")


def test_every_local_link_of_the_readme_exists():
    links = re.findall(r"\]\(([^)#]+)\)", README)
    local = [link for link in links if "://" not in link]
    assert len(local) > 10
    assert [link for link in local if not (ROOT / link).exists()] == []
