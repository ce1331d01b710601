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
# (ch-location-scale)=
# # Location-scale families and the once-for-all interval
#
# The adaptive scheme of the paper {cite:p}`yildirim2023adaptive` chooses the interval for
# individual $t + 1$ in two steps (Section 5.1): draw a parameter value $\vartheta_t$ from
# the current posterior (Thompson sampling), then take the interval that maximises the
# score of the Fisher information of the next release at $\vartheta_t$,
#
# $$
# [l_{t+1}, r_{t+1}] = \arg\max_{l < r}\ \mathrm{sc}\big(F^\epsilon_{l,r}(\vartheta_t)\big)
# \qquad \text{(eq. 9)}.
# $$
#
# Done literally this is a new two-dimensional optimisation, of a Monte Carlo estimate,
# after every individual.  Section 5.2 shows that for a **location-scale family** it is
# not needed: if $\vartheta_t = (m, c)$ is a location and a scale, the intervals of the
# form
#
# $$
# l = m + a c, \qquad r = m + b c \qquad \text{(eq. 11)}
# $$
#
# are ranked in the same order by the Fisher score for every $(m, c)$ (Theorem 3), so one
# maximisation for the base distribution, $(a^*, b^*)$ at $(m, c) = (0, 1)$ (eq. 13,
# computed in {ref}`ch-fisher-grid`), serves every $\vartheta_t$.
#
# This chapter checks the chain of results of Appendix B numerically:
#
# 1. **Lemma 1**: truncating a location-scale distribution to $[m + ca, m + cb]$ gives a
#    location-scale distribution with base $g_{[a,b]}$;
# 2. **Lemma 2**: the release $Y = T_{m+ac}^{m+bc}(X) + c(b - a)V$ (eq. 12) is in
#    distribution $m + cY_0$, with $Y_0$ the release of the base variable with $[a, b]$;
# 3. **Theorem 3**: $F^\epsilon_{m+ac,\,m+bc}(m, c) = F^\epsilon_{a,b}(0, 1)/c^2$, so the
#    ranking of intervals by the score does not depend on $(m, c)$.

# %% tags=["parameters"]
mode = "quick"  # "quick": small samples and Monte Carlo sizes; "full": large ones
seed = 2023  # seed of the samples and the Monte Carlo estimates

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import integrate, stats

from dpbook.figures import figure_saver, pit_ecdf_differences, show_table
from dpbook.fisher import fisher_grid, fisher_information, fisher_mc
from dpbook.likelihood.normal_laplace import log_density, score
from dpbook.model.mechanisms import clip, release

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
# samples: draws per distribution in the Lemma checks; M, K: sizes of eq. (8) and
# Algorithm 4; grid: intervals per axis in the ranking check; quad_all: check every
# case of the Theorem 3 table by quadrature (else the first (m, c) of each)
size = {"quick": dict(samples=20_000, M=500, K=2_000, grid=25, quad_all=False),
        "full": dict(samples=400_000, M=1_000, K=10_000, grid=50, quad_all=True)}[mode]
rng = np.random.default_rng(seed)

# Two location-scale families: the normal of the paper's Section 6, and the (skewed)
# Gumbel distribution, to show that nothing depends on symmetry.
FAMILIES = {"normal": stats.norm, "Gumbel": stats.gumbel_r}
# (m, c) values: the paper's population N(50, 10), a narrow one, a wide far-away one
THETAS = [(50.0, float(np.sqrt(10.0))), (-3.0, 0.1), (1000.0, 25.0)]

save = figure_saver("04_location_scale", mode=mode, seed=seed)
pd.set_option("display.float_format", "{:.4g}".format)
timings = {}

size

# %% [markdown]
# ## Location-scale families
#
# A family $\{f(\cdot\,; m, c)\}$ is **location-scale** with base density $g$ if
# $f(x; m, c) = g\big((x - m)/c\big)/c$ (Definition 2): $X \sim f(\cdot\,; m, c)$ exactly
# when $X = m + cZ$ with $Z \sim g$.  The normal family with $\theta = (\mu, \sigma)$ is
# one, with $g = \mathcal{N}(0, 1)$.
#
# ## Lemma 1: truncation keeps the family
#
# Write $g_{[a,b]}$ for $g$ truncated to $[a, b]$ (restricted and renormalised).
# **Lemma 1** says that $f(\cdot\,; m, c)$ truncated to $[ca + m,\ cb + m]$ is
# location-scale with location $m$, scale $c$ and base $g_{[a,b]}$: if $X$ has the
# truncated law then $(X - m)/c \sim g_{[a,b]}$, whatever $(m, c)$.  The proof is a change
# of variables; here is the experiment.  We draw from $f(\cdot\,; m, c)$ with scipy, keep
# the draws inside $[m + ca, m + cb]$ (which is how truncation acts on a sample),
# standardise them, and compare with the distribution function of $g_{[a,b]}$,
# $G_{[a,b]}(z) = \big(G(z) - G(a)\big)/\big(G(b) - G(a)\big)$, by a one-sample
# Kolmogorov-Smirnov test.

# %% caption="Lemma 1: Kolmogorov-Smirnov tests of the standardised truncated draws against G_[a,b]." name="tbl-04-lemma1"
def truncated_base_cdf(family, a, b):
    """Distribution function of the base density g truncated to [a, b]."""
    g = FAMILIES[family]
    return lambda z: (g.cdf(z) - g.cdf(a)) / (g.cdf(b) - g.cdf(a))


lemma1_cases = [
    ("normal", -0.5, 1.0),
    ("normal", -2.0, 0.3),
    ("Gumbel", -1.0, 1.5),
    ("Gumbel", 0.2, 3.0),
]
rows, standardised = [], {}
for family, a, b in lemma1_cases:
    for m, c in THETAS:
        x = FAMILIES[family].rvs(
            loc=m, scale=c, size=size["samples"], random_state=rng
        )
        kept = x[(x >= m + c * a) & (x <= m + c * b)]
        z = (kept - m) / c
        standardised[family, a, b, m, c] = z
        test = stats.kstest(z, truncated_base_cdf(family, a, b))
        rows.append(
            {
                "family": family,
                "[a, b]": f"[{a:g}, {b:g}]",
                "(m, c)": f"({m:g}, {c:.3g})",
                "kept draws": z.size,
                "KS statistic": test.statistic,
                "KS p-value": test.pvalue,
            }
        )
lemma1 = pd.DataFrame(rows).set_index(["family", "[a, b]", "(m, c)"])
show_table(lemma1)

# %% [markdown]
# Under the lemma the p-values are uniformly distributed on $(0, 1)$, so among a dozen
# tests an occasional one below 0.05 is expected; what would signal a failure is a
# systematic pattern of small p-values and large statistics, which the table does not
# show.  The figure shows the comparison itself, on the probability scale: the
# empirical distribution function of $u = G_{[a,b]}(z)$ for the standardised draws $z$
# minus the uniform cdf, for every $(m, c)$, inside the band where 95% of such curves
# would lie if the lemma holds (the KS critical value for the number of kept draws).

# %% tags=["hide-input"] fig_caption="Lemma 1 checked by simulation: the empirical cdf of u, the truncated base cdf at the standardised truncated draws z = (x − m)/c, minus the uniform cdf, for several (m, c), one panel per family and interval." fig_alt="Panels of difference curves, one colour per (m, c), with a grey band around zero (the 95% band of the KS statistic)."
pits = pd.concat(pd.DataFrame({"case": f"{family}, [a, b] = [{a:g}, {b:g}]",
                               "(m, c)": f"({m:g}, {c:.3g})",
                               "pit": truncated_base_cdf(family, a, b)(z)})
                 for (family, a, b, m, c), z in standardised.items())
grid = pit_ecdf_differences(pits, col="case", col_wrap=2, hue="(m, c)", band="ks",
                            height=2.8, aspect=1.35)
grid.set_axis_labels("u = $G_{[a,b]}(z)$", "ECDF(u) − u")
fig = grid.figure
save(fig, "lemma1_cdf",
     f"{size['samples']} draws before truncation; grey: 95% band of the "
     "KS statistic for the kept draws")

# %% [markdown]
# **Truncation or clipping?**  Lemma 1 is about truncation (conditioning on the
# interval), but the mechanism of eq. (10) *clips*: $T_l^r(x) = \min\{\max\{x, l\}, r\}$
# puts the mass outside $[l, r]$ on the end points instead of discarding it.  The proof of
# Lemma 2 uses Lemma 1 for the distribution of $T_{ac+m}^{bc+m}(X)$, which is a clipped,
# not a truncated, variable.  The argument goes through all the same, and more simply,
# because clipping commutes with the affine map pointwise:
#
# $$
# T_{m+ca}^{m+cb}(m + cz) = m + c\,T_a^b(z) \qquad \text{for every } z \text{ and } c > 0,
# $$
#
# so $(T_{m+ca}^{m+cb}(X) - m)/c$ is $T_a^b(Z)$, the clipped base variable, for any
# location-scale family.  `dpbook.model.mechanisms.clip` satisfies it to rounding error:

# %% caption="Clipping commutes with the affine map: the largest discrepancy over z, per (m, c) and [a, b]." name="tbl-04-commutes"
z = rng.standard_normal(size["samples"]) * 3.0
show_table(
    pd.DataFrame(
        [
            {
                "(m, c)": f"({m:g}, {c:.3g})",
                "[a, b]": f"[{a:g}, {b:g}]",
                "max |T(m + cz) − (m + c T(z))| / c": np.max(
                    np.abs(
                        clip(m + c * z, m + c * a, m + c * b)
                        - (m + c * clip(z, a, b))
                    )
                )
                / c,
            }
            for m, c in THETAS
            for a, b in [(-0.5, 1.0), (-2.0, 0.3)]
        ]
    ).set_index(["(m, c)", "[a, b]"])
)

# %% [markdown]
# ## Lemma 2: the release is location-scale too
#
# The release of eq. (12) at $(m, c)$ uses the interval $[m + ac, m + bc]$, so its noise
# has scale $c(b - a)/\epsilon$:
#
# $$
# Y = T_{m+ac}^{m+bc}(X) + c(b - a)V, \qquad X \sim f(\cdot\,; m, c),\ V \sim
# \mathrm{Laplace}(1/\epsilon).
# $$
#
# **Lemma 2**: $Y$ has the law of $m + cY_0$, where $Y_0 = T_a^b(Z) + (b - a)V_0$ is the
# release of a base variable $Z \sim g$ with the interval $[a, b]$.  We release samples of
# both with `dpbook.model.mechanisms.release`, independently, and compare $Y$ with $m + cY_0$ by
# two two-sample tests (Kolmogorov-Smirnov and Cramér-von Mises).  A **negative
# control** shows that the tests would notice a violation: the same population released
# with the interval only shifted, $[m + a, m + b]$, not scaled.

# %% caption="Lemma 2: two-sample tests of Y against m + cY₀, with the negative control." name="tbl-04-lemma2"
def released(family, m, c, l, r, eps):
    """Releases (eq. 10) of samples of f(.; m, c) with the interval [l, r]."""
    x = FAMILIES[family].rvs(
        loc=m, scale=c, size=size["samples"], random_state=rng
    )
    return release(x, l, r, eps, rng)


lemma2_cases = [
    ("normal", 1.0, -1.0, 2.0),
    ("normal", 5.0, -0.5, 0.5),
    ("Gumbel", 2.0, -1.0, 1.5),
]
rows, qq = [], {}
for family, eps, a, b in lemma2_cases:
    y0 = released(family, 0.0, 1.0, a, b, eps)
    for m, c in THETAS:
        y = released(family, m, c, m + a * c, m + b * c, eps)
        y_shift = released(family, m, c, m + a, m + b, eps)  # negative control
        qq[family, eps, m, c] = (y0, y, y_shift)
        ks = stats.ks_2samp(y, m + c * y0)
        cvm = stats.cramervonmises_2samp(y, m + c * y0)
        rows.append(
            {
                "family": family,
                "ε, [a, b]": f"{eps:g}, [{a:g}, {b:g}]",
                "(m, c)": f"({m:g}, {c:.3g})",
                "KS statistic": ks.statistic,
                "KS p-value": ks.pvalue,
                "CvM p-value": cvm.pvalue,
                "control: KS statistic": stats.ks_2samp(
                    y_shift, m + c * y0
                ).statistic,
                "control: KS p-value": stats.ks_2samp(
                    y_shift, m + c * y0
                ).pvalue,
            }
        )
lemma2 = pd.DataFrame(rows).set_index(["family", "ε, [a, b]", "(m, c)"])
show_table(lemma2)

# %% [markdown]
# For the scaled intervals the p-values spread over $(0, 1)$, as they should under the
# null, and the statistics are of the size of sampling noise.  The merely shifted
# interval is rejected with p-values at or near zero: its noise scale
# $(b - a)/\epsilon$ does not grow with $c$, and its clipping points sit at a different
# place relative to the spread of $X$.
# The quantile-quantile plot shows both, on the standardised scale $(y - m)/c$.

# %% tags=["hide-input"] fig_caption="Lemma 2 checked by simulation: quantiles of the standardised releases (Y − m)/c with the interval of eq. (11) (blue) and with an unscaled interval (red, a control that should fail) against the quantiles of Y_0, one panel per (m, c)." fig_alt="Quantile-quantile panels, one per (m, c): blue points for the interval of eq. (11), red points for the control, and the diagonal."
family, eps, a, b = lemma2_cases[0]
levels = np.linspace(0.002, 0.998, 300)
fig, axes = plt.subplots(1, len(THETAS), figsize=(9, 3.6))
for ax, (m, c) in zip(axes, THETAS):
    y0, y, y_shift = qq[family, eps, m, c]
    q0 = np.quantile(y0, levels)
    ax.plot(q0, np.quantile((y - m) / c, levels), ".", ms=3, color="C0",
            label="[m + ac, m + bc] (eq. 11)")
    ax.plot(q0, np.quantile((y_shift - m) / c, levels), ".", ms=3, color="C3",
            label="[m + a, m + b] (control)")
    ax.axline((0, 0), slope=1, color="k", lw=0.8)
    ax.set(title=f"(m, c) = ({m:g}, {c:.3g})", xlabel="quantiles of $Y_0$",
           xlim=(q0[0], q0[-1]), ylim=(2 * q0[0], 2 * q0[-1]))
axes[0].set_ylabel("quantiles of (Y − m)/c")
axes[0].legend(fontsize=9, loc="upper left")
fig.tight_layout()
save(fig, "lemma2_qq",
     f"{family}, ε = {eps:g}, [a, b] = [{a:g}, {b:g}]; {size['samples']} "
     "releases per sample; diagonal: equality in distribution")

# %% [markdown]
# ## Theorem 3: the Fisher information scales as $1/c^2$
#
# By Lemma 2, $Y$ has density $p(y \mid m, c) = p_0\big((y - m)/c\big)/c$ with $p_0$ the
# density of $Y_0$, which depends on $a, b, \epsilon$ only.  For such a density the scores
# are $\partial_m \log p = -p_0'(u)/(c\,p_0(u))$ and
# $\partial_c \log p = -\big(1 + u\,p_0'(u)/p_0(u)\big)/c$ at $u = (y - m)/c$: both are a
# function of $u$ divided by $c$, and $u$ has the law of $Y_0$.  Hence
#
# $$
# F^\epsilon_{m+ac,\,m+bc}(m, c) = \frac{1}{c^2}\, F^\epsilon_{a,b}(0, 1)
# \qquad \text{(Theorem 3)},
# $$
#
# every entry of the $2 \times 2$ matrix scaled by the same factor.  We check it for the
# normal model with `dpbook.fisher` and `dpbook.likelihood.normal_laplace`, in four ways that
# are not equally
# independent:
#
# * **exact**: `fisher_information(..., method="exact")` at $(m, c)$.  This is
#   `dpbook.fisher.fisher_exact`, which standardises the interval and integrates for
#   $\mathcal{N}(0, 1)$, i.e. it *uses* Theorem 3; the check only confirms that the
#   rescaling is implemented consistently.
# * **quadrature at $(m, c)$**: $F = \int p(y)\, s(y) s(y)^T dy$ integrated by
#   `scipy.integrate.quad_vec` in the original units of $y$, with the closed-form density
#   and score of `dpbook.likelihood.normal_laplace` evaluated at $(m, c)$.  This does not use
#   the theorem.
# * **Monte Carlo at $(m, c)$, own seed**: eq. (8) with the scores of Algorithm 4
#   (`fisher_mc`), simulated at $(m, c)$ with a seed of its own, compared in units of its
#   standard error.  Independent of the other three.
# * **Monte Carlo, same seed**: the same estimate with the random numbers of the
#   $(0, 1)$ estimate.  `fisher_mc` draws standardised variates and scales them, so the
#   theorem holds for the *estimates*, draw by draw, up to rounding.

# %% caption="Theorem 3: the information at (m, c) against that at (0, 1) divided by c², by four computations." name="tbl-04-theorem3"
def quad_fisher(l, r, eps, m, c):
    """int p(y) s(y) s(y)^T dy at theta = (m, c).

    In the units of y (no standardising)."""

    def integrand(y):
        s = score(y, l, r, eps, m, c)
        return np.exp(log_density(y, l, r, eps, m, c)) * np.array(
            [s[0] * s[0], s[0] * s[1], s[1] * s[1]]
        )

    parts = [
        integrate.quad_vec(integrand, lo, hi, epsabs=0.0, epsrel=1e-9)[0]
        for lo, hi in [(-np.inf, l), (l, r), (r, np.inf)]
    ]
    f = np.sum(parts, axis=0)
    return np.array([[f[0], f[1]], [f[1], f[2]]])


def rel_diff(A, B):
    return float(np.max(np.abs(A - B)) / np.max(np.abs(B)))


theorem_cases = [(-0.5, 0.5, 1.0), (-1.0, 2.0, 5.0), (-0.96, 0.96, 10.0)]
start = time.perf_counter()
rows = []
for i, (a, b, eps) in enumerate(theorem_cases):
    F0 = fisher_information(a, b, eps, method="exact").F
    F0_mc = fisher_mc(
        a,
        b,
        eps,
        M=size["M"],
        K=size["K"],
        rng=np.random.default_rng([seed, 1]),
    )
    for j, (m, c) in enumerate(THETAS):
        l, r = m + a * c, m + b * c
        F_exact = fisher_information(l, r, eps, (m, c), method="exact").F
        own = fisher_mc(
            l,
            r,
            eps,
            (m, c),
            M=size["M"],
            K=size["K"],
            rng=np.random.default_rng([seed, 2, i, j]),
        )
        same = fisher_mc(
            l,
            r,
            eps,
            (m, c),
            M=size["M"],
            K=size["K"],
            rng=np.random.default_rng([seed, 1]),
        )
        check_quad = size["quad_all"] or j == 0
        rows.append(
            {
                "ε, [a, b]": f"{eps:g}, [{a:g}, {b:g}]",
                "(m, c)": f"({m:g}, {c:.3g})",
                "F_μμ(0, 1)": F0[0, 0],
                "F_σσ(0, 1)": F0[1, 1],
                "exact: rel. diff": rel_diff(c**2 * F_exact, F0),
                "quadrature: rel. diff": (
                    rel_diff(c**2 * quad_fisher(l, r, eps, m, c), F0)
                    if check_quad
                    else np.nan
                ),
                "MC own seed: max |z|": float(
                    np.max(np.abs(c**2 * own.F - F0) / (c**2 * own.se))
                ),
                "MC same seed: rel. diff": rel_diff(c**2 * same.F, F0_mc.F),
            }
        )
timings["Theorem 3 table"] = time.perf_counter() - start
theorem = pd.DataFrame(rows).set_index(["ε, [a, b]", "(m, c)"])
show_table(theorem)

# %% [markdown]
# All four agree.  The exact values and the quadrature in the units of $y$ reproduce
# $F_{a,b}(0, 1)/c^2$ to about machine precision (in quick mode the slow quadrature is
# run for the first $(m, c)$ only), for scales from $0.1$ to $25$ and locations up
# to $1000$.  The independent Monte Carlo estimates lie within a few standard errors
# ("max |z|" is the largest of the three distinct entries), and with shared random
# numbers the estimates at $(m, c)$ and $(0, 1)$ coincide to rounding error.
#
# Each entry is scaled by the same factor, so a picture makes the point.  Take symmetric
# intervals $[m - h, m + h]$ around the location.  On the left, $F_{\mu\mu}$ against the
# half-width $h$ in the units of the data, for several scales $c$: the curves differ in
# height and in where they peak.  On the right, the same numbers as $c^2 F_{\mu\mu}$
# against $h/c$: one curve.

# %% caption="F_μμ of symmetric intervals for several scales c: one curve after rescaling." name="tbl-04-rescaling" tags=["hide-input"] fig_caption="Theorem 3: the exact F_μμ of symmetric intervals [m − h, m + h] for several scales c, in the units of the data (left) and rescaled by c² against h/c (right), where the curves of one ε fall onto one." fig_alt="Left: curves of F_mu_mu against the half-width on log axes, one colour per scale. Right: the same curves rescaled by c squared against h over c."
m = THETAS[0][0]
scales = [0.3, 1.0, 3.0, 10.0]
h = np.geomspace(1e-3, 1e3, {"quick": 400, "full": 2000}[mode])  # units of the data
fig, axes = plt.subplots(1, 2, figsize=(9, 4))
rows = []
for k, eps in enumerate([1.0, 10.0]):
    for j, c in enumerate(scales):
        F_mumu = fisher_information(m - h, m + h, eps, (m, c), method="exact").F[:, 0, 0]
        best = np.argmax(F_mumu)
        rows.append({"ε": eps, "c": c, "best h (grid)": h[best], "best h / c": h[best] / c,
                     "max F_μμ": F_mumu[best], "c² max F_μμ": c**2 * F_mumu[best]})
        style = dict(color=f"C{j}", ls="-" if k == 0 else "--", lw=1.2)
        label = f"c = {c:g}" if k == 0 else None
        axes[0].plot(h, F_mumu, label=label, **style)
        axes[1].plot(h / c, c**2 * F_mumu, label=label, **style)
        axes[0].plot(h[best], F_mumu[best], "o", ms=4, color=f"C{j}")
axes[0].set(xscale="log", yscale="log", xlabel="half-width h of [m − h, m + h]",
            ylabel="$F_{\\mu\\mu}$", title="in the units of the data",
            ylim=(1e-5, None))
axes[1].set(xscale="log", yscale="log", xlabel="h / c", ylabel="$c^2 F_{\\mu\\mu}$",
            title="rescaled: one curve per ε", xlim=(1e-2, 1e2), ylim=(1e-3, None))
axes[0].legend(fontsize=9, title="solid ε = 1, dashed ε = 10", title_fontsize=9)
fig.tight_layout()
save(fig, "collapse",
     f"normal, m = {m:g}, exact Fisher information; dots: largest "
     f"F_μμ on a grid of {h.size} half-widths")
show_table(pd.DataFrame(rows).set_index(["ε", "c"]))

# %% [markdown]
# In the units of the data, the best half-width grows in proportion to $c$; in units of
# $c$ it is the same for every scale (up to the spacing of the grid of $h$), and so is
# the rescaled information.  This is the practical content of the theorem: a
# maximisation over *absolute* intervals would have to be redone for every Thompson draw
# $(m, c)$, a maximisation over $(a, b)$ is done once.
#
# ## The ranking of intervals does not depend on $(m, c)$
#
# Theorem 3 is stated as a statement about rankings: for two pairs $(a, b)$ and
# $(a', b')$ the order of $\mathrm{sc}(F_{m+ac,\,m+bc}(m, c))$ and
# $\mathrm{sc}(F_{m+a'c,\,m+b'c}(m, c))$ is the same for every $(m, c)$.  (This needs the
# score to respect the common factor $1/c^2$: it holds for the paper's
# $\mathrm{sc}(F) = F_{11}$, for the trace, any positively weighted sum of entries, or the
# determinant, but not for an arbitrary function of the matrix.)
#
# We take the grid of intervals $(a, b)$ of {ref}`ch-fisher-grid` (here
# `size["grid"]` values per axis on $[-3, 3]$, pairs with $a < b$), score every interval
# at $(0, 1)$ and at $(m, c) = (50, \sqrt{10})$, and compare the rankings by Spearman's
# rank correlation.  Exactly the rankings agree by construction (see above), so the
# interesting comparison is with Monte Carlo estimates made at $(m, c)$ from their own
# random numbers (common to all cells, as in `fisher_grid`).

# %% caption="Rankings of the intervals at (m, c) against those at (0, 1): rank correlations and pairs in opposite order." name="tbl-04-rankings"
eps = 5.0
m, c = THETAS[0]
start = time.perf_counter()
base_exact = fisher_grid(eps, method="exact", grid=size["grid"])
base_mc = fisher_grid(
    eps,
    method="mc",
    grid=size["grid"],
    M=size["M"],
    K=size["K"],
    seed=np.random.SeedSequence([seed, 3]),
)
A, B = np.meshgrid(base_exact.a_values, base_exact.b_values, indexing="ij")
valid = A < B
at_mc_exact = np.full(A.shape, np.nan)
at_mc_exact[valid] = fisher_information(
    m + A[valid] * c, m + B[valid] * c, eps, (m, c), method="exact"
).F[:, 0, 0]
at_mc_mc, at_mc_se = np.full(A.shape, np.nan), np.full(A.shape, np.nan)
for i, j in zip(*np.nonzero(valid)):
    est = fisher_mc(
        m + A[i, j] * c,
        m + B[i, j] * c,
        eps,
        (m, c),
        M=size["M"],
        K=size["K"],
        rng=np.random.default_rng([seed, 4]),
    )
    at_mc_mc[i, j], at_mc_se[i, j] = est.F[0, 0], est.se[0, 0]
timings["ranking grids"] = time.perf_counter() - start


def best_cell(scores):
    i, j = np.unravel_index(np.nanargmax(scores), scores.shape)
    return f"[{A[i, j]:.2f}, {B[i, j]:.2f}]"


def discordant_pairs(s, ref, tol=1e-9):
    """Pairs of intervals that s and ref put in opposite order.

    Ties of ref are excluded."""
    s, ref = s[valid], ref[valid]
    ds = np.sign(s[:, None] - s[None, :])
    dr = ref[:, None] - ref[None, :]
    clear = np.abs(dr) > tol * np.abs(ref).max()
    return int(np.sum((ds != np.sign(dr)) & clear) // 2)


surfaces = {
    "exact at (0, 1)": base_exact.scores("mu"),
    "MC at (0, 1), own seed": base_mc.scores("mu"),
    "exact at (m, c), times c²": c**2 * at_mc_exact,
    "MC at (m, c), own seed, times c²": c**2 * at_mc_mc,
}
reference = surfaces["exact at (0, 1)"]
show_table(
    pd.DataFrame(
        {
            name: {
                "Spearman ρ with exact at (0, 1)": stats.spearmanr(
                    s[valid], reference[valid]
                ).statistic,
                "Kendall τ with exact at (0, 1)": stats.kendalltau(
                    s[valid], reference[valid]
                ).statistic,
                "pairs in opposite order": discordant_pairs(s, reference),
                "best interval [a, b] (grid)": best_cell(s),
                "largest score": np.nanmax(s),
            }
            for name, s in surfaces.items()
        }
    ).T
)

# %% [markdown]
# The exact scores at $(m, c)$ rank the intervals exactly as at $(0, 1)$: no pair of
# intervals is put in the opposite order, and the best cell is the same.  (Kendall's τ
# falls a hair short of one because of ties: by the symmetry of the normal, $[a, b]$ and
# $[-b, -a]$ have the same $F_{\mu\mu}$, and rounding at the level of $10^{-16}$ breaks
# such ties at random; "pairs in opposite order" ignores differences below $10^{-9}$ of
# the largest score.)  The Monte Carlo estimates, at either point, agree with that
# ranking up to Monte Carlo noise, which only matters among intervals whose scores are
# nearly equal; their best cells lie on the flat ridge around the exact best (the
# flatness is discussed in {ref}`ch-fisher-grid`).  The heat maps show the surfaces, and
# the right panel the differences in units of the Monte Carlo standard error.

# %% caption="Monte Carlo at (m, c) against the exact information, in standard errors, over the grid's cells." name="tbl-04-mc-vs-exact" tags=["hide-input"] fig_caption="Theorem 3 on the whole grid: the exact F_μμ(a, b) of the base distribution (left), c² times the Monte Carlo F_μμ of the intervals m + c[a, b] at another (m, c) (middle), and their difference in Monte Carlo standard errors (right)." fig_alt="Three heat maps over a and b: the exact and the rescaled Monte Carlo surfaces with their best cells marked, and the standardised differences."
fig, axes = plt.subplots(1, 3, figsize=(9, 3.4), layout="constrained")
half = 0.5 * (base_exact.a_values[1] - base_exact.a_values[0])  # cell edges, not centres
extent = [base_exact.b_values[0] - half, base_exact.b_values[-1] + half,
          base_exact.a_values[0] - half, base_exact.a_values[-1] + half]
vmax = np.nanmax(reference)
panels = [(reference, "exact, (0, 1)"), (c**2 * at_mc_mc, f"MC × c², ({m:g}, {c:.3g})")]
for ax, (surface, title) in zip(axes[:2], panels):
    im = ax.imshow(surface, origin="lower", extent=extent, vmin=0, vmax=vmax,
                   cmap="viridis", aspect="auto")
    i, j = np.unravel_index(np.nanargmax(surface), surface.shape)
    ax.plot(B[i, j], A[i, j], "r+", ms=10, mew=2)
    ax.set(title=title, xlabel="b", ylabel="a")
fig.colorbar(im, ax=axes[:2], shrink=0.85)
z = (c**2 * at_mc_mc - reference) / (c**2 * at_mc_se)
im = axes[2].imshow(z, origin="lower", extent=extent, vmin=-4, vmax=4, cmap="RdBu_r",
                    aspect="auto")
axes[2].set(title="(MC − exact) / se", xlabel="b", ylabel="a")
fig.colorbar(im, ax=axes[2], shrink=0.85)
save(fig, "ranking_heatmaps",
     f"normal, ε = {eps:g}, {size['grid']} x {size['grid']} grid of (a, b) "
     f"on [-3, 3]², a < b; MC: eq. (8) with M = {size['M']}, "
     f"K = {size['K']}; +: best cell")

show_table(pd.Series({"cells": int(valid.sum()), "mean z": float(np.nanmean(z)),
           "sd of z": float(np.nanstd(z)), "max |z|": float(np.nanmax(np.abs(z)))}
          ).to_frame("MC at (m, c) vs exact, in standard errors"))

# %% [markdown]
# All cells of the Monte Carlo surface share their random numbers (as in `fisher_grid`),
# so their errors are strongly correlated: the surface is mostly shifted or tilted as a
# whole, by an amount of the order of one standard error, rather than speckled.  The
# differences stay within a few standard errors everywhere, which is what Theorem 3 and
# correct standard errors predict together.
#
# ## Summary
#
# * Truncating or clipping a location-scale variable to $[m + ca, m + cb]$ and adding
#   Laplace noise of scale $c(b - a)/\epsilon$ gives $m + c\,Y_0$, with $Y_0$ the release
#   of the base variable (Lemmas 1 and 2); samples from `dpbook.model.mechanisms.release`
#   confirm it, and merely shifting the interval does not.
# * The Fisher information of the release is $F_{a,b}(0, 1)/c^2$ (Theorem 3), checked by
#   quadrature in the units of the data and by independent Monte Carlo.
# * Hence the intervals are ranked the same way at every $(m, c)$ and the best $(a^*,
#   b^*)$ of {ref}`ch-fisher-grid` is computed once; the adaptive policy
#   (`dpbook.privacy.policies.AdaptivePolicy`) then only evaluates $m + a^* c$ and $m + b^* c$
#   for each Thompson draw, as used in {ref}`ch-smc` and {ref}`ch-four-eps`.

# %% caption="Wall-clock seconds of this chapter's heavy steps." name="tbl-04-timings" tags=["hide-input"]
show_table(pd.Series(timings).to_frame("seconds"))
