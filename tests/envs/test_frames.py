from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pong.core.frames import UNKNOWN, AleFrames, GymFrames, frames_for
from pong.core.preprocess import binarize
from pong.core.rollout import DOWN, UP
from pong.envs.make import make_env
from pong.tools.evaluate import FrameRecorder


@pytest.mark.ale
@pytest.mark.parametrize(("env_id", "seed"), [("ALE/Pong-v5", 3), ("Pong-v0", 4)])
def test_both_frames_give_the_changes_of_the_binarized_frames_for_a_whole_game(
    env_id: str, seed: int
) -> None:
    """Step by step, the changes, rewards and game end that env.step + binarize give."""
    fast_env, gym_env, plain_env = make_env(env_id), make_env(env_id), make_env(env_id)
    fast = frames_for(fast_env)
    assert isinstance(fast, AleFrames)  # training's default path is the fast one
    reference = GymFrames(gym_env)
    rng = np.random.default_rng(seed)
    prev = binarize(plain_env.reset(seed=seed)[0])
    np.testing.assert_array_equal(fast.reset(seed=seed), prev)
    np.testing.assert_array_equal(reference.reset(seed=seed), prev)
    done, steps, points, moves = False, 0, 0, 0
    while not done:
        action = UP if rng.random() < 0.5 else DOWN
        observation, want_reward, terminated, truncated, _ = plain_env.step(action)
        cur = binarize(observation)
        want_changed = np.flatnonzero(cur != prev)
        want = (want_changed, cur[want_changed], float(want_reward), terminated or truncated)
        for frames in (fast, reference):
            changed, arrived, reward, done = frames.step(action)
            np.testing.assert_array_equal(changed, want[0], err_msg=f"step {steps}")
            np.testing.assert_array_equal(arrived, want[1], err_msg=f"step {steps}")
            assert (reward, done) == want[2:], f"step {steps}"
        prev = cur
        steps, points, moves = steps + 1, points + abs(reward), moves + len(changed)
    assert points >= 21 and steps > 500 and moves > 10 * steps  # a whole game, ball in play
    # The table learned Pong's few colours from the RGB screen and nothing else.
    known = np.flatnonzero(fast.table != UNKNOWN)
    assert 2 <= known.size <= 16
    assert set(fast.table[known]) == {0, 1}  # background and objects both seen
    for env in (fast_env, gym_env, plain_env):
        env.close()


@pytest.mark.ale
def test_frames_for_uses_gymnasium_where_ale_frames_would_differ() -> None:
    recorded = FrameRecorder(
        make_env(), lambda frame: None
    )  # a wrapper that must see every observation
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
    first = frames.reset(seed=0)
    assert first.shape == (6400,) and first.dtype == bool and first.any()
    changed, arrived, reward, done = frames.step(UP)
    assert arrived.dtype == bool and isinstance(reward, float) and isinstance(done, bool)
    env.close()
