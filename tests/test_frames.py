from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pong.env import DOWN, UP, make_env
from pong.evaluate import FrameRecorder
from pong.frames import UNKNOWN, AleFrames, GymFrames, frames_for


@pytest.mark.ale
@pytest.mark.parametrize(("env_id", "seed"), [("ALE/Pong-v5", 3), ("Pong-v0", 4)])
def test_ale_frames_are_gymnasiums_frames_for_a_whole_game(env_id: str, seed: int) -> None:
    """Step by step, the same frames, rewards and game end as env.step + binarize."""
    fast_env, gym_env = make_env(env_id), make_env(env_id)
    fast = frames_for(fast_env)
    assert isinstance(fast, AleFrames)  # training's default path is the fast one
    reference = GymFrames(gym_env)
    rng = np.random.default_rng(seed)
    np.testing.assert_array_equal(fast.reset(seed=seed), reference.reset(seed=seed))
    done, steps, points = False, 0, 0
    while not done:
        action = UP if rng.random() < 0.5 else DOWN
        cur, reward, done = fast.step(action)
        want_cur, want_reward, want_done = reference.step(action)
        np.testing.assert_array_equal(cur, want_cur, err_msg=f"step {steps}")
        assert (reward, done) == (want_reward, want_done), f"step {steps}"
        steps, points = steps + 1, points + abs(reward)
    assert points >= 21 and steps > 500  # a whole game, with the ball in play
    # The table learned Pong's few colours from the RGB screen and nothing else.
    known = np.flatnonzero(fast.table != UNKNOWN)
    assert 2 <= known.size <= 16
    assert set(fast.table[known]) == {0, 1}  # background and objects both seen
    fast_env.close()
    gym_env.close()


@pytest.mark.ale
def test_frames_for_uses_gymnasium_where_ale_frames_would_differ() -> None:
    recorded = FrameRecorder(make_env())  # a wrapper that must see every observation
    assert isinstance(frames_for(recorded), GymFrames)
    blended = gym.make("ALE/Pong-v5")
    blended.unwrapped.ale.setBool("color_averaging", True)  # a pixel mixes two frames
    assert isinstance(frames_for(blended), GymFrames)
    grey = gym.make("ALE/Pong-v5", obs_type="grayscale")
    assert isinstance(frames_for(grey), GymFrames)
    for env in (recorded, blended, grey):
        env.close()


def test_frames_for_the_toy_env_is_gymnasiums() -> None:
    env = make_env("PongToy/Catch-v0")
    frames = frames_for(env)
    assert isinstance(frames, GymFrames)
    cur = frames.reset(seed=0)
    assert cur.shape == (6400,) and cur.dtype == bool and cur.any()
    cur, reward, done = frames.step(UP)
    assert isinstance(reward, float) and isinstance(done, bool)
    env.close()
