"""What a Ray job installs on a node that has only Ray is what the package depends on, the
cluster launcher's config is one Ray accepts, and the license travels with the package."""

from __future__ import annotations

import json
import re
from pathlib import Path

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


def test_the_cluster_launcher_config_is_one_ray_up_accepts() -> None:
    """cluster.yaml against the schema that `ray up` checks it with, and what it copies is
    what it installs."""
    import jsonschema
    import ray.autoscaler

    schema = json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())
    with open(ROOT / "cluster.yaml") as f:
        config = yaml.safe_load(f)
    jsonschema.validate(config, schema)
    assert config["head_node_type"] in config["available_node_types"]  # beyond the schema
    [(remote, local)] = config["file_mounts"].items()
    assert local == "." and f"pip install --quiet {remote}" in config["setup_commands"]
    # Ray's image of a Ray and Python this package supports
    tag = r"rayproject/ray:(\d+)\.(\d+)\.\d+-py3(\d+)-cpu"
    image = re.fullmatch(tag, config["docker"]["image"])
    with open(ROOT / "pyproject.toml", "rb") as f:
        project = tomllib.load(f)["project"]
    [least_ray] = [d.split(">=")[1] for d in project["dependencies"] if d.startswith("ray")]
    least_python = project["requires-python"].removeprefix(">=3.")
    assert image, config["docker"]["image"]
    assert (int(image[1]), int(image[2])) >= tuple(map(int, least_ray.split(".")))
    assert int(image[3]) >= int(least_python)


def test_the_license_is_apache_2_0_and_in_the_package_metadata() -> None:
    from importlib.metadata import metadata

    text = (ROOT / "LICENSE").read_text()
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    installed = metadata("pong")
    assert installed["License-Expression"] == "Apache-2.0"
    assert installed.get_all("License-File") == ["LICENSE"]
