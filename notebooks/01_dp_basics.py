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
# (ch-dp-basics)=
# # Differential privacy basics
#
# Individual $t$ holds a sensitive number $X_t$ (an income, say) and never shares it.
# What leaves their hands is
#
# $$
# \begin{gathered}
# Y_t = T_{l_t}^{r_t}(X_t) + (r_t - l_t)\, V_t, \\
# T_l^r(x) = \min\{\max\{x, l\}, r\}, \qquad V_t \sim \mathrm{Laplace}(1/\epsilon),
# \end{gathered}
# $$
#
# eq. (2) and (10) of the paper {cite:p}`yildirim2023adaptive`: the value is *clipped*
# (truncated) to an interval $[l_t, r_t]$ and then *noised*, with noise proportional to
# the width of the interval.  Everything else in this book (the SMC sampler, the Fisher
# information, the adaptive choice of $[l_t, r_t]$) only ever touches $Y_t$.
#
# This chapter explains why that is private, checks it numerically with the `dpbook`
# implementation of the mechanism, and shows the trade-off that motivates the whole paper:
# a wide interval means a lot of noise, a narrow one means a lot of clipping.
#
# The chapter follows Sections 2 and 3 of the paper:
#
# 1. ε-differential privacy and the privacy loss (Definition 1);
# 2. the sensitivity of a clipped query and the Laplace mechanism (Theorem 2);
# 3. an empirical check with samples of `dpbook.model.mechanisms.release`;
# 4. post-processing (Theorem 1) and why the adaptive scheme, Algorithm 1, is ε-DP
#    (Proposition 1);
# 5. the truncation-versus-noise trade-off of Example 1.

# %% tags=["parameters"]
mode = "quick"  # "quick": small Monte Carlo sizes (seconds); "full": large ones
seed = 2023  # seed of the chapter's random draws (simulated values and noise)

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import optimize, special, stats

from dpbook.figures import eps_colours, figure_saver, show_table
from dpbook.model.mechanisms import clip, noise_logpdf, noise_scale, release
from dpbook.validation import check_eps, check_interval

assert mode in ("quick", "full"), f"mode must be 'quick' or 'full', got {mode!r}"
size = {"quick": dict(n_release=40_000, n_transcripts=4_000, n_mse=20_000, n_grid=801),
        "full": dict(n_release=2_000_000, n_transcripts=100_000, n_mse=400_000,
                     n_grid=4001)}[mode]
rng = np.random.default_rng(seed)

save = figure_saver("01_dp_basics", mode=mode, seed=seed)


size

# %% [markdown]
# ## Differential privacy and the privacy loss
#
# A randomised algorithm $\mathcal{A}$ is **ε-differentially private** (Definition 1,
# {cite:p}`dwork2006differential`) if for all neighbouring data sets $\mathbf{x},
# \mathbf{x}'$ (differing in one individual) and all sets $S$ of outputs
#
# $$
# \mathbb{P}[\mathcal{A}(\mathbf{x}) \in S] \le e^{\epsilon}\,
# \mathbb{P}[\mathcal{A}(\mathbf{x}') \in S].
# $$
#
# When the output has a density $p(y \mid \mathbf{x})$ it is enough that the
# **privacy loss**
#
# $$
# L(y) = \log p(y \mid \mathbf{x}) - \log p(y \mid \mathbf{x}')
# $$
#
# stays in $[-\epsilon, \epsilon]$ for every $y$: whatever is released, it is at most
# $e^\epsilon$ times more likely under one neighbour than under the other.  Here the
# "data set" of one release is a single individual's value, so any two values $x \ne x'$
# are neighbours.
#
# ## The sensitivity of a clipped query
#
# The Laplace mechanism (Theorem 2, {cite:p}`dwork2013algorithmic`) releases
# $\varphi(x) + \Delta\varphi\, V$ with $V \sim \mathrm{Laplace}(1/\epsilon)$, where the
# sensitivity $\Delta\varphi$ is the largest change of $\varphi$ between neighbours.
# The identity $\varphi(x) = x$ on an income has an enormous (or unbounded) sensitivity.
# Clipping fixes that: $T_l^r$ takes values in $[l, r]$, so $\Delta T_l^r = r - l$
# whatever the data.  `dpbook.model.mechanisms.clip` and `noise_scale` say so directly:

# %% caption="Clipping bounds the sensitivity: the ranges of x and of its clipped value, and the noise scale at ε = 2." name="tbl-01-clipping"
l, r = check_interval(-1.0, 2.0)
x = np.concatenate([np.linspace(-1e6, 1e6, size["n_grid"]), [-np.inf, np.inf]])
clipped = clip(x, l, r)
show_table(pd.Series({
    "range of x": np.ptp(x[np.isfinite(x)]),
    "range of clip(x, l, r)": np.ptp(clipped),
    "r - l": float(r - l),
    "noise scale (r - l)/eps at eps = 2": float(noise_scale(l, r, 2.0)),
}))

# %% [markdown]
# ## The privacy loss of the clipped Laplace mechanism
#
# For the released value $Y = T_l^r(x) + (r - l)V$ the density is
# $\mathrm{Laplace}(y - T_l^r(x);\, (r - l)/\epsilon)$, the noise factor of the paper's
# eq. (5), which `dpbook.model.mechanisms.noise_logpdf` evaluates.  The privacy loss between
# two values is therefore
#
# $$
# \begin{gathered}
# L(y) = \frac{\epsilon}{r - l}\Big(\lvert y - T_l^r(x') \rvert
#        - \lvert y - T_l^r(x) \rvert\Big), \\
# \lvert L(y) \rvert \le \frac{\epsilon}{r - l}\,
#        \lvert T_l^r(x) - T_l^r(x') \rvert \le \epsilon .
# \end{gathered}
# $$
#
# The worst pair puts one value below $l$ and the other above $r$.  The left panel
# below evaluates $L$ for that pair over a grid of $y$.  The right panel keeps the same
# noise level but skips the clipping, i.e. it pretends that the sensitivity is $r - l$
# while the query is the raw value: the loss then leaves the band $[-\epsilon, \epsilon]$,
# by a factor that grows with how far the data lie outside $[l, r]$.

# %% tags=["hide-input"] fig_caption="The privacy loss L(y) of one release, for the worst pair of neighbouring values, with the clipped query (left: bounded by ±ε) and without clipping (right: unbounded)." fig_alt="Two panels of privacy loss against the released value for three epsilons: with clipping the loss stays between the dotted lines at plus and minus epsilon, without clipping it grows beyond them."
eps_values = [check_eps(e) for e in (0.5, 1.0, 2.0)]
x_low, x_high = l - 2.0, r + 3.0  # a worst-case pair: one below l, one above r
y = np.linspace(l - 12.0, r + 12.0, size["n_grid"])


def privacy_loss(y, x, x_prime, eps, clipped=True):
    c, c_prime = (clip(x, l, r), clip(x_prime, l, r)) if clipped else (x, x_prime)
    return noise_logpdf(y, c, l, r, eps) - noise_logpdf(y, c_prime, l, r, eps)


fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
for eps, colour in eps_colours(eps_values).items():
    for ax, clipped_query in zip(axes, [True, False]):
        ax.plot(y, privacy_loss(y, x_low, x_high, eps, clipped_query), color=colour,
                label=f"ε = {eps:g}")
        ax.axhline(eps, color=colour, ls=":", lw=1)
        ax.axhline(-eps, color=colour, ls=":", lw=1)
for ax, title in zip(axes, ["clipped query: T(x) + (r-l)V", "no clipping: x + (r-l)V"]):
    ax.axvspan(l, r, color="0.9", zorder=0)
    ax.set(title=title, xlabel="released value y")
axes[0].set_ylabel("privacy loss L(y)")
axes[0].legend(loc="upper right")
save(fig, "privacy_loss",
     f"x = {x_low:g}, x' = {x_high:g}, [l, r] = [{l:g}, {r:g}] (grey); "
     "dotted lines: ±ε")

# %% [markdown]
# The bound is attained (the loss is exactly $\pm\epsilon$ in the tails), so the Laplace
# noise cannot be shrunk without breaking ε-DP.  The same holds for any pair, not just
# the extreme one: the table below is the largest $|L(y)|/\epsilon$ over the $y$ grid and
# over many random pairs $(x, x')$ drawn far outside and inside $[l, r]$.

# %% caption="The largest privacy loss |L(y)|/ε over the y grid and random pairs (x, x'), with and without clipping." name="tbl-01-privacy-loss"
pairs = rng.normal(0.0, 50.0, size=(200, 2))
rows = []
for eps in eps_values:
    loss_clipped = privacy_loss(y[:, None], pairs[:, 0], pairs[:, 1], eps)
    loss_raw = privacy_loss(
        y[:, None], pairs[:, 0], pairs[:, 1], eps, clipped=False
    )
    rows.append(
        {
            "eps": eps,
            "max |L|/eps, clipped": np.abs(loss_clipped).max() / eps,
            "max |L|/eps, not clipped": np.abs(loss_raw).max() / eps,
        }
    )
table = pd.DataFrame(rows).set_index("eps")
assert (table["max |L|/eps, clipped"] <= 1 + 1e-9).all()
show_table(table)

# %% [markdown]
# ## An empirical check with released samples
#
# The density calculation uses the same formula as the likelihood inside the sampler, so
# it is worth checking the mechanism itself: draw many releases `release(x, l, r, eps,
# rng)` for $x$ and for $x'$, bin them, and compare the frequencies.  Each bin $S$ is a
# set in Definition 1, so
# $\log \mathbb{P}[Y \in S \mid x] - \log \mathbb{P}[Y \in S \mid x']$ must lie in
# $[-\epsilon, \epsilon]$ up to Monte Carlo error.  The error bars are $\pm 2$ standard
# errors of the log ratio of two binomial frequencies; the line is the exact value from
# the Laplace distribution function (`scipy.stats.laplace`).

# %% caption="ε-DP checked on samples of release(): the bins used and the largest excess of the log ratio over ε." name="tbl-01-empirical-loss" tags=["hide-input"] fig_caption="The privacy loss measured on samples of release(): the log ratio of the frequencies of each bin under x and x', with two standard errors, against the exact Laplace value and the bound ±ε." fig_alt="Points with error bars following a black curve that rises from minus epsilon to plus epsilon and stays within the dotted lines at plus and minus epsilon."
eps = check_eps(1.0)
n = size["n_release"]
y_x = release(np.full(n, x_low), l, r, eps, rng)
y_xp = release(np.full(n, x_high), l, r, eps, rng)

edges = np.quantile(np.concatenate([y_x, y_xp]), np.linspace(0.02, 0.98, 31))
count_x, _ = np.histogram(y_x, edges)
count_xp, _ = np.histogram(y_xp, edges)
enough = (count_x >= 50) & (count_xp >= 50)
log_ratio = np.log(count_x / count_xp)
std_err = np.sqrt(1 / count_x + 1 / count_xp)

scale = float(noise_scale(l, r, eps))
law_x = stats.laplace(loc=clip(x_low, l, r), scale=scale)
law_xp = stats.laplace(loc=clip(x_high, l, r), scale=scale)
exact = np.log(np.diff(law_x.cdf(edges)) / np.diff(law_xp.cdf(edges)))
mid = 0.5 * (edges[1:] + edges[:-1])
z = (np.abs(log_ratio) - eps) / std_err  # > 0 where the estimate is outside the band

fig, ax = plt.subplots(figsize=(7, 3.6))
ax.errorbar(mid[enough], log_ratio[enough], yerr=2 * std_err[enough], fmt="o", ms=3,
            label="release() samples, per bin")
ax.plot(mid, exact, color="k", lw=1, label="exact (Laplace cdf)")
ax.axhline(eps, color="C3", ls=":")
ax.axhline(-eps, color="C3", ls=":", label="±ε")
ax.set(xlabel="bin centre", ylabel="log P[Y∈S | x] − log P[Y∈S | x']")
ax.legend(loc="upper right")
save(fig, "release_histogram_check",
     f"ε = {eps:g}, x = {x_low:g}, x' = {x_high:g}, [l, r] = [{l:g}, {r:g}], "
     f"{n} releases each, 30 quantile bins")

summary = pd.Series({"bins used": int(enough.sum()),
                     "largest |log ratio| - eps": float(np.max(np.abs(log_ratio[enough]) - eps)),
                     "largest excess in standard errors": float(z[enough].max())})
assert summary["largest excess in standard errors"] < 5, summary
show_table(summary)

# %% [markdown]
# Bins in the tails sit *on* the boundary $\pm\epsilon$ (the exact line is flat there),
# so about half of the estimates scatter around $\pm\epsilon$; none is further outside
# than Monte Carlo error explains.
#
# ## Post-processing and the adaptive scheme
#
# **Theorem 1 (post-processing).** Whatever is computed from the output of an ε-DP
# algorithm, without looking at the data again, is ε-DP too.
#
# The paper's Algorithm 1 uses this repeatedly.  Individual $t$ releases $Y_t$ through
# the clipped Laplace mechanism with the interval $s_t = [l_t, r_t]$; the estimate
# $\Theta_t$ and the next interval $s_{t+1} = H(\Theta_t)$ are computed from
# $Y_{1:t}$ only.  The whole transcript $R_n = (Y_{1:n}, s_{1:n})$ has density
#
# $$
# \begin{aligned}
# p(R_n \mid x_{1:n}) = {}& \prod_{t=1}^n
#   \mathrm{Laplace}\big(y_t - T_{l_t}^{r_t}(x_t);\, (r_t - l_t)/\epsilon\big) \\
#   & \times (\text{terms that depend on } y_{1:t-1} \text{ only}),
# \end{aligned}
# $$
#
# so for neighbours differing in individual $k$ every factor except the $k$-th cancels
# and the privacy loss of the transcript is that of the single release $Y_k$:
# **Algorithm 1 is ε-DP (Proposition 1, proof in Appendix A)** — with no composition
# penalty, because every individual is queried once.
#
# We check this by simulation with a deliberately simple adaptive rule $H$: the next
# interval is centred at the running mean of the *released* values,
# $[\bar Y_t - h, \bar Y_t + h]$.  For many transcripts generated from a data set
# $x_{1:n}$ we evaluate the log density of the whole transcript under $x_{1:n}$ and under
# a neighbour $x'_{1:n}$ that replaces individual $k$ by an extreme value, summing
# `noise_logpdf` over all $n$ steps (nothing is cancelled by hand).

# %% caption="The largest privacy loss |L|/ε of whole transcripts of the toy adaptive algorithm, per ε." name="tbl-01-transcripts" tags=["hide-input"] fig_caption="The privacy loss of whole transcripts of the toy adaptive algorithm (intervals centred at the running mean of the released values): histograms over simulated transcripts, one panel per ε." fig_alt="Three histograms of the transcript privacy loss, for epsilon 1, 2 and 5; each lies between the dotted lines at plus and minus epsilon."
n_people, k, half_width = 30, 10, 1.5
x_data = rng.normal(3.0, 1.0, n_people)
x_neighbour = x_data.copy()
x_neighbour[k] = 40.0  # individual k replaced by an outlier


def transcripts(x_values, eps, n_rep):
    """Run the toy Algorithm 1 n_rep times; return released y and the intervals used."""
    ys, ls, rs = (np.empty((n_rep, len(x_values))) for _ in range(3))
    left, right = np.full(n_rep, -5.0), np.full(n_rep, 5.0)  # s_1, fixed in advance
    for t, x_t in enumerate(x_values):
        ys[:, t] = release(np.full(n_rep, x_t), left, right, eps, rng)
        ls[:, t], rs[:, t] = left, right
        centre = ys[:, : t + 1].mean(axis=1)  # H: uses released values only
        left, right = centre - half_width, centre + half_width
    return ys, ls, rs


def transcript_logpdf(ys, ls, rs, x_values, eps):
    c = clip(x_values[None, :], ls, rs)
    return noise_logpdf(ys, c, ls, rs, eps).sum(axis=1)


eps_grid = [check_eps(e) for e in (1.0, 2.0, 5.0)]
fig, axes = plt.subplots(1, len(eps_grid), figsize=(9, 3.2))
rows = []
for ax, eps in zip(axes, eps_grid):
    ys, ls, rs = transcripts(x_data, eps, size["n_transcripts"])
    loss = transcript_logpdf(ys, ls, rs, x_data, eps) - transcript_logpdf(
        ys, ls, rs, x_neighbour, eps)
    ax.hist(loss, bins=60, color="C0")
    for v in (-eps, eps):
        ax.axvline(v, color="C3", ls=":")
    ax.set(title=f"ε = {eps:g}", xlabel="privacy loss of the transcript")
    rows.append({"eps": eps, "min loss / eps": loss.min() / eps,
                 "max loss / eps": loss.max() / eps})
axes[0].set_ylabel("transcripts")
save(fig, "transcript_privacy_loss",
     f"n = {n_people} individuals, neighbour differs in individual {k}, "
     f"h = {half_width:g}, {size['n_transcripts']} transcripts per ε; "
     "dotted lines: ±ε")
table = pd.DataFrame(rows).set_index("eps")
assert (table.abs() <= 1 + 1e-9).all().all()
show_table(table)

# %% [markdown]
# The loss of the entire transcript, adaptive intervals included, never leaves
# $[-\epsilon, \epsilon]$.  (The spike at zero comes from transcripts in which the
# interval offered to individual $k$ lies below both $x_k$ and $x'_k$: both are clipped to
# the same end point and the release cannot tell them apart.)
#
# Had $H$ looked at the raw values (say, centring the next interval at $x_t$), the
# released intervals would reveal $x_t$ exactly and no amount of noise on $Y_t$ would
# help: adaptivity is free *only* because it is post-processing.
#
# ## The truncation–noise trade-off (Example 1)
#
# Privacy is guaranteed for every interval; *utility* is not.  Take
# $X \sim \mathcal{N}(\theta, \sigma^2)$ and the interval $[m - \Delta, m + \Delta]$.
# How far is the released value from the truth?  The error splits into two independent
# parts,
#
# $$
# \mathbb{E}\big[(Y - X)^2\big] =
# \underbrace{\mathbb{E}\big[(T_{m-\Delta}^{m+\Delta}(X) - X)^2\big]}_{\text{truncation}}
# + \underbrace{2\,(2\Delta/\epsilon)^2}_{\text{Laplace noise variance}} .
# $$
#
# A wide interval ($\Delta$ large) removes truncation but the noise grows like
# $\Delta^2/\epsilon^2$; a narrow one does the opposite.  For the normal distribution the
# truncation term has a closed form, $\sigma^2[(1 + z^2)(1 - \Phi(z)) - z\varphi(z)]$ per
# side with $z$ the standardised distance from $\theta$ to the end point.  Below, lines
# are that formula and markers are Monte Carlo estimates from `release`.

# %% caption="The best half-width of a centred interval and the mean squared error of one release there, against the fixed interval [θ − 10σ, θ + 10σ]." name="tbl-01-half-width" tags=["hide-input"] fig_caption="The trade-off between truncation and noise: the mean squared error of the released value for an interval of half-width Δ centred at θ (left, dashed: the truncation part alone), and at the best Δ for an interval whose centre is off by |m − θ| (right)." fig_alt="Left: U-shaped error curves against the half-width on log axes, one per epsilon, with a star at each minimum. Right: the best error grows with the offset of the interval centre."
theta, sigma = 0.0, 1.0
eps_paper = [check_eps(e) for e in (1.0, 2.0, 5.0, 10.0)]  # the ε values of Section 6
LOG_SQRT_2PI = 0.5 * np.log(2 * np.pi)


def truncation_mse(left, right):
    """E[(T_l^r(X) - X)^2] for X ~ N(theta, sigma^2)."""
    zr, zl = (right - theta) / sigma, (left - theta) / sigma
    phi_r, phi_l = np.exp(-0.5 * zr**2 - LOG_SQRT_2PI), np.exp(-0.5 * zl**2 - LOG_SQRT_2PI)
    upper = (1 + zr**2) * special.ndtr(-zr) - zr * phi_r  # E[(X - r)^2; X > r] / sigma^2
    lower = (1 + zl**2) * special.ndtr(zl) + zl * phi_l  # E[(l - X)^2; X < l] / sigma^2
    return sigma**2 * (upper + lower)


def release_mse(delta, eps, offset=0.0):
    left, right = theta + offset - delta, theta + offset + delta
    return truncation_mse(left, right) + 2 * (noise_scale(left, right, eps)) ** 2


def release_mse_mc(delta, eps, offset=0.0):
    x = rng.normal(theta, sigma, size["n_mse"])
    return np.mean((release(x, theta + offset - delta, theta + offset + delta, eps, rng)
                    - x) ** 2)


def best_half_width(eps, offset=0.0):
    res = optimize.minimize_scalar(lambda d: release_mse(d, eps, offset),
                                   bounds=(1e-4, 10 * sigma), method="bounded")
    return res.x, res.fun


deltas = np.geomspace(0.01, 10, 200) * sigma
deltas_mc = np.geomspace(0.02, 5, 9) * sigma
offsets = np.linspace(0.0, 3.0, 31) * sigma
offsets_mc = np.linspace(0.0, 3.0, 7) * sigma

fig, axes = plt.subplots(1, 2, figsize=(9, 4))
for eps, colour in eps_colours(eps_paper).items():
    axes[0].plot(deltas / sigma, release_mse(deltas, eps) / sigma**2, color=colour,
                 label=f"ε = {eps:g}")
    axes[0].plot(deltas_mc / sigma, [release_mse_mc(d, eps) / sigma**2 for d in deltas_mc],
                 "o", ms=3, color=colour)
    d_best, mse_best = best_half_width(eps)
    axes[0].plot(d_best / sigma, mse_best / sigma**2, "*", ms=12, color=colour, mec="k")
    best = [best_half_width(eps, o)[1] / sigma**2 for o in offsets]
    axes[1].plot(offsets / sigma, best, color=colour, label=f"ε = {eps:g}")
    best_mc = [release_mse_mc(best_half_width(eps, o)[0], eps, o) / sigma**2
               for o in offsets_mc]
    axes[1].plot(offsets_mc / sigma, best_mc, "o", ms=3, color=colour)
axes[0].plot(deltas / sigma, truncation_mse(theta - deltas, theta + deltas) / sigma**2,
             "k--", lw=1, label="truncation part")
axes[0].set(xscale="log", yscale="log", ylim=(1e-2, 1e3),
            xlabel="half-width Δ/σ (interval centred at θ)",
            ylabel="E[(Y − X)²] / σ²", title="centred interval")
axes[1].set(yscale="log", xlabel="offset |m − θ|/σ of the interval centre",
            ylabel="E[(Y − X)²] / σ² at the best Δ", title="misplaced interval")
axes[0].legend()
fig.tight_layout()
save(fig, "truncation_noise_tradeoff",
     f"X ~ N(θ, σ²), θ = {theta:g}, σ = {sigma:g}; lines exact, "
     f"dots Monte Carlo with {size['n_mse']} draws; stars: best Δ")

rows = []
for eps in eps_paper:
    d_best, mse_best = best_half_width(eps)
    rows.append({"eps": eps, "best half-width / sigma": d_best / sigma,
                 "E[(Y-X)^2]/sigma^2 at best": mse_best / sigma**2,
                 "E[(Y-X)^2]/sigma^2, [theta-10 sigma, theta+10 sigma]":
                     release_mse(10 * sigma, eps) / sigma**2})
show_table(pd.DataFrame(rows).set_index("eps"))

# %% [markdown]
# Three lessons carry through the rest of the book.
#
# * For every ε there is a best width, and it is **narrow**: far narrower than the
#   spread of the data when ε is small, because the noise term dominates.  The wide
#   interval $[\theta - 10\sigma, \theta + 10\sigma]$ used by the paper's non-adaptive
#   baseline pays for its safety with a much larger error (last column).
# * A narrow interval is only good **where the data are**: the right panel shows how
#   quickly the error grows when the interval is centred away from $\theta$.  Since
#   $\theta$ is unknown, the interval has to be placed using what has been learnt so far
#   — which is what the adaptive truncation of Section 5 does, at no privacy cost.
# * The squared error of one release is a convenient illustration, not the paper's
#   criterion.  The paper chooses the interval that maximises the **Fisher information**
#   of $Y$ about $\theta$ (Section 5, {ref}`ch-fisher-grid`); for location-scale families
#   that choice is made once for all $\theta$ ({ref}`ch-location-scale`).  The Bayesian
#   estimation from the noisy, clipped releases is the subject of {ref}`ch-smc`.
