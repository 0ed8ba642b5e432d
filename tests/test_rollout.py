from __future__ import annotations

import numpy as np
import pytest

from pong.env import make_env
from pong.model import D, H, Model
from pong.rewards import advantages
from pong.rollout import episode_gradient, rollout

pytestmark = pytest.mark.ale


@pytest.fixture(scope="module")
def played():
    """One real game of ALE/Pong-v5 with a fresh policy (about 1,000 steps)."""
    env = make_env()
    model = Model(seed=0)
    episode = rollout(model, env, np.random.default_rng(0), seed=0)
    env.close()
    return model, episode


def test_episode_shapes(played) -> None:
    _, ep = played
    T = len(ep.epr)
    assert ep.epx.shape == (T, D) and ep.eph.shape == (T, H)
    assert ep.epdlogp.shape == (T,) and ep.epr.shape == (T,)


def test_episode_is_one_whole_game(played) -> None:
    _, ep = played
    assert set(np.unique(ep.epr)) <= {-1.0, 0.0, 1.0}
    won, lost = int((ep.epr == 1).sum()), int((ep.epr == -1).sum())
    assert max(won, lost) == 21  # a game of Pong ends when one side reaches 21
    assert ep.epr[-1] != 0  # ...on the step that scores the last point


def test_inputs_are_difference_frames(played) -> None:
    _, ep = played
    assert not ep.epx[0].any()  # first step: no previous frame
    assert set(np.unique(ep.epx)) <= {-1.0, 0.0, 1.0}
    nonzero = (ep.epx != 0).sum(1)
    assert 0 < np.median(nonzero) < 100  # a ball and two paddles move: few pixels change


def test_stored_hidden_states_and_labels_match_the_model(played) -> None:
    model, ep = played
    for t in (0, 1, len(ep.epr) // 2, len(ep.epr) - 1):
        aprob, h = model.policy_forward(ep.epx[t])
        np.testing.assert_array_equal(ep.eph[t], h)
        assert ep.epdlogp[t] in (1 - aprob, -aprob)  # y - aprob with y in {0, 1}


def test_episode_gradient_is_the_dense_formula(played) -> None:
    model, ep = played
    grad, note = episode_gradient(model, ep)
    assert note is None
    adv, _ = advantages(ep.epr)
    W2 = model.weights["W2"]
    dlogp = ep.epdlogp * adv
    dW2 = sum(dlogp[t] * ep.eph[t] for t in range(len(dlogp)))
    dW1 = sum(np.outer(dlogp[t] * W2 * (ep.eph[t] > 0), ep.epx[t]) for t in range(len(dlogp)))
    np.testing.assert_allclose(grad["W2"], dW2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad["W1"], dW1, rtol=1e-9, atol=1e-12)


def test_same_seeds_give_the_same_episode_and_gradient(played) -> None:
    model, ep = played
    env = make_env()
    again = rollout(model, env, np.random.default_rng(0), seed=0)
    env.close()
    np.testing.assert_array_equal(again.epr, ep.epr)
    np.testing.assert_array_equal(again.epdlogp, ep.epdlogp)
    np.testing.assert_array_equal(
        episode_gradient(model, again)[0]["W1"], episode_gradient(model, ep)[0]["W1"]
    )
