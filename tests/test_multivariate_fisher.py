"""The Fisher information of one two-dimensional box release (issue 54): the score, the
Monte Carlo estimate (eq. 8 with Algorithm 4) against the quadrature, the reduction to
the 1-D release at rho = 0, Theorem 3's symmetries, the box search and bad input."""

import numpy as np
import pytest
from scipy import stats

import dpbook.multivariate.box_fisher as mf
from dpbook.likelihood.fisher_quadrature import fisher_exact
from dpbook.multivariate.box_fisher import (
    best_box,
    best_split,
    box_score,
    fisher_mc,
    fisher_quad,
    mvn_score,
)

# (theta, l, r, eps, options): rho != 0, unequal sigmas, boxes off centre
CASES = [
    ([0.3, -1.0, 1.5, 0.7, 0.5], [-1.0, -2.5], [2.0, 0.0], 3.0, {}),
    ([0.0, 0.0, 1.0, 3.0, -0.7], [-0.5, -2.0], [0.8, 3.0], 5.0, {}),
    ([0.3, -1.0, 1.5, 0.7, 0.5], [-1.0, -2.5], [2.0, 0.0], 3.0, {"eps_split": (1.0, 2.0)}),
    ([0.3, -1.0, 1.5, 0.7, 0.5], [-1.0, -2.5], [2.0, 0.0], 3.0, {"mechanism": "gaussian"}),
]
QUAD_TOL = 1e-6  # relative; n = 32 against n = 64 agree to < 3e-7 (measured)


def _logpdf(x, theta, d):
    mu, sd = theta[:d], theta[d:2 * d]
    R = np.eye(d)
    R[np.triu_indices(d, 1)] = theta[2 * d:]
    R = np.triu(R) + np.triu(R, 1).T
    return stats.multivariate_normal(mu, R * np.outer(sd, sd)).logpdf(x)


@pytest.mark.parametrize("theta", [[0.5, -1.0, 1.3, 0.6, -0.4],
                                   [0.0, 1.0, 2.0, 0.8, 1.1, 0.5, 0.3, -0.2, 0.1]])
def test_score_matches_finite_differences(theta):
    theta = np.array(theta)
    d = 2 if theta.size == 5 else 3
    x = np.random.default_rng(3).normal(size=(6, d)) * 2
    h = 1e-6
    fd = np.stack([(_logpdf(x, theta + h * e, d) - _logpdf(x, theta - h * e, d)) / (2 * h)
                   for e in np.eye(theta.size)], -1)
    np.testing.assert_allclose(mvn_score(x, theta), fd, rtol=1e-6, atol=1e-7)
    # batched theta (one per x, as for particles) gives the same rows
    np.testing.assert_allclose(mvn_score(x, np.tile(theta, (6, 1))), fd, rtol=1e-6,
                               atol=1e-7)


def test_quadrature_has_unit_mass_and_converges():
    th, l, r, eps, _ = CASES[0]
    F1, mass = fisher_quad(th, l, r, eps, n=32, return_mass=True)
    F2 = fisher_quad(th, l, r, eps, n=64)
    assert abs(mass - 1) < 1e-10
    assert np.max(np.abs(F1 - F2) / np.sqrt(np.outer(np.diag(F2), np.diag(F2)))) < QUAD_TOL


@pytest.mark.parametrize("case, rho, n, tol", [(1, None, 32, QUAD_TOL), (0, 0.9999, 48, 2e-5)])
def test_quadrature_is_symmetric_in_the_components(case, rho, n, tol):
    # it integrates x1 in closed form and x2 by nodes: swapping the components must
    # permute F (at rho = 0.9999 an x2 rule without splits where E[X1 | x2] = l1, r1,
    # y1 was 0.18 apart; it is 4e-6 apart now, and 1.5e-4 from n = 96 in F_rhorho)
    th, l, r, eps, _ = CASES[case]
    th = np.array(th)
    if rho is not None:
        th[4] = rho
    perm = [1, 0, 3, 2, 4]
    F = fisher_quad(th, l, r, eps, n=n)
    G = fisher_quad(th[perm], l[::-1], r[::-1], eps, n=n)
    scale = np.sqrt(np.outer(np.diag(F), np.diag(F)))
    assert np.max(np.abs(G[np.ix_(perm, perm)] - F) / scale) < tol


def _mc_vs_quad(th, l, r, eps, opts, Fq=None):
    """max |F_mc - F_quad| / (4 se + quadrature error): <= 1 means they agree."""
    Fq = fisher_quad(th, l, r, eps, n=32, **opts) if Fq is None else Fq
    F, se = fisher_mc(th, l, r, eps, np.random.default_rng(1), M=2000, K=10000, **opts)
    return np.max(np.abs(F - Fq) / (4 * se + QUAD_TOL * np.abs(Fq)))


@pytest.mark.parametrize("case", range(len(CASES)))
def test_mc_agrees_with_quadrature(case):
    # se includes the shared importance draws' error (delta method); the O(1/K) bias
    # of eq. (8) is ~1 % of F_sigma at K = 10^4, well inside 4 se
    assert _mc_vs_quad(*CASES[case]) <= 1


def test_mc_vs_quadrature_catches_a_wrong_scale_or_a_missing_clip(monkeypatch):
    th, l, r, eps, _ = CASES[0]
    Fq = fisher_quad(th, l, r, eps, n=32)  # the right answer, before the faults
    with monkeypatch.context() as m:  # b = max width / eps instead of W / eps
        m.setattr(mf, "_scales", lambda l, r, eps, *a: np.full(2, (r - l).max() / eps))
        assert _mc_vs_quad(th, l, r, eps, {}, Fq) > 2
    with monkeypatch.context() as m:  # the clip left out
        m.setattr(mf, "_clip", lambda x, l, r: x)
        assert _mc_vs_quad(th, l, r, eps, {}, Fq) > 2


@pytest.mark.parametrize("c, eps", [(0.8, 2.0), (0.3, 1.0), (1.5, 10.0)])
def test_square_box_at_rho_zero_is_two_1d_releases_at_half_eps(c, eps):
    # b = 2 (2c) / eps = 2c / (eps/2): each Y_j is the 1-D release of [-c, c] at eps/2,
    # independent of the other; at rho = 0 the rho-score is E[z1 | y1] E[z2 | y2], so
    # F_rhorho = F1_mumu^2 (sigma = 1) and the rho row is 0 elsewhere
    F = fisher_quad([0, 0, 1, 1, 0], [-c, -c], [c, c], eps, n=32)
    F1 = fisher_exact(-c, c, eps / 2, theta=(0.0, 1.0))
    want = np.zeros((5, 5))
    for j in range(2):
        want[np.ix_([j, j + 2], [j, j + 2])] = F1
    want[4, 4] = F1[0, 0] ** 2
    np.testing.assert_allclose(F, want, rtol=1e-6, atol=1e-9 * F1[0, 0])
    # the check can fail: the 1-D release at eps is another matrix
    assert abs(fisher_exact(-c, c, eps, theta=(0.0, 1.0))[0, 0] / F[0, 0] - 1) > 0.1


def _jac(c1, c2):
    return np.diag([1 / c1, 1 / c2, 1 / c1, 1 / c2, 1.0])


A, B = np.array([-0.7, -1.2]), np.array([0.9, 0.4])  # a standard box
BASE = np.array([0.0, 0.0, 1.0, 1.0, 0.4])


def _moved(m, c):
    """theta and box after a shift m and per-component scales c of the standard box."""
    m, c = np.asarray(m, float), np.asarray(c, float)
    return np.r_[m, c, BASE[4]], m + A * c, m + B * c


def test_shift_and_common_scale_are_symmetries():
    # Theorem 3 in 2-D: F(m + c theta) = D F(theta) D, D = diag(1/c on mu, sigma; 1)
    F0 = fisher_quad(BASE, A, B, 2.0, n=32)
    th, l, r = _moved([3.0, -2.0], [2.5, 2.5])
    D = _jac(2.5, 2.5)
    np.testing.assert_allclose(fisher_quad(th, l, r, 2.0, n=32), D @ F0 @ D, rtol=1e-7,
                               atol=1e-12)
    # the Monte Carlo estimate too, to rounding: same draws, standardised
    G0, _ = fisher_mc(BASE, A, B, 2.0, np.random.default_rng(5), M=200, K=500)
    G, _ = fisher_mc(th, l, r, 2.0, np.random.default_rng(5), M=200, K=500)
    np.testing.assert_allclose(G, D @ G0 @ D, rtol=1e-9, atol=1e-14)


def test_per_component_scale_is_a_symmetry_only_for_a_split_budget():
    th, l, r = _moved([1.0, 1.0], [1.0, 3.0])
    D = _jac(1.0, 3.0)
    # L1: W = w1 + 3 w2 is not 3 times anything: the information moves
    F0, F = fisher_quad(BASE, A, B, 2.0, n=32), fisher_quad(th, l, r, 2.0, n=32)
    assert np.max(np.abs(F - D @ F0 @ D) / np.abs(D @ F0 @ D).max()) > 0.05
    # a fixed split: b_j = w_j / e_j scales with its component
    split = (0.8, 1.2)
    F0 = fisher_quad(BASE, A, B, 2.0, eps_split=split, n=32)
    F = fisher_quad(th, l, r, 2.0, eps_split=split, n=32)
    np.testing.assert_allclose(F, D @ F0 @ D, rtol=1e-7, atol=1e-12)


def test_l1_release_is_the_proportional_split():
    th, l, r, eps, _ = CASES[0]
    w = np.subtract(r, l)
    np.testing.assert_allclose(fisher_quad(th, l, r, eps, eps_split=eps * w / w.sum()),
                               fisher_quad(th, l, r, eps), rtol=1e-7, atol=1e-12)
    # (not to 1e-12: b's last bit differs, and central differences amplify it 1e5-fold)


def test_box_score():
    F = np.diag([1.0, 2.0, 3.0, 4.0, 5.0])
    assert box_score(F, "trace-mu") == 3 and box_score(F, "trace") == 15
    assert box_score(F, "logdet") == pytest.approx(np.log(120))


def _sc(a, b, eps, th=(0, 0, 1, 1, 0), score="trace-mu"):
    return box_score(fisher_quad(th, a, b, eps, n=32), score)


def test_best_box_at_rho_zero():
    # eps = 5: the square box at the 1-D optimum for eps/2, no better box near it
    a, b = best_box(5.0)
    c = b[0]
    np.testing.assert_allclose(np.r_[a, b], np.r_[-c, -c, c, c], rtol=1e-3)
    s = _sc(a, b, 5.0)
    for f in (0.9, 1.1):
        assert s >= _sc(a * [f, 1], b * [f, 1], 5.0)
        assert s >= _sc(a * f, b * f, 5.0)
    # eps = 1: F_mumu grows as eps_j^2, so one component gets the budget
    a, b = best_box(1.0)
    assert min(b - a) < 1e-3 and _sc(a, b, 1.0) > 1.5 * _sc([-c, -c], [c, c], 1.0)


def test_best_box_logdet_keeps_both_components():
    th = (0, 0, 1, 3, 0.5)
    a, b = best_box(5.0, score="logdet", rho=0.5, ratio=3.0)
    assert np.all(b - a > 0.5)
    s = _sc(a * [1, 3], b * [1, 3], 5.0, th, "logdet")
    for f in ([1.05, 1], [0.95, 1], [1, 1.05], [1, 0.95]):
        assert s >= _sc(a * f * [1, 3], b * f * [1, 3], 5.0, th, "logdet")


def test_best_split():
    th, l, r = [0, 0, 1, 1, 0], [-0.31, -0.31], [0.31, 0.31]
    e1, best, l1 = best_split(l, r, th, 5.0)
    assert abs(e1 - 2.5) < 0.05 and best == pytest.approx(l1, rel=1e-6)  # symmetric
    # an unequal box: the split's score is the quadrature's, and a local maximum
    th, l, r, eps = [0, 0, 1, 3, 0.5], [-1.33, -1.81], [1.33, 1.81], 5.0
    e1, best, l1 = best_split(l, r, th, eps, "logdet")

    def sc(e):
        return box_score(fisher_quad(th, l, r, eps, eps_split=(e, eps - e), n=32), "logdet")
    assert best == pytest.approx(sc(e1), abs=1e-6)
    assert best > sc(e1 - 0.05) and best > sc(e1 + 0.05) and best > l1 + 0.1


@pytest.mark.parametrize("call, words", [
    (lambda: fisher_quad(BASE, [0, 1], [1, 1], 1.0), "component 2"),
    (lambda: fisher_mc(BASE, [0, 0], [1, 1], 0.0, 1), "eps"),
    (lambda: fisher_quad([0, 0, 1, 1, 1.0], [0, 0], [1, 1], 1.0), "rho"),
    (lambda: fisher_mc([0, 0, 1, -1, 0], [0, 0], [1, 1], 1.0, 1), "sigma"),
    (lambda: fisher_quad(BASE, [0, 0], [1, 1], 1.0, eps_split=(0.5, 0.6)), "eps_split"),
    (lambda: fisher_quad(BASE, [0, 0], [1, 1], 1.0, mechanism="cauchy"), "mechanism"),
    (lambda: best_box(1.0, score="max"), "score"),
    (lambda: best_box(1.0, rho=-1.0), "rho"),
    (lambda: best_box(1.0, ratio=0.0), "ratio"),
    (lambda: fisher_quad(BASE, [0, 0], [1, 1], 1.0, eps_split=(-0.5, 1.5)), "eps_split"),
    (lambda: fisher_quad(BASE[:4], [0, 0], [1, 1], 1.0), "theta"),
])
def test_bad_input_names_the_problem(call, words):
    with pytest.raises(ValueError, match=words) as info:
        call()
    assert "\n" not in str(info.value)
