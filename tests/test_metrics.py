from __future__ import annotations

import csv

from pong.metrics import EPISODES, UPDATES, MetricsLog


def _row(update: int) -> dict[str, object]:
    return {
        "update": update,
        "episodes": 2 * update,
        "steps": 900 * update,
        "seconds": 1.5,
        "steps_per_s": 1200.0,
        "running_reward": -20.5,
        "reward_mean": -20.0,
        "reward_min": -21.0,
        "reward_max": -19.0,
    }


def _episodes(update: int) -> list[dict[str, object]]:
    return [
        {"episode": 2 * update - 1 + i, "update": update, "reward": -21.0 + i, "steps": 900}
        for i in range(2)
    ]


def _read(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_rows_are_flushed_as_written_and_appended_on_reopen(tmp_path) -> None:
    log = MetricsLog(tmp_path)
    log.update(_row(1), _episodes(1))
    # Visible before close: a crash after this loses nothing.
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1"]
    assert [r["episode"] for r in _read(tmp_path / EPISODES)] == ["1", "2"]
    log.close()

    log = MetricsLog(tmp_path)  # a resumed run
    log.update(_row(2), _episodes(2))
    log.close()
    text = (tmp_path / UPDATES).read_text()
    assert text.count("update,episodes") == 1  # one header
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1", "2"]
    assert [r["episode"] for r in _read(tmp_path / EPISODES)] == ["1", "2", "3", "4"]
    assert _read(tmp_path / EPISODES)[3]["reward"] == "-20.0"


def test_resuming_drops_rows_of_updates_after_the_checkpoint(tmp_path) -> None:
    # A run killed after update 3 whose last checkpoint is update 2 plays update 3
    # again on resume: its first row must go, so each update keeps one row.
    log = MetricsLog(tmp_path)
    for update in (1, 2, 3):
        log.update(_row(update), _episodes(update))
    log.close()

    log = MetricsLog(tmp_path, after=2)
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1", "2"]
    assert [r["episode"] for r in _read(tmp_path / EPISODES)] == ["1", "2", "3", "4"]
    log.update(_row(3), _episodes(3))
    log.close()
    assert [r["update"] for r in _read(tmp_path / UPDATES)] == ["1", "2", "3"]
    assert [r["update"] for r in _read(tmp_path / EPISODES)] == ["1", "1", "2", "2", "3", "3"]
    assert (tmp_path / UPDATES).read_text().count("update,episodes") == 1
