"""A seeded reset of an ale-py env without reloading the ROM: the same state, far sooner.

Every game of a run is seeded (``pong.core.worker.game_seed``), so that it is the
same game whichever worker plays it. ale-py's ``reset(seed=s)`` reloads the ROM
for that, so that ALE's random generator (the one that draws sticky actions)
starts from ``s``: a worker would pay a ROM load, many times an unseeded
reset's cost, for every game (``benchmarks/README.md`` has the figures).

After a seeded reset the emulator's state is the same for every seed but for
that generator (so it was in every seed tried; the check below tries it
again), a standard mt19937 seeded with a number ale-py derives from ``s``,
which ALE saves last in the emulator's part of its state, as text (its 624
words and its position). ``SeededReset`` resets without a seed, then
restores the state a seeded reset once left, with the generator's words for
``s`` written in, and seeds the env's own generator (random frameskips) as
``reset(seed=s)`` does.

It relies on that only once it has seen it hold: its first seeded reset, to
``s``, is made both ways, the template coming from ale-py's reset to another
seed, and ale-py's state, observation and info are compared with the quick
way's. Only if they are equal are later seeded resets made the quick way;
otherwise (an ale-py that saves or restores its state another way) every
seeded reset stays ale-py's own.
"""

from __future__ import annotations

import itertools
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
    the ROM, once it has checked that this gives ale-py's reset exactly.

    For an env as ``gymnasium.make`` returns it (nothing but its API checks
    between this and the ``AtariEnv``). ALE settings changed after the first
    seeded reset are not re-applied, as a ROM load would.

    Args:
        env: an ale-py env, as ``gymnasium.make`` returns it.
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.template: Template | None = None  # another seed's state, cut
        self.quick: bool | None = None  # restoring gave ale-py's reset (None: not yet tried)

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
        """``reset(seed=seed)`` the quick way and ale-py's way, compared; ale-py's is kept.

        The template comes from a seed whose ALE seed lies on the other side of
        2**31 from ``seed``'s, so that both readings of it, signed and unsigned,
        are checked.
        """
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

    def _restore(
        self, seed: int, options: dict[str, Any] | None
    ) -> tuple[np.ndarray, dict[str, Any]]:
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
