"""A seeded reset of an ale-py env without reloading the ROM: the same state, far sooner.

Every game of a run is seeded (``pong.worker.game_seed``), so that it is the
same game whichever worker plays it. ale-py's ``reset(seed=s)`` reloads the ROM
for that, so that ALE's random generator (the one that draws sticky actions)
starts from ``s``: a worker would pay a ROM load, many times an unseeded
reset's cost, for every game (``benchmarks/README.md`` has the figures).

After a seeded reset the emulator's state is the same for every seed but for
that generator, a standard mt19937 seeded with a number ale-py derives from
``s``, which ALE saves last in its state, as text (its 624 words and its
position). ``SeededReset`` resets without a seed, then restores the state a
seeded reset once left, with the generator's words for ``s`` written in, and
seeds the env's own generator (random frameskips) as ``reset(seed=s)`` does.

It relies on that only once it has seen it hold: its first seeded reset, to
``s``, is two of ale-py's own, one to another seed whose state becomes the
template, then one to ``s``, compared byte for byte with what the template
gives for ``s``. Only if they are equal are later seeded resets made the quick
way; otherwise (an ale-py that saves its state another way) every seeded reset
stays ale-py's own.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np

__all__ = ["SeededReset", "Template", "mt19937_text"]

INT = struct.Struct("<i")  # ALE's serializer writes an int as 4 little-endian bytes
HEADER = 6 * INT.size  # ALEState: paddles, frame numbers, mode, difficulty, then the emulator
TRAILER = 2 * INT.size  # then the paddles' limits


def mt19937_text(seed: int) -> bytes:
    """``std::mt19937(seed)`` as C++'s ``operator<<`` writes it: 624 words, then its position.

    The standard's seeding recurrence; numpy's legacy ``RandomState(seed)`` uses it too.

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
    """A seeded reset's saved state (``ALEState.serialize``), cut around its generator.

    ``header``, then the emulator's state (``before_rng``, then the generator as a
    length-prefixed string), length-prefixed, then ``trailer``.
    """

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
    """An ale-py ``AtariEnv`` whose ``reset(seed=...)`` restores a state instead of loading
    the ROM, once it has checked that this gives ale-py's state exactly.

    Args:
        env: an ale-py env, as ``gymnasium.make`` returns it.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.template: Template | None = None  # another seed's state, cut
        self.quick: bool | None = None  # the template gave ale-py's state (None: not yet seen)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        if seed is not None and self.quick is None:
            return self._check(seed, options)
        if seed is not None and self.quick:
            return self._restore(seed, options)
        return self.env.reset(seed=seed, options=options)

    def _check(
        self, seed: int, options: dict[str, Any] | None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``reset(seed=seed)`` as ale-py does it, after one to another seed for the template;
        whether the template gives ``seed``'s state decides the later resets."""
        ale = self.env.unwrapped.ale
        _, info = self.env.reset(seed=seed + 1, options=options)
        if "seeds" in info:
            self.template = Template.cut(
                ale.cloneState(include_rng=True).serialize(), info["seeds"][1]
            )
        observation, info = self.env.reset(seed=seed, options=options)
        state = ale.cloneState(include_rng=True).serialize()
        self.quick = self.template is not None and self.template.state(info["seeds"][1]) == state
        return observation, info

    def _restore(
        self, seed: int, options: dict[str, Any] | None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """``reset(seed=seed)`` as the emulator's unseeded reset and a restored state."""
        import ale_py

        atari = self.env.unwrapped
        # The unseeded reset resets what the state does not hold (the last sticky action).
        self.env.reset(options=options)
        seeds = atari.seed_game(seed)  # as reset(seed=...) seeds: random frameskips, ALE's seed
        atari.ale.restoreState(ale_py.ALEState(self.template.state(seeds[1])))
        return atari._get_obs(), {**atari._get_info(), "seeds": seeds}
