"""A toy env with Pong's frames, actions and rewards, that a policy learns in a minute.

``PongToy/Catch-v0``: a ball falls from a random column toward a paddle in the middle of the
bottom row; actions 2 and 3 push it left or right; a catch is +1, a miss -1. A correct learner
steers by the ball's side within a few hundred games, a broken one does not."""

import gymnasium as gym
import numpy as np

__all__ = ["ENV_ID", "Catch"]

ENV_ID = "PongToy/Catch-v0"
CELLS = 80  # the 80 x 80 grid that preprocessing keeps (rows 35..194, every 2nd pixel)
PADDLE_ROW, PADDLE_COL, PADDLE_HALF = 77, CELLS // 2, 6  # the paddle: 13 cells; it never moves
STEER, FALL = 4, 8  # cells a step moves the ball: sideways (actions 2, 3) and down
POINTS = 5  # balls a game drops: its score is at most this
EMPTY = np.full((210, 160, 3), (144, 72, 17), np.uint8)  # Pong's field, erased by preprocessing
EMPTY.flags.writeable = False  # copied for each frame: np.full with a colour is ~30x slower


class Catch(gym.Env):
    """Catch the falling ball. See the module docstring."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}  # Pong-v5's 60 Hz / frameskip 4

    def __init__(self, points: int = POINTS, render_mode: str | None = None) -> None:
        self.points, self.render_mode = points, render_mode
        self.observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(6)  # as Pong: 2 and 3 are the moves

    def _new_ball(self) -> None:
        self.ball_row, self.ball_col = 0, int(self.np_random.integers(0, CELLS))

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.played = 0
        self._new_ball()
        return self.render(), {}

    def step(self, action: int):
        steer = -STEER if action == 2 else STEER if action == 3 else 0
        self.ball_col = min(CELLS - 1, max(0, self.ball_col + steer))
        self.ball_row = min(PADDLE_ROW, self.ball_row + FALL)
        reward = 0.0
        if self.ball_row == PADDLE_ROW:
            reward = 1.0 if abs(self.ball_col - PADDLE_COL) <= PADDLE_HALF else -1.0
            self.played += 1
            self._new_ball()
        return self.render(), reward, self.played >= self.points, False, {}

    def render(self) -> np.ndarray:
        frame = EMPTY.copy()
        row, col = 35 + 2 * self.ball_row, 2 * self.ball_col
        frame[row : row + 2, col : col + 2] = (236, 236, 236)  # the ball
        row, col = 35 + 2 * PADDLE_ROW, 2 * (PADDLE_COL - PADDLE_HALF)
        frame[row : row + 2, col : col + 4 * PADDLE_HALF + 2] = (92, 186, 92)  # the paddle
        return frame


gym.register(id=ENV_ID, entry_point=Catch)  # gymnasium.make(ENV_ID) once pong.envs is imported
