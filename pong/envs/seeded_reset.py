"""A seeded reset of an ale-py env without reloading the ROM: the same state, far sooner.

Every game is seeded, and ale-py's ``reset(seed=s)`` reloads the ROM (``benchmarks/README.md``)
only to restart ALE's sticky-action generator, an mt19937 kept as text in the state; this resets
unseeded and writes ``s``'s generator into the state, once the two ways agreed."""

import contextlib
import itertools
import struct
from typing import Any, NamedTuple

import ale_py
import gymnasium as gym
import numpy as np

__all__ = ["SeededReset", "Template", "mt19937_text"]

INT = struct.Struct("<i")  # ALE's serializer writes an int as 4 little-endian bytes
HEADER, TRAILER = 6 * INT.size, 2 * INT.size  # ALEState's ints before the emulator's, after
Reset = tuple[np.ndarray, dict[str, Any]]


def mt19937_text(seed: int) -> bytes:
    """``std::mt19937(seed)``, as NumPy's legacy generator is seeded, as C++'s ``<<`` writes it."""
    _, words, position, *_ = np.random.RandomState(int(seed) & 0xFFFFFFFF).get_state()
    return " ".join(map(str, [*words.tolist(), position])).encode()  # 624 words, position


def _sized(data: bytes) -> bytes:  # as ALE writes a string: its length first
    return INT.pack(len(data)) + data


class Template(NamedTuple):
    """A seeded reset's state (``ALEState.serialize``) cut around its generator: ``header``,
    the emulator's sized part (``before_rng``, then the generator), ``trailer``."""

    header: bytes
    before_rng: bytes
    trailer: bytes

    @classmethod
    def cut(cls, state: bytes, ale_seed: int) -> "Template | None":
        """``state``, left by a reset seeded with ``ale_seed``, cut (None: not of that shape)."""
        rng, emulator = _sized(mt19937_text(ale_seed)), state[HEADER + INT.size : -TRAILER]
        if not emulator.endswith(rng) or state[HEADER:] != _sized(emulator) + state[-TRAILER:]:
            return None
        return cls(state[:HEADER], emulator[: -len(rng)], state[-TRAILER:])

    def state(self, ale_seed: int) -> bytes:
        """The state a reset seeded with ``ale_seed`` leaves."""
        emulator = self.before_rng + _sized(mt19937_text(ale_seed))
        return self.header + _sized(emulator) + self.trailer


class SeededReset(gym.Wrapper):
    """An ale-py env whose seeded resets restore a state, once checked to be ale-py's reset
    exactly (ALE settings changed after that check are not re-applied)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.template: Template | None = None  # another seed's state, cut
        self.quick: bool | None = None  # restoring gave ale-py's reset (None: not yet tried)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        if seed is None or self.quick is False:
            return self.env.reset(seed=seed, options=options)
        return self._restore(seed, options) if self.quick else self._check(seed, options)

    def _check(self, seed: int, options: dict[str, Any] | None) -> Reset:
        """``reset(seed=seed)`` the quick way and ale-py's, compared; ale-py's is kept. The
        template's ALE seed is on the other side of 2**31: both readings, signed and unsigned."""
        atari = self.env.unwrapped
        gym.Env.reset(atari, seed=seed)  # a seed ale-py refuses is refused before anything
        other = next(s for s in itertools.count() if _high(s) != _high(seed))
        _, info = self.env.reset(seed=other, options=options)
        quick = None
        with contextlib.suppress(Exception):  # no template, or states not made from bytes
            self.template = Template.cut(_state(atari), info["seeds"][1])
            quick = (*self._restore(seed, options), _state(atari))
        observation, info = self.env.reset(seed=seed, options=options)
        same = quick and quick[2] == _state(atari) and np.array_equal(quick[0], observation)
        self.quick = bool(same and quick[1] == info)  # info: ints, and the seeds as numbers
        return observation, info

    def _restore(self, seed: int, options: dict[str, Any] | None) -> Reset:
        """``reset(seed=seed)`` as the emulator's unseeded reset and a restored state."""
        atari = self.env.unwrapped
        gym.Env.reset(atari, seed=seed)  # as ale-py's: checks the seed, sets np_random_seed
        self.env.reset(options=options)  # for what the state does not hold: the last action
        seeds = atari.seed_game(seed)  # as reset(seed=...) seeds: random frameskips, ALE's seed
        atari.ale.restoreState(ale_py.ALEState(self.template.state(seeds[1])))
        return atari._get_obs(), {**atari._get_info(), "seeds": seeds}


def _state(atari: gym.Env) -> bytes:
    return atari.ale.cloneState(include_rng=True).serialize()


def _high(seed: int) -> bool:  # whether ``seed``'s ALE seed (``AtariEnv.seed_game``) is >= 2**31
    return int(np.random.SeedSequence(seed).generate_state(2)[1]) >= 2**31
