"""dpbook.figures: the saver leaves captions to the cell's metadata, and the shared
plotting helpers."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from dpbook import figures  # noqa: E402
from dpbook.fisher import fisher_grid  # noqa: E402


def test_saver_leaves_caption_and_alt_text_to_the_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text("")
    shown = []
    monkeypatch.setattr("IPython.display.display", shown.append)
    save = figures.figure_saver("00_test", mode="quick")
    fig, _ = plt.subplots()
    with pytest.raises(TypeError, match="cell's metadata"):
        save(fig, "x", caption="What it shows.", alt="An empty set of axes.")
    save(fig, "x", "note", eps=np.float64(2.0))
    png = tmp_path / "build" / "figures" / "00_test" / "x.png"
    assert png.exists() and (png.with_suffix(".svg")).exists()
    from PIL import Image

    assert float(Image.open(png).text[figures.MIN_TEXT_KEY]) > 0
    data, meta = shown[0]._repr_mimebundle_()
    assert meta[figures.FIGURE_KEY] == {
        "name": "x", "label": "fig-00-test-x", "path": "../figures/00_test/x.png",
        "note": "note", "stamp": "mode=quick", "fields": {"eps": 2.0}}
    # in plain Jupyter: the image with the computed note and the stamp
    assert data["text/plain"] == "note (mode=quick)."
    assert "<figcaption>note (mode=quick).</figcaption>" in data["text/html"]
    figures.describe_png(png, "An empty\n set of axes.")
    assert Image.open(png).text["Description"] == "An empty set of axes."
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


def test_marginals_against_exact_draws_each_panel_once():
    import numpy as np
    import pandas as pd

    from dpbook.posterior import exact_posterior
    from dpbook.smc.resample_move import Particles

    rng = np.random.default_rng(0)
    y = rng.normal(50, 3, 40) + rng.laplace(0, 4, 40)
    post = exact_posterior(y, 30.0, 70.0, 10.0, grid=(41, 41))
    dens = post.marginal_frame()
    assert set(dens.param) == {"mu", "sigma"} and list(dens.columns) == ["param", "x", "density"]
    theta = np.column_stack([rng.normal(50, 1, 500), rng.gamma(9, 0.3, 500)])
    cloud = Particles(theta, rng.uniform(size=500), ("mu", "sigma"))
    np.testing.assert_allclose(cloud.mean(), cloud.w @ theta)
    assert cloud.summary()["mu"]["mean"] == pytest.approx(cloud.mean()[0])
    draws = pd.concat([cloud.frame().assign(run=k) for k in (1, 2)])
    grid = figures.marginals_against_exact(draws, dens, row=None, col="param", hue="run")
    for ax in grid.axes.flat:  # one exact line per panel, one histogram per run
        assert [line.get_label() for line in ax.lines].count("exact") == 1
    plt.close(grid.figure)
    grid = figures.marginals_against_exact(cloud.frame(), dens, truth={"mu": 50, "sigma": 3})
    assert grid.axes.shape == (2, 1) and grid.axes[1, 0].get_xlim()[0] >= 0
    plt.close(grid.figure)


def test_tables_for_readers():
    import numpy as np
    import pandas as pd

    from dpbook.figures import TABLE_KEY, format_table, show_table

    df = pd.DataFrame({"eps": [1.0, 2.0, 0.5], "runs": [30.0, 30.0, 30.0],
                       "rmse": [0.123456, 1.5, np.nan], "n": [1000, 100000, 5],
                       "method": ["a", "b", None]})
    text, align = format_table(df)
    assert list(text.columns) == ["eps", "runs", "rmse", "n", "method"]  # no 0..n index
    assert list(text.eps) == ["1", "2", "0.5"] and list(text.runs) == ["30"] * 3
    assert list(text.rmse) == ["0.123", "1.500", ""]  # 3 significant digits at the median
    assert list(text.n) == ["1,000", "100,000", "5"] and text.method.iat[2] == ""
    assert align == ["right"] * 4 + ["left"]
    # a named index becomes a column; column levels are joined
    wide = pd.DataFrame([[1.23456, 2.0]], columns=pd.MultiIndex.from_tuples(
        [("μ", "bias"), ("μ", "RMSE")]), index=pd.Index([5.0], name="eps"))
    assert list(format_table(wide)[0].columns) == ["eps", "μ bias", "μ RMSE"]
    # a mixed column is formatted cell by cell
    mixed = format_table(pd.Series({"n": 200, "sigma": 10 ** 0.5, "family": "normal"},
                                   dtype=object).to_frame("value"))[0]
    assert list(mixed.value) == ["200", "3.16", "normal"]
    data, meta = show_table(df)._repr_mimebundle_()
    assert meta == {TABLE_KEY: True}
    assert data["text/markdown"].splitlines()[:3] == [
        "| eps | runs | rmse | n | method |", "|--:|--:|--:|--:|:--|",
        "| 1 | 30 | 0.123 | 1,000 | a |"]
