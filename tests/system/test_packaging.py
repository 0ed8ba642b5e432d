"""What a Ray job installs on a node that has only Ray is what the package depends on."""

from __future__ import annotations

import pytest
import yaml

from tests.helpers import ROOT

tomllib = pytest.importorskip("tomllib")  # Python 3.11+


def test_runtime_env_pip_is_the_package_dependencies_but_ray() -> None:
    with open(ROOT / "pyproject.toml", "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    with open(ROOT / "runtime_env.yaml") as f:
        pip = yaml.safe_load(f)["pip"]
    assert sorted(pip) == sorted(d for d in dependencies if not d.startswith("ray"))
