"""A seeded reset of an ale-py env without reloading the ROM: the same state, far sooner.

Every game of a run is seeded (``pong.core.worker.game_seed``), so that any worker
plays it the same; ale-py's ``reset(seed=s)`` reloads the ROM for that, to restart
ALE's random generator (sticky actions) from ``s``, at many times an unseeded
reset's cost (``benchmarks/README.md``). After a seeded reset the emulator's state
is the same for every seed tried but for that generator: a standard mt19937 seeded
with a number ale-py derives from ``s``, saved last in the emulator's part of the
state as text (624 words and a position). ``SeededReset`` resets without a seed,
restores that state with the generator's words for ``s`` written in, and seeds the
env's own generator (random frameskips) as ``reset(seed=s)`` does. It does so only
once it has seen it hold: its first seeded reset is made both ways and ale-py's
state, observation and info compared; if they differ, every seeded reset stays
ale-py's own.
"""

from __future__ import annotations

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
    """``std::mt19937(seed)`` as C++'s ``operator<<`` writes it: 624 words, then its position
    (the standard's seeding recurrence, as numpy's legacy ``RandomState(seed)``'s).

    Example:
        >>> words = mt19937_text(5489).split()
        >>> words[:3], words[-1], len(words)
        ([b'5489', b'1301868182', b'2938499221'], b'624', 625)
    """
    words = [int(seed) & 0xFFFFFFFF]
    for i in range(1, 624):
        prev = words[-1]
        words.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
    return " ".join(map(str, [*words, 624])).encode()


class Template(NamedTuple):
    """A seeded reset's saved state (``ALEState.serialize``) cut around its generator:
    ``header``, the emulator's state, length-prefixed (``before_rng``, then the generator
    as a length-prefixed string), then ``trailer``."""

    header: bytes
    before_rng: bytes
    trailer: bytes

    @classmethod
    def cut(cls, state: bytes, ale_seed: int) -> Template | None:
        """``state``, left by a reset seeded with ``ale_seed``, cut (None: not of that shape)."""
        if len(state) < HEADER + INT.size + TRAILER:
            return None
        (size,) = INT.unpack_from(state, HEADER)
        start = HEADER + INT.size
        emulator, trailer = state[start : start + size], state[start + size :]
        rng = mt19937_text(ale_seed)
        rng = INT.pack(len(rng)) + rng
        if len(trailer) != TRAILER or not emulator.endswith(rng):
            return None
        return cls(state[:HEADER], emulator[: -len(rng)], trailer)

    def state(self, ale_seed: int) -> bytes:
        """The state a reset seeded with ``ale_seed`` leaves."""
        rng = mt19937_text(ale_seed)
        emulator = self.before_rng + INT.pack(len(rng)) + rng
        return self.header + INT.pack(len(emulator)) + emulator + self.trailer


class SeededReset(gym.Wrapper):
    """An ale-py env, as ``gymnasium.make`` returns it, whose ``reset(seed=...)`` restores a
    state instead of loading the ROM, once it has checked that this gives ale-py's reset
    exactly. ALE settings changed after the first seeded reset are not re-applied."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.template: Template | None = None  # another seed's state, cut
        self.quick: bool | None = None  # restoring gave ale-py's reset (None: not yet tried)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Reset:
        if seed is not None and self.quick is None:
            return self._check(seed, options)
        if seed is not None and self.quick:
            return self._restore(seed, options)
        return self.env.reset(seed=seed, options=options)

    def _check(self, seed: int, options: dict[str, Any] | None) -> Reset:
        """``reset(seed=seed)`` the quick way and ale-py's way, compared; ale-py's is kept. The
        template's seed has its ALE seed on the other side of 2**31 from ``seed``'s, so that
        both readings of it, signed and unsigned, are checked."""
        atari = self.env.unwrapped
        gym.Env.reset(atari, seed=seed)  # a seed ale-py refuses is refused before anything
        other = next(s for s in itertools.count() if _high(s) != _high(seed))
        _, info = self.env.reset(seed=other, options=options)
        state = atari.ale.cloneState(include_rng=True).serialize()
        self.template = Template.cut(state, info["seeds"][1]) if "seeds" in info else None
        quick = None
        if self.template is not None:
            try:
                observation, info = self._restore(seed, options)
                quick = (atari.ale.cloneState(include_rng=True).serialize(), observation, info)
            except Exception:  # an ale-py whose states cannot be made from bytes: not quick
                pass
        observation, info = self.env.reset(seed=seed, options=options)
        self.quick = quick is not None and _same(
            quick, (atari.ale.cloneState(include_rng=True).serialize(), observation, info)
        )
        return observation, info

    def _restore(self, seed: int, options: dict[str, Any] | None) -> Reset:
        """``reset(seed=seed)`` as the emulator's unseeded reset and a restored state."""
        import ale_py

        atari = self.env.unwrapped
        gym.Env.reset(atari, seed=seed)  # as ale-py's: checks the seed, sets np_random_seed
        # The unseeded reset resets what the state does not hold (the last sticky action).
        self.env.reset(options=options)
        seeds = atari.seed_game(seed)  # as reset(seed=...) seeds: random frameskips, ALE's seed
        atari.ale.restoreState(ale_py.ALEState(self.template.state(seeds[1])))
        return atari._get_obs(), {**atari._get_info(), "seeds": seeds}


def _high(seed: int) -> bool:
    """Whether the ALE seed ale-py derives from ``seed`` is 2**31 or more."""
    return int(np.random.SeedSequence(seed).generate_state(2)[1]) >= 2**31


def _same(a: tuple[bytes, np.ndarray, dict], b: tuple[bytes, np.ndarray, dict]) -> bool:
    """Equal states, observations and infos (the seeds compared as numbers)."""
    (state_a, obs_a, info_a), (state_b, obs_b, info_b) = a, b
    same_info = info_a.keys() == info_b.keys() and all(
        np.array_equal(info_a[k], info_b[k]) for k in info_a
    )
    return state_a == state_b and np.array_equal(obs_a, obs_b) and same_info
