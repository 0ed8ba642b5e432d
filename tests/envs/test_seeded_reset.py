from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from pong.core.model import DOWN, UP
from pong.envs.make import make_env
from pong.envs.seeded_reset import SeededReset, Template, mt19937_text

# Seeds whose ALE seed (ale-py derives it) is below and above 2**31, where a signed
# and an unsigned reading of it would part.
SEEDS = (0, 1, 2, 5)
TEMPLATE_STATE = Template.state  # before a test replaces it


def ale_seed(seed: int) -> int:
    """The ALE seed ale-py's ``reset(seed=seed)`` gives, recomputed here."""
    return int(np.random.SeedSequence(seed).generate_state(2)[1])


def test_the_seeds_cover_ale_seeds_on_both_sides_of_2_31() -> None:
    assert {ale_seed(s) >= 2**31 for s in SEEDS} == {False, True}


@pytest.mark.parametrize("seed", [0, 5489, 2**31 - 1, 2**31 + 7, 2**32 - 1])
def test_mt19937_text_is_the_standard_seeding(seed: int) -> None:
    """Against std::mt19937's seeding recurrence (init_genrand), written out here."""
    words = [seed]
    for i in range(1, 624):
        words.append((1812433253 * (words[-1] ^ (words[-1] >> 30)) + i) & 0xFFFFFFFF)
    assert mt19937_text(seed) == " ".join(map(str, [*words, 624])).encode()


def ale_state(env: gym.Env) -> bytes:
    return env.unwrapped.ale.cloneState(include_rng=True).serialize()


def play(env: gym.Env, actions: np.ndarray) -> list[tuple]:
    """Each step's observation digest, reward and end, for ``actions``."""
    out = []
    for action in actions:
        observation, reward, terminated, truncated, _ = env.step(int(action))
        out.append((observation.tobytes().__hash__(), reward, terminated, truncated))
        if terminated or truncated:
            break
    return out


def same_info(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


@pytest.mark.ale
@pytest.mark.parametrize("env_id", ["ALE/Pong-v5", "Pong-v0"])
def test_a_quick_seeded_reset_is_ale_pys_reset_exactly(env_id: str) -> None:
    """State (generators included), first frame, info, np_random_seed, frameskip draws and the
    game that follows, against ale-py's own reset on a second env; each reset mid-game.
    """
    quick, plain = make_env(env_id).env, gym.make(env_id)  # make_env's, under FastFrames
    assert isinstance(quick, SeededReset)
    rng = np.random.default_rng(0)
    for n, seed in enumerate([*SEEDS, None, 7]):  # an unseeded reset among them
        assert quick.quick is (None if n == 0 else True)  # first both ways, checked
        observation, info = quick.reset(seed=seed)
        want_observation, want_info = plain.reset(seed=seed)
        assert ale_state(quick) == ale_state(plain)
        np.testing.assert_array_equal(observation, want_observation)
        assert same_info(info, want_info)
        assert quick.unwrapped.np_random_seed == plain.unwrapped.np_random_seed
        actions = rng.choice([UP, DOWN], size=int(rng.integers(100, 400)))
        assert play(quick, actions) == play(plain, actions)  # sticky actions, frameskips
    for env in (quick, plain):
        env.close()


@pytest.mark.ale
@pytest.mark.parametrize("seed", [-1, 2.5, np.int64(3)])
def test_a_seed_ale_py_refuses_is_refused_alike(seed) -> None:
    quick, plain = make_env().env, gym.make("ALE/Pong-v5")  # SeededReset, under FastFrames
    quick.reset(seed=1)  # checked: the next seeded reset is the quick one
    assert quick.quick
    for env in (quick, plain):
        with pytest.raises(gym.error.Error, match="[Ss]eed"):
            env.reset(seed=seed)
    for env in (quick, plain):
        env.close()


@pytest.mark.ale
@pytest.mark.parametrize(
    "spoilt",
    [
        lambda template, ale_seed: b"a state ALE cannot read",
        lambda template, ale_seed: TEMPLATE_STATE(template, ale_seed + 1),  # another generator
    ],
)
def test_a_quick_reset_that_does_not_check_out_leaves_ale_pys_reset(monkeypatch, spoilt) -> None:
    monkeypatch.setattr(Template, "state", spoilt)
    env, plain = make_env().env, gym.make("ALE/Pong-v5")  # SeededReset, under FastFrames
    for seed in (1, 2, 3):
        env.reset(seed=seed)
        plain.reset(seed=seed)
        assert env.quick is False
        assert ale_state(env) == ale_state(plain)
    for e in (env, plain):
        e.close()


@pytest.mark.ale
def test_a_state_of_another_shape_makes_no_template() -> None:
    env = gym.make("ALE/Pong-v5")
    _, info = env.reset(seed=4)
    state = ale_state(env)
    assert Template.cut(state, int(info["seeds"][1])) is not None
    assert Template.cut(state, int(info["seeds"][1]) + 1) is None  # another generator
    assert Template.cut(state[:-1], int(info["seeds"][1])) is None  # cut short
    assert Template.cut(state[:20], int(info["seeds"][1])) is None
    assert Template.cut(state, int(info["seeds"][1])).state(int(info["seeds"][1])) == state
    env.close()


def test_only_atari_envs_are_wrapped() -> None:
    assert not isinstance(make_env("PongToy/Catch-v0"), SeededReset)
