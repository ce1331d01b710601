"""Simulation-based calibration of the private posteriors (chapter 8).

* :mod:`~dpbook.calibration.replication` -- one replication per method (draw theta from
  the prior, release data, compute the posterior, record the PIT of the truth) and the
  statistics of many (KS, coverage, ECDF bands);
* :mod:`~dpbook.calibration.study` -- a study of many replications through the
  experiment's machinery (``run_calibration``), and its summary table.
"""

from dpbook.calibration.replication import (
    ALL_METHODS,
    CENTRAL_METHODS,
    METHODS,
    PARAMS,
    check_study_model,
    draw_theta,
    ecdf_band,
    naive_posterior,
    replicate,
    sample_cdf,
    summarize_pit,
)
from dpbook.calibration.study import (
    Replication,
    calibration_config,
    calibration_summary,
    calibration_verdict,
    coverage_table,
    pit_frame,
    prior_iqr,
    replication_seed,
    replications,
    run_calibration,
    run_replication,
    study_family,
)

__all__ = ["ALL_METHODS", "CENTRAL_METHODS", "METHODS", "PARAMS", "Replication",
           "calibration_config", "calibration_summary",
           "calibration_verdict", "check_study_model", "coverage_table", "draw_theta",
           "ecdf_band", "naive_posterior", "pit_frame", "prior_iqr", "replicate",
           "replication_seed", "replications", "run_calibration", "run_replication",
           "sample_cdf", "study_family", "summarize_pit"]
