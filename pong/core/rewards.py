"""A game's rewards -> its discounted returns, reset at each point, and its advantages."""

from __future__ import annotations

import numpy as np

__all__ = ["advantages", "gamma", "process_rewards"]

gamma = 0.99  # discount factor


def process_rewards(r: np.ndarray, gamma: float = gamma) -> np.ndarray:
    """2016's ``discount_rewards``: the (T,) float64 discounted returns of the (T,) rewards
    ``r``, summed backwards. A non-zero reward ends a point (in Pong), so the sum restarts
    there: a point's outcome is not credited to the point before.

    Example:
        >>> process_rewards(np.array([0.0, 0.0, 1.0, 0.0, -1.0]), gamma=0.5)
        array([ 0.25,  0.5 ,  1.  , -0.5 , -1.  ])
    """
    r = np.asarray(r, dtype=np.float64).ravel()
    discounted_r = np.zeros_like(r)
    running_add = 0.0
    for t in reversed(range(r.size)):
        if r[t] != 0:
            running_add = 0.0  # a point ended: reset the sum
        running_add = running_add * gamma + r[t]
        discounted_r[t] = running_add
    return discounted_r


def advantages(r: np.ndarray, gamma: float = gamma) -> tuple[np.ndarray, str | None]:
    """A game's advantages, ``(adv, note)``: its discounted returns standardised to mean 0 and
    standard deviation 1, and ``note`` None. Where they cannot be (all equal, as in a game cut
    short before any point, where 2016 divided by zero into NaN weights; or a spread that is
    not finite), ``adv`` is zeros and ``note`` says why.

    Example:
        >>> adv, note = advantages(np.array([0.0, 1.0]), gamma=0.5)
        >>> adv, note
        (array([-1.,  1.]), None)
        >>> advantages(np.zeros(3))[1]
        'returns constant over the 3-step game (std 0): zero gradient instead of NaN'
    """
    returns = process_rewards(r, gamma)
    adv = returns - np.mean(returns)
    std = np.std(adv)
    if not std > 0 or not np.isfinite(std):
        what = "constant" if std == 0 else "not finite"
        why = f"returns {what} over the {adv.size}-step game (std {std:g})"
        return np.zeros_like(adv), f"{why}: zero gradient instead of NaN"
    adv /= std
    return adv, None
