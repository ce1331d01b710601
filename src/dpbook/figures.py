"""Saving the book's figures: PNG for the page plus SVG, stamped with how they were made."""

from __future__ import annotations

from pathlib import Path


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml above ``start`` (default: the working directory)."""
    start = Path.cwd() if start is None else Path(start)
    for p in (start, *start.parents):
        if (p / "pyproject.toml").exists():
            return p
    return start


def figure_saver(chapter: str, **stamp):
    """Return ``save(fig, name, note)`` writing build/figures/<chapter>/<name>.{png,svg}.

    ``stamp`` (for example mode="quick", seed=1) is printed under the figure with the note,
    so a saved figure always says which parameters and mode produced it.
    """
    import matplotlib.pyplot as plt

    folder = repo_root() / "build" / "figures" / chapter
    folder.mkdir(parents=True, exist_ok=True)
    tag = ", ".join(f"{k}={v}" for k, v in stamp.items())

    def save(fig, name: str, note: str = ""):
        text = f"{note}   [{tag}]" if note else f"[{tag}]"
        fig.text(0.0, -0.02, text, fontsize=8, color="0.35", ha="left", va="top", wrap=True)
        for ext in ("png", "svg"):
            fig.savefig(folder / f"{name}.{ext}", bbox_inches="tight", dpi=150)
        plt.show()

    return save
