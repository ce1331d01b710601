"""The paper-scale experiment of Section 6, resumable and executor-independent.

:mod:`dpbook.experiment.runner` holds the configuration, the seeds, one task, the store
and the executors (local pool, Dask); its public names are re-exported here.
"""

from dpbook.experiment.runner import (
    BOOK_CONFIGS,
    CHAIN_POINTS,
    METHODS,
    PAPER,
    Task,
    Trajectories,
    algorithm_fingerprint,
    book_experiment,
    code_version,
    config_params,
    config_theta,
    data_seed,
    ensure_results,
    eps_code,
    is_complete,
    keep_freed_memory,
    keep_freed_memory_env,
    load_results,
    make_config,
    package_versions,
    read_manifest,
    run_experiment,
    run_task,
    store_progress,
    summarize,
    task_seed,
)

__all__ = ["BOOK_CONFIGS", "CHAIN_POINTS", "METHODS", "PAPER", "Task", "Trajectories",
           "algorithm_fingerprint", "book_experiment", "code_version", "config_params",
           "config_theta", "data_seed", "ensure_results", "eps_code", "is_complete",
           "keep_freed_memory", "keep_freed_memory_env", "load_results", "make_config",
           "package_versions", "read_manifest", "run_experiment", "run_task",
           "store_progress", "summarize", "task_seed"]
