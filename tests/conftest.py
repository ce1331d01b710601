"""Shared fixtures and helpers of the test suite.

* ``shipped_family(name)``: a shipped family as the tests use it (Student-t with df 5);
  the ``family_name`` fixture runs a test once per shipped family;
* ``assert_same_estimates(a, b)``: two estimates tables identical bit for bit, apart
  from the timing column;
* ``write_csv``: a function writing a data file (header y,l,r) into the test's folder;
* ``dask_scheduler``: the address of a local Dask cluster of two worker processes (one
  thread each), started once for the session and shared by the tests that run on Dask.

Each pytest-xdist worker runs numba's parallel loops on one thread (tests of the thread
count set theirs): with a thread per core in each of two workers, their loops wait on
threads the other holds.
"""

import os

import pandas as pd
import pytest

from dpbook.model.families import get_family

FAMILIES = ("normal", "laplace", "student_t", "poisson")


def pytest_configure(config):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import numba

        numba.set_num_threads(1)


def shipped_family(name):
    """A shipped family; the Student-t with df = 5 (its default, named for clarity)."""
    return get_family(name, df=5.0) if name == "student_t" else get_family(name)


def assert_same_estimates(a: pd.DataFrame, b: pd.DataFrame):
    pd.testing.assert_frame_equal(a.drop(columns="seconds"), b.drop(columns="seconds"),
                                  check_exact=True)


@pytest.fixture(params=FAMILIES)
def family_name(request):
    return request.param


@pytest.fixture
def write_csv(tmp_path):
    def write(text, name="data.csv"):
        path = tmp_path / name
        path.write_text(text)
        return str(path)
    return write


@pytest.fixture(scope="session")
def dask_scheduler():
    import distributed

    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  host="127.0.0.1", dashboard_address=None) as cluster:
        yield cluster.scheduler_address
