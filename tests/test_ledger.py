"""The ledger of the paper's claims (book/ledger.py, book/claims.py): verdicts follow the
data (a store with two methods swapped flips them), and the file's check and compare."""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

BOOK = Path(__file__).resolve().parents[1] / "book"
sys.path.insert(0, str(BOOK))
import ledger  # noqa: E402


def section6_store(runs=30, seed=0):
    """Estimates as a Section 6 store holds them: the adaptive SMC's errors a third of
    the fixed interval's and MHAAR's, at every eps (the paper's Figure 3)."""
    rng = np.random.default_rng(seed)
    rows = []
    for eps in ledger.PAPER_EPS:
        for run in range(runs):
            for method, spread in (("smc-adaptive", 0.3), ("smc-fixed", 1.0), ("mhaar", 1.0)):
                rows.append(dict(method=method, eps=eps, run=run, mu_true=50.0,
                                 sigma_true=10**0.5, mu_hat=50 + spread * rng.normal(),
                                 sigma_hat=10**0.5 + spread * rng.normal(),
                                 mu_sd=spread * (1 + 0.1 * rng.random())))
    return pd.DataFrame(rows)


def verdicts(est, ids=("figure-3",)):
    built = ledger.build("full", stores={"paper": (est, None)}, only=ids)
    return {c["id"]: [x["verdict"] for x in c["cells"]] for c in built["claims"]}


def test_experiment_negative_control_swapping_two_methods_flips_figure_3():
    est = section6_store()
    before = verdicts(est)
    assert before["figure-3"] == ["holds"] * 16
    swapped = est.replace({"method": {"smc-adaptive": "smc-fixed",
                                      "smc-fixed": "smc-adaptive"}})
    after = verdicts(swapped)
    # adaptive is now the worse one against the fixed interval, and ties MHAAR
    assert [v for v, cell in zip(after["figure-3"], range(16)) if cell % 2 == 0] == \
        ["does not hold"] * 8


def test_quick_mode_shows_the_numbers_but_leaves_the_verdict_to_the_full_build():
    built = ledger.build("quick", stores={"paper": (section6_store(runs=5), None)},
                         only=("figure-3",))
    (c,) = built["claims"]
    assert c["verdict"] == ledger.NOT_CHECKED and "full build" in c["note"]
    assert all(x["evidence"]["RMSE ratio"]["value"] < 1 for x in c["cells"])


def test_rules_render_from_the_parameters_the_checks_use():
    built = ledger.build("quick", only=("theorem-3", "best-intervals"))
    for c in built["claims"]:
        assert "{" not in c["rule"]["text"], c["rule"]["text"]
        assert c["rule"]["parameters"]
    by_id = {c["id"]: c for c in built["claims"]}
    assert "1e-08" in by_id["theorem-3"]["rule"]["text"]
    assert ledger.check(built) == []


def test_a_store_not_computed_is_not_checked():
    built = ledger.build("full", root=Path("/nonexistent"), only=("figure-3", "cost-smc"))
    assert {c["verdict"] for c in built["claims"]} == {ledger.NOT_CHECKED}
    assert all("not in this build" in c["note"] for c in built["claims"])


def test_check_and_compare_commands(tmp_path, capsys):
    old = {"schema": ledger.SCHEMA, "claims": [
        {"id": "a", "paper_ref": "Theorem 2", "category": "Theorems", "verdict": "holds",
         "rule": {"text": "x at most 1", "parameters": {"x": 1}}},
        {"id": "b", "paper_ref": "Figure 3", "category": "Section 6", "verdict": "holds",
         "rule": {"text": "p < 0.05", "parameters": {}}}]}
    new = json.loads(json.dumps(old))
    new["claims"][0]["rule"] = {"text": "x at most 2", "parameters": {"x": 2}}
    new["claims"][1]["verdict"] = "inconclusive"
    a, b = tmp_path / "old.json", tmp_path / "new.json"
    a.write_text(json.dumps(old))
    b.write_text(json.dumps(new))
    assert ledger.main(["compare", str(a), str(b)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["rule changed: a: 'x at most 1' -> 'x at most 2'",
                   "verdict changed: b: holds -> inconclusive"]
    assert ledger.main(["check", str(a)]) == 0
    new["claims"][1]["verdict"] = "probably"
    b.write_text(json.dumps(new))
    assert ledger.main(["check", str(b)]) == 1
    assert "b: verdict 'probably'" in capsys.readouterr().err
    assert ledger.main(["check", str(tmp_path / "missing.json")]) == 2


def test_tally_counts_the_paper_s_statements_only():
    claims = [{"category": "Theorems", "verdict": "holds"}] * 2 + [
        {"category": "Section 6", "verdict": "does not hold"},
        {"category": "Beyond the paper", "verdict": "holds"}]
    assert ledger.tally({"claims": claims, "mode": "full"}) == (
        "Of the paper's 3 statements that this build checks, 2 *hold*, 1 *does not hold* "
        "(full mode)")


def test_check_and_compare_read_a_ledger_of_the_previous_schema(tmp_path, capsys):
    """A schema-1 ledger (its 'holds with a departure', no Privacy group) still passes
    `check`, and `compare` against this schema's names the schema, the verdict and the
    group that moved."""
    rule = {"text": "r", "parameters": {}}
    old = {"schema": 1, "claims": [
        {"id": "best-intervals", "paper_ref": "Section 6", "category": "Section 6",
         "verdict": "holds with a departure", "rule": rule},
        {"id": "theorem-2", "paper_ref": "Theorem 2", "category": "Theorems",
         "verdict": "holds", "rule": rule}]}
    new = {"schema": ledger.SCHEMA, "claims": [
        {"id": "best-intervals", "paper_ref": "Section 6", "category": "Section 6",
         "verdict": "does not reproduce", "rule": rule},
        {"id": "theorem-2", "paper_ref": "Theorem 2", "category": "Privacy",
         "verdict": "holds", "rule": rule}]}
    assert ledger.check(old) == [] and ledger.check(new) == []
    assert ledger.check({**new, "schema": 1}) == [
        "best-intervals: verdict 'does not reproduce'", "theorem-2: category 'Privacy'"]
    assert ledger.counts(old)["Section 6"]["holds with a departure"] == 1
    a, b = tmp_path / "old.json", tmp_path / "new.json"
    a.write_text(json.dumps(old))
    b.write_text(json.dumps(new))
    assert ledger.main(["compare", str(a), str(b)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "schema: 1 -> 2",
        "verdict changed: best-intervals: holds with a departure -> does not reproduce",
        "category changed: theorem-2: Theorems -> Privacy"]


def test_the_authors_code_is_counted_apart_from_the_paper():
    claims = [{"category": "Section 6", "verdict": "does not reproduce"},
              {"category": "The authors' code", "verdict": "holds"},
              {"category": "Beyond the paper", "verdict": "inconclusive"}]
    assert ledger.tally({"claims": claims, "mode": "full"}) == (
        "Of the paper's 1 statement that this build checks, 1 *does not reproduce* "
        "(full mode)")


@pytest.mark.parametrize("p, expect", [([0.01, 0.04, 0.03], [0.03, 0.06, 0.06]),
                                       ([0.5], [0.5])])
def test_holm(p, expect):
    np.testing.assert_allclose(ledger.holm(p), expect)


def cell_verdicts(ids, **kw):
    built = ledger.build(kw.pop("mode", "quick"), only=ids, **kw)
    return {c["id"]: (c["verdict"], {x["cell"]: x["verdict"] for x in c["cells"]})
            for c in built["claims"]}


def test_theorem_negative_control_a_family_whose_scale_enters_its_shape(monkeypatch):
    """Theorem 3 and Lemma 2 are checked by quadrature in the original coordinates: a
    'family' whose spread is c + (c - 1)^2 (not location-scale, Definition 2 broken, the
    same to first order at c = 1) fails them, while dpbook's code still agrees with the
    quadrature at (0, 1)."""
    import audit
    from scipy import stats

    before = cell_verdicts(("theorem-3", "lemmas-1-2"))
    assert before["theorem-3"][0] == before["lemmas-1-2"][0] == "holds"
    monkeypatch.setitem(audit.SCIPY_FAMILIES, "normal",
                        lambda m, c: stats.norm(loc=m, scale=c + (c - 1) ** 2))
    after = cell_verdicts(("theorem-3", "lemmas-1-2"))
    assert after["theorem-3"][0] == after["lemmas-1-2"][0] == "does not hold"
    assert after["theorem-3"][1]["normal: Theorem 3"] == "does not hold"
    assert after["theorem-3"][1]["normal: dpbook's fisher_exact"] == "holds"
    assert after["lemmas-1-2"][1] == {"normal": "does not hold", "laplace": "holds",
                                      "student_t": "holds"}


def _defective(kind):
    """A release with one planted defect, in its two forms (the vectorised `release`
    and Algorithm 1's `release_one`), drawing the same noise stream as the shipped ones."""
    def move(x, l, r, eps):
        return {"no clipping": (x, (r - l) / eps),
                "noise scaled by half the width": (np.clip(x, l, r), (r - l) / (2 * eps)),
                "the sqrt(2) slip": (np.clip(x, l, r), (r - l) / (eps * 2**0.5))}[kind]

    def release(x, l, r, eps, rng, mechanism="laplace"):
        c, b = move(np.asarray(x, float), l, r, eps)
        return c + b * rng.laplace(0.0, 1.0, size=np.shape(c))

    def release_one(x, l, r, eps, rng, mechanism="laplace"):
        c, b = move(x, l, r, eps)
        return float(c + b * rng.laplace(0.0, 1.0, size=()))

    return release, release_one


@pytest.mark.parametrize("kind", ["no clipping", "noise scaled by half the width",
                                  "the sqrt(2) slip"])
def test_privacy_negative_control_a_release_that_is_not_eps_dp(monkeypatch, kind):
    """Theorem 2 on the shipped release and the empirical audit each flip to 'does not
    hold' under a release that forgets to clip, scales its noise by the wrong width or
    by the authors' code's (r - l)/(eps sqrt 2); and the audit cells themselves flip,
    not only the tie between the shipped and the vectorised release."""
    ids = ("theorem-2", "privacy-audit")
    before = cell_verdicts(ids)
    assert before["theorem-2"][0] == before["privacy-audit"][0] == "holds"
    from dpbook.model import mechanisms
    from dpbook.privacy import population

    release, release_one = _defective(kind)
    monkeypatch.setattr(mechanisms, "release", release)
    monkeypatch.setattr(population, "release_one", release_one)
    after = cell_verdicts(ids)
    assert after["theorem-2"][0] == after["privacy-audit"][0] == "does not hold"
    audit_cells = after["privacy-audit"][1]
    assert audit_cells["the shipped release equals the audited one"] == "holds"
    flipped = [c for c, v in audit_cells.items() if v == "does not hold"]
    assert flipped and all(c.startswith("ε") for c in flipped)
    if kind == "no clipping":
        assert all(c.endswith("beyond") for c in flipped)


def section6_trajectories(est, n=100, fast=0.3, seed=1):
    """Trajectories as a Section 6 store holds them, for the runs of ``est``: the
    adaptive SMC's posterior sd ``fast`` times the fixed interval's at every t, both
    shrinking as 1/sqrt(t), means within a posterior sd of the truth; distinct particles
    and a healthy ESS; releases of N(50, 10) through [30, 70]."""
    rng = np.random.default_rng(seed)
    t = np.arange(1, n + 1)
    tr = {}
    for (m, e, run), _ in est.groupby(["method", "eps", "run"]):
        scale = fast if m == "smc-adaptive" else 1.0
        arr = {"ess": np.full(n, 500.0), "y": rng.normal(50, 10**0.5, n),
               "l": np.full(n, 30.0), "r": np.full(n, 70.0),
               "snapshot_mu": rng.normal(50, 1, (2, 200))}
        for p, true in (("mu", 50.0), ("sigma", 10**0.5)):
            sd = scale * 3 / np.sqrt(t)
            arr[f"sd_{p}"] = sd
            arr[f"mean_{p}"] = true + sd * rng.normal() * 0.5
        tr[m, e, run] = arr
    return tr


FIG2 = ("figure-2-concentrates", "figure-2-quickly", "figure-2-spread")


def test_experiment_negative_control_figure_2_over_time_flips_when_the_methods_swap():
    est = section6_store()
    tr = section6_trajectories(est)
    built = ledger.build("full", stores={"paper": (est, tr)}, only=FIG2)
    assert [c["verdict"] for c in built["claims"]] == ["holds"] * 3
    swapped = {(("smc-fixed" if m == "smc-adaptive" else "smc-adaptive"
                 if m == "smc-fixed" else m), e, run): a for (m, e, run), a in tr.items()}
    after = {c["id"]: c["verdict"] for c in ledger.build(
        "full", stores={"paper": (est, swapped)}, only=FIG2)["claims"]}
    assert after == {"figure-2-concentrates": "does not hold",
                     "figure-2-quickly": "does not hold", "figure-2-spread": "holds"}
    # spread that grows over time fails the spread claim
    grown = {k: {**a, "sd_mu": a["sd_mu"][::-1]} for k, a in tr.items()}
    (c,) = ledger.build("full", stores={"paper": (est, grown)},
                        only=("figure-2-spread",))["claims"]
    assert c["verdict"] == "does not hold"


def test_experiment_negative_control_figure_3_inconclusive_branch_and_overall_verdict():
    """No difference between SMC-adaptive and SMC-non-adaptive (the same spread) makes
    those cells inconclusive and the statement inconclusive; a difference the other way
    makes it 'does not hold'."""
    est = section6_store()
    assert ledger.build("full", stores={"paper": (est, None)}, only=("figure-3",))[
        "claims"][0]["verdict"] == "holds"
    rng = np.random.default_rng(5)
    tie = est.copy()
    adaptive = tie.method == "smc-adaptive"
    for p, true in (("mu", 50.0), ("sigma", 10**0.5)):
        tie.loc[adaptive, f"{p}_hat"] = true + rng.normal(size=int(adaptive.sum()))
    (c,) = ledger.build("full", stores={"paper": (tie, None)}, only=("figure-3",))["claims"]
    assert c["verdict"] == "inconclusive"
    assert "inconclusive" in {x["verdict"] for x in c["cells"]}
    assert "does not hold" not in {x["verdict"] for x in c["cells"]}
    assert all(x["evidence"]["ratio detected with 80% power"]["value"] < 1 for x in c["cells"])


def test_algorithm_negative_control_collapsed_particles_fail_the_guard():
    est = section6_store()
    tr = section6_trajectories(est)
    ids = ("resample-move-guard",)
    assert ledger.build("full", stores={"paper": (est, tr)}, only=ids)["claims"][0][
        "verdict"] == "holds"
    collapsed = {k: {**a, "snapshot_mu": np.full((2, 200), 50.0)} for k, a in tr.items()}
    assert ledger.build("full", stores={"paper": (est, collapsed)}, only=ids)["claims"][0][
        "verdict"] == "does not hold"


def test_algorithm_negative_control_a_theta_move_that_is_not_invariant(monkeypatch):
    """Algorithm 3's θ move replaced by one whose σ is 10% short of the conditional
    draw (a family that overrides the Gibbs move, so the SMC runs it): the SMC's
    posterior no longer matches eq. (5) and the claim flips."""
    import claims

    from dpbook.model.families.normal import Normal

    class Shrunk(Normal):
        def gibbs(self, rng, theta, x):
            out = super().gibbs(rng, theta, x)
            out[:, 1] *= 0.9
            return out

    monkeypatch.setattr(claims, "INVARIANT_FAMILY", Shrunk())
    (c,) = ledger.build("quick", only=("algorithm-3-invariant",))["claims"]
    assert c["verdict"] == "does not hold"
    assert {x["cell"]: x["verdict"] for x in c["cells"]}["σ"] == "does not hold"


@pytest.mark.parametrize("slopes, expect", [
    ({"smc-slope": 2.0, "subset-slope": 1.0, "gradient-slope": 1.0}, "holds"),
    ({"smc-slope": 1.0, "subset-slope": 1.0, "gradient-slope": 1.0}, "does not hold"),
    ({"smc-slope": 2.0, "subset-slope": 1.9, "gradient-slope": 1.0}, "does not hold"),
    ({"smc-slope": 2.0, "subset-slope": 1.0, "gradient-slope": 2.0}, "does not hold")])
def test_cost_negative_control_slopes_that_break_the_cost_claims(monkeypatch, slopes, expect):
    """The cost claims read chapter 9's glued slopes: a quadratic SMC, a linear subset
    SMC and a linear gradient method hold; any one of them off flips its claim."""
    monkeypatch.setattr(ledger.Context, "glued", lambda self, chapter, key: slopes[key])
    built = ledger.build("full", only=("cost-smc", "cost-subset", "cost-gradient"))
    verdicts = {c["verdict"] for c in built["claims"]}
    assert verdicts == {"holds"} if expect == "holds" else "does not hold" in verdicts


# ---- every other rule can fail: a planted defect per claim ------------------------------

def one_verdict(cid, mode="quick", **kw):
    (c,) = ledger.build(mode, only=(cid,), **kw)["claims"]
    return c["verdict"]


def test_theorem_negative_control_an_algorithm_1_that_reads_a_hidden_value(monkeypatch):
    """Proposition 1's replay: an Algorithm 1 whose seed depends on the population's
    hidden values (which the replay's differ from) no longer gives bit-identical runs."""
    import dpbook.online as online

    assert one_verdict("proposition-1") == "holds"
    real = online.run_online

    def leaky(population, policy, n, particles, seed=None, **kw):
        peek = int(abs(np.sum(getattr(population, "values", [0.0]))) * 1000) % 7
        return real(population, policy, n, particles, seed=seed + peek, **kw)

    monkeypatch.setattr(online, "run_online", leaky)
    assert one_verdict("proposition-1") == "does not hold"


def _patch_fisher(monkeypatch, change):
    """dpbook.fisher.fisher_exact with ``change(F, l, r, eps)`` applied to its output."""
    import dpbook.fisher as fisher

    real = fisher.fisher_exact

    def planted(l, r, eps, *a, **k):
        return change(np.asarray(real(l, r, eps, *a, **k), float), np.asarray(l, float),
                      np.asarray(r, float), eps)

    monkeypatch.setattr(fisher, "fisher_exact", planted)


def test_section_5_negative_controls_on_the_fisher_information(monkeypatch):
    import claims

    assert one_verdict("best-interval-unique") == "holds"
    assert one_verdict("exact-fisher") == "does not reproduce"
    # a second maximiser, the mirror of a bump at (a, b) = (-1.2, 0.3)
    def bump(F, l, r, eps):
        hill = sum(np.exp(-((l - a) ** 2 + (r - b) ** 2) / 0.02) for a, b in
                   ((-1.2, 0.3), (-0.3, 1.2)))
        return F * (1 + 5 * hill)[..., None, None]

    with monkeypatch.context() as m:
        _patch_fisher(m, bump)
        assert one_verdict("best-interval-unique") == "does not hold"
    with monkeypatch.context() as m:  # eq. (7) off by 1e-6: the two quadratures disagree
        _patch_fisher(m, lambda F, l, r, eps: F * (1 + 1e-6))
        assert one_verdict("exact-fisher") == "holds"
    # the best intervals: the paper's found, or an asymmetric one, or narrowing with eps
    paper = {e: {"a": -b, "b": b, "score": 1.0} for e, b in ledger.PAPER_B.items()}
    with monkeypatch.context() as m:
        m.setattr(claims, "_best", lambda e: paper[e])
        _patch_fisher(m, lambda F, l, r, eps: np.ones_like(F))
        assert one_verdict("best-intervals") == "holds"
        assert one_verdict("best-interval-widens") == "holds"
        m.setattr(claims, "_best", lambda e: {**paper[e], "a": -1.0})
        assert one_verdict("best-interval-symmetric") == "does not hold"
        m.setattr(claims, "_best", lambda e: {**paper[e], "b": 1 / e, "a": -1 / e})
        assert one_verdict("best-interval-widens") == "does not hold"


def test_section_5_negative_control_information_that_grows_as_eps_falls(monkeypatch):
    import dpbook.fisher as fisher

    assert one_verdict("fisher-falls-with-eps") == "holds"
    real = fisher.fisher_grid

    class Inverted:
        def __init__(self, eps):
            self.g, self.eps = real(eps), eps

        def scores(self):
            return self.g.scores() / self.eps**2

    monkeypatch.setattr(fisher, "fisher_grid", Inverted)
    assert one_verdict("fisher-falls-with-eps") == "does not hold"


def test_algorithm_negative_controls_biased_estimators(monkeypatch):
    """eq. (8) 10% high fails the pooled z; an exact score 20% off fails Algorithm 4."""
    import dpbook.fisher as fisher
    import dpbook.likelihood.normal_laplace as nl

    real_mc, real_score = fisher.fisher_mc, nl.score

    def high(*a, **k):
        import dataclasses

        est = real_mc(*a, **k)
        return dataclasses.replace(est, F=est.F * 1.1)

    with monkeypatch.context() as m:
        m.setattr(fisher, "fisher_mc", high)
        assert one_verdict("eq-8") == "does not hold"
    with monkeypatch.context() as m:
        m.setattr(nl, "score", lambda *a: 1.2 * np.asarray(real_score(*a)))
        assert one_verdict("algorithm-4") == "does not hold"


def test_algorithm_negative_control_an_exact_posterior_that_ignores_the_noise(monkeypatch):
    """The reference posterior computed as if the noise were 100 times smaller: the
    SMC's means fall outside its (too narrow) posterior."""
    import dpbook.posterior as posterior

    assert one_verdict("gaussian-mechanism") == "holds"
    real = posterior.exact_posterior
    monkeypatch.setattr(posterior, "exact_posterior",
                        lambda y, l, r, eps, **k: real(y, l, r, 100 * eps, **k))
    assert one_verdict("gaussian-mechanism") == "does not hold"


def calibration_store(n, squeeze=1.0, seed=3):
    """PIT values of every method of chapters 8 and 11, uniform (a calibrated posterior)
    or pushed towards 0 and 1 by ``squeeze`` (a posterior too narrow) for those that
    should fail; n replications per eps."""
    from scipy import stats

    rng = np.random.default_rng(seed)
    rows = []
    for method in ("smc-adaptive", "smc-fixed", "exact", "naive", "original-code",
                   "central", "central-private", "central-naive"):
        bad = method in ("naive", "original-code", "central-naive")
        for eps in ledger.PAPER_EPS:
            z = rng.normal(size=(n, 2)) * (squeeze if bad else 1.0)
            u = stats.norm.cdf(z)
            rows += [dict(method=method, eps=eps, n=50, mu=a, sigma=b) for a, b in u]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("n, squeeze, expect", [
    (3000, 3.0, "holds"),      # enough replications to see a sd off by 1.5
    (100, 3.0, "inconclusive"),  # too few: a non-rejection is not 'calibrated'
    (3000, 1.0, "inconclusive")])  # the should-fail methods not seen to fail
def test_experiment_negative_control_calibration_and_its_power(n, squeeze, expect):
    df = calibration_store(n, squeeze)
    stores = {"calibration": df, "central-calibration": df}
    for cid in ("calibration", "central-calibration"):
        assert one_verdict(cid, "full", stores=stores) == expect
    assert one_verdict("smc-targets-eq-5", "full", stores=stores) == (
        "holds" if n == 3000 else "inconclusive")
    # a sampler that is not calibrated fails
    broken = df.assign(mu=np.where(df.method == "smc-adaptive", df.mu ** 2, df.mu))
    assert one_verdict("smc-targets-eq-5", "full", stores={"calibration": broken}) == \
        "does not hold"


def test_experiment_negative_control_exploration_that_never_shrinks():
    est = section6_store()
    tr = section6_trajectories(est, n=200)
    rng = np.random.default_rng(2)
    shrinking = {k: {**a, "l": a["l"] + rng.normal(size=200) * np.linspace(5, 0.1, 200)}
                 for k, a in tr.items()}
    flat = {k: {**a, "l": a["l"] + rng.normal(size=200)} for k, a in tr.items()}
    assert one_verdict("exploration-shrinks", "full", stores={"paper": (est, shrinking)}) \
        == "holds"
    assert one_verdict("exploration-shrinks", "full", stores={"paper": (est, flat)}) \
        == "does not hold"


def test_authors_code_negative_control_a_slip_that_changes_nothing():
    """The same store as the 'original code' changes nothing: inconclusive, not holds."""
    est = section6_store()
    moved = est.assign(sigma_hat=np.where(est.method == "smc-fixed",
                                          est.sigma_hat + 3.0, est.sigma_hat))
    assert one_verdict("original-code", "full", stores={
        "paper": (est, None), "original-code": (moved, None)}) == "holds"
    assert one_verdict("original-code", "full", stores={
        "paper": (est, None), "original-code": (est, None)}) == "inconclusive"


def test_experiment_negative_control_accuracy_that_falls_with_eps():
    est = section6_store()
    # errors shrinking with eps for both SMC methods: holds; growing: does not hold
    def scaled(power):
        out = est.copy()
        for p, true in (("mu", 50.0), ("sigma", 10**0.5)):
            out[f"{p}_hat"] = true + (out[f"{p}_hat"] - true) * out.eps ** power
        return out

    assert one_verdict("figure-2-eps", "full", stores={"paper": (scaled(-1.0), None)}) \
        == "holds"
    assert one_verdict("figure-2-eps", "full", stores={"paper": (scaled(1.0), None)}) \
        == "does not hold"


def test_algorithm_negative_control_mhaar_far_from_the_exact_posterior():
    est = section6_store(runs=3)
    tr = section6_trajectories(est, n=50)
    far = est.assign(mu_hat=np.where(est.method == "mhaar", 80.0, est.mu_hat))
    assert one_verdict("mhaar-agrees", "full", stores={"paper": (far, tr)}) == \
        "does not hold"


@pytest.mark.parametrize("n, pit, expect", [(2000, "uniform", "holds"),
                                            (100, "uniform", "inconclusive"),
                                            (2000, "narrow", "does not hold")])
def test_beyond_negative_control_mhaar_coverage_and_its_power(n, pit, expect):
    """Coverage of MHAAR's 90% intervals: near 0.90 with enough replications holds, with
    too few is inconclusive (a departure of 0.05 unseen), far from it does not hold."""
    rng = np.random.default_rng(4)
    u = rng.random((n, 2))
    if pit == "narrow":  # a posterior too narrow: PIT values pushed to 0 and 1
        u = np.where(u < 0.5, u**2 * 2, 1 - (1 - u) ** 2 * 2) * 1.0
    df = pd.DataFrame(dict(method="mhaar", eps=1.0, n=50, mu=u[:, 0], sigma=u[:, 1],
                           mu_iqr=1.0, sigma_iqr=1.0))
    assert one_verdict("mhaar-coverage", "full", stores={"calibration-mhaar-long": df}) \
        == expect


def _lockin_table(adaptive, fixed, guarded, runs=400, seed=0):
    """lockin.table of synthetic paired runs: per (model, eps) location errors of the
    adaptive policy and the fixed interval, each a multiple of one draw per run shared
    by the policies (paired, as the chapter's runs are) plus its own, and the guard's, a
    multiple of the adaptive one's (its draws are the adaptive run's until it acts)."""
    sys.path.insert(0, str(BOOK.parent / "benchmarks"))
    import lockin

    rng = np.random.default_rng(seed)
    rows = []
    for model in ("t1", "normal"):
        for eps in (1.0, 5.0):
            z = rng.standard_normal(runs)
            err = {"adaptive": adaptive * (z + rng.standard_normal(runs)),
                   "fixed": fixed * (z + rng.standard_normal(runs))}
            err["guarded"] = guarded / adaptive * err["adaptive"]  # its draws until it acts
            for policy, e in err.items():
                if model == "normal" and policy == "fixed":
                    continue
                rows += [dict(model=model, eps=eps, policy=policy, run=i, error=v,
                              scale_true=3.0, sigma_true=3.0) for i, v in enumerate(e)]
    return lockin.table(pd.DataFrame(rows))


@pytest.mark.parametrize("adaptive, guarded, expect", [
    (0.5, 0.5, ("holds", "holds")),
    (2.0, 2.0, ("does not hold", "holds")),      # adaptive worse than the fixed interval
    (0.5, 0.8, ("holds", "does not hold"))])     # a guard that changes the normal model
def test_beyond_negative_control_lockin_and_guard(monkeypatch, adaptive, guarded, expect):
    import claims

    table = _lockin_table(adaptive, 1.0, guarded)
    monkeypatch.setattr(claims, "_lockin", lambda ctx: table)
    built = ledger.build("full", only=("heavy-tail-lockin", "guard-normal"))
    assert tuple(c["verdict"] for c in built["claims"]) == expect


def test_beyond_lockin_too_few_runs_is_inconclusive(monkeypatch):
    import claims

    table = _lockin_table(0.9, 1.0, 0.9, runs=5)  # 5 runs cannot see 25% either way
    monkeypatch.setattr(claims, "_lockin", lambda ctx: table)
    built = ledger.build("full", only=("heavy-tail-lockin",))
    assert built["claims"][0]["verdict"] == "inconclusive"


# ---- chapter 14 (two dimensions) --------------------------------------------------------
def test_beyond_negative_control_a_box_release_scaled_by_its_widest_side(monkeypatch):
    """The two-dimensional privacy claim holds for the shipped release and fails for noise
    scaled by the box's largest width (its L-infinity sensitivity) instead of W."""
    built = ledger.build("full", only=("two-d-privacy",))
    assert built["claims"][0]["verdict"] == "holds"
    monkeypatch.setattr("dpbook.multivariate.release.box_scale",
                        lambda l, r, eps, mech="laplace": np.max(r - l) / eps)
    built = ledger.build("full", only=("two-d-privacy",))
    assert built["claims"][0]["verdict"] == "does not hold"


@pytest.mark.parametrize("glued, expect", [
    ({"outside": 0, "p": 0.3, "reps": 1000}, ("holds", "holds")),
    ({"outside": 1, "p": 1e-5, "reps": 1000}, ("does not hold", "does not hold")),
    ({"outside": 0, "p": 0.3, "reps": 100}, ("holds", "inconclusive"))])  # too few to see
def test_beyond_negative_control_two_d_sampler_checks(monkeypatch, glued, expect):
    values = {"two-d-exact-outside": glued["outside"], "two-d-exact-comparisons": 12,
              "two-d-exact-z": 1.0, "two-d-sbc-min-p": glued["p"],
              "two-d-sbc-reps": glued["reps"]}
    monkeypatch.setattr(ledger.Context, "glued", lambda self, chapter, key: values[key])
    built = ledger.build("full", only=("two-d-factorised", "two-d-calibration"))
    assert tuple(c["verdict"] for c in built["claims"]) == expect


@pytest.mark.parametrize("adaptive, runs, expect", [
    (0.5, 100, "holds"), (2.0, 100, "does not hold"), (0.9, 5, "inconclusive")])
def test_beyond_negative_control_two_d_adaptive(monkeypatch, adaptive, runs, expect):
    """Paired errors with the adaptive box's spread ``adaptive`` times the fixed box's."""
    import claims

    sys.path.insert(0, str(BOOK.parent / "benchmarks"))
    import two_d

    rng = np.random.default_rng(1)
    rows = []
    for eps in (1.0, 10.0):
        for design, spread in (("adaptive", adaptive), ("fixed", 1.0)):
            for run in range(runs):
                rows.append({"design": design, "eps": eps, "run": run,
                             **{f"{p}_q50": spread * rng.normal() for p in two_d.PARAMS},
                             **{f"{p}_true": 0.0 for p in two_d.PARAMS}})
    table = two_d.table(pd.DataFrame(rows))
    monkeypatch.setattr(claims, "_two_d", lambda ctx: table)
    built = ledger.build("full", only=("two-d-adaptive",))
    assert built["claims"][0]["verdict"] == expect
