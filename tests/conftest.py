from __future__ import annotations

import time

import pytest
import ray

from tests.helpers import ray_cluster

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


@pytest.fixture(scope="session")
def shared_ray():
    """One Ray of 3 CPUs for this test process (`ray start`), which the runs and tests that
    need no Ray of their own join: ``(address, env)``, the env its clients run with. (A
    process that has joined one Ray cannot start another after it: Ray then cancels its
    actors.)"""
    with ray_cluster(cpus=3) as shared:
        yield shared


@pytest.fixture(scope="module")
def joined_ray(shared_ray):
    """This process joined to the shared Ray for the tests of one module, once every CPU of
    it is free (a module before may have just ended its workers)."""
    address, _ = shared_ray
    ray.init(address=address, logging_level="ERROR")
    deadline = time.monotonic() + 30
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"]:
        assert time.monotonic() < deadline, "the shared Ray's CPUs stayed taken"
        time.sleep(0.05)
    yield
    ray.shutdown()
