from __future__ import annotations

import pytest
import ray


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray with 2 CPUs for the tests of one module, its own even if a cluster runs here."""
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="ERROR")
    yield
    ray.shutdown()
