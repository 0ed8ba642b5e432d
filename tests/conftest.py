from __future__ import annotations

import pytest
import ray

# The slowest modules, longest first (seconds of each, run alone). xdist deals whole modules
# to its two processes in the order collected: these first, so that the quick ones fill in
# at the end rather than one slow module running on alone.
SLOW = (
    "test_hosts.py",  # 180
    "test_driver.py",  # 160
    "test_cluster.py",  # 110
    "test_sweep.py",  # 110
    "test_faults.py",  # 85
    "test_schedule.py",  # 47
    "test_notebook.py",  # 27
    "test_train.py",  # 25
    "test_toy.py",  # 22
)


def pytest_collection_modifyitems(items) -> None:
    rank = {name: i for i, name in enumerate(SLOW)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW)))  # stable: the rest in order


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray with 2 CPUs for the tests of one module, its own even if a cluster runs here."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()
