from __future__ import annotations

import subprocess
import sys

import pytest

from pong.envs.make import DEFAULT_ENV, PONG_ENVS, check_env, make_env


@pytest.mark.parametrize("env_id", [DEFAULT_ENV, "Pong-v0"])
def test_pong_ids_make_pong_envs(env_id: str) -> None:
    env = make_env(env_id)
    try:
        assert env.observation_space.shape == (210, 160, 3)
        assert env.unwrapped.get_action_meanings()[2:4] == ["RIGHT", "LEFT"]
    finally:
        env.close()


@pytest.mark.parametrize(
    ("env_id", "message"),
    [
        ("ALE/Pongg-v5", "unknown env id 'ALE/Pongg-v5'"),
        ("NoSuchEnv-v0", "unknown env id"),
        ("CartPole-v1", "unknown env id 'CartPole-v1': this program plays ALE/Pong-v5, Pong-v0"),
        ("ALE/Breakout-v5", "unknown env id"),
        ("this:Foo-v0", "names a Python module to import"),
        ("pong.envs.toy:Catch-v0", "names a Python module to import"),
    ],
)
def test_bad_env_ids_raise_a_one_line_value_error(env_id: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        check_env(env_id)
    assert "\n" not in str(info.value)


def test_an_id_from_a_file_never_imports_a_module() -> None:
    """Gymnasium imports an id's ``module:`` part; ``this`` would print the Zen of Python."""
    code = (
        "import sys; from pong.envs.make import check_env\n"
        "try:\n    check_env('this:Foo-v0')\nexcept ValueError:\n    pass\n"
        "print('this' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n" and "Beautiful is better" not in out.stdout + out.stderr


@pytest.mark.parametrize("env_id", PONG_ENVS)
def test_every_id_it_plays_makes_a_pong_env(env_id: str) -> None:
    check_env(env_id)
