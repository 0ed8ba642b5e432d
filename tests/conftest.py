from __future__ import annotations

import contextlib
import time

import pytest
import ray

from tests.helpers import ray_cluster

# The slowest modules, longest first (seconds of each, run alone), those that join the shared
# Ray (below) before those that do not. xdist deals whole modules to its two processes in the
# order collected: these first, so that the quick ones fill in at the end rather than one slow
# module running on alone, and each process's shared Ray is up only at the start.
SLOW = (
    "test_driver.py",  # 130
    "test_hosts.py",  # 160 (alone, 2026-11-29)
    "test_sweep.py",  # 65
    "test_sweep_hosts.py",  # 80
    "test_schedule.py",  # 50
    "test_train.py",  # 20
    "test_toy.py",  # 12
    "test_worker.py",  # 10
    "test_faults.py",  # 85
    "test_cluster.py",  # 80
    "test_notebook.py",  # 27
)
USERS: set = set()  # the modules with a test that joins the shared Ray
_SHARED: dict = {}  # the shared Ray, while it is up: its ``ExitStack`` and ``(address, env)``


def pytest_collection_modifyitems(items) -> None:
    rank = {name: i for i, name in enumerate(SLOW)}
    items.sort(key=lambda item: rank.get(item.path.name, len(SLOW)))  # stable: the rest in order
    USERS.update(item.path for item in items if "shared_ray" in item.fixturenames)


def _stop_shared_ray() -> None:
    if _SHARED:
        _SHARED.pop("stack").close()
        _SHARED.clear()


def pytest_runtest_setup(item) -> None:
    """Stop the shared Ray once a module that never joins it starts: idle, it takes about 5% of
    a core (2 CPU-seconds a minute), which a Ray start (7 CPU-seconds) repays in 3 minutes."""
    if item.path not in USERS:
        _stop_shared_ray()


def pytest_sessionfinish() -> None:
    _stop_shared_ray()


@pytest.fixture(scope="module")
def shared_ray():
    """One Ray of 3 CPUs for this test process (`ray start`), which the runs and tests that
    need no Ray of their own join: ``(address, env)``, the env its clients run with. Started
    for the first module that needs it, stopped when one that does not starts. (Every test
    here that needs a Ray in this process joins this one: one that had started a local Ray
    and then joined another had its actors cancelled by Ray.)"""
    if not _SHARED:
        stack = contextlib.ExitStack()
        _SHARED["value"] = stack.enter_context(ray_cluster(cpus=3))
        _SHARED["stack"] = stack
    return _SHARED["value"]


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
