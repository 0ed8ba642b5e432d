"""A seeded reset of an ale-py env without reloading the ROM: the same state, far sooner.

Every game is seeded (``pong.core.worker.game_seed``), and ale-py's ``reset(seed=s)`` reloads
the ROM at many times an unseeded reset's cost (``benchmarks/README.md``) only to restart ALE's
generator (sticky actions), an mt19937 saved as text in the state. ``SeededReset`` resets
unseeded and restores that state with ``s``'s generator written in, once its first seeded
reset, made both ways, gave the same state, observation and info."""

from __future__ import annotations

import contextlib
import itertools
import struct
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

__all__ = ["SeededReset", "Template", "mt19937_text"]

INT = struct.Struct("<i")  # ALE's serializer writes an int as 4 little-endian bytes
Reset = tuple[np.ndarray, dict[str, Any]]
HEADER = 6 * INT.size  # ALEState: paddles, frame numbers, mode, difficulty, then the emulator
TRAILER = 2 * INT.size  # then the paddles' limits


def mt19937_text(seed: int) -> bytes:
    """``std::mt19937(seed)`` as C++'s ``operator<<`` writes it: 624 words, then its position."""
    words = [int(seed) & 0xFFFFFFFF]
    for i in range(1, 624):
        words.append((1812433253 * (words[-1] ^ (words[-1] >> 30)) + i) & 0xFFFFFFFF)
    return " ".join(map(str, [*words, 624])).encode()


class Template(NamedTuple):
    """A seeded reset's state (``ALEState.serialize``) cut around its generator: ``header``,
    the emulator's length-prefixed part (``before_rng``, then the generator), ``trailer``."""

    header: bytes
    before_rng: bytes
    trailer: bytes

    @classmethod
    def cut(cls, state: bytes, ale_seed: int) -> Template | None:
        """``state``, left by a reset seeded with ``ale_seed``, cut (None: not of that shape)."""
        if len(state) < HEADER + INT.size + TRAILER:
            return None
        (size,) = INT.unpack_from(state, HEADER)
        start, rng = HEADER + INT.size, mt19937_text(ale_seed)
        rng = INT.pack(len(rng)) + rng  # as the state holds it: a length-prefixed string
        emulator, trailer = state[start : start + size], state[start + size :]
        if len(trailer) != TRAILER or not emulator.endswith(rng):
            return None
        return cls(state[:HEADER], emulator[: -len(rng)], trailer)

    def state(self, ale_seed: int) -> bytes:
        """The state a reset seeded with ``ale_seed`` leaves."""
        rng = mt19937_text(ale_seed)
        emulator = self.before_rng + INT.pack(len(rng)) + rng
        return self.header + INT.pack(len(emulator)) + emulator + self.trailer


class SeededReset(gym.Wrapper):
    """An ale-py env whose ``reset(seed=...)`` restores a state instead of loading the ROM, once
    checked to give ale-py's reset exactly (ALE settings changed after that are not re-applied)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.template: Template | None = None  # another seed's state, cut
        self.quick: bool | None = None  # restoring gave ale-py's reset (None: not yet tried)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        if seed is None or self.quick is False:
            return self.env.reset(seed=seed, options=options)
        return self._restore(seed, options) if self.quick else self._check(seed, options)

    def _check(self, seed: int, options: dict[str, Any] | None) -> Reset:
        """``reset(seed=seed)`` the quick way and ale-py's way, compared; ale-py's is kept. The
        template's seed has its ALE seed on the other side of 2**31 from ``seed``'s, so that
        both readings of it, signed and unsigned, are checked."""
        atari = self.env.unwrapped
        gym.Env.reset(atari, seed=seed)  # a seed ale-py refuses is refused before anything
        other = next(s for s in itertools.count() if _high(s) != _high(seed))
        _, info = self.env.reset(seed=other, options=options)
        self.template = Template.cut(_state(atari), info["seeds"][1]) if "seeds" in info else None
        quick = None
        with contextlib.suppress(Exception):  # an ale-py whose states cannot be made from bytes
            if self.template is not None:
                quick = (*self._restore(seed, options), _state(atari))
        observation, info = self.env.reset(seed=seed, options=options)
        self.quick = quick is not None and _same(quick, (observation, info, _state(atari)))
        return observation, info

    def _restore(self, seed: int, options: dict[str, Any] | None) -> Reset:
        """``reset(seed=seed)`` as the emulator's unseeded reset and a restored state."""
        import ale_py

        atari = self.env.unwrapped
        gym.Env.reset(atari, seed=seed)  # as ale-py's: checks the seed, sets np_random_seed
        self.env.reset(options=options)  # for what the state does not hold: the last action
        seeds = atari.seed_game(seed)  # as reset(seed=...) seeds: random frameskips, ALE's seed
        atari.ale.restoreState(ale_py.ALEState(self.template.state(seeds[1])))
        return atari._get_obs(), {**atari._get_info(), "seeds": seeds}


def _state(atari: gym.Env) -> bytes:
    return atari.ale.cloneState(include_rng=True).serialize()


def _high(seed: int) -> bool:
    """Whether the ALE seed ale-py derives from ``seed`` is 2**31 or more."""
    return int(np.random.SeedSequence(seed).generate_state(2)[1]) >= 2**31


def _same(a: tuple[np.ndarray, dict, bytes], b: tuple[np.ndarray, dict, bytes]) -> bool:
    """Equal observations, infos (the seeds compared as numbers) and states."""
    (obs_a, info_a, state_a), (obs_b, info_b, state_b) = a, b
    same = state_a == state_b and np.array_equal(obs_a, obs_b) and info_a.keys() == info_b.keys()
    return same and all(np.array_equal(info_a[k], info_b[k]) for k in info_a)
