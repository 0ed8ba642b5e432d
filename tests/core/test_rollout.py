from __future__ import annotations

import numpy as np
import pytest

from pong.core.model import D, H, Model, policy_backward, policy_forward
from pong.core.reference import game_gradient_dense, play_game_dense
from pong.core.rewards import advantages
from pong.core.rollout import (
    SparseGame,
    game_gradient,
    play_game,
    policy_backward_sparse,
    policy_forward_sparse,
)
from pong.envs.make import make_env

ale = pytest.mark.ale  # the tests that play real Pong


@pytest.fixture(scope="module")
def played():
    """One real game of ALE/Pong-v5 with a fresh policy (about 1,000 steps)."""
    env = make_env()
    model = Model(seed=0)
    game = play_game_dense(model, env, np.random.default_rng(0), reset_seed=0)
    env.close()
    return model, game


@ale
def test_dense_game_shapes(played) -> None:
    _, ep = played
    T = len(ep.epr)
    assert ep.epx.shape == (T, D) and ep.eph.shape == (T, H)
    assert ep.epdlogp.shape == (T,) and ep.epr.shape == (T,)


@ale
def test_a_game_is_one_whole_game(played) -> None:
    _, ep = played
    assert set(np.unique(ep.epr)) <= {-1.0, 0.0, 1.0}
    won, lost = int((ep.epr == 1).sum()), int((ep.epr == -1).sum())
    assert max(won, lost) == 21  # a game of Pong ends when one side reaches 21
    assert ep.epr[-1] != 0  # ...on the step that scores the last point


@ale
def test_inputs_are_difference_frames(played) -> None:
    _, ep = played
    assert not ep.epx[0].any()  # first step: no previous frame
    assert set(np.unique(ep.epx)) <= {-1.0, 0.0, 1.0}
    nonzero = (ep.epx != 0).sum(1)
    assert 0 < np.median(nonzero) < 100  # a ball and two paddles move: few pixels change


@ale
def test_stored_hidden_states_and_labels_match_the_model(played) -> None:
    model, ep = played
    for t in (0, 1, len(ep.epr) // 2, len(ep.epr) - 1):
        aprob, h = policy_forward(model, ep.epx[t])
        np.testing.assert_array_equal(ep.eph[t], h)
        assert ep.epdlogp[t] in (1 - aprob, -aprob)  # y - aprob with y in {0, 1}


@ale
def test_game_gradient_is_the_dense_formula(played) -> None:
    model, ep = played
    grad, note = game_gradient_dense(model, ep)
    assert note is None
    adv, _ = advantages(ep.epr)
    W2 = model.weights["W2"]
    dlogp = ep.epdlogp * adv
    dW2 = sum(dlogp[t] * ep.eph[t] for t in range(len(dlogp)))
    dW1 = sum(np.outer(dlogp[t] * W2 * (ep.eph[t] > 0), ep.epx[t]) for t in range(len(dlogp)))
    np.testing.assert_allclose(grad["W2"], dW2, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grad["W1"], dW1, rtol=1e-9, atol=1e-12)


@ale
def test_same_seeds_give_the_same_game_and_gradient(played) -> None:
    model, ep = played
    env = make_env()
    again = play_game_dense(model, env, np.random.default_rng(0), reset_seed=0)
    env.close()
    np.testing.assert_array_equal(again.epr, ep.epr)
    np.testing.assert_array_equal(again.epdlogp, ep.epdlogp)
    np.testing.assert_array_equal(
        game_gradient_dense(model, again)[0]["W1"], game_gradient_dense(model, ep)[0]["W1"]
    )


@pytest.mark.parametrize(
    ("env_id", "seed", "w2_scale"), [("ALE/Pong-v5", 1, 1.0), ("Pong-v0", 2, 30.0)]
)
@ale
def test_fast_path_plays_the_same_game_and_gives_the_dense_gradient(env_id, seed, w2_scale) -> None:
    """The sparse rollout and backward pass against the 2016 dense formulas, on real Pong."""
    model = Model(seed=seed)
    model.weights["W2"] *= w2_scale  # spread aprob away from 0.5: actions depend on the weights
    env = make_env(env_id)
    fast = play_game(model, env, np.random.default_rng(seed), reset_seed=seed)
    dense = play_game_dense(model, env, np.random.default_rng(seed), reset_seed=seed)
    env.close()

    assert len(fast.epr) == len(dense.epr)
    np.testing.assert_array_equal(fast.epr, dense.epr)
    np.testing.assert_array_equal(fast.epdlogp > 0, dense.epdlogp > 0)  # the same actions
    np.testing.assert_allclose(fast.epdlogp, dense.epdlogp, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(fast.epx(), dense.epx)
    on = np.unpackbits(fast.on_bits, axis=1, count=H).astype(bool)
    np.testing.assert_array_equal(on, dense.eph > 0)  # the ReLU pattern the backward uses
    if w2_scale > 1:
        assert np.std(dense.epdlogp) > 0.1  # the test above was not only coin flips

    fast_grad, _ = game_gradient(model, fast)
    reference, _ = game_gradient_dense(model, dense)
    for k in ("W1", "W2"):
        got, want = fast_grad.dense()[k], reference[k]
        assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max(), k
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12 * np.abs(want).max())
    assert sum(a.nbytes for a in fast) / len(fast.epr) <= 1024  # the 2016 storage: ~53 KB a step


@ale
def test_a_game_is_given_up_when_stop_says_so_and_played_whole_otherwise() -> None:
    """``stop`` is asked every ``STOP_EVERY`` steps: a game it stops returns None at the first
    ask, and one it never stops is the game played without it."""
    from pong.core.rollout import STOP_EVERY

    env, model, asked = make_env("ALE/Pong-v5"), Model(seed=0), []
    assert play_game(model, env, np.random.default_rng(1), reset_seed=1, stop=lambda: True) is None

    def never() -> bool:
        asked.append(1)
        return False

    whole = play_game(model, env, np.random.default_rng(1), reset_seed=1, stop=never)
    alone = play_game(model, env, np.random.default_rng(1), reset_seed=1)
    assert len(asked) == 1 + (len(whole.epr) - 1) // STOP_EVERY > 1  # at the start, each 256
    assert whole.epr.tobytes() == alone.epr.tobytes()
    assert whole.epdlogp.tobytes() == alone.epdlogp.tobytes()


def test_a_game_that_ends_as_stop_is_asked_is_kept() -> None:
    """A game whose last step is a ``STOP_EVERY``-th is finished: no ask there gives it up."""
    import gymnasium as gym

    from pong.core.rollout import STOP_EVERY
    from pong.envs.toy import Catch

    env = gym.wrappers.TimeLimit(Catch(points=10**6), max_episode_steps=STOP_EVERY)
    asked = []

    def stop() -> bool:  # not wanted from the second ask on: the one at the game's last step
        asked.append(1)
        return len(asked) > 1

    game = play_game(Model(seed=0), env, np.random.default_rng(0), 0, stop=stop)
    assert game is not None and len(game.epr) == STOP_EVERY and asked == [1]


def sparse_inputs(T: int, rng: np.random.Generator):
    """Random sparse +-1 inputs as (offsets, changed, delta, epx), some steps empty."""
    counts = rng.integers(0, 40, T)
    counts[0] = 0  # the first step of a game has no input
    changed = np.concatenate([rng.choice(D, c, replace=False) for c in counts]).astype(np.uint16)
    delta = rng.choice(np.array([-1, 1], np.int8), changed.size)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    epx = np.zeros((T, D))
    for t in range(T):
        epx[t, changed[offsets[t] : offsets[t + 1]]] = delta[offsets[t] : offsets[t + 1]]
    return offsets, changed, delta, epx


def test_sparse_forward_matches_dense_forward() -> None:
    rng = np.random.default_rng(6)
    model = Model(seed=6)
    offsets, changed, delta, epx = sparse_inputs(5, rng)
    for t in range(5):
        i, v = changed[offsets[t] : offsets[t + 1]], delta[offsets[t] : offsets[t + 1]]
        aprob, h = policy_forward_sparse(model, i, v.astype(float))
        aprob_dense, h_dense = policy_forward(model, epx[t])
        np.testing.assert_allclose(h, h_dense, rtol=1e-12, atol=1e-14)
        assert aprob == pytest.approx(aprob_dense, rel=1e-12)


def test_sparse_backward_matches_dense_backward() -> None:
    rng = np.random.default_rng(7)
    model = Model(seed=7)
    model.weights["W2"] *= 10
    T = 2500  # many BACKWARD_CHUNKs
    offsets, changed, delta, epx = sparse_inputs(T, rng)
    eph = np.maximum(0, epx @ model.weights["W1"].T)
    epdlogp = rng.standard_normal(T)
    dense = policy_backward(model, eph, epx, epdlogp)
    on_bits = np.packbits(eph > 0, axis=1)
    game = SparseGame(offsets, changed, delta, on_bits, epdlogp, np.zeros(T))
    sparse = policy_backward_sparse(model, game, epdlogp)
    assert np.all(np.diff(sparse.columns) > 0)
    np.testing.assert_array_equal(sparse.columns, np.flatnonzero(np.abs(epx).sum(0)))
    for k in ("W1", "W2"):
        np.testing.assert_allclose(sparse.dense()[k], dense[k], rtol=1e-9, atol=1e-12)


def test_sparse_grad_adds_like_the_dense_gradient() -> None:
    rng = np.random.default_rng(8)
    model = Model(seed=8)
    offsets, changed, delta, epx = sparse_inputs(50, rng)
    on_bits = np.packbits(epx @ model.weights["W1"].T > 0, axis=1)
    epdlogp = rng.standard_normal(50)
    game = SparseGame(offsets, changed, delta, on_bits, epdlogp, np.zeros(50))
    grad = policy_backward_sparse(model, game, epdlogp)
    buffer = {k: rng.standard_normal(v.shape) for k, v in model.weights.items()}
    expected = {k: buffer[k] + grad.dense()[k] for k in buffer}
    grad.add_to(buffer)
    for k in buffer:
        np.testing.assert_array_equal(buffer[k], expected[k])
    assert grad.is_finite()
    assert not grad._replace(W2=np.full(H, np.nan)).is_finite()
