from __future__ import annotations

import csv
import subprocess
import sys

import numpy as np
import pytest

from pong.core.preprocess import binarize
from pong.envs.make import make_env
from pong.envs.toy import ENV_ID, PADDLE_COL, PADDLE_HALF
from tests.helpers import run_driver


def test_frames_look_like_pong_to_the_preprocessing() -> None:
    env = make_env(ENV_ID)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (210, 160, 3) and obs.dtype == np.uint8
    assert np.flatnonzero(binarize(obs)).size == 1 + 2 * PADDLE_HALF + 1  # ball + paddle cells
    assert env.unwrapped.get_wrapper_attr("points") == 5


def play(policy, seed: int = 0, games: int = 20) -> float:
    env = make_env(ENV_ID)
    env.reset(seed=seed)
    game = env.unwrapped
    scores = []
    for _ in range(games):
        env.reset()
        done, score = False, 0.0
        while not done:
            _, reward, terminated, truncated, _ = env.step(policy(game))
            score += reward
            assert reward in (-1.0, 0.0, 1.0)
            done = terminated or truncated
        scores.append(score)
    return float(np.mean(scores))


def test_steering_toward_the_paddle_wins_every_point_and_away_loses_them() -> None:
    assert play(lambda g: 3 if g.ball_col < PADDLE_COL else 2) == 5.0
    assert play(lambda g: 2 if g.ball_col < PADDLE_COL else 3) == -5.0


@pytest.mark.ray
def test_the_real_training_loop_learns_the_toy(tmp_path, shared_ray) -> None:
    """60 updates of 10 games with the real driver, Ray workers and RMSProp.

    Measured with seeds 0, 1, 2: the mean score of the first 100 games was
    -1.8 to -2.2 and of the last 100 +3.0 to +3.5 (a random policy: -3.4;
    with the update's sign flipped: -4.2 then -5.0). The margin asked here
    (+3.0 better, and above +1.5) fails for a flipped gradient, a blind
    preprocessing or an update that does nothing.
    """
    address, env = shared_ray
    run = tmp_path / "run"
    proc = run_driver(
        [
            f"--env={ENV_ID}",
            "--batch-size=10",
            "--updates=60",
            "--learning-rate=1e-2",
            "--seed=0",
            f"--address={address}",
            f"--run-dir={run}",
        ],
        env,
    )
    assert proc.returncode == 0, proc.stderr
    with open(run / "games.csv", newline="") as f:
        scores = [float(row["score"]) for row in csv.DictReader(f)]
    assert len(scores) == 600
    first, last = np.mean(scores[:100]), np.mean(scores[-100:])
    assert last - first >= 3.0 and last >= 1.5, (first, last)


def test_after_import_pong_envs_gymnasium_makes_the_toy_and_check_env_passes_without_a_warning():
    code = (
        "import warnings; warnings.simplefilter('error')\n"
        "import gymnasium, pong.envs\n"
        "from gymnasium.utils.env_checker import check_env\n"
        "env = gymnasium.make('PongToy/Catch-v0')\n"
        "check_env(env.unwrapped)\n"
        "print(env.spec.id, env.observation_space.shape)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout == "PongToy/Catch-v0 (210, 160, 3)\n"
