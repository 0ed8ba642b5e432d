from __future__ import annotations

import pytest

from pong.env import DEFAULT_ENV, check_env, make_env


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
        ("CartPole-v1", r"observations of shape \(4,\)"),
    ],
)
def test_bad_env_ids_raise_a_one_line_value_error(env_id: str, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        check_env(env_id)
    assert "\n" not in str(info.value)
