from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pong.core.model import DOWN, UP
from pong.core.preprocess import binarize
from pong.core.rollout import GymFrames, frames_of
from pong.envs.frames import UNKNOWN, AleFrames, FastFrames, with_fast_frames
from pong.envs.make import make_env


@pytest.mark.ale
@pytest.mark.parametrize(("env_id", "seed"), [("ALE/Pong-v5", 3), ("Pong-v0", 4)])
def test_both_frames_give_the_changes_of_the_binarized_frames_for_a_whole_game(
    env_id: str, seed: int
) -> None:
    """Step by step, the changes, rewards and game end that env.step + binarize give."""
    fast_env, gym_env, plain_env = make_env(env_id), make_env(env_id), make_env(env_id)
    fast = frames_of(fast_env)
    assert isinstance(fast, AleFrames)  # make_env's Atari env offers the fast path
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
def test_the_fast_path_is_offered_only_where_ale_frames_are_exact() -> None:
    assert isinstance(with_fast_frames(gym.make("ALE/Pong-v5")), FastFrames)  # can fail
    # play_games's recorder, which must see every observation
    recorded = gym.wrappers.TransformObservation(make_env(), lambda frame: frame, None)
    assert isinstance(frames_of(recorded), GymFrames)  # the wrapper hides the fast path
    assert not isinstance(with_fast_frames(recorded), FastFrames)
    blended = gym.make("ALE/Pong-v5")
    blended.unwrapped.ale.setBool("color_averaging", True)  # a pixel mixes two frames
    grey = gym.make("ALE/Pong-v5", obs_type="grayscale")
    for env in (blended, grey):
        assert with_fast_frames(env) is env and isinstance(frames_of(env), GymFrames)
    for env in (recorded, blended, grey):
        env.close()


def test_the_toy_env_s_frames_are_gymnasiums() -> None:
    env = make_env("PongToy/Catch-v0")
    frames = frames_of(env)
    assert isinstance(frames, GymFrames)
    first = frames.reset(seed=0)
    assert first.shape == (6400,) and first.dtype == bool and first.any()
    changed, arrived, reward, done = frames.step(UP)
    assert arrived.dtype == bool and isinstance(reward, float) and isinstance(done, bool)
    env.close()
