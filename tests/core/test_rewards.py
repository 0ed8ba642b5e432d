from __future__ import annotations

import numpy as np
import pytest

from pong.core.rewards import advantages, process_rewards


@pytest.mark.parametrize(
    ("rewards", "gamma", "expected"),
    [
        # one point lost at the end: 0.99^k backwards
        ([0, 0, -1], 0.99, [-0.9801, -0.99, -1.0]),
        # two points: the sum restarts after the first point's reward
        ([0, 1, 0, 0, -1], 0.5, [0.5, 1.0, -0.25, -0.5, -1.0]),
        # steps after the last point get nothing
        ([1, 0, 0], 0.9, [1.0, 0.0, 0.0]),
        # consecutive points: each stands alone
        ([1, -1, 1], 0.9, [1.0, -1.0, 1.0]),
        ([0, 0, 0], 0.99, [0.0, 0.0, 0.0]),
    ],
)
def test_process_rewards_hand_worked(rewards, gamma, expected) -> None:
    np.testing.assert_allclose(process_rewards(np.array(rewards, float), gamma), expected)


def test_process_rewards_does_not_modify_input() -> None:
    r = np.array([0.0, 1.0, 0.0, -1.0])
    before = r.copy()
    process_rewards(r)
    np.testing.assert_array_equal(r, before)


def test_advantages_are_standardised_returns() -> None:
    r = np.array([0, 0, 1, 0, 0, 0, -1, 0, -1], float)
    adv, note = advantages(r, gamma=0.9)
    returns = process_rewards(r, 0.9)
    expected = (returns - returns.mean()) / returns.std()
    np.testing.assert_allclose(adv, expected, rtol=1e-12)
    assert note is None
    assert abs(adv.mean()) < 1e-12 and abs(adv.std() - 1) < 1e-12


@pytest.mark.parametrize("rewards", [[0.0] * 5, [1.0], [0.0]])
def test_constant_returns_give_zeros_and_a_note_not_nan(rewards) -> None:
    adv, note = advantages(np.array(rewards))
    np.testing.assert_array_equal(adv, np.zeros(len(rewards)))
    assert note is not None and "std 0" in note
