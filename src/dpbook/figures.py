"""The book's figures: one style, and a saver that files every figure as PNG and SVG,
stamps it with how it was made and shows it; the book's build numbers it and adds the
caption and alt text of its cell's metadata (see :func:`figure_saver`)."""

from __future__ import annotations

import base64
import html
import math
from functools import cache, lru_cache
from pathlib import Path

import numpy as np

from dpbook.experiment.store import git_output, repo_root

DPI = 150
# Smallest text, in CSS pixels, that a figure may show in the book's page column at a
# 1280-px window (book/tools/check_pages.py measures it; the saver records each figure's
# smallest text in its PNG as MIN_TEXT_KEY).
MIN_TEXT_PX = 9.0
MIN_TEXT_KEY = "dpbook:min-text-px"
STAMP_POINTS = 9


# One colour per method in every chapter (seaborn's colour-blind palette).
METHOD_COLOURS = {"smc-adaptive": "#0173b2", "smc-fixed": "#de8f05", "mhaar": "#029e73",
                  "exact": "#000000", "naive": "#cc78bc", "original-code": "#ca9161",
                  # the online posteriors for long streams (chapter 9)
                  "smc": "#0173b2", "smc-subset": "#56b4e9", "smc-marginal": "#d55e00",
                  "online-gradient": "#cc78bc"}


GREEK = {"mu": "μ", "sigma": "σ"}  # parameter names as the figures print them


def eps_colours(eps_values) -> dict:
    """One colour per privacy level, the same in every chapter: seaborn's "flare" map
    on log eps over [0.5, 20] (light: much noise, dark: little)."""
    import seaborn as sns

    cmap = sns.color_palette("flare", as_cmap=True)
    lo, hi = math.log(0.5), math.log(20.0)
    return {e: cmap(min(max((math.log(e) - lo) / (hi - lo), 0.0), 1.0)) for e in eps_values}


@lru_cache(maxsize=8)
def commit(root: Path | None = None) -> str:
    """Short git commit of the checkout at ``root`` (default: :func:`repo_root`),
    ``-dirty`` if tracked files are modified; "" outside git."""
    root = repo_root() if root is None else Path(root)
    head = git_output("rev-parse", "--short=10", "HEAD", cwd=root) or ""
    dirty = git_output("status", "--porcelain", "--untracked-files=no", cwd=root)
    return head + ("-dirty" if head and dirty else "")


def use_book_style():
    """The book's figure style (seaborn's "notebook" context, white background with
    ticks), sized so that text stays readable when a figure at most 9 inches wide
    fills the page column."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="ticks", font_scale=0.9,
                  rc={"figure.dpi": 100, "savefig.dpi": DPI, "axes.titlesize": "medium"})


def interval_heatmaps(data, value="score", *, row=None, col=None, col_wrap=None,
                      vmin=0.0, vmax=None, cmap="viridis", label="", height=3.6):
    """Heat maps of a score over intervals [a, b] (a across, b up; the diagonal a = b in
    grey) from a long-form table with columns a, b and ``value`` (for example
    :meth:`dpbook.fisher.estimates.FisherGrid.frame`), one panel per ``row`` / ``col``
    value (seaborn's FacetGrid, returned), one colour bar for all."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    vmax = data[value].max() if vmax is None else vmax

    def draw(data, color=None, label=None):  # one panel's rows (FacetGrid passes data=)
        surface = data.pivot(index="b", columns="a", values=value)
        plt.gca().pcolormesh(surface.columns, surface.index, surface.to_numpy(),
                             shading="nearest", cmap=cmap, vmin=vmin, vmax=vmax,
                             rasterized=True)

    grid = sns.FacetGrid(data, row=row, col=col, col_wrap=col_wrap, height=height,
                         despine=False)
    grid.map_dataframe(draw)
    lims = (min(data.a.min(), data.b.min()), max(data.a.max(), data.b.max()))
    for ax in grid.axes.flat:
        ax.plot(lims, lims, color="0.5", lw=0.8)
        ax.set(xlim=lims, ylim=lims, aspect="equal")
    grid.set_axis_labels("a (left end)", "b (right end)")
    grid.figure.colorbar(grid.axes.flat[0].collections[0], ax=grid.axes, shrink=0.6,
                         label=label)
    return grid


def paths_frame(runs, params=("mu", "sigma"), names=None):
    """The online posterior of {name: run} (results of
    :func:`dpbook.online.algorithm1.run_online`) in long form: one row per (method, param,
    t) with the SMC posterior ``mean`` and ``sd`` after individual t, and the release
    ``y`` and interval ``l``, ``r`` of individual t.  ``names`` relabels the parameters
    (e.g. {"mu": "μ"})."""
    import pandas as pd

    names = names or {}
    return pd.concat([pd.DataFrame({
        "method": name, "param": names.get(p, p), "t": np.arange(1, len(run.y) + 1),
        "mean": getattr(run.smc.history, f"mean_{p}"),
        "sd": getattr(run.smc.history, f"sd_{p}"), "y": run.y, "l": run.l, "r": run.r})
        for name, run in runs.items() for p in params], ignore_index=True)


def posterior_paths(data, *, row=None, col=None, hue="method", truth=None, palette=None,
                    height=2.8, aspect=1.4, centre="mean", band=None, **facet):
    """Posterior mean (line) and mean ± 2 sd (band) against t from a long-form table
    such as :func:`paths_frame`'s, one panel per ``row`` / ``col`` value and one colour
    per ``hue`` value (default: the method colours, for methods named "adaptive",
    "fixed" or as in :data:`METHOD_COLOURS`); ``truth`` {param: value} adds dashed
    lines.  ``centre`` and ``band`` = (lower, upper) name other columns for the line
    and the band (for example the median and the quartiles).  Returns seaborn's
    FacetGrid."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    def draw(data, color=None, label=None):
        ax = plt.gca()
        if band is None:
            lo, hi = data[centre] - 2 * data.sd, data[centre] + 2 * data.sd
        else:
            lo, hi = data[band[0]], data[band[1]]
        ax.fill_between(data.t, lo, hi, color=color, alpha=0.25, lw=0)
        ax.plot(data.t, data[centre], color=color, label=label)
        value = (truth or {}).get(data.param.iat[0])
        if value is not None:
            ax.axhline(value, color="k", lw=1, ls="--")

    if palette is None and hue is not None:
        palette = {h: METHOD_COLOURS.get(h, METHOD_COLOURS.get(f"smc-{h}"))
                   for h in data[hue].unique()}
    grid = sns.FacetGrid(data, row=row, col=col, hue=hue, palette=palette, height=height,
                         aspect=aspect, **facet)
    grid.map_dataframe(draw)
    grid.set_axis_labels("t (individuals released)", "")
    return grid


def pit_ecdf_differences(data, *, col, col_wrap=4, hue="eps", alpha=0.05, height=1.9,
                         aspect=1.0, band="sailynoja"):
    """ECDF-difference plots of PIT values (Sailynoja, Burkner and Vehtari 2022): the
    ECDF of the long-form column ``pit`` minus the uniform cdf, one panel per ``col``
    value (wrapped at ``col_wrap``) and one line per ``hue`` value, over the grey
    simultaneous 1 - alpha band for that many uniform values: Sailynoja et al.'s
    (:func:`dpbook.calibration.ecdf_band`, for up to a few thousand values) or, with
    ``band="ks"``, the Kolmogorov-Smirnov band of constant width.  Returns seaborn's
    FacetGrid."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from scipy import stats

    from dpbook.calibration.replication import ecdf_band

    z = np.linspace(0.0, 1.0, 201)

    @cache
    def limits(reps):  # the band of reps uniform values (the same in every panel)
        if band == "ks":
            half = stats.kstwo.ppf(1 - alpha, reps)
            return z - half, z + half
        return ecdf_band(reps, alpha=alpha, points=z, rng=0)[1:]

    def draw(data, color=None, label=None):
        u = np.sort(data["pit"].to_numpy())
        ax = plt.gca()
        if not ax.collections:  # the band, once per panel
            lo, hi = limits(u.size)
            ax.fill_between(z, lo - z, hi - z, color="0.85", lw=0)
            ax.axhline(0.0, color="0.5", lw=0.6)
        ax.step(z, np.searchsorted(u, z, side="right") / u.size - z, where="post",
                color=color, label=label, lw=1.2)

    hues = sorted(data[hue].unique())
    grid = sns.FacetGrid(data, col=col, col_wrap=col_wrap, hue=hue, hue_order=hues,
                         palette=eps_colours(hues) if hue == "eps" else "colorblind",
                         height=height, aspect=aspect)
    grid.map_dataframe(draw)
    grid.set_axis_labels("PIT value u", "ECDF(u) − u")
    grid.set_titles("{col_name}")
    grid.add_legend(title="ε" if hue == "eps" else hue)
    return grid


def marginals_against_exact(draws, exact, *, row="param", col=None, hue=None, truth=None,
                            window=(0.01, 0.99), pad=0.1, bins=40, height=2.6,
                            aspect=0.8, palette=None, color=None, label="draws"):
    """Weighted histograms of posterior draws against exact marginal densities: one panel
    per (``row``, ``col``) value, one histogram per ``hue`` value.

    ``draws``: long form with columns ``value`` and ``weight`` (any scale: normalised per
    panel and hue, so a histogram is the density of the whole cloud, draws outside the
    window included); ``exact``: long form with ``x`` and ``density`` and the same facet
    columns.  Each panel shows the central ``window`` of the exact marginal and of the
    draws, widened by ``pad`` on either side (not below 0 for a positive parameter:
    one whose exact nodes are all positive).  ``truth``: {row value: true value}, a
    dotted line.  ``palette`` colours the hues; without a hue, ``color`` and ``label``
    style the one histogram.  Returns seaborn's FacetGrid."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from scipy.integrate import cumulative_trapezoid

    facets = [c for c in (row, col) if c is not None]

    def cloud_quantiles(d, q):
        order = np.argsort(d["value"].to_numpy())
        v, w = d["value"].to_numpy()[order], d["weight"].to_numpy()[order]
        return np.interp(q, (np.cumsum(w) - 0.5 * w) / w.sum(), v)

    limits = {}
    for key, e in exact.groupby(facets, sort=False):
        d = draws.set_index(facets).loc[key].reset_index() if facets else draws
        x, dens = e["x"].to_numpy(), e["density"].to_numpy()
        cdf = cumulative_trapezoid(dens, x, initial=0.0)
        lo, hi = np.interp(window, cdf / cdf[-1], x)
        clouds = [g for _, g in d.groupby(hue)] if hue else [d]
        lo = min(lo, *[cloud_quantiles(g, window[0]) for g in clouds])
        hi = max(hi, *[cloud_quantiles(g, window[1]) for g in clouds])
        lo, hi = lo - pad * (hi - lo), hi + pad * (hi - lo)
        limits[key if isinstance(key, tuple) else (key,)] = \
            (max(lo, 0.0) if x.min() > 0 else lo, hi, e)

    def draw(data, color=None, label=None):  # FacetGrid passes a hue's colour and label
        key = tuple(data[f].iloc[0] for f in facets)
        lo, hi, e = limits[key]
        ax = plt.gca()
        if key not in drawn:  # the exact density and the truth, once per panel, on top
            drawn.add(key)
            inside = (e["x"] >= lo) & (e["x"] <= hi)
            ax.plot(e["x"][inside], e["density"][inside], color="k", lw=1.6, label="exact",
                    zorder=3)
            if truth is not None and row is not None:
                ax.axvline(truth[key[0]], color="C3", ls=":", lw=1, label="true value",
                           zorder=3)
        sns.histplot(x=data["value"], weights=data["weight"] / (data["weight"].sum()
                                                                 * (hi - lo) / bins),
                     bins=bins, binrange=(lo, hi), stat="count", element="step",
                     fill=hue is None, alpha=0.45 if hue is None else 0.9, ax=ax,
                     color=color if hue else one_color, label=label if hue else one_label)
        ax.set(xlim=(lo, hi), yticks=[], ylabel="", xlabel=str(key[0]) if row else "")

    grid = sns.FacetGrid(draws, row=row, col=col, hue=hue, sharex=False, sharey=False,
                         height=height, aspect=aspect, palette=palette)
    one_color, one_label, drawn = color or "C0", label, set()
    grid.map_dataframe(draw)
    grid.set_titles(template=(f"{col} = {{col_name}}" if row else "{col_name}") if col else "")
    return grid


def _cloud_limits(values, truth, log=False):
    """Vertical limits around the 1-99% quantiles of ``values`` and the truth."""

    v, t = (np.log(values), np.log(truth)) if log else (values, truth)
    lo, hi = np.quantile(v, [0.01, 0.99])
    lo, hi = min(lo, t), max(hi, t)
    lo, hi = lo - 0.25 * (hi - lo), hi + 0.25 * (hi - lo)
    return (np.exp(lo), np.exp(hi)) if log else (lo, hi)


def _cloud(ax, t_snap, particles, mean, truth, ylim, colour, log=False, l=None, r=None):
    from matplotlib.ticker import NullFormatter

    steps = np.arange(1, len(mean) + 1)
    if l is not None:  # behind the particles
        ax.plot(steps, l, steps, r, color="C2", lw=0.5, alpha=0.7, zorder=1)
    ax.scatter(np.repeat(t_snap, particles.shape[1]), particles.ravel(), s=3, color=colour,
               alpha=min(0.4, 50 / particles.shape[1]), lw=0, rasterized=True, zorder=2)
    ax.plot(steps, mean, color="C3", lw=1.2, zorder=3)
    ax.axhline(truth, color="k", lw=1, zorder=3)
    if log:
        ax.set_yscale("log")
        ticks = [v for v in (0.3, 0.5, 1, 2, 3, 5, 10, 20, 50) if ylim[0] <= v <= ylim[1]]
        ax.set_yticks(ticks, [f"{v:g}" for v in ticks])
        ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylim(ylim)


def particle_clouds(trajectories, eps, run, methods):
    """Figure 2 of the paper from an experiment store: the particles of mu (top) and
    sigma (bottom, log scale) over time, one column per method (``methods``: {method:
    title}), with the posterior mean (red), the truth (black) and the interval ends
    l_t, r_t (green; a fixed interval's usually lie outside the limits).  The vertical
    limits cover the 1-99% quantiles of the particles after the first quarter of the
    stream, and the truth."""
    import matplotlib.pyplot as plt

    config = trajectories.config
    truth = config["mu"], config["sigma"]
    fig, axes = plt.subplots(2, len(methods), figsize=(4.5 * len(methods), 5.6), sharex=True,
                             squeeze=False)
    snaps = {m: trajectories.particles(m, eps, run) for m in methods}
    late = {m: s[0] > config["n"] / 4 for m, s in snaps.items()}
    lims = [_cloud_limits(np.concatenate([s[j + 1][late[m]].ravel() for m, s in snaps.items()]),
                          truth[j], log=j == 1) for j in (0, 1)]
    for k, (method, title) in enumerate(methods.items()):
        d = trajectories[method, eps, run]
        t_snap, mu_p, sig_p = snaps[method]
        _cloud(axes[0, k], t_snap, mu_p, d["mean_mu"], truth[0], lims[0],
               METHOD_COLOURS[method], l=d["l"], r=d["r"])
        _cloud(axes[1, k], t_snap, sig_p, d["mean_sigma"], truth[1], lims[1],
               METHOD_COLOURS[method], log=True)
        axes[0, k].set_title(title)
        axes[1, k].set_xlabel("t")
    axes[0, 0].set_ylabel("μ")
    axes[1, 0].set_ylabel("σ")
    fig.tight_layout()
    return fig


def coverage_dots(summary, *, levels=(50, 90), height=2.2, aspect=1.6):
    """Coverage of central credible intervals per method: one dot per row of a
    calibration summary (:func:`dpbook.calibration.calibration_summary`: one per eps),
    ±2 binomial se of a calibrated posterior as grey bars, the nominal level as a
    vertical line; one panel per parameter (rows) and level (columns).  Returns
    seaborn's FacetGrid."""
    import pandas as pd
    import seaborn as sns

    cover = pd.concat([summary.assign(level=f"{p}%", coverage=summary[f"coverage{p}"],
                                      se=summary[f"coverage{p}_se"]) for p in levels])
    cover["param"] = cover.param.map(GREEK).fillna(cover.param)
    grid = sns.catplot(cover, kind="point", x="coverage", y="method", hue="method",
                       col="level", row="param", palette=METHOD_COLOURS, linestyle="none",
                       height=height, aspect=aspect, markers="o", errorbar=None, dodge=False)
    for (param, level), ax in grid.axes_dict.items():
        ax.axvline(int(level[:-1]) / 100, color="0.4", lw=0.8)
        rows = cover[(cover.param == param) & (cover.level == level)]
        ax.errorbar(rows.coverage, rows.method, xerr=2 * rows.se, color="0.6", lw=0.8,
                    zorder=0, ls="none")
    grid.set_titles("{row_name}, {col_name} interval")
    return grid


def smallest_text_points(fig) -> float:
    """Font size (points) of the smallest visible, non-empty text of ``fig``."""
    from matplotlib.text import Text

    fig.canvas.draw()  # tick labels exist only once drawn
    sizes = [t.get_fontsize() for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and t.get_window_extent().width > 0]
    return min(sizes) if sizes else float("inf")


FIGURE_KEY = "dpbook-figure"  # output metadata that marks a figure for the book's build


def figure_caption(caption: str, note: str, stamp: str) -> str:
    """The caption a figure shows: ``caption`` (from its cell's metadata; "" outside the
    book's build), the computed ``note`` and the ``stamp`` parameters in brackets."""
    full = f"{' '.join(caption.split())} {note.strip()}".strip().rstrip(".")
    return f"{full} ({stamp})." if stamp else f"{full}."


def figure_markdown(relative: str, label: str, caption: str, alt: str = "") -> str:
    """A numbered MyST figure (label ``label``) of the image at ``relative``."""
    alt = " ".join(alt.split())
    alt = f":alt: {alt}\n" if alt else ""
    return (f"```{{figure}} {relative}\n:name: {label}\n{alt}:width: 100%\n\n"
            f"{caption}\n```\n")


def figure_html(png_base64: str, caption: str, alt: str = "") -> str:
    """The figure for Jupyter: the image inline, with its caption."""
    alt = html.escape(" ".join(alt.split()))
    return (f'<figure><img src="data:image/png;base64,{png_base64}" alt="{alt}"'
            f' style="max-width:100%"><figcaption>{html.escape(caption)}'
            "</figcaption></figure>")


def describe_png(png: Path, alt: str) -> None:
    """Write ``alt`` into the PNG's "Description" text (its other texts kept)."""
    from PIL import Image, PngImagePlugin

    with Image.open(png) as image:
        image.load()
        info = PngImagePlugin.PngInfo()
        for key, value in image.text.items():
            if key != "Description":
                info.add_text(key, value)
        info.add_text("Description", " ".join(alt.split()))
        extra = {"dpi": image.info["dpi"]} if "dpi" in image.info else {}
        image.save(png, pnginfo=info, **extra)


def _plain(value):
    """A JSON-friendly value for the output's metadata (numpy scalars as Python's)."""
    value = value.item() if hasattr(value, "item") else value
    return value if isinstance(value, str | int | float | bool) else str(value)


class Figure:
    """A saved figure as a notebook output, marked with :data:`FIGURE_KEY` in the output's
    metadata (the figure's name, label, image path, note, stamp and fields): a MyST
    figure (text/markdown, for the book) and the image (text/html, for Jupyter), both
    captioned with the computed note and the stamp.  The book's build
    (``book/tools/run_chapters.py``) adds the caption and alt text of the code cell's
    metadata (see :func:`figure_saver`)."""

    def __init__(self, png: Path, relative: str, label: str, name: str, note: str,
                 stamp: str, fields: dict):
        self.png, self.relative, self.label, self.name = png, relative, label, name
        self.note, self.stamp, self.fields = note, stamp, fields

    def _repr_mimebundle_(self, include=None, exclude=None):
        caption = figure_caption("", self.note, self.stamp)
        data = base64.b64encode(self.png.read_bytes()).decode()
        meta = {"name": self.name, "label": self.label, "path": self.relative,
                "note": self.note, "stamp": self.stamp, "fields": self.fields}
        return ({"text/markdown": figure_markdown(self.relative, self.label, caption),
                 "text/html": figure_html(data, caption), "text/plain": caption},
                {FIGURE_KEY: meta})


def figure_saver(chapter: str, **stamp):
    """Set the book's style and return ``save(fig, name, note="", **fields)`` for the
    chapter ``chapter``.

    ``save`` writes build/figures/<chapter>/<name>.{png,svg}, stamped under the figure
    with ``note`` (what was computed: sizes, seeds, numbers), the ``stamp`` parameters
    (for example mode="quick", seed=1) and the git commit, and shows the figure (label
    ``fig-<chapter>-<name>``) captioned with the note and the parameters.

    The figure's caption and alt text (what it shows, in words, for readers who cannot
    see it) are not arguments: they live in the metadata of the cell that makes the
    figure, beside it, as the tables' captions do; in the chapter source
    ``# %% fig_caption="..." fig_alt="..."`` (a cell that makes several figures may map
    each figure's name to its text: ``fig_caption={"name": "...", ...}``).  ``fields``
    fill ``{field}`` placeholders in them (``save(fig, f"f{eps:g}", note, eps=eps)``
    with ``fig_caption="... at ε = {eps:g} ..."``).  The book's build
    (``book/tools/run_chapters.py``, its ``finish``) makes the figure a numbered MyST
    figure whose caption is the cell's caption followed by the note and the parameters,
    with the cell's alt text (also written into the PNG's "Description"); a figure
    without them fails the chapter.  Run in plain Jupyter, a chapter shows each figure
    with the note and the parameters only.
    """
    import matplotlib.pyplot as plt
    from IPython.display import display

    use_book_style()
    folder = repo_root() / "build" / "figures" / chapter
    folder.mkdir(parents=True, exist_ok=True)
    tag = ", ".join(f"{k}={v}" for k, v in stamp.items())

    def save(fig, name: str, note: str = "", **fields):
        if "caption" in fields or "alt" in fields:
            raise TypeError("a figure's caption and alt text live in its cell's metadata "
                            '(# %% fig_caption="..." fig_alt="..."), not in save()')
        code = f", dpbook {commit()}" if commit() else ""
        text = f"{note}   [{tag}{code}]" if note else f"[{tag}{code}]"
        fig.text(0.0, -0.02, text, fontsize=STAMP_POINTS, color="0.35", ha="left",
                 va="top", wrap=True)
        smallest = smallest_text_points(fig) * DPI / 72  # pixels in the PNG
        png = folder / f"{name}.png"
        fig.savefig(png, bbox_inches="tight", dpi=DPI,
                    metadata={MIN_TEXT_KEY: f"{smallest:.2f}"})
        fig.savefig(folder / f"{name}.svg", bbox_inches="tight", dpi=DPI)
        plt.close(fig)
        display(Figure(png, f"../figures/{chapter}/{name}.png",
                       f"fig-{chapter}-{name}".replace("_", "-"), name, note, tag,
                       {k: _plain(v) for k, v in fields.items()}))

    return save


def _column_format(values, digits):
    """A formatter for one numeric column: integers as integers, values that have at most
    ``digits`` significant digits as they are (0.5, 10), others with the decimals that
    give their median magnitude ``digits`` significant digits; blank for NaN."""
    v = np.asarray(values, dtype=float)
    fin = v[np.isfinite(v)]
    if fin.size == 0:
        return lambda x: ""
    if np.all(fin == np.round(fin)) and np.all(np.abs(fin) < 2**53):
        big = np.abs(fin).max() >= 1e4
        return lambda x: "" if not np.isfinite(x) else (f"{int(x):,}" if big else f"{int(x)}")
    short = all(float(f"{x:.{digits}g}") == x for x in fin)
    if short:
        return lambda x: "" if not np.isfinite(x) else f"{x:g}"
    mag = np.median(np.abs(fin[fin != 0])) if np.any(fin != 0) else 1.0
    dec = int(min(6, max(0, digits - 1 - math.floor(math.log10(mag)))))
    return lambda x: "" if not np.isfinite(x) else f"{x:.{dec}f}"


def _cell(x, digits):
    """One cell of a text or mixed column: numbers as in a numeric column, to ``digits``
    significant digits; empty for None or NaN."""
    if x is None or isinstance(x, bool | np.bool_):
        return "" if x is None else str(x)
    if isinstance(x, int | float | np.integer | np.floating):
        if not np.isfinite(x):
            return "" if np.isnan(x) else str(x)
        return f"{int(x)}" if float(x) == round(float(x)) and abs(x) < 2**53 else \
            f"{float(x):.{digits}g}"
    return str(x)


def format_table(df, digits=3):
    """The table as strings, for readers: the index as ordinary columns (none for a
    default 0..n-1 index), column levels joined, integer-valued columns as integers,
    other numbers to ``digits`` significant digits (chosen per column), empty cells
    blank.  Returns (DataFrame of str, list of 'right'/'left' alignments)."""
    import pandas as pd

    out = df.copy()
    if isinstance(out.columns, pd.MultiIndex):
        out.columns = [" ".join(str(p) for p in c if str(p).strip()) for c in out.columns]
    if not (isinstance(out.index, pd.RangeIndex) and out.index.start == 0
            and out.index.step == 1 and out.index.name is None):
        names = [n if n is not None else "" for n in out.index.names]
        out = out.reset_index(names=names if len(set(names)) == len(names) else None)
    cells, align = {}, []
    for name in out.columns:
        col = out[name]
        if pd.api.types.is_numeric_dtype(col) and not pd.api.types.is_bool_dtype(col):
            fmt = _column_format(col.to_numpy(dtype=float), digits)
            cells[str(name)] = [fmt(float(x)) for x in col.to_numpy(dtype=float)]
            align.append("right")
        else:  # text, or a mix: numbers one by one
            cells[str(name)] = [_cell(x, digits) for x in col]
            align.append("left")
    return pd.DataFrame(cells), align


TABLE_KEY = "dpbook-table"  # output metadata that marks a table for the book's build


class Table:
    """A table as a notebook output: a Markdown pipe table (text/markdown, marked with
    :data:`TABLE_KEY` in the output's metadata) and an HTML table (text/html, for
    Jupyter).  The caption and label live in the code cell's metadata (``caption``,
    ``name``: in the chapter source ``# %% caption="..." name="tbl-..."``), beside the
    table, not in its code; the book's build (``book/tools/run_chapters.py``) wraps the
    table in a numbered MyST table directive with them; ``fields`` fill ``{field}``
    placeholders in the caption (a caption that names what the chapter computed on)."""

    def __init__(self, df, digits: int, fields: dict | None = None):
        self.text, self.align = format_table(df, digits)
        self.fields = {k: _plain(v) for k, v in (fields or {}).items()}

    def _repr_mimebundle_(self, include=None, exclude=None):
        def row(cells):
            return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"

        rule = "|" + "|".join("--:" if a == "right" else ":--" for a in self.align) + "|"
        body = "\n".join([row(self.text.columns), rule,
                          *(row(r) for r in self.text.itertuples(index=False))])
        data = {"text/markdown": body + "\n",
                "text/html": self.text.to_html(index=False, escape=True),
                "text/plain": self.text.to_string(index=False)}
        return data, {TABLE_KEY: self.fields or True}


def show_table(df, digits: int = 3, **fields) -> Table:
    """Show a DataFrame (or Series) as a table for readers: its numbers formatted by
    :func:`format_table`; its caption and label come from the cell's metadata (see
    :class:`Table`), with ``{field}`` placeholders filled from ``fields``
    (``show_table(df, family="Gumbel")`` with ``caption="... the {family} family ..."``)."""
    import pandas as pd

    if isinstance(df, pd.Series):
        df = df.to_frame(df.name if df.name is not None else "value")
        if df.index.name is None:
            df = df.rename_axis("")
    return Table(df, digits, fields)


def glue_number(key: str, value) -> None:
    """A number computed for the prose: a markdown cell pastes it with
    ``{glue:text}`key:.2f``` (myst-nb's glue; numpy scalars become Python numbers,
    whose text the format applies to)."""
    from myst_nb import glue

    glue(key, value.item() if hasattr(value, "item") else value, display=False)


def glue_phrase(key: str, text: str) -> None:
    """A phrase computed for the prose, where its wording depends on the numbers: a
    markdown cell pastes it with ``{glue:md}`key```."""
    from IPython.display import Markdown
    from myst_nb import glue

    glue(key, Markdown(text), display=False)
