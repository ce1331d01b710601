"""The curator's state file (``dpbook curator``): a SQLite database (Python's ``sqlite3``,
rollback journal) in which every save is one transaction, so that a crash at any instant,
``kill -9`` included, loses at most the save under way, and the file alone is the state
once a save has returned.  A read-only file or directory, a full disk, are an OSError
that leaves the file as it was.  Its tables (documented for
other programs in the book's page Running dpbook):

* ``releases`` (id, y, l, r, eps, time, sha256): the releases taken, in order,
  append-only (triggers refuse an update or a delete);
* ``intervals`` (id, l, r, k, time, sha256): [l, r] published for k individuals, or,
  with k < 0, -k of its releases withdrawn; the view ``outstanding`` (l, r, k) is what
  is still expected;
* ``meta`` (key, value, sha256): ``config``, what rebuilds the curator (JSON: method,
  eps, family by name or ``module:Class`` / ``path/to/file.py:Class`` with its options
  and prior, mechanism, particles, the posterior's seed, policy); ``rng``, the state of
  the policy's generator; ``head``, the file's id and its row counts;
* ``snapshots`` (releases, time, state, particles, sha256): the posterior after the
  first ``releases`` releases, its plain values as JSON and its arrays as an ``.npz``,
  written in the transaction that adds those releases.

Every row carries the sha256 of its values, and loading checks them: a snapshot that
fails (or is missing) is rebuilt from the release log, the record of truth (the
posterior is a function of the releases and the seed: the same posterior bit for bit);
any other damage, or a file that is not a curator state, is a one-line ValueError.
Loading runs no code from the file (values, JSON, arrays without pickles; a family given
as ``module:Class`` or a file is imported again from there).  A state file of the older
format (a pickle) is migrated when first loaded, the old file kept beside it.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import pickle
import shutil
import sqlite3
import sys
import uuid
from collections import Counter
from dataclasses import asdict, is_dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from dpbook.model.families import family_class, family_sha256, get_family
from dpbook.online.gradient import OnlineGradient
from dpbook.online.ibis import MarginalSMC
from dpbook.online.methods import ONLINE_METHODS, get_method
from dpbook.privacy.curator import Curator, absorb
from dpbook.privacy.policies import AdaptivePolicy, FixedPolicy
from dpbook.smc.resample_move import History
from dpbook.validation import check_json, output_file

APPLICATION_ID = 0x64706263  # "dpbc", SQLite's header field application_id
VERSION = 2  # SQLite's user_version; version 1 was a pickle
_SQLITE = b"SQLite format 3\x00"  # the first bytes of a SQLite database
_POLICIES = {"adaptive": AdaptivePolicy, "fixed": FixedPolicy}
_SCHEMA = (
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL, sha256 TEXT NOT NULL)",
    "CREATE TABLE releases (id INTEGER PRIMARY KEY, y REAL NOT NULL, l REAL NOT NULL, "
    "r REAL NOT NULL, eps REAL NOT NULL, time TEXT NOT NULL, sha256 TEXT NOT NULL)",
    "CREATE TRIGGER releases_no_update BEFORE UPDATE ON releases BEGIN "
    "SELECT RAISE(ABORT, 'releases are append-only'); END",
    "CREATE TRIGGER releases_no_delete BEFORE DELETE ON releases BEGIN "
    "SELECT RAISE(ABORT, 'releases are append-only'); END",
    "CREATE TABLE intervals (id INTEGER PRIMARY KEY, l REAL NOT NULL, r REAL NOT NULL, "
    "k INTEGER NOT NULL, time TEXT NOT NULL, sha256 TEXT NOT NULL)",
    "CREATE VIEW outstanding AS SELECT l, r, SUM(k) AS k FROM (SELECT l, r, k FROM "
    "intervals UNION ALL SELECT l, r, -1 FROM releases) GROUP BY l, r HAVING SUM(k) > 0",
    "CREATE TABLE snapshots (releases INTEGER PRIMARY KEY, time TEXT NOT NULL, "
    "state TEXT NOT NULL, particles BLOB NOT NULL, sha256 TEXT NOT NULL)",
)


def save_curator(curator: Curator, path) -> None:
    """Write ``curator`` to the state file ``path`` in one transaction: to the file it
    was loaded from or last saved to, the releases and intervals added since and a
    snapshot of the posterior; anywhere else, a new state (replacing what is there: a
    state in one transaction, any other file through a temporary file and a rename).
    ValueError for a curator that a state cannot rebuild (a method with latent values,
    a policy other than adaptive or fixed, a family defined in ``__main__``)."""
    target = output_file(path)
    config = _config(curator)
    if not target.exists() or _header(target) != _SQLITE:  # seen only once complete
        tmp = target.with_name(target.name + ".tmp")
        for p in _with_journal(tmp):
            p.unlink(missing_ok=True)
        try:
            _write(curator, tmp, config)
        except BaseException as e:  # a full disk, a signal: nothing of it left
            for p in _with_journal(tmp):
                p.unlink(missing_ok=True)
            if isinstance(e, OSError):
                e.filename = str(target)
            raise
        for p in _with_journal(target)[1:]:  # no journal of the file replaced may pair
            p.unlink(missing_ok=True)        # with the new one
        os.replace(tmp, target)
    else:
        _write(curator, target, config)


def load_curator(path, family_changed_ok=False) -> Curator:
    """The curator kept in the state file ``path`` (:func:`save_curator`), ready to go
    on; a pickle of the older format is migrated to a state file first (the pickle kept
    as ``<path>.pickle-v1``).  ValueError (one line) for a missing, foreign or damaged
    file, or a family that cannot be imported again, or whose file is not the one the
    state was made with (its sha256, recorded by states made since issue 55) unless
    ``family_changed_ok``: its releases would be absorbed under two models."""
    path = Path(path)
    try:
        header = _header(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such curator state file") from None
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}") from None
    if header != _SQLITE:
        return _migrate(path)
    try:
        # its journal beside the target of a link
        return _load(os.path.realpath(path), family_changed_ok)
    except OSError:  # the environment's: a full disk, a read-only file (not a damaged one)
        raise
    except Exception as e:  # SQLite's errors, a value of a damaged file, a family's import
        raise ValueError(f"{path}: {e}" if isinstance(e, ValueError) else
                         f"{path}: not a dpbook curator state file, a damaged one, or one "
                         f"whose family fails to import ({type(e).__name__}: {e})") from None


# ---------------------------------------------------------------------------- writing
def _write(curator, path, config):
    post = curator.posterior
    with _transaction(path, write=True) as con:
        bound = getattr(curator, "_state", None)  # (file id, releases, intervals) known
        head = _meta(con, "head") if _ours(con) else None
        if head is None or bound is None or head["id"] != bound[0]:
            for kind, name in con.execute("SELECT type, name FROM sqlite_master WHERE "
                                          "type IN ('table', 'view') AND name NOT LIKE "
                                          "'sqlite_%'").fetchall():
                con.execute(f'DROP {kind} "{name.replace(chr(34), chr(34) * 2)}"')
            for statement in _SCHEMA:
                con.execute(statement)
            con.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            con.execute(f"PRAGMA user_version = {VERSION}")
            _put(con, "config", config)
            head = {"id": uuid.uuid4().hex, "releases": 0, "intervals": 0}
        elif (head["releases"], head["intervals"]) != bound[1:]:
            raise ValueError(f"{path} was changed by another process since this curator "
                             "was loaded from it")
        now = datetime.now(UTC).isoformat()
        rows = [(i, y, l, r, post.eps, now) for i, (y, l, r) in
                enumerate(zip(curator.y, curator.l, curator.r), 1) if i > head["releases"]]
        con.executemany("INSERT INTO releases VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [(*row, _sha("releases", *row)) for row in rows])
        rows = [(i, *iv, now) for i, iv in enumerate(curator.intervals, 1)
                if i > head["intervals"]]
        con.executemany("INSERT INTO intervals VALUES (?, ?, ?, ?, ?, ?)",
                        [(*row, _sha("intervals", *row)) for row in rows])
        if curator.n > head["releases"]:
            state, blob = _encode(post)
            con.execute("DELETE FROM snapshots")
            con.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?)",
                        (curator.n, now, state, blob,
                         _sha("snapshots", curator.n, now, state, blob=blob)))
        head.update(releases=curator.n, intervals=len(curator.intervals))
        _put(con, "head", head)
        _put(con, "rng", curator.rng.bit_generator.state)
    curator._state = (head["id"], head["releases"], head["intervals"])


def _config(curator) -> dict:
    """What rebuilds the curator, as plain values."""
    post, policy, fam = curator.posterior, curator.policy, curator.posterior.family
    method = next((m.name for m in ONLINE_METHODS.values() if not m.latent and type(post)
                   is (OnlineGradient if m.point_estimate else MarginalSMC)), None)
    if method is None:
        names = ", ".join(m.name for m in ONLINE_METHODS.values() if not m.latent)
        raise ValueError(f"a curator state keeps the posterior of a method without latent "
                         f"values ({names}), not a {type(post).__name__}")
    if type(policy) not in _POLICIES.values():
        raise ValueError(f"a curator state keeps an adaptive or fixed policy, not a "
                         f"{type(policy).__name__}")
    if curator.rng.bit_generator.state["bit_generator"] != "PCG64":
        raise ValueError("a curator state keeps a policy generator of numpy's PCG64")
    cls = type(fam)
    if cls.__module__.startswith("dpbook.model.families."):
        spec = cls.name
    elif cls.__module__ == "__main__" or "<locals>" in cls.__qualname__:
        raise ValueError(f"the family {cls.__qualname__} cannot be found again from a "
                         f"state file: define it in a module or a file")
    elif cls.__module__.startswith("dpbook_user_"):  # path/to/file.py:Class
        spec = f"{Path(sys.modules[cls.__module__].__file__).resolve()}:{cls.__qualname__}"
    else:
        spec = f"{cls.__module__}:{cls.__qualname__}"
    prior = getattr(fam, "prior", None)
    seed = getattr(getattr(post, "rng", None), "bit_generator", None)
    seed = getattr(seed, "seed_seq", None)
    return {"method": method, "eps": post.eps, "family": spec,
            **({"family_sha256": family_sha256(cls)} if family_sha256(cls) else {}),
            "options": {k: getattr(fam, k) for k in cls.options},
            "prior": asdict(prior) if is_dataclass(prior) else None,
            "mechanism": post.mechanism, "particles": getattr(post, "n_particles", None),
            "seed": seed and {"entropy": seed.entropy, "spawn_key": list(seed.spawn_key),
                              "pool_size": seed.pool_size},
            "policy": {"name": policy.name, **vars(policy)}}


def _encode(post):
    """The posterior's state: its plain values as JSON and its arrays (lists and its
    history's lists among them) as an ``.npz``; the rest comes from its configuration."""
    plain, arrays = {}, {}
    for k, v in vars(post).items():
        if isinstance(v, np.random.Generator):
            plain[k] = v.bit_generator.state
        elif isinstance(v, (np.ndarray, list)):
            arrays[k] = np.asarray(v)
        elif isinstance(v, History):
            arrays.update({f"{k}.{h}": np.asarray(w) for h, w in vars(v).items()
                           if isinstance(w, list)})
        elif isinstance(v, (bool, int, float, str, dict)):
            plain[k] = v
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return json.dumps(plain), buf.getvalue()


# ---------------------------------------------------------------------------- reading
def _load(path, family_changed_ok=False):
    with _transaction(path, write=False) as con:
        if not _ours(con):
            raise ValueError("not a dpbook curator state file")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version != VERSION:
            raise ValueError(f"curator state version {version}, this dpbook reads "
                             f"version {VERSION}")
        if con.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            raise ValueError("damaged curator state file (SQLite's quick_check fails)")
        config, rng, head = (_meta(con, key) for key in ("config", "rng", "head"))
        releases = _rows(con, "releases", "y, l, r, eps", head["releases"])
        intervals = _rows(con, "intervals", "l, r, k", head["intervals"])
        # as bytes: a damaged snapshot is rebuilt, even when it is no longer UTF-8
        snaps = con.execute("SELECT releases, CAST(time AS BLOB), CAST(state AS BLOB), "
                            "CAST(particles AS BLOB), CAST(sha256 AS BLOB) "
                            "FROM snapshots").fetchall()
    curator = _build(config, family_changed_ok)
    curator.rng.bit_generator.state = rng
    n = len(releases)
    y, l, r = np.array(releases, float).reshape(n, 4)[:, :3].T
    start = 0
    for t, *cols, blob, sha in snaps:  # the one kept, unless it fails its check
        time, state = (c.decode(errors="replace") for c in cols)
        if t <= n and _sha("snapshots", t, time, state, blob=blob).encode() == sha:
            _restore(curator.posterior, state, blob)
            start = t
    if start < n:  # rebuilt from the release log
        absorb(curator.posterior, y[start:], l[start:], r[start:])
    curator.y, curator.l, curator.r = y.tolist(), l.tolist(), r.tolist()
    curator.intervals = [tuple(iv) for iv in intervals]
    out = Counter()
    for li, ri, k in intervals:
        out[(li, ri)] += k
    out.subtract(zip(curator.l, curator.r))
    curator.outstanding = +out
    curator._state = (head["id"], n, len(intervals))
    return curator


def _build(config, family_changed_ok=False) -> Curator:
    """A new curator of this configuration: the posterior before any release."""
    spec, options = config["family"], config["options"]
    if ":" not in spec:
        fam = get_family(spec, **options)
    else:
        try:
            cls = family_class(spec)
        except ValueError as e:
            gone = "no such file" in str(e)
            raise ValueError(f"its family {spec}: {'the file is gone: ' if gone else ''}{e}"
                             ) from None
        then, now = config.get("family_sha256"), family_sha256(cls)
        if then and now != then and not family_changed_ok:
            raise ValueError(f"its family {spec} has changed since the state was made "
                             f"(sha256 {then[:16]} then, {now and now[:16]} now): its "
                             f"releases would be absorbed under two models; "
                             f"--family-changed-ok uses the changed file")
        from dpbook.model.checks import probe_family

        fam = cls(**options)
        probe_family(fam)  # as the command line's init did: not NaN from a changed file
    if config["prior"] is not None:
        fam = fam.with_prior(**config["prior"])
    seed = config["seed"] and np.random.SeedSequence(**config["seed"])
    post = get_method(config["method"]).build(
        config["eps"], fam, config["mechanism"], n_particles=config["particles"] or 1000,
        seed=seed or 0)
    policy = dict(check_json(config["policy"], "its config's policy", {"name": str}))
    policy = _POLICIES[policy.pop("name")](**policy)
    return Curator(post, policy, np.random.Generator(np.random.PCG64()))


def _restore(post, state, blob):
    """Set the posterior's state from :func:`_encode`'s JSON and ``.npz``."""
    attrs = vars(post)
    for k, v in json.loads(state).items():
        if isinstance(attrs.get(k), np.random.Generator):
            attrs[k].bit_generator.state = v
        elif k in attrs:
            attrs[k] = v
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        for name in npz.files:
            k, _, h = name.partition(".")
            owner, key = (vars(attrs[k]), h) if h else (attrs, k)
            owner[key] = (npz[name] if isinstance(owner.get(key), np.ndarray)
                          else npz[name].tolist())


# ---------------------------------------------------------------------------- helpers
# SQLite's codes for what the environment refuses (a read-only file or directory, a full
# disk, an I/O error, a lock held too long): OSError, not a damaged state
_ENVIRONMENT = ("SQLITE_FULL", "SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_IOERR",
                "SQLITE_BUSY", "SQLITE_PERM", "SQLITE_LOCKED")


@contextlib.contextmanager
def _transaction(path, write):
    verb = "write" if write else "read"
    try:
        con = sqlite3.connect(path, isolation_level=None, timeout=60.0)
        try:
            if write:  # a rollback journal: once committed the file alone is the state (a
                # mv or cp of it loses nothing), and no checkpoint can fail after a commit
                con.execute("PRAGMA busy_timeout = 0")  # a state of WAL days, still open
                with contextlib.suppress(sqlite3.OperationalError):  # elsewhere, stays WAL
                    con.execute("PRAGMA journal_mode = DELETE")
                con.execute("PRAGMA busy_timeout = 60000")
                con.execute("PRAGMA synchronous = FULL")
            con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield con
            con.execute("COMMIT")
            verb = "checkpoint"  # committed: only a state left in WAL mode gets here
            if write:
                con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            con.close()  # without COMMIT: rolled back
    except sqlite3.Error as e:
        if not getattr(e, "sqlite_errorname", "").startswith(_ENVIRONMENT):
            raise
        done = "; the state is as it was" if verb != "checkpoint" else \
            f"; the change is committed, but only in {path}-wal: keep the two together"
        raise OSError(errno.EIO, f"cannot {verb} the curator state: {e}{done}",
                      str(path)) from None


def _header(path) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(16)


def _with_journal(path):
    return [path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))]


def _ours(con) -> bool:
    return con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID


def _sha(*values, blob=b"") -> str:
    return hashlib.sha256(json.dumps(values).encode() + blob).hexdigest()


def _put(con, key, value):
    text = json.dumps(value)
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?, ?)",
                (key, text, _sha("meta", key, text)))


# the keys each record of the meta table must hold, and their types
_NONE = type(None)
_META = {"config": {"method": str, "eps": (int, float), "family": str, "options": dict,
                    "prior": (dict, _NONE), "mechanism": str, "particles": (int, _NONE),
                    "seed": (dict, _NONE), "policy": dict},
         "head": {"id": str, "releases": int, "intervals": int},
         "rng": {"bit_generator": str, "state": dict}}
_META_OPTIONAL = {"config": {"family_sha256": str}}  # states made before issue 55 lack it


def _meta(con, key):
    row = con.execute("SELECT value, sha256 FROM meta WHERE key = ?", (key,)).fetchone()
    if row is None or _sha("meta", key, row[0]) != row[1]:
        raise ValueError(f"damaged curator state file: its {key} is missing or fails its "
                         f"checksum")
    return check_json(json.loads(row[0]), f"its {key}", _META[key], _META_OPTIONAL.get(key))


def _rows(con, table, columns, count):
    """The rows of ``table`` (without id and time), each checked against its sha256."""
    rows = con.execute(f"SELECT id, {columns}, time, sha256 FROM {table} "
                       f"ORDER BY id").fetchall()
    if len(rows) != count:
        raise ValueError(f"damaged curator state file: {len(rows)} rows of {table}, "
                         f"{count} written")
    for i, row in enumerate(rows, 1):
        if row[0] != i or _sha(table, *row[:-1]) != row[-1]:
            raise ValueError(f"damaged curator state file: row {i} of {table} fails its "
                             f"checksum")
    return [row[1:-2] for row in rows]


# ---------------------------------------------------------------- the older format
# where the online posteriors lived when older state files were written
_MOVED = {"dpbook.marginal.ibis": "dpbook.online.ibis",
          "dpbook.gradient": "dpbook.online.gradient"}
# what a pickled curator holds besides dpbook's classes and compiled kernels
_GLOBALS = {("collections", "Counter"), ("numpy", "dtype"), ("numpy", "ndarray"),
            ("copy_reg", "_reconstructor"), ("copyreg", "_reconstructor"),
            ("__builtin__", "object"), ("builtins", "object"), ("_codecs", "encode"),
            ("numpy.random._pickle", "__generator_ctor"),
            ("numpy.random._pickle", "__bit_generator_ctor"),
            ("numpy.random._pcg64", "PCG64"),
            ("numpy.random.bit_generator", "SeedSequence"),
            ("numpy.random.bit_generator", "__pyx_unpickle_SeedSequence")} | {
    (f"numpy.{core}.{module}", name) for core in ("core", "_core")
    for module, name in (("numeric", "_frombuffer"), ("multiarray", "_reconstruct"),
                         ("multiarray", "scalar"))}
_DPBOOK = ("dpbook.privacy.", "dpbook.online.", "dpbook.smc.", "dpbook.model.")


class _Unpickler(pickle.Unpickler):
    """Only a curator's classes: dpbook's (its kernels by reference), numpy's arrays and
    generators, a Counter; any other global is refused, so nothing else runs."""

    def find_class(self, module, name):
        module = _MOVED.get(module, module)
        if (module, name) in _GLOBALS:
            return super().find_class(module, name)
        if module.startswith(_DPBOOK + ("dpbook.likelihood.",)):
            obj = super().find_class(module, name)
            if isinstance(obj, type) or module.startswith("dpbook.likelihood."):
                return obj
        raise pickle.UnpicklingError(f"{module}.{name} is not part of a curator state")


def _migrate(path):
    """A version-1 state file (a pickle): kept as ``<path>.pickle-v1``, its curator
    written to ``path`` as a state file and loaded from there."""
    try:
        with open(path, "rb") as fh:
            state = _Unpickler(fh).load()
        old = state["curator"]
        if state["format"] != "dpbook-curator" or state["version"] != 1 or \
                not isinstance(old, Curator):
            raise ValueError(state.get("version"))
        # the intervals as published: those taken back and those still out
        counts = Counter(zip(old.l, old.r)) + old.outstanding
        old.intervals = [(l, r, k) for (l, r), k in counts.items()]
        _config(old)
    except Exception as e:  # a foreign, truncated or forged file
        raise ValueError(f"{path}: not a dpbook curator state file ({type(e).__name__})"
                         ) from None
    shutil.copy2(path, path.with_name(path.name + ".pickle-v1"))
    save_curator(old, path)
    return load_curator(path)
