"""dpbook.figures: the saver insists on captions, and the shared plotting helpers."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from dpbook import figures  # noqa: E402
from dpbook.fisher import fisher_grid  # noqa: E402


def test_saver_wants_caption_and_alt_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    save = figures.figure_saver("00_test", mode="quick")
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="caption and alt text"):
        save(fig, "x", caption="", alt="a figure")
    save(fig, "x", "note", caption="What it shows.", alt="An empty set of axes.")
    png = tmp_path / "build" / "figures" / "00_test" / "x.png"
    assert png.exists() and (png.with_suffix(".svg")).exists()
    from PIL import Image

    assert float(Image.open(png).text[figures.MIN_TEXT_KEY]) > 0


def test_interval_heatmaps_one_panel_per_value():
    frames = [fisher_grid(e, grid=5).frame("mu") for e in (1.0, 2.0, 5.0)]
    import pandas as pd

    grid = figures.interval_heatmaps(pd.concat(frames), col="eps", col_wrap=2)
    assert sorted(grid.axes_dict) == [1.0, 2.0, 5.0]
    assert all(len(ax.collections) == 1 for ax in grid.axes_dict.values())
    plt.close(grid.figure)


def test_eps_colours_are_the_same_everywhere_and_ordered():
    a, b = figures.eps_colours([1, 10]), figures.eps_colours([10, 2, 1])
    assert a[1] == b[1] and a[10] == b[10]
    assert sum(a[1][:3]) > sum(b[2][:3]) > sum(a[10][:3])  # darker as eps grows
