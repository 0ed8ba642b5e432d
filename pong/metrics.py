"""Metrics of a run as CSV files in its run directory, one row per update and per episode.

``updates.csv``: update, episodes, steps, seconds, steps_per_s, running_reward,
reward_mean, reward_min, reward_max. ``episodes.csv``: episode, update, reward,
steps. Each row is flushed as it is written, so a crash loses nothing already
printed; a resumed run appends to the same files, after dropping the rows of
updates made after its checkpoint (a run killed between two checkpoints plays
those updates again, so each update keeps exactly one row).
"""

from __future__ import annotations

import csv
import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pong.train import Trainer, UpdateStats

__all__ = ["EPISODES", "UPDATES", "MetricsLog"]

UPDATES = "updates.csv"
EPISODES = "episodes.csv"
UPDATE_FIELDS = [
    "update",
    "episodes",
    "steps",
    "seconds",
    "steps_per_s",
    "running_reward",
    "reward_mean",
    "reward_min",
    "reward_max",
]
EPISODE_FIELDS = ["episode", "update", "reward", "steps"]


class MetricsLog:
    """Appends rows to ``updates.csv`` and ``episodes.csv`` in ``run_dir``."""

    def __init__(self, run_dir: str | os.PathLike, after: int | None = None) -> None:
        """Open the files; with ``after``, first drop rows of updates later than ``after``."""
        run_dir = Path(run_dir)
        self._files, self._writers = [], {}
        for name, fields in ((UPDATES, UPDATE_FIELDS), (EPISODES, EPISODE_FIELDS)):
            path = run_dir / name
            if after is not None:
                _drop_rows_after(path, after)
            new = not path.exists() or path.stat().st_size == 0
            f = open(path, "a", newline="")  # noqa: SIM115 - closed in close()
            writer = csv.DictWriter(f, fieldnames=fields)
            if new:
                writer.writeheader()
            self._files.append(f)
            self._writers[name] = (writer, f)

    def update(self, row: dict[str, object], episodes: list[dict[str, object]]) -> None:
        """One update's row and its episodes' rows, flushed."""
        for name, rows in ((EPISODES, episodes), (UPDATES, [row])):
            writer, f = self._writers[name]
            writer.writerows(rows)
            f.flush()

    def record(self, stats: UpdateStats, trainer: Trainer) -> None:
        """The rows of the update ``trainer`` just made (``stats``), flushed."""
        first_episode = trainer.episodes - stats.rollouts + 1
        row = {
            "update": stats.iteration,
            "episodes": trainer.episodes,
            "steps": trainer.steps,
            "seconds": round(stats.seconds, 4),
            "steps_per_s": round(stats.steps_per_second, 1),
            "running_reward": trainer.running_reward,
            "reward_mean": sum(stats.rewards) / len(stats.rewards),
            "reward_min": min(stats.rewards),
            "reward_max": max(stats.rewards),
        }
        episodes = [
            {"episode": first_episode + i, "update": stats.iteration, "reward": r, "steps": n}
            for i, (r, n) in enumerate(zip(stats.rewards, stats.episode_steps, strict=True))
        ]
        self.update(row, episodes)

    def close(self) -> None:
        for f in self._files:
            f.close()


def _drop_rows_after(path: Path, update: int) -> None:
    """Rewrite ``path`` (atomically) without the rows whose update is later than ``update``."""
    if not path.exists():
        return
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        fields = reader.fieldnames
    kept = [row for row in rows if int(row["update"]) <= update]
    if len(kept) == len(rows) or fields is None:
        return
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(kept)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
