"""TensorBoard's events, read back with TensorBoard's own reader."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from pong.run.board import Board

TAGS = {
    "charts/episodic_return",
    "charts/episodic_length",
    "charts/SPS",
    "charts/running_mean",
    "charts/update_seconds",
}


class Counters:
    """What Board reads of a Trainer, after each made-up update of two games."""

    def __init__(self) -> None:
        self.steps, self.running_mean = 0, None

    def play(self, scores: list[float], game_steps: list[int], seconds: float) -> SimpleNamespace:
        self.steps += sum(game_steps)
        self.running_mean = sum(scores) / len(scores)
        return SimpleNamespace(
            scores=scores,
            game_steps=game_steps,
            steps=sum(game_steps),
            seconds=seconds,
            steps_per_second=sum(game_steps) / seconds,
        )


def read(run_dir) -> dict[str, list[tuple[int, float]]]:
    board = EventAccumulator(str(run_dir))
    board.Reload()
    return {
        tag: [(e.step, pytest.approx(e.value)) for e in board.Scalars(tag)]
        for tag in board.Tags()["scalars"]
    }


def test_the_curves_are_cleanrls_tags_at_env_steps(tmp_path) -> None:
    trainer, board = Counters(), Board(tmp_path)
    for scores, game_steps in (([-21, -20], [100, 150]), ([-19, -21], [120, 80])):
        board.record(trainer.play(scores, game_steps, seconds=2.0), trainer)
    board.close()
    curves = read(tmp_path)
    assert set(curves) == TAGS
    assert curves["charts/episodic_return"] == [(100, -21), (250, -20), (370, -19), (450, -21)]
    assert curves["charts/episodic_length"] == [(100, 100), (250, 150), (370, 120), (450, 80)]
    assert curves["charts/SPS"] == [(250, 125), (450, 100)]
    assert curves["charts/running_mean"] == [(250, -20.5), (450, -20)]
    assert curves["charts/update_seconds"] == [(250, 2), (450, 2)]
    board = EventAccumulator(str(tmp_path))
    board.Reload()
    assert all(
        e.wall_time > 1.7e9 for e in board.Scalars("charts/SPS")
    )  # when, for TensorBoard's time axes


def test_a_resumed_run_continues_its_curves_without_repeating_a_step(tmp_path) -> None:
    trainer, board = Counters(), Board(tmp_path)
    board.record(trainer.play([-21], [100], seconds=1.0), trainer)  # update 1, checkpointed
    saved_steps = trainer.steps
    board.record(trainer.play([-20], [100], seconds=1.0), trainer)  # update 2: lost in a kill
    board.close()
    trainer.steps = saved_steps  # resumed from the checkpoint of update 1
    board = Board(tmp_path, resumed_at_step=saved_steps)
    board.record(trainer.play([-19], [90], seconds=1.0), trainer)  # update 2 again
    board.record(trainer.play([-18], [80], seconds=1.0), trainer)  # update 3
    board.close()
    curves = read(tmp_path)
    assert curves["charts/episodic_return"] == [(100, -21), (190, -19), (270, -18)]
    assert [step for step, _ in curves["charts/SPS"]] == [100, 190, 270]
