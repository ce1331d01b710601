"""The experiment's configuration and seeds (Section 6 of the paper).

The configuration is a plain dict (kept in the store's manifest) holding everything that
changes a result or the set of tasks; how the tasks are executed is not part of it.
Seeds are derived from identities, never from positions or completion order:

* data (sensitive values and privacy noise): ``SeedSequence(seed, spawn_key=(0, E, run))``
* algorithm: ``SeedSequence(seed, spawn_key=(code(method), E, run))``, code = 1, 2, 3
  for smc-adaptive, smc-fixed, mhaar, 7, 8, 9 for smc-marginal-adaptive,
  smc-marginal-fixed, online-gradient, 10, 11 for smc-subset-adaptive, smc-subset-fixed
  (the online methods' codes are theirs in :mod:`dpbook.online.methods`, pinned by
  tests/test_online_methods.py); 4 for the best intervals, 5 for resampling the stored
  particles (6: the calibration study's replications),

where E is the IEEE-754 bit pattern of eps as an unsigned 64-bit integer.

A store of several batch sizes (``batch=[1, 10, 100]``) has a task (method, eps, run,
B) per batch size B for the online methods (Algorithm 1 publishing one interval per B
individuals) and one (method, eps, run) task for MHAAR.  B is not in the seeds: the
task of batch size B sees the same sample, noise stream and algorithm seed as in a store
of B alone (whose tasks are (method, eps, run) and whose seeds are the ones above), so
it does not depend on the other batch sizes of its store, B = 1 is the unbatched task
bit for bit, and the batch sizes of one (method, eps, run) are compared on common random
numbers, as the methods of one (eps, run) are.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np

from dpbook.online.methods import TASKS
from dpbook.validation import check_count, check_eps, check_memory
from dpbook.versions import CENTRAL, CORE, GENERIC_MODEL, LONG_STREAM, VERSIONS, fingerprint

# the tasks' methods: the online methods' tasks (dpbook.online.methods, each with the
# seed code of its name) and the MHAAR baseline of Section 6
MHAAR_CODE = 3
METHOD_CODE = {"mhaar": MHAAR_CODE, **{task: code for task, (_, _, code) in TASKS.items()}}
ALL_METHODS = tuple(sorted(METHOD_CODE, key=METHOD_CODE.get))  # Section 6's first
METHODS = tuple(m for m in ALL_METHODS  # Section 6's, the default
                if m == "mhaar" or not TASKS[m][0].long_stream)
# for long streams (chapter 9): the marginal SMC on theta, the online gradient method and
# the latent SMC with subset rejuvenation (config["subset"] latent values moved per step)
LONG_STREAM_METHODS = tuple(m for m in ALL_METHODS if m not in METHODS)
SUBSET_METHODS = tuple(m for m in LONG_STREAM_METHODS if TASKS[m][0].subset)
ADAPTIVE_METHODS = tuple(m for m in ALL_METHODS if m in TASKS and TASKS[m][1] == "adaptive"
                         and not TASKS[m][0].point_estimate)  # Thompson + eq. (13)
DATA_CODE = 0
INTERVAL_CODE = 4
RESAMPLE_CODE = 5
FORMAT = 2  # 2: task files carry the configuration's hash
FIXED_HALF_WIDTH = 10.0  # [l_c, r_c] = [mu - 10 sigma, mu + 10 sigma]
MHAAR_AUX = 20
EVERY = 20
CHAIN_POINTS = 1000  # at most this many thinned MHAAR chain points per task file

PAPER = dict(eps=(1.0, 2.0, 5.0, 10.0), runs=30, n=1000, particles=1000,
             mhaar_iters=100_000, mu=50.0, sigma=10 ** 0.5)
METHOD_ORDER = {m: i for i, m in enumerate(ALL_METHODS)}


def eps_code(eps: float) -> int:
    """The IEEE-754 bit pattern of eps, an exact integer identity for a float."""
    return struct.unpack("<Q", struct.pack("<d", float(eps)))[0]


def data_seed(root: int, eps: float, run: int) -> np.random.SeedSequence:
    """Seed of the sensitive sample and the privacy noise of run ``run`` at ``eps``."""
    return np.random.SeedSequence(root, spawn_key=(DATA_CODE, eps_code(eps), int(run)))


def task_seed(root: int, method: str, eps: float, run: int) -> np.random.SeedSequence:
    """Seed of the algorithm (SMC + Thompson draws, or MHAAR) of one task."""
    return np.random.SeedSequence(root, spawn_key=(METHOD_CODE[method], eps_code(eps),
                                                   int(run)))


def seed_str(ss: np.random.SeedSequence) -> str:
    return f"{ss.entropy}:{','.join(str(k) for k in ss.spawn_key)}"


@dataclass(frozen=True, order=True)
class Task:
    """One task: (method, eps, run), and its batch size B in a store of several batch
    sizes (None otherwise: a store of one batch size keeps the keys and file names it
    had before the batch sizes were a dimension)."""

    method: str
    eps: float
    run: int
    batch: int | None = None

    @property
    def name(self) -> str:
        tail = "" if self.batch is None else f"_batch{self.batch}"
        return f"{self.method}_eps{self.eps!r}_run{self.run}{tail}"

    @property
    def filename(self) -> str:
        return self.name + ".npz"


def _eps_list(eps) -> list[float]:
    if isinstance(eps, str):
        eps = [e for e in eps.replace(",", " ").split()]
    try:
        items = list(eps)
    except TypeError:
        items = [eps]
    if not items:
        raise ValueError("eps must list at least one value")
    return sorted({check_eps(e) for e in items})


def _batch_list(batch) -> list[int]:
    """The batch sizes, ascending: one integer >= 1 or a list of distinct ones."""
    if isinstance(batch, (str, bytes)) or np.ndim(batch) == 0:
        batch = [batch]
    items = [check_count("batch", b) for b in batch]
    if not items:
        raise ValueError("batch must list at least one batch size")
    twice = sorted({b for b in items if items.count(b) > 1})
    if twice:
        raise ValueError(f"batch lists {twice[0]} twice; give each batch size once")
    return sorted(items)


def config_batches(config) -> list[int] | None:
    """The batch sizes of a store of several (its tasks carry theirs), else None."""
    batch = config.get("batch")
    return list(batch) if isinstance(batch, list) else None


def _method_list(methods) -> list[str]:
    if isinstance(methods, str):
        methods = [m.strip() for m in methods.split(",") if m.strip()]
    try:
        items = list(methods)
    except TypeError:
        raise ValueError(f"methods must be a list of names, got {methods!r}") from None
    if not items:
        raise ValueError(f"no method given; choose from {', '.join(ALL_METHODS)}")
    for m in items:
        if m not in ALL_METHODS:
            raise ValueError(f"unknown method {m!r}; choose from {', '.join(ALL_METHODS)}")
    return [m for m in ALL_METHODS if m in items]


def _family_config(family, mechanism, theta, mu, sigma) -> dict:
    """The population part of the configuration: family, its options, mechanism, theta.

    The normal family (the default) keeps the paper's ``mu``/``sigma`` keys; any other
    family gives its true theta as ``theta`` (default: the family's default_theta()).
    """
    from dpbook.model.families import as_family, available, family_sha256
    from dpbook.model.mechanisms import check_mechanism

    fam = as_family(family)
    mech = check_mechanism(mechanism)
    opts = {k: getattr(fam, k) for k in fam.options}
    out = {"family": fam.name, "family_options": opts, "mechanism": mech,
           "params": list(fam.params), "family_registered": fam.name in available()}
    if fam.name == "normal" and theta is None:
        theta = (mu, sigma)
    elif theta is None:
        theta = fam.default_theta()
    elif np.ndim(theta) == 0:
        theta = (theta,)
    out["theta"] = list(fam.check_theta(*theta))
    prior = _prior_record(fam, opts, out["family_registered"])
    if prior is not None:
        out["prior"] = prior
    if not out["family_registered"]:
        out["family_source"] = _source_hash(type(fam))
        if family_sha256(type(fam)):  # the whole file: a module-level helper too
            out["family_sha256"] = family_sha256(type(fam))
    return out


def _prior_record(fam, opts, registered):
    """The family's prior (its hyperparameters, JSON-ready) when it is not the family's
    default, else None: a store of one prior is not read back for another, and a
    shipped family's tasks are run with it (:func:`family_of`)."""
    import dataclasses
    import json

    from dpbook.model.families import get_family

    prior = getattr(fam, "prior", None)
    if not dataclasses.is_dataclass(prior):
        return None
    try:
        default = (get_family(fam.name, **opts) if registered else type(fam)()).prior
    except Exception:  # a family of the user's that needs arguments: record it
        default = None
    if prior == default:
        return None
    return json.loads(json.dumps(dataclasses.asdict(prior)))


def _source_hash(cls) -> str:
    """A hash of a class's source (results of an edited family are not reused)."""
    import hashlib
    import inspect

    try:
        text = inspect.getsource(cls)
    except (OSError, TypeError):  # no source available: fall back to the bytecode
        text = repr(sorted((k, v.__code__.co_code.hex() if hasattr(v, "__code__") else repr(v))
                           for k, v in vars(cls).items() if not k.startswith("__")))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def family_of(config, family_obj=None):
    """The Family object of a configuration (the object itself for an unregistered one)."""
    from dpbook.model.families import get_family

    if family_obj is not None:
        return family_obj
    if not config.get("family_registered", True):
        raise ValueError(f"family {config['family']!r} is not a shipped family: pass the "
                         f"Family object (family=...) to run its tasks")
    fam = get_family(config.get("family", "normal"), **config.get("family_options", {}))
    if "prior" in config:  # not the family's default (_prior_record)
        fam = fam.with_prior(type(fam.prior)(**config["prior"]))
    return fam


def make_config(eps=PAPER["eps"], runs=30, n=1000, particles=1000, mhaar_iters=100_000,
                methods=METHODS, seed=0, interval_method="exact", mu=50.0,
                sigma=10 ** 0.5, keep_particles=1, interval_grid=50, interval_M=1000,
                interval_K=10000, family=None, mechanism="laplace", theta=None,
                subset=None, original_code=False, batch=1, algorithm_seed=None,
                quartiles=False, guard=None) -> dict:
    """Validate the arguments and return the configuration dict kept in the manifest.

    Everything that changes a result or the set of tasks is in the configuration;
    how the tasks are executed (workers, scheduler, progress) is not.  ``family``
    (name or Family object; default the normal), ``mechanism`` and the true ``theta``
    choose the population; for the normal family ``mu`` and ``sigma`` give theta.
    ``subset``: the latent values moved per step by the smc-subset methods (required
    with them, and recorded only then, so other configurations keep their keys).
    ``original_code``: release with the authors' code's noise scale, (r - l)/(eps
    sqrt 2), while every method analyses with the paper's (r - l)/eps (reproduction
    notes, item 1); recorded only when True.  ``batch``: individuals per published
    interval in Algorithm 1 (:func:`dpbook.online.algorithm1.run_online`; MHAAR's
    releases are not Algorithm 1's and keep their fixed interval); recorded only when
    above 1, so the paper's configuration keeps its key.  A list of several batch sizes
    (distinct) makes one store with a task per batch size for each online method's
    (eps, run), recorded as the ascending list (module docstring); a list of one is
    that one value.  ``algorithm_seed``: the root of the algorithms' seeds when it is to
    differ from ``seed``, which then seeds the data only (the same sensitive samples and
    noise, other SMC and MHAAR draws: the Monte Carlo spread of a rerun, issue 38's
    equivalence check); recorded only when given.  ``quartiles=True``: each online
    task's row also holds the final posterior's 5%, 25%, 50%, 75% and 95% quantiles
    (``mu_q05``, ..., ``mu_q95``; the posterior of a scale can have infinite variance
    under clipping, so it is summarised by quantiles); recorded only when True.
    ``guard``: the latent SMC's adaptive tasks widen their interval when a block of
    ``guard`` releases piles up at one end (:class:`dpbook.privacy.policies.GuardedPolicy`,
    not the paper's); recorded only when given.
    """
    pop = _family_config(family, mechanism, theta, mu, sigma)
    if pop["family"] == "normal" and theta is not None:
        mu, sigma = pop["theta"]  # the normal family's theta is (mu, sigma)
    if pop["family"] != "normal":
        mu, sigma = 0.0, 1.0  # unused: theta is in pop
    try:
        mu_f = float(mu) if not isinstance(mu, bool) else float("nan")
    except (TypeError, ValueError):
        mu_f = float("nan")
    if not math.isfinite(mu_f):
        raise ValueError(f"mu must be a finite number, got {mu!r}")
    try:
        sig_f = float(sigma)
    except (TypeError, ValueError):
        sig_f = float("nan")
    if not (math.isfinite(sig_f) and sig_f > 0):
        raise ValueError(f"sigma must be a positive finite number, got {sigma!r}")
    if interval_method not in ("exact", "mc"):
        raise ValueError(f"interval_method must be 'exact' or 'mc', got {interval_method!r}")
    config = {
        "format": FORMAT,
        "eps": _eps_list(eps),
        "runs": check_count("runs", runs),
        "n": check_count("n", n),
        "particles": check_count("particles", particles, 2),
        "mhaar_iters": check_count("mhaar_iters", mhaar_iters),
        "mhaar_aux": MHAAR_AUX,
        "methods": _method_list(methods),
        "seed": check_count("seed", seed, 0),
        "interval_method": interval_method,
        "interval_grid": check_count("interval_grid", interval_grid, 2),
        "interval_lims": [-3.0, 3.0],
        "interval_score": "mu",
        "interval_M": check_count("interval_M", interval_M),
        "interval_K": check_count("interval_K", interval_K),
        "fixed_half_width": FIXED_HALF_WIDTH,
        "mu": mu_f,
        "sigma": sig_f,
        "keep_particles": check_count("keep_particles", keep_particles, 0),
        "every": EVERY,
        "algorithm": None,
    }
    if set(SUBSET_METHODS) & set(config["methods"]):
        if subset is None:
            raise ValueError("the smc-subset methods need subset, the number of latent "
                             "values moved per step")
        from dpbook.smc.resample_move import check_subset

        config["subset"] = check_subset(subset)
    elif subset is not None:
        raise ValueError("subset goes with the smc-subset methods")
    batches = _batch_list(batch)
    if batches != [1]:
        if not set(TASKS) & set(config["methods"]):
            raise ValueError("batch goes with the online methods (Algorithm 1), not with "
                             f"{', '.join(config['methods'])}")
        config["batch"] = batches if len(batches) > 1 else batches[0]
    if quartiles is not False:
        if quartiles is not True:
            raise ValueError(f"quartiles must be True or False, got {quartiles!r}")
        config["quartiles"] = True
    if guard is not None:
        from dpbook.privacy.policies import check_guard

        config["guard"] = check_guard(guard)
        if not any(m in ADAPTIVE_METHODS and TASKS[m][0].latent for m in config["methods"]):
            raise ValueError("guard goes with the latent SMC's adaptive methods, "
                             "smc-adaptive and smc-subset-adaptive")
    if algorithm_seed is not None:
        config["algorithm_seed"] = check_count("algorithm_seed", algorithm_seed, 0)
    if original_code is not False:
        if original_code is not True:
            raise ValueError(f"original_code must be True or False, got {original_code!r}")
        config["original_code"] = True
    _check_task_memory(config)
    from dpbook.model.families import as_family

    point = [m for m in config["methods"] if m in TASKS and TASKS[m][0].point_estimate]
    if point and not as_family(family).location_scale:
        raise ValueError(f"{point[0]} needs a location-scale family, not {pop['family']}")
    if pop["family"] == "normal":
        del pop["theta"]  # it is (mu, sigma)
        if "prior" in pop and pop["mechanism"] == "laplace":
            config["prior"] = pop["prior"]
    else:
        del config["mu"], config["sigma"], config["fixed_half_width"]
    if pop["family"] != "normal" or pop["mechanism"] != "laplace":
        config.update(pop)  # the paper's configuration keeps its keys unchanged
    long = set(LONG_STREAM_METHODS) & set(config["methods"])
    generic = (pop["family"], pop["mechanism"]) != ("normal", "laplace")
    config["algorithm"] = algorithm_fingerprint((*(LONG_STREAM if long else ()),
                                                 *(GENERIC_MODEL if generic else ())))
    return config


TASK_BYTES = 1000  # a task's place in the list of tasks and its row of estimates, at least


def _check_task_memory(config):
    """Each task must fit in memory (the executors run them side by side, but one that
    cannot fit alone would fail in every executor)."""
    from dpbook.smc.resample_move import check_smc_memory

    tasks = len(config["methods"]) * len(config["eps"]) * config["runs"]
    check_memory(f"{tasks} tasks", TASK_BYTES * tasks)  # their list and estimates rows
    if any(m in TASKS and TASKS[m][0].latent for m in config["methods"]):
        check_smc_memory(config["particles"], config["n"])
    if "mhaar" in config["methods"]:
        check_memory(f"MHAAR with {config['mhaar_iters']} iterations for {config['n']} "
                     f"individuals", 40 * config["mhaar_iters"]
                     + 64 * config["n"] * config["mhaar_aux"])


def config_theta(config) -> tuple:
    """The true theta of a configuration."""
    return tuple(config["theta"]) if "theta" in config else (config["mu"], config["sigma"])


def config_params(config) -> tuple:
    return tuple(config.get("params", ("mu", "sigma")))


# Stores made before dpbook.versions carried a hash of the source text of the algorithm
# modules (and calibration studies one of dpbook/calibration): these are the hashes of
# the commit that introduced the versions (dcc0e6d), whose numbers are the version-1
# numbers the golden test records.  Such a store is read as a version-1 store (a
# migration, not a recompute) as long as the versions it uses are still 1.
LEGACY_SOURCE_HASHES = {"b1681e7a1935cb81": (), "273ecca4a283fdcb": LONG_STREAM}
LEGACY_CALIBRATION_CODE = "1ef9e988c8cb1e3a"
LEGACY_VERSIONS = dict.fromkeys(VERSIONS, 1)


def algorithm_fingerprint(extra=()) -> str:
    """The fingerprint (:func:`dpbook.versions.fingerprint`) of the Section 6
    experiment's algorithms and of ``extra`` ones (names in
    :data:`dpbook.versions.VERSIONS`: the long-stream methods, the generic model)."""
    return fingerprint((*CORE, "experiment", *extra))


# the central model's calibration methods (chapter 11): their tasks' stores also carry
# the CENTRAL algorithms' versions (dpbook.calibration runs them)
CENTRAL_METHODS = ("central", "central-naive", "central-private")


def config_algorithms(config, method=None) -> tuple:
    """The versioned algorithms whose numbers a configuration's store holds, and those
    of a task of ``method`` where it uses more (a central calibration replication:
    :data:`~dpbook.versions.CENTRAL`, see :func:`task_config`)."""
    generic = (config.get("family", "normal"), config.get("mechanism", "laplace")) != \
        ("normal", "laplace")
    if config.get("study") == "calibration":
        names = (*CORE, "calibration", *(CENTRAL if method in CENTRAL_METHODS else ()))
    else:
        long = set(LONG_STREAM_METHODS) & set(config.get("methods", ()))
        names = (*CORE, "experiment", *(LONG_STREAM if long else ()))
    return names + (GENERIC_MODEL if generic else ())


def task_config(config, task) -> dict:
    """The configuration a task's file is keyed by (:func:`config_hash`): the store's,
    with the fingerprint of the task's own algorithms where they are more than the
    store's.  A calibration store holds any set of methods; keying the central
    replications' files by the central release's version too makes a change of it
    recompute those files and no others (the store's key, and the local methods' files,
    stay as they were)."""
    names = config_algorithms(config, getattr(task, "method", None))
    if names == config_algorithms(config):
        return config
    return {**config, "algorithm": fingerprint(names)}


def _legacy_algorithm(config) -> str | None:
    """The source hash a store of this configuration carried before the versions, if
    the versions it uses are still those of that code (else None)."""
    names = config_algorithms(config)
    if any(VERSIONS[k] != LEGACY_VERSIONS[k] for k in names):
        return None
    long = tuple(k for k in LONG_STREAM if k in names)
    return next(h for h, extra in LEGACY_SOURCE_HASHES.items() if extra == long)


def migrate_config(config: dict) -> dict:
    """A configuration read from a store, in today's terms: one made before the
    versions, by code whose numbers are today's (see :data:`LEGACY_SOURCE_HASHES`),
    gets today's fingerprint; any other is returned unchanged."""
    old = config.get("algorithm")
    if old not in LEGACY_SOURCE_HASHES or old != _legacy_algorithm(config):
        return config
    if config.get("study") == "calibration" and \
            config.get("calibration_code") != LEGACY_CALIBRATION_CODE:
        return config
    new = {k: v for k, v in config.items() if k != "calibration_code"}
    new["algorithm"] = fingerprint(config_algorithms(config))
    return new


def accepted_hashes(config) -> set:
    """The configuration hashes a task file of this configuration may carry: today's
    (:func:`config_hash`) and, while the versions are those of the code before them,
    the hash the same configuration had then (see :func:`migrate_config`)."""
    out = {config_hash(config)}
    old = _legacy_algorithm(config)
    if old is not None and config.get("algorithm") == fingerprint(config_algorithms(config)):
        legacy = {**config, "algorithm": old}
        if config.get("study") == "calibration":
            legacy["calibration_code"] = LEGACY_CALIBRATION_CODE
        out.add(config_hash(legacy))
    return out


def config_hash(config) -> str:
    """A short hash of the whole configuration; every task file carries it, and a file
    whose hash differs is never used (see :func:`dpbook.experiment.store.read_task`)."""
    import hashlib
    import json

    text = json.dumps(config, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def config_tasks(config) -> list[Task]:
    """The tasks of a configuration: (method, eps, run), and for the online methods
    one per batch size in a store of several (method, batch, eps, run order)."""
    batches = config_batches(config)
    return [Task(m, e, r, b) for m in config["methods"]
            for b in (batches if batches and m in TASKS else [None])
            for e in config["eps"] for r in range(config["runs"])]
