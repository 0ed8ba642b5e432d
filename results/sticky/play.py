"""The sticky actions, measured: a policy's games on ALE/Pong-v5 as ``driver.py --evaluate``
plays them (game i seeded with i), with the env's ``repeat_action_probability`` set to STICKY.
ALE/Pong-v5's own is 0.25: at each emulator frame (4 a step), a quarter of the time, the env
repeats the previous action instead of the one chosen. With 0.25 this prints the games
``--evaluate`` does.

    .venv/bin/python results/sticky/play.py POLICY STICKY GAMES
"""

import ale_py
import gymnasium as gym
import numpy as np

from pong.core.model import Model
from pong.core.rollout import play_game
from pong.envs.frames import with_fast_frames
from pong.envs.seeded_reset import SeededReset
from pong.run.checkpoint import CheckpointError, load
from pong.run.errors import OneLineParser
from pong.tools.evaluate import report

parser = OneLineParser(description=__doc__.split("\n\n")[0])
parser.add_argument("policy", metavar="POLICY", help="a policy file, checkpoint or run directory")
parser.add_argument("sticky", metavar="STICKY", type=float, help="the repeat probability, 0 to 1")
parser.add_argument("games", metavar="GAMES", type=int, help="how many games: seeds 0 to GAMES - 1")
args = parser.parse_args()
policy, sticky, games = args.policy, args.sticky, args.games
if not (0 <= sticky <= 1 and games >= 1):
    parser.error("STICKY is a probability, from 0 to 1, and GAMES at least 1")
ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
gym.register_envs(ale_py)
try:
    model = Model.from_weights(load(policy, policy=True).weights)
except CheckpointError as e:
    parser.refuse(str(e))
env = gym.make("ALE/Pong-v5", repeat_action_probability=sticky)
env = with_fast_frames(SeededReset(env))  # as make_env wraps it
print(f"Playing {games} games of ALE/Pong-v5, repeat_action_probability={sticky}, with the"
      f" policy of {policy}, seed 0", flush=True)  # fmt: skip


def played():  # as pong.tools.evaluate.play_games, on this env
    for seed in range(games):
        rewards = play_game(model, env, np.random.default_rng(seed), seed).epr
        yield int((rewards > 0).sum()), int((rewards < 0).sum()), len(rewards)


points = np.array([won - lost for won, lost, _ in report(played(), 0)])
print(f"Mean score {points.mean():+.2f} (standard deviation {points.std():.2f}) over {games}"
      f" games; won {(points > 0).sum()}")  # fmt: skip
