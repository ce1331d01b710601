"""Bad or extreme input gives a one-line error naming the problem (exit status 2 on the
command line, ValueError in Python), never a traceback or a silently wrong answer:
data files, sizes that cannot fit in memory, random generators, a family's theta.  Other
input that is accepted but means something else is in test_one_line_errors.py; the
store's faults are in test_store.py."""

import numpy as np
import pytest

from dpbook.cli import main
from dpbook.model.mechanisms import release
from dpbook.validation import available_memory


def _cli_error(capsys, *args) -> str:
    assert main(list(args)) == 2
    err = capsys.readouterr().err
    assert err.startswith("dpbook: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("kind", ["directory", "utf16", "binary", "latin1"])
def test_data_file_problems_are_named(tmp_path, capsys, kind):
    path = tmp_path / "data.csv"
    if kind == "directory":
        path.mkdir()
        want = "is a directory"
    elif kind == "utf16":
        path.write_bytes("y,l,r\n1,0,2\n".encode("utf-16"))
        want = "UTF-16"
    elif kind == "binary":
        path.write_bytes(bytes(range(256)) * 4)
        want = "binary file"
    else:
        path.write_bytes("y,l,r\n1,0,2\n# caf\xe9\n".encode("latin-1"))
        want = "not UTF-8"
    err = _cli_error(capsys, "posterior", "--method", "exact", "--eps", "1", str(path))
    assert str(path) in err and want in err


@pytest.mark.slow
def test_utf8_with_byte_order_mark_is_read(tmp_path, capsys):
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffy,l,r\n1,0,2\n0.5,0,2\n".encode("utf-8"))
    plain = tmp_path / "plain.csv"
    plain.write_text("y,l,r\n1,0,2\n0.5,0,2\n")
    outs = []
    for p in (path, plain):
        assert main(["posterior", "--method", "exact", "--eps", "1", str(p), "--json"]) == 0
        outs.append(capsys.readouterr().out.split('"seconds"')[0])
    assert outs[0] == outs[1]


@pytest.mark.parametrize("args", [
    ["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc", "--M", "10" * 7],
    ["fisher", "--eps", "1", "--a", "-1", "--b", "1", "--method", "mc", "--K", "10" * 7],
    ["best-interval", "--eps", "1", "--grid", "100000000"],
    ["best-interval", "--eps", "1", "--grid", "1000000", "--family", "student_t"],
    ["experiment", "--n", "10000000000", "--runs", "1", "--eps", "1", "--no-progress"],
    ["experiment", "--particles", "10000000000", "--runs", "1", "--n", "10", "--eps", "1"],
    ["experiment", "--mhaar-iters", "10" * 7, "--methods", "mhaar", "--runs", "1"],
])
def test_work_that_cannot_fit_is_refused_before_allocating(tmp_path, capsys, args):
    if args[0] == "experiment":
        args = args + ["--out", str(tmp_path / "x")]
    err = _cli_error(capsys, *args)
    assert "would need about" in err and "available" in err
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("method, extra", [("smc", ["--particles", "10" * 6]),
                                           ("mhaar", ["--iters", "10" * 7])])
def test_posterior_sizes_that_cannot_fit(tmp_path, capsys, method, extra):
    data = tmp_path / "d.csv"
    data.write_text("y,l,r\n1,0,2\n")
    err = _cli_error(capsys, "posterior", "--method", method, "--eps", "1", str(data), *extra)
    assert "would need about" in err


def test_available_memory_is_plausible():
    assert 1 << 20 < available_memory() < 1 << 50


def test_release_accepts_what_default_rng_accepts():
    x = np.array([0.3, 1.7, -2.0])
    a = release(x, -1, 1, 2.0, 5)
    b = release(x, -1, 1, 2.0, np.random.default_rng(5))
    c = release(x, -1, 1, 2.0, np.random.SeedSequence(5))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)
    assert release(x, -1, 1, 2.0, None).shape == (3,)


@pytest.mark.parametrize("bad", ["seed", 1.5, -1, True, [1, 2], object()])
def test_release_rejects_other_rngs(bad):
    with pytest.raises(ValueError, match="rng"):
        release([0.0], -1, 1, 1.0, bad)


_BAD_THETA = [("normal", (0.0, -1.0), "sigma"), ("normal", (0.0, 0.0), "sigma"),
              ("normal", (float("nan"), 1.0), "mu"), ("normal", (0.0, float("inf")), "sigma"),
              ("laplace", (0.0, -1.0), "scale"), ("student_t", (0.0, 0.0), "scale"),
              ("poisson", (0.0,), "lam"), ("poisson", (-1.0,), "lam"),
              ("normal", (0.0, np.array([1.0, -2.0])), "sigma")]


@pytest.mark.parametrize("name, theta, param", _BAD_THETA)
@pytest.mark.parametrize("primitive", ["logpdf", "score", "sample", "cdf", "sf", "ppf",
                                       "cdf_grad", "from_latent"])
def test_family_primitives_validate_theta(name, theta, param, primitive):
    from dpbook.model.families import get_family

    fam = get_family(name)
    first = np.random.default_rng(0) if primitive == "sample" else 0.5
    with pytest.raises(ValueError, match=f"^{param} of the {name} family must be"):
        getattr(fam, primitive)(first, *theta)


def test_a_family_defined_outside_dpbook_is_checked_too():
    from dpbook.model.families import LocationScaleFamily

    class Logistic(LocationScaleFamily):
        name = "logistic"

        def base_logpdf(self, z):
            return -z - 2 * np.log1p(np.exp(-z))

    assert np.isfinite(Logistic().logpdf(0.3, 0.0, 2.0))
    with pytest.raises(ValueError, match="scale of the logistic family"):
        Logistic().logpdf(0.3, 0.0, -2.0)
    with pytest.raises(ValueError, match="has 2 parameter"):
        Logistic().logpdf(0.3, 0.0)


@pytest.mark.slow
def test_collapsed_smc_and_frozen_mhaar_are_reported(capsys):
    """Near-noiseless releases (eps = 1e6) of two individuals: the SMC weights collapse
    and the MHAAR chain never moves; both say so instead of printing sd 0 silently."""
    import warnings

    from dpbook.mhaar import mhaar
    from dpbook.online.ibis import marginal_posterior
    from dpbook.smc import smc_posterior
    from dpbook.validation import ReliabilityWarning

    y, l, r = np.array([1.0, 1.5]), np.zeros(2), np.full(2, 2.0)
    with pytest.warns(ReliabilityWarning, match="collapsed onto one particle"):
        smc_posterior(y, l, r, 1e6, n_particles=200, seed=0)
    with pytest.warns(ReliabilityWarning, match="accepted none"):
        mhaar(y, l, r, 1e6, n_iter=2000, seed=0)
    with pytest.warns(ReliabilityWarning, match="fewer than 10 particles.*n_particles"):
        smc_posterior(y, l, r, 1.0, n_particles=4, seed=1)  # too few for a summary
    with pytest.warns(ReliabilityWarning, match="the marginal SMC's weights.*--particles"):
        marginal_posterior(y, l, r, 1.0, n_particles=2, seed=1)  # was silent
    with warnings.catch_warnings():  # an ordinary run stays quiet
        warnings.simplefilter("error", ReliabilityWarning)
        smc_posterior(y, l, r, 1.0, n_particles=200, seed=0)
        marginal_posterior(y, l, r, 1.0, n_particles=200, seed=0)
        mhaar(y, l, r, 1.0, n_iter=5000, seed=0)  # 2000: too short (chain ESS 4.5 < 5)
