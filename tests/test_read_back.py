"""Issue 55: what dpbook reads back (a store's manifest, its task files, a curator state's
meta records) is checked by shape: valid JSON of another type, or without a key its
reader needs, is one line naming the file (it was an AttributeError or a KeyError)."""

import hashlib
import json
import shutil
import sqlite3

import numpy as np
import pytest

from dpbook import experiment as ex
from dpbook.cli import main
from dpbook.experiment.store import StoreWarning
from dpbook.online.curator_state import load_curator, save_curator
from dpbook.online.streams import make_curator

SMALL = dict(eps=(2,), runs=1, n=6, particles=20, methods=("smc-fixed",), progress=False,
             workers=1)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    out = tmp_path_factory.mktemp("store") / "ref"
    ex.run_experiment(out=out, **SMALL)
    return out


def _copy(store, tmp_path):
    out = tmp_path / "s"
    shutil.copytree(store, out)
    (out / "estimates.parquet").unlink()
    return out


@pytest.mark.parametrize("change, needle", [
    (lambda m: [1, 2], "manifest.json is an array, not a JSON object"),
    (lambda m: "x", "manifest.json is a string"),
    (lambda m: None, "manifest.json is null"),
    (lambda m: {k: v for k, v in m.items() if k != "config"}, "has no 'config'"),
    (lambda m: {**m, "config": [m["config"]]}, "'config' is an array, not an object"),
    (lambda m: {**m, "intervals": []}, "'intervals' is an array"),
    # what only the reader of the results needs (the experiment: another configuration)
    (lambda m: {**m, "config": {k: v for k, v in m["config"].items() if k != "methods"}},
     "its config has no 'methods'"),
    (lambda m: {**m, "config": {**m["config"], "runs": "1"}}, "its config: 'runs' is a s")])
def test_a_manifest_of_another_shape_is_one_line(store, tmp_path, capsys, change, needle):
    out = _copy(store, tmp_path)
    m = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps(change(m)))
    with pytest.raises(ValueError, match=needle) as e:
        ex.load_results(out)
    assert str(out / "manifest.json") in str(e.value)
    if needle.startswith("its config"):
        return
    assert main(["experiment", "--out", str(out), "--runs", "1", "--n", "6", "--particles",
                 "20", "--eps", "2", "--workers", "1", "--no-progress", "--methods",
                 "smc-fixed"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "manifest.json" in err, err


@pytest.mark.parametrize("change, needle", [
    (lambda r: [r], "its row is an array, not a JSON object"),
    (lambda r: {k: v for k, v in r.items() if k != "mu_hat"}, "its row has no 'mu_hat'"),
    (lambda r: {**r, "sigma_hat": [1.0]}, "'sigma_hat' is an array, not a number"),
    (lambda r: {**r, "seconds": {"s": 1}}, "'seconds' is an object")])
def test_a_task_row_of_another_shape_is_named_and_not_used(store, tmp_path, change, needle):
    out = _copy(store, tmp_path)
    path = next((out / "tasks").glob("*.npz"))
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    arrays["row_json"] = np.array(json.dumps(change(json.loads(str(arrays["row_json"])))))
    np.savez_compressed(path, **arrays)
    with pytest.warns(StoreWarning, match=needle) as w:
        df, _ = ex.load_results(out)
    assert len(df) == 0 and str(path) in str(w[0].message)


def _forge(path, key, change):
    """The meta record ``key`` changed, with its checksum recomputed (a forged file)."""
    con = sqlite3.connect(path)
    text = json.dumps(change(json.loads(con.execute(
        "SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0])))
    sha = hashlib.sha256(json.dumps(["meta", key, text]).encode()).hexdigest()
    con.execute("UPDATE meta SET value = ?, sha256 = ? WHERE key = ?", (text, sha, key))
    con.commit()
    con.close()


@pytest.mark.parametrize("key, change, needle", [
    ("config", lambda v: [v], "its config is an array, not a JSON object"),
    ("head", lambda v: "x", "its head is a string"),
    ("rng", lambda v: 3, "its rng is a number"),
    ("config", lambda v: {k: x for k, x in v.items() if k != "family"},
     "its config has no 'family'"),
    ("config", lambda v: {**v, "options": []}, "'options' is an array, not an object"),
    ("config", lambda v: {**v, "policy": {}}, "its config's policy has no 'name'"),
    ("head", lambda v: {**v, "releases": "0"}, "'releases' is a string, not a number")])
def test_a_curator_state_s_meta_of_another_shape_is_one_line(tmp_path, capsys, key, change,
                                                            needle):
    state = tmp_path / "c.db"
    save_curator(make_curator(1.0, "smc-marginal", n_particles=20), state)
    _forge(state, key, change)
    with pytest.raises(ValueError, match=needle) as e:
        load_curator(state)
    assert str(e.value).startswith(f"{state}: ")
    assert main(["curator", "status", str(state)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and str(state) in err, err
