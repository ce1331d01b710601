"""The paper-scale experiment of Section 6, resumable and executor-independent.

* :mod:`~dpbook.experiment.config` -- the configuration (``make_config``) and the seeds
  derived from each task's identity;
* :mod:`~dpbook.experiment.tasks` -- one (method, eps, run) task, and its batch size
  in a store of several (``run_task``);
* :mod:`~dpbook.experiment.store` -- the store: task files, manifest, Parquet table;
* :mod:`~dpbook.experiment.executors` -- this process, a local pool, a Dask cluster;
* :mod:`~dpbook.experiment.results` -- reading a store (``load_results``, ``summarize``);
* :mod:`~dpbook.experiment.runner` -- ``run_experiment``, ``ensure_results`` and the
  book's stores (``book_experiment``).

The public names of all six are re-exported here.
"""

from dpbook.experiment.config import (
    ALL_METHODS,
    CHAIN_POINTS,
    METHODS,
    PAPER,
    Task,
    algorithm_fingerprint,
    config_params,
    config_tasks,
    config_theta,
    data_seed,
    eps_code,
    make_config,
    task_seed,
)
from dpbook.experiment.results import (
    STORE_LOG,
    Trajectories,
    load_results,
    rmse_ratios,
    summarize,
    verdict_category,
)
from dpbook.experiment.runner import (
    BOOK_CONFIGS,
    book_experiment,
    ensure_results,
    is_complete,
    run_experiment,
    run_tasks,
    store_report,
)
from dpbook.experiment.store import code_version, package_versions, read_manifest, store_progress
from dpbook.experiment.tasks import (
    keep_freed_memory,
    keep_freed_memory_env,
    run_task,
    task_spec,
)

__all__ = ["ALL_METHODS", "BOOK_CONFIGS", "CHAIN_POINTS", "METHODS", "PAPER", "STORE_LOG", "Task",
           "Trajectories",
           "algorithm_fingerprint", "book_experiment", "code_version", "config_params",
           "config_tasks", "config_theta", "data_seed", "ensure_results", "eps_code",
           "is_complete", "keep_freed_memory", "keep_freed_memory_env", "load_results",
           "make_config", "package_versions", "read_manifest", "rmse_ratios", "run_experiment",
           "run_task",
           "run_tasks", "store_progress", "store_report", "summarize", "task_seed", "task_spec",
           "verdict_category"]
