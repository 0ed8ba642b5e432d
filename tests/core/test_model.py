from __future__ import annotations

import numpy as np
import pytest

from pong.core.model import D, H, Model, policy_backward, policy_forward, zeros_like_weights


def random_game(model: Model, T: int, rng: np.random.Generator):
    """Sparse +-1 inputs like real difference frames, and the actions they sample."""
    epx = np.zeros((T, D))
    for t in range(T):
        idx = rng.choice(D, 30, replace=False)
        epx[t, idx] = rng.choice([-1.0, 1.0], 30)
    logits, eph = [], []
    for x in epx:
        h = np.maximum(0, model.weights["W1"] @ x)
        eph.append(h)
        logits.append(model.weights["W2"] @ h)
    p = 1 / (1 + np.exp(-np.array(logits)))
    y = (rng.random(T) < p).astype(float)
    return epx, np.array(eph), y, p


def objective(weights: dict[str, np.ndarray], epx, y, adv) -> float:
    """sum_t adv_t * log pi(a_t | x_t): what policy_backward differentiates."""
    h = np.maximum(0, epx @ weights["W1"].T)
    p = 1 / (1 + np.exp(-(h @ weights["W2"])))
    return float(np.sum(adv * (y * np.log(p) + (1 - y) * np.log(1 - p))))


def test_init_shapes_and_scale() -> None:
    w = Model(seed=0).weights
    assert w["W1"].shape == (H, D) and w["W2"].shape == (H,)
    assert abs(w["W1"].std() * np.sqrt(D) - 1) < 0.01
    assert abs(w["W2"].std() * np.sqrt(H) - 1) < 0.15


def test_same_seed_same_weights() -> None:
    a, b, c = Model(seed=3), Model(seed=3), Model(seed=4)
    np.testing.assert_array_equal(a.weights["W1"], b.weights["W1"])
    assert not np.array_equal(a.weights["W1"], c.weights["W1"])


def test_policy_forward_matches_the_formula() -> None:
    model = Model(seed=1)
    x = np.random.default_rng(1).choice([-1.0, 0.0, 1.0], D, p=[0.01, 0.98, 0.01])
    aprob, h = policy_forward(model, x)
    W1, W2 = model.weights["W1"], model.weights["W2"]
    h_ref = np.array([max(0.0, float(W1[i] @ x)) for i in range(H)])
    np.testing.assert_allclose(h, h_ref, rtol=1e-12, atol=1e-15)
    assert aprob == pytest.approx(1 / (1 + np.exp(-float(W2 @ h_ref))), rel=1e-12)
    assert 0 < aprob < 1


def test_policy_backward_matches_finite_differences() -> None:
    rng = np.random.default_rng(2)
    model = Model(seed=2)
    T = 12
    epx, eph, y, p = random_game(model, T, rng)
    adv = rng.standard_normal(T)
    grad = policy_backward(model, eph, epx, (y - p) * adv)
    assert grad["W1"].shape == (H, D) and grad["W2"].shape == (H,)

    eps = 1e-6
    active_inputs = np.flatnonzero(np.abs(epx).sum(0))
    entries = [("W2", (i,)) for i in rng.choice(H, 8, replace=False)]
    entries += [
        ("W1", (i, j))
        for i, j in zip(rng.choice(H, 12), rng.choice(active_inputs, 12), strict=True)
    ]
    entries += [("W1", (5, int(np.setdiff1d(np.arange(D), active_inputs)[0])))]  # zero
    for name, index in entries:
        w = {k: v.copy() for k, v in model.weights.items()}
        w[name][index] += eps
        up = objective(w, epx, y, adv)
        w[name][index] -= 2 * eps
        down = objective(w, epx, y, adv)
        numeric = (up - down) / (2 * eps)
        assert grad[name][index] == pytest.approx(numeric, rel=1e-5, abs=1e-8), (name, index)


def test_update_is_one_rmsprop_ascent_step() -> None:
    rng = np.random.default_rng(3)
    model = Model(seed=3)
    before = {k: v.copy() for k, v in model.weights.items()}
    grad = {k: rng.standard_normal(v.shape) for k, v in model.weights.items()}
    cache = {k: rng.random(v.shape) for k, v in model.weights.items()}
    cache_before = {k: v.copy() for k, v in cache.items()}
    model.rmsprop(grad, cache, learning_rate=1e-3, decay_rate=0.9)
    for k in before:
        i = (7, 123) if k == "W1" else (7,)
        g, c = grad[k][i], cache_before[k][i]
        c_new = 0.9 * c + 0.1 * g * g
        assert cache[k][i] == pytest.approx(c_new, rel=1e-12)
        assert model.weights[k][i] == pytest.approx(
            before[k][i] + 1e-3 * g / (c_new**0.5 + 1e-5), rel=1e-12
        )


def test_update_is_the_2016_formula_exactly_on_every_entry() -> None:
    rng = np.random.default_rng(8)
    model = Model(seed=8)
    w = {k: v.copy() for k, v in model.weights.items()}
    cache = {k: rng.random(v.shape) for k, v in model.weights.items()}
    c = {k: v.copy() for k, v in cache.items()}
    grad = zeros_like_weights(model.weights)
    columns = rng.choice(D, 300, replace=False)
    grad["W1"][:, columns] = rng.standard_normal((H, 300))
    grad["W1"][:5, 3] = rng.standard_normal(5)  # a column that is zero in most rows
    grad["W2"][:] = rng.standard_normal(H)
    model.rmsprop(grad, cache, learning_rate=1e-3, decay_rate=0.9)
    for k, g in grad.items():  # the formulas on every entry, as the 2016 program has them
        c_new = 0.9 * c[k] + (1 - 0.9) * g**2
        np.testing.assert_array_equal(cache[k], c_new)
        np.testing.assert_array_equal(model.weights[k], w[k] + 1e-3 * g / (np.sqrt(c_new) + 1e-5))


def test_first_update_from_zero_cache_moves_each_weight_by_about_ten_lr() -> None:
    model = Model(seed=4)
    before = model.weights["W2"].copy()
    grad = {k: np.full_like(v, 0.5) for k, v in model.weights.items()}
    model.rmsprop(grad, zeros_like_weights(model.weights), 1e-4, 0.99)  # the defaults
    # cache = 0.01 * g^2, so the step is 1e-4 * g / (0.1 |g| + 1e-5) ~= 1e-3
    np.testing.assert_allclose(model.weights["W2"] - before, 1e-4 * 0.5 / (0.05 + 1e-5))


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (np.nan, "W1"),
        (np.inf, "W1"),
        (-np.inf, "W1"),
        (1e200, "would make W1"),
    ],  # 1e200**2 overflows
)
def test_update_refuses_a_non_finite_gradient_or_step_and_changes_nothing(bad, message) -> None:
    model = Model(seed=5)
    before = {k: v.copy() for k, v in model.weights.items()}
    grad = zeros_like_weights(model.weights)
    grad["W1"][0, 0] = bad
    cache = zeros_like_weights(model.weights)
    with pytest.raises(FloatingPointError, match=message):
        model.rmsprop(grad, cache, 1e-4, 0.99)
    for k in before:
        np.testing.assert_array_equal(model.weights[k], before[k])
        assert not cache[k].any()


def test_weights_stay_column_major_through_updates() -> None:
    model = Model(seed=9)
    grad = zeros_like_weights(model.weights)
    cache = zeros_like_weights(model.weights)
    grad["W1"] += 0.1
    model.rmsprop(grad, cache, 1e-4, 0.99)
    assert model.weights["W1"].flags.f_contiguous and grad["W1"].flags.f_contiguous
