"""The trained agent shipped in results/pong-v5 (see RESULTS.md)."""

from __future__ import annotations

import csv

import pytest

from pong.checkpoint import load
from pong.config import Config
from pong.evaluate import play_games
from pong.model import Model
from tests.helpers import ROOT

RUN = ROOT / "results" / "pong-v5"


def test_the_shipped_policy_and_metrics_are_from_the_same_run() -> None:
    policy = load(RUN / "policy.npz", policy=True)
    assert (RUN / "policy.npz").stat().st_size < 10e6
    assert policy.config == Config(seed=policy.config.seed)  # every setting at its default
    with open(RUN / "updates.csv", newline="") as f:
        updates = list(csv.DictReader(f))
    assert [int(r["update"]) for r in updates] == list(range(1, policy.iteration + 1))
    assert int(updates[-1]["episodes"]) == policy.episodes
    assert float(updates[-1]["running_reward"]) == pytest.approx(policy.running_reward)
    with open(RUN / "episodes.csv", newline="") as f:
        assert sum(1 for _ in csv.DictReader(f)) == policy.episodes


@pytest.mark.ale
def test_the_shipped_policy_plays_far_better_than_a_fresh_one() -> None:
    trained = Model.from_weights(load(RUN / "policy.npz", policy=True).weights)
    [(won, lost, _)] = play_games(trained, "ALE/Pong-v5", episodes=1, seed=0)
    [(fresh_won, fresh_lost, _)] = play_games(Model(seed=0), "ALE/Pong-v5", 1, seed=0)
    assert fresh_won - fresh_lost <= -18  # a fresh policy loses nearly every point
    assert won - lost >= -12, (won, lost)  # the shipped one wins many (RESULTS.md)
