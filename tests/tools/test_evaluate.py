from __future__ import annotations

import re

import numpy as np
import pytest

import driver
from pong.core.model import Model, zeros_like_weights
from pong.run.checkpoint import FILENAME, Checkpoint, save, save_policy
from pong.run.config import Config
from pong.tools import evaluate
from pong.tools.evaluate import FRAME_SECONDS, play_games, report
from pong.tools.gif import GifWriter
from tests.helpers import ROOT, TOY
from tests.tools.test_gif import assert_gif_shows

pytestmark = pytest.mark.ale


def test_games_are_whole_and_frames_match_steps() -> None:
    frames = []
    scores = play_games(Model(seed=0), "ALE/Pong-v5", 1, seed=0, on_frame=frames.append)
    [(won, lost, steps)] = scores
    assert max(won, lost) == 21
    assert len(frames) == steps + 1  # the reset's frame, then one per step
    assert frames[0].shape == (210, 160, 3)


def test_a_recorded_game_reads_back_frame_for_frame(tmp_path) -> None:
    frames, path = [], tmp_path / "game.gif"
    with open(path, "wb") as f:
        gif = GifWriter(f, FRAME_SECONDS)
        games = play_games(
            Model(seed=1),
            "ALE/Pong-v5",
            1,
            seed=1,
            on_frame=lambda x: frames.append(x.copy()) or gif.add(x),
        )
        [_] = games  # plays it
        gif.close()
    assert gif.frames == len(frames)
    assert_gif_shows(path, frames, FRAME_SECONDS)


def test_each_score_is_printed_as_its_game_ends(capsys) -> None:
    printed_before_game_2 = []

    def games():
        yield 21, 3, 100
        printed_before_game_2.append(capsys.readouterr().out)
        yield 3, 21, 90

    assert report(games(), seed=7) == [(21, 3, 100), (3, 21, 90)]
    assert printed_before_game_2 == ["Game 1 (seed 7): won 21-3 in 100 steps\n"]
    assert capsys.readouterr().out == "Game 2 (seed 8): lost 3-21 in 90 steps\n"


def test_game_i_is_the_game_of_seed_plus_i_alone() -> None:
    def frames_of(episodes: int, seed: int) -> list[list]:
        games = [[]]
        for _ in play_games(Model(seed=3), TOY.env, episodes, seed, lambda x: games[-1].append(x)):
            games.append([])
        return games[:-1]

    three = frames_of(3, seed=5)
    for i, game in enumerate(three):
        [alone] = frames_of(1, seed=5 + i)
        assert len(game) == len(alone) and all(map(np.array_equal, game, alone))
    assert not np.array_equal(np.stack(three[0]), np.stack(three[1]))  # not one game thrice


def test_the_summary_line_is_the_games_mean_and_spread(tmp_path, capsys) -> None:
    model = Model(seed=2)
    checkpoint = Checkpoint(
        model.weights, zeros_like_weights(model.weights), 1, 1, 1, -1.0, -1.0, TOY
    )
    save(tmp_path / FILENAME, checkpoint)
    assert driver.main(["--evaluate", str(tmp_path), "--games=12", "--seed=0"]) == 0
    out = capsys.readouterr().out.splitlines()
    games = [
        re.fullmatch(r"Game (\d+) \(seed (\d+)\): (won|lost) (\d+)-(\d+) in \d+ steps", line)
        for line in out[1:-1]
    ]
    assert all(games) and [(int(g[1]), int(g[2])) for g in games] == [(i + 1, i) for i in range(12)]
    points = [int(g[4]) - int(g[5]) for g in games]
    mean = sum(points) / 12
    spread = (sum((p - mean) ** 2 for p in points) / 12) ** 0.5
    assert len(set(points)) > 1  # a spread to compute
    wins = sum(g[3] == "won" for g in games)
    assert out[-1] == (
        f"Mean score {mean:+.2f} (standard deviation {spread:.2f}) over 12 games; won {wins}"
    )


def test_driver_evaluate_prints_scores_and_records(tmp_path, capsys) -> None:
    model = Model(seed=2)
    save(
        tmp_path / FILENAME,
        Checkpoint(
            model.weights,
            zeros_like_weights(model.weights),
            5,
            50,
            50_000,
            -20.0,
            -19.5,
            Config(seed=2),
        ),
    )
    gif = tmp_path / "game.gif"
    assert driver.main(["--evaluate", str(tmp_path), "--seed=3", "--record", str(gif)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("Playing 1 game of ALE/Pong-v5 with the policy of")
    assert "(update 5), seed 3" in out[0]
    assert out[1].startswith(("Game 1 (seed 3): lost ", "Game 1 (seed 3): won "))
    assert out[2].startswith("Mean score ") and out[3].startswith("Recorded ")
    assert gif.read_bytes()[:6] == b"GIF89a"


def test_a_policy_file_plays_the_same_games_as_its_checkpoint(tmp_path, capsys) -> None:
    model = Model(seed=4)
    checkpoint = Checkpoint(
        model.weights,
        zeros_like_weights(model.weights),
        9,
        90,
        90_000,
        -20.0,
        -19.5,
        Config(seed=4),
    )
    save(tmp_path / FILENAME, checkpoint)
    save_policy(tmp_path / "policy.safetensors", checkpoint)
    scores = []
    for path in (tmp_path / FILENAME, tmp_path / "policy.safetensors"):
        assert driver.main(["--evaluate", str(path), "--seed=5", "--games=2"]) == 0
        out = capsys.readouterr().out.splitlines()
        assert "(update 9), seed 5" in out[0]
        scores.append(out[1:])
    # Same seed, weights within float32 rounding: the same actions, point for point.
    assert scores[0] == scores[1] and scores[0][0].startswith("Game 1 (seed 5): ")


def test_a_record_path_that_cannot_be_written_is_refused_before_playing(tmp_path, capsys) -> None:
    (tmp_path / "dir.gif").mkdir()
    policy = ROOT / "results" / "pong-v5" / "policy.safetensors"
    assert driver.main(["--evaluate", str(policy), "--record", str(tmp_path / "dir.gif")]) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and "dir.gif is a directory" in captured.err
    assert "Game 1" not in captured.out  # refused before any game was played


def test_a_full_disk_while_recording_is_one_line_and_keeps_the_old_gif(
    tmp_path, capsys, monkeypatch
) -> None:
    model = Model(seed=2)
    checkpoint = Checkpoint(
        model.weights, zeros_like_weights(model.weights), 1, 1, 1, -1.0, -1.0, TOY
    )
    save(tmp_path / FILENAME, checkpoint)
    gif = tmp_path / "game.gif"
    gif.write_bytes(b"an older recording")
    frames = []

    def full(self, frame) -> None:
        frames.append(frame)
        if len(frames) == 30:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(GifWriter, "add", full)
    assert driver.main(["--evaluate", str(tmp_path), "--games=3", "--record", str(gif)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"could not write {gif}: No space left on device" in err
    assert gif.read_bytes() == b"an older recording"
    assert sorted(p.name for p in tmp_path.iterdir()) == [FILENAME, "game.gif"]  # no leftovers


def test_a_ctrl_c_just_after_a_game_s_line_counts_that_game(tmp_path, capsys, monkeypatch):
    """A stop landing right after the last game's line said 'Stopped after 0 of 1 game' (a
    tester's find): the game is counted before its line."""
    _policy(tmp_path / FILENAME, TOY.env)
    monkeypatch.setattr(evaluate, "play_games", lambda *args, **kwargs: iter([(5, 0, 100)]))
    said = []

    def say(line: str) -> None:
        said.append(line)
        if line.startswith("Game 1 "):
            raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "say", say)
    assert driver.main(["--evaluate", str(tmp_path), "--games=1", "--seed=5"]) == 130
    assert said[-2:] == [
        "Stopped after 1 of 1 game",
        "Mean score +5.00 (standard deviation 0.00) over 1 game; won 1",
    ], said


def test_a_ctrl_c_says_the_games_played_and_keeps_the_old_gif(tmp_path, capsys, monkeypatch):
    """Ctrl-C in game 3 of 4: the scores of games 1 and 2 and their mean are said, and that
    no recording was kept (it had said nothing of either)."""
    _policy(tmp_path / FILENAME, TOY.env)
    gif = tmp_path / "game.gif"
    gif.write_bytes(b"an older recording")

    def two_games_then_ctrl_c(*args, **kwargs):
        yield from [(5, 0, 100), (1, 4, 90)]
        raise KeyboardInterrupt

    monkeypatch.setattr(evaluate, "play_games", two_games_then_ctrl_c)
    argv = ["--evaluate", str(tmp_path), "--games=4", "--seed=5", "--record", str(gif)]
    assert driver.main(argv) == 130
    out = capsys.readouterr().out.splitlines()
    assert out[-3:] == [
        "Game 2 (seed 6): lost 1-4 in 90 steps",
        f"Stopped after 2 of 4 games; nothing was written to {gif} (it is as it was)",
        "Mean score +1.00 (standard deviation 4.00) over 2 games; won 1",
    ], out
    assert gif.read_bytes() == b"an older recording"


def _policy(path, env: str) -> None:
    model = Model(seed=2)
    cache = zeros_like_weights(model.weights)
    save(
        path, Checkpoint(model.weights, cache, 5, 50, 50_000, -20.0, -19.5, Config(seed=2, env=env))
    )


def test_playing_another_env_than_the_policy_learned_is_said(tmp_path, capsys) -> None:
    _policy(tmp_path / "pong.safetensors", "Pong-v0")
    assert driver.main(["--evaluate", str(tmp_path / "pong.safetensors"), f"--env={TOY.env}"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == f"note: this policy was trained on 'Pong-v0', not {TOY.env}"
    _policy(tmp_path / "toy.safetensors", TOY.env)
    assert driver.main(["--evaluate", str(tmp_path / "toy.safetensors"), f"--env={TOY.env}"]) == 0
    assert "note:" not in capsys.readouterr().out  # its own env: nothing to say


def test_an_env_id_edited_into_a_policy_file_is_refused_not_imported(tmp_path, capsys) -> None:
    _policy(tmp_path / FILENAME, "this:Foo-v0")
    assert driver.main(["--evaluate", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    expected = f"--evaluate: {tmp_path}: env: env id 'this:Foo-v0' names a Python module"
    assert expected in captured.err
