"""The runs in results/ and the trained agent shipped in results/pong-v5 (see RESULTS.md)."""

from __future__ import annotations

import csv
import re
import shlex
import subprocess
import sys
from collections import Counter
from datetime import datetime

import pytest

from pong.core.model import Model
from pong.run import metrics
from pong.run.checkpoint import load
from pong.run.config import Config
from pong.tools import compare
from pong.tools.evaluate import play_games
from tests.helpers import ROOT

RUN = ROOT / "results" / "pong-v5"
RUNS = sorted((ROOT / "results").glob("pong-v5*"))
STUDY = sorted((ROOT / "results" / "lr-study").iterdir())  # a sweep's trials, batch 10 too
FAST = ROOT / "results" / "fast-agent"  # the fast recipe (learning rate 1e-3), trained on
FAST_SWEEP = sorted(p for p in (ROOT / "results" / "fast-sweep").iterdir() if p.is_dir())
DROP = [ROOT / "results" / "lr-drop" / rate for rate in ("1e-4", "1e-3")]  # from FAST's policy
BATCH_20 = ROOT / "results" / "batch-20"  # from FAST's policy too, 20 games an update at 1e-3
LONG_DROP = ROOT / "results" / "long-drop"  # the drop's run (DROP[0]) resumed, at 1e-4 still
SECOND_DROP = ROOT / "results" / "second-drop"  # LONG_DROP's last weights on, at 3e-5
STICKY = ROOT / "results" / "sticky"  # DROP[0]'s policy played without sticky actions
LATER = [DROP[0], BATCH_20, LONG_DROP, SECOND_DROP]  # trained on from the fast agent's policy
TIMED = [FAST, *FAST_SWEEP, *DROP, BATCH_20, LONG_DROP, SECOND_DROP]  # updates.csv has a time
RESULTS_MD = (ROOT / "RESULTS.md").read_text()
README = (ROOT / "README.md").read_text()


def _rows(path) -> list[dict[str, str]]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("run", RUNS + STUDY + TIMED, ids=[r.name for r in RUNS + STUDY + TIMED])
def test_each_runs_updates_agree_with_its_games(run) -> None:
    updates, games = _rows(run / "updates.csv"), _rows(run / "games.csv")
    assert [int(row["update"]) for row in updates] == list(range(1, len(updates) + 1))
    assert [int(row["game"]) for row in games] == list(range(1, len(games) + 1))
    size = 20 if run == BATCH_20 else 10  # the default, but for the batch's own run
    running, steps, scores, after = None, 0, {}, {}
    for row in games:  # in the order they arrived, as the trainer counted them
        score, update = float(row["score"]), int(row["update"])
        running = score if running is None else 0.99 * running + 0.01 * score
        steps += int(row["steps"])
        scores.setdefault(update, []).append(score)
        after[update] = running, steps
    for row in updates:
        update = int(row["update"])
        batch = scores[update]
        assert len(batch) == size
        assert int(row["games"]) == size * update and int(row["steps"]) == after[update][1]
        assert float(row["running_mean"]) == pytest.approx(after[update][0], abs=1e-9)
        assert float(row["score_mean"]) == pytest.approx(sum(batch) / size)
        assert (float(row["score_min"]), float(row["score_max"])) == (min(batch), max(batch))


def _quoted_commands(module: str) -> list[list[str]]:
    """The arguments of each ``python -m module`` command RESULTS.md shows."""
    lines = re.findall(rf"^\.venv/bin/python -m {module} (.*)$", RESULTS_MD, re.MULTILINE)
    return [shlex.split(line.split("#")[0]) for line in lines]


def test_results_md_quotes_the_tables_the_committed_metrics_give(capsys, monkeypatch) -> None:
    commands = _quoted_commands("pong compare")
    quoted = sorted(ROOT / arg for args in commands for arg in args)
    assert quoted == sorted(RUNS + STUDY + TIMED)  # every run in results/, once, no other
    monkeypatch.chdir(ROOT)  # the commands as pasted in the repository
    for args in commands:
        assert compare.main(args) == 0
        table = capsys.readouterr().out
        assert table.count("\n") == len(args) + 2 + 2 * (len(args) > 1)
        assert table in RESULTS_MD


def test_results_md_quotes_the_study_s_running_means_after_each_500_games() -> None:
    for rate, tag in (("1e-3", "0.001"), ("3e-4", "0.0003")):
        updates = [_rows(run / "updates.csv") for run in STUDY if f"-lr{tag}-" in run.name]
        cells = [
            ", ".join(f"{float(rows[n - 1]['running_mean']):+.2f}" for rows in updates)
            for n in (50, 100, 150, 200)
        ]
        assert f"| {rate} | seeds 1, 2 | {' | '.join(cells)} |" in RESULTS_MD


@pytest.mark.parametrize("run", RUNS + TIMED, ids=[run.name for run in RUNS + TIMED])
def test_results_md_quotes_each_runs_summary(run) -> None:
    assert "\n".join(metrics.summarize(run)) + "\n" in RESULTS_MD


def test_the_shipped_policy_and_metrics_are_from_the_same_run() -> None:
    policy = load(RUN / "policy.safetensors", policy=True)
    assert (RUN / "policy.safetensors").stat().st_size < 10e6
    assert policy.config == Config(seed=policy.config.seed)  # every setting at its default
    updates = _rows(RUN / "updates.csv")
    assert [int(r["update"]) for r in updates] == list(range(1, policy.updates + 1))
    assert int(updates[-1]["games"]) == policy.games
    assert float(updates[-1]["running_mean"]) == pytest.approx(policy.running_mean)
    assert len(_rows(RUN / "games.csv")) == policy.games


GAME = re.compile(r"Game (\d+) \(seed (\d+)\): (won|lost) (\d+)-(\d+) in \d+ steps")


@pytest.mark.parametrize("run", RUNS, ids=[run.name for run in RUNS])
def test_each_final_policy_played_the_20_fixed_game_seeds_as_results_md_says(run) -> None:
    first, *games, last = (run / "evaluation.txt").read_text().splitlines()
    updates = len(_rows(run / "updates.csv"))
    assert first.startswith("Playing 20 games of ALE/Pong-v5 with the policy of ")
    assert first.endswith(f"(update {updates}), seed 0")  # the run's final policy
    matches = [GAME.fullmatch(line) for line in games]
    assert all(matches) and [(int(m[1]), int(m[2])) for m in matches] == [
        (i + 1, i) for i in range(20)
    ]
    scores = [int(m[4]) - int(m[5]) for m in matches]
    mean = sum(scores) / 20
    spread = (sum((x - mean) ** 2 for x in scores) / 20) ** 0.5
    won = sum(m[3] == "won" for m in matches)
    assert (
        last == f"Mean score {mean:+.2f} (standard deviation {spread:.2f}) over 20 games; won {won}"
    )
    assert (
        f"| results/{run.name} | {updates:,} | {mean:+.2f} ± {spread:.2f} | {won} of 20 |"
        in RESULTS_MD
    )


@pytest.mark.ale
def test_the_shipped_policy_plays_its_quoted_game_and_far_better_than_a_fresh_one() -> None:
    shipped = load(RUN / "policy.safetensors", policy=True)
    [(won, lost, steps)] = play_games(Model.from_weights(shipped.weights), "ALE/Pong-v5", 1, seed=0)
    quoted = (RUN / "evaluation.txt").read_text().splitlines()[1]
    assert (
        quoted
        == f"Game 1 (seed 0): {'won' if won > lost else 'lost'} {won}-{lost} in {steps} steps"
    )
    [(fresh_won, fresh_lost, _)] = play_games(Model(seed=0), "ALE/Pong-v5", 1, seed=0)
    assert fresh_won - fresh_lost <= -18  # a fresh policy loses nearly every point
    assert won - lost >= -12, (won, lost)  # the shipped one wins many (RESULTS.md)


def test_results_md_quotes_the_next_agent_s_20_test_games() -> None:
    run = ROOT / "results" / "lr-study" / "next-agent"
    first, *games, last = (run / "evaluation.txt").read_text().splitlines()
    assert first.endswith(f"(update {len(_rows(run / 'updates.csv'))}), seed 0")
    matches = [GAME.fullmatch(line) for line in games]
    assert all(matches) and len(matches) == 20
    scores = [int(m[4]) - int(m[5]) for m in matches]
    mean, won = sum(scores) / 20, sum(m[3] == "won" for m in matches)
    spread = (sum((x - mean) ** 2 for x in scores) / 20) ** 0.5
    assert f"it won {won}, mean score {mean:+.2f} (standard deviation {spread:.2f})" in RESULTS_MD


@pytest.mark.parametrize("run", TIMED, ids=[run.name for run in TIMED])
def test_the_timed_runs_rows_say_when_they_were_written_in_order(run) -> None:
    times = [metrics.written(row) for row in _rows(run / "updates.csv")]
    assert None not in times and times == sorted(times)


def test_the_readme_s_fast_recipe_figures_are_the_fast_agent_s_first_run() -> None:
    passed = metrics.summary(FAST, [0]).passed[0]
    assert (
        f"passed a running mean of 0 after {passed.update} updates ({passed.games:,} games)"
        f" and **{passed.wall_hours * 60:.1f} minutes** of wall clock from its first update's"
    ) in README.replace("\n", " ")


ONLY = [(FAST, {"learning_rate": 1e-3}), (DROP[0], {}), (DROP[1], {"learning_rate": 1e-3})]
ONLY += [(BATCH_20, {"learning_rate": 1e-3, "batch_size": 20}), (LONG_DROP, {})]
ONLY += [(SECOND_DROP, {"learning_rate": 3e-5})]


@pytest.mark.parametrize(("run", "changed"), ONLY, ids=[run.name for run, _ in ONLY])
def test_the_fast_agent_s_policies_are_their_runs_last_updates(run, changed) -> None:
    policy = load(run / "policy.safetensors", policy=True)
    assert policy.config == Config(seed=1, **changed)  # 2016's settings but those named
    updates = _rows(run / "updates.csv")
    assert [int(r["update"]) for r in updates] == list(range(1, policy.updates + 1))
    assert int(updates[-1]["games"]) == policy.games == len(_rows(run / "games.csv"))
    assert float(updates[-1]["running_mean"]) == pytest.approx(policy.running_mean)


def _every_100(updates: int) -> list[int]:
    """The updates a quoted curve gives: each 100th, and the last."""
    return sorted({*range(100, updates, 100), updates})


def test_the_readme_and_results_md_quote_the_fast_agent_s_training() -> None:
    run, updates = metrics.summary(FAST), _rows(FAST / "updates.csv")
    final = float(run.last["running_mean"])
    assert (
        f"{run.updates} updates at learning rate 1e-3 ({run.seconds / 3600:.1f} hours of"
        f" training on 2 cores), running mean {final:+.2f} at the end"
    ) in README.replace("\n", " ")
    said = re.search(r"Its running mean was (.*?) \(best", RESULTS_MD.replace("\n", " "))[1]
    pairs = re.findall(r"([+-]\d+\.\d\d) after (?:update )?(\d+)", said)
    assert [int(u) for _, u in pairs] == _every_100(len(updates))
    assert [m for m, _ in pairs] == [f"{float(updates[int(u) - 1]['running_mean']):+.2f}"
                                     for _, u in pairs]  # fmt: skip


def test_the_fast_agent_s_run_repeats_the_first_run_of_its_seed() -> None:
    first, again = _rows(FAST / "first-run-updates.csv"), _rows(FAST / "updates.csv")
    timings = {"seconds", "steps_per_s", "time"}  # a run's own clock; the rest must repeat
    assert len(first) == 743 <= len(again)
    assert all(
        {k: v for k, v in a.items() if k not in timings}
        == {k: v for k, v in b.items() if k not in timings}
        for a, b in zip(first, again, strict=False)
    )
    at = next(row for row in first if float(row["running_mean"]) > 0)
    clock = [datetime.fromisoformat(row["time"]).timestamp() for row in (first[0], at)]
    minutes = (clock[1] - clock[0] + float(first[0]["seconds"])) / 60  # from update 1's start
    assert (
        f"seed, run with `--until-mean 0` and then resumed twice, passed 0 at the same update in"
        f" {minutes:.1f} minutes"
    ) in RESULTS_MD.replace("\n", " ")
    assert at["update"] == str(metrics.summary(FAST, [0]).passed[0].update)


def test_the_learning_rate_drop_and_its_control_started_alike_and_ran_as_long() -> None:
    """Both from FAST's policy file, on the same game seeds: their first update's games (played
    before either had changed a weight) are the same games, to the step."""
    drop, control = (_rows(run / "games.csv") for run in DROP)
    assert drop[:10] == control[:10] and len(drop) == len(control)
    updates = [_rows(run / "updates.csv") for run in DROP]
    text = RESULTS_MD.replace("\n", " ")
    said = re.search(r"running means after each 100 updates: (.*?)\.(?:\s|$)", text)[1]
    pairs = re.findall(r"update (\d+), ([+-]\d+\.\d\d) against ([+-]\d+\.\d\d)", said)
    assert [int(u) for u, _, _ in pairs] == _every_100(len(updates[0]))
    for u, *quoted in pairs:
        assert quoted == [f"{float(rows[int(u) - 1]['running_mean']):+.2f}" for rows in updates]


def test_the_larger_batch_and_its_control_started_alike_and_played_as_many_games() -> None:
    """From FAST's policy file on the same game seeds, as the drop: its first 10 games are the
    control's; its running means are quoted beside the control's at the same games."""
    batch, control = (_rows(run / "games.csv") for run in (BATCH_20, DROP[1]))
    assert batch[:10] == control[:10] and len(batch) == len(control)
    updates = {size: _rows(run / "updates.csv") for size, run in ((20, BATCH_20), (10, DROP[1]))}
    text = RESULTS_MD.replace("\n", " ")
    said = re.search(r"at the same games: (.*?), the first run", text)[1]
    quoted = re.findall(r"after ([\d,]+)(?: games)?, ([+-]\d+\.\d\d) against ([+-]\d+\.\d\d)", said)
    assert [int(g.replace(",", "")) for g, _, _ in quoted] == [1000, 2000, len(batch)]
    for games, *means in quoted:
        rows = [updates[n][int(games.replace(",", "")) // n - 1] for n in (20, 10)]
        assert means == [f"{float(row['running_mean']):+.2f}" for row in rows]


def test_the_longer_drop_is_the_drop_s_run_resumed_and_quoted() -> None:
    """Its first rows are the drop's, as written then (a resume keeps the rows its checkpoint
    holds); its running means after each 100 updates are the ones RESULTS.md quotes."""
    short, long = (_rows(run / "updates.csv") for run in (DROP[0], LONG_DROP))
    assert len(long) > len(short) and long[: len(short)] == short
    games = [_rows(run / "games.csv") for run in (DROP[0], LONG_DROP)]
    assert games[1][: len(games[0])] == games[0]
    _assert_curve_quoted("longer drop's", long)
    means = ", ".join(_thousands(games[1]))
    assert f"their mean score, 1,000 at a time: {means} (each" in RESULTS_MD.replace("\n", " ")


def _assert_curve_quoted(whose: str, updates: list[dict[str, str]]) -> None:
    """RESULTS.md's "``whose`` running mean after each 100 updates: update 100, +14.41; ..."
    gives ``updates``' running means at each 100th update and the last."""
    said = re.search(rf"{whose} running mean after each 100 updates: (.*?)\.(?:\s|$)",
                     RESULTS_MD.replace("\n", " "))[1]  # fmt: skip
    pairs = re.findall(r"update (\d+), ([+-]\d+\.\d\d)", said)
    assert [int(u) for u, _ in pairs] == _every_100(len(updates))
    assert [m for _, m in pairs] == [f"{float(updates[int(u) - 1]['running_mean']):+.2f}"
                                     for u, _ in pairs]  # fmt: skip


def _thousands(games: list[dict[str, str]]) -> list[str]:
    """The mean score of each whole 1,000 of ``games``, as RESULTS.md writes it."""
    scores = [float(row["score"]) for row in games]
    return [f"{sum(scores[i : i + 1000]) / 1000:+.2f}" for i in range(0, len(scores) - 999, 1000)]


def test_the_second_drop_is_quoted_and_started_from_the_long_drop_s_last_weights() -> None:
    """Its running means after each 100 updates and its training games' means, 1,000 at a
    time, beside the long drop's last 2,000, are those RESULTS.md quotes; its first game (seed
    1's game 0 of update 1) is the one the long drop's policy plays (the test below)."""
    _assert_curve_quoted("second drop's", _rows(SECOND_DROP / "updates.csv"))
    ours, long = (_thousands(_rows(run / "games.csv")) for run in (SECOND_DROP, LONG_DROP))
    said = (
        f"its first 3,000 training games, 1,000 at a time: {', '.join(ours)} (each with a"
        f" standard error of about 0.11), against the long drop's {' and '.join(long[-2:])}"
    )
    assert len(ours) == 3 and said in RESULTS_MD.replace("\n", " ")


@pytest.mark.ale
def test_the_second_drop_s_first_game_is_the_long_drop_policy_s() -> None:
    from pong.core.rollout import play_game
    from pong.core.worker import game_randomness, game_seed
    from pong.envs.make import make_env

    first = _rows(SECOND_DROP / "games.csv")[0]
    model = Model.from_weights(load(LONG_DROP / "policy.safetensors", policy=True).weights)
    rng, reset_seed = game_randomness(game_seed(1, 1, 0))
    with make_env() as env:
        game = play_game(model, env, rng, reset_seed)
    assert (int(game.epr.sum()), len(game.epr)) == (int(float(first["score"])), int(first["steps"]))


def test_the_curve_of_the_runs_after_the_fast_agent_is_described_by_their_rows() -> None:
    """RESULTS.md's words beside docs/after_fast_agent.png: first scores and last means."""
    runs = [LONG_DROP, DROP[1], BATCH_20, SECOND_DROP]
    firsts = [float(_rows(r / "games.csv")[0]["score"]) for r in runs]
    lasts = [float(_rows(r / "updates.csv")[-1]["running_mean"]) for r in runs]
    text = RESULTS_MD.replace("\n", " ")
    assert f"first game's score ({min(firsts):+.0f} to {max(firsts):+.0f} here)" in text
    assert f"they end at {min(lasts):+.2f} to {max(lasts):+.2f}:" in text
    names = " ".join(str(r.relative_to(ROOT)) for r in runs)
    assert f"plot {names} --output docs/after_fast_agent.png" in text


def _evaluation(run, name="evaluation.txt") -> tuple[str, list[re.Match], str]:
    first, *games, last = (run / name).read_text().splitlines()
    return first, [GAME.fullmatch(line) for line in games], last


def _summed(matches: list[re.Match], last: str | None = None) -> tuple[list[int], str]:
    """100 games' scores, and their summary as RESULTS.md quotes it; with ``last``, checked to
    be the evaluation's own last line of them."""
    scores = [int(m[4]) - int(m[5]) for m in matches]
    mean, won = sum(scores) / 100, sum(m[3] == "won" for m in matches)
    spread = (sum((x - mean) ** 2 for x in scores) / 100) ** 0.5
    said = f"Mean score {mean:+.2f} (standard deviation {spread:.2f}) over 100 games; won {won}"
    assert last is None or last == said
    return scores, f"mean score {mean:+.2f} (standard deviation {spread:.2f}), won {won} of 100"


EVALUATED = [(FAST, "evaluation.txt"), (RUN, "evaluation-100.txt")]
EVALUATED += [(run, "evaluation.txt") for run in (*DROP, BATCH_20, LONG_DROP, SECOND_DROP)]


@pytest.mark.parametrize(("run", "name"), EVALUATED)
def test_the_agents_played_100_fixed_game_seeds_as_quoted(run, name) -> None:
    first, matches, last = _evaluation(run, name)
    updates = len(_rows(run / "updates.csv"))
    assert first == (
        "Playing 100 games of ALE/Pong-v5 with the policy of"
        f" {run.relative_to(ROOT)}/policy.safetensors (update {updates}), seed 0"
    )
    assert all(matches) and [(int(m[1]), int(m[2])) for m in matches] == [
        (i + 1, i) for i in range(100)
    ]
    _, quoted = _summed(matches, last)
    assert quoted in RESULTS_MD.replace("\n", " ")
    assert run != FAST or quoted in README.replace("\n", " ")


@pytest.mark.parametrize("run", LATER, ids=lambda run: run.name)
def test_the_readme_quotes_each_later_policy_s_mean_beside_its_name(run) -> None:
    """Each policy trained on from the fast agent's, in the README's sentence that names it."""
    *_, last = _evaluation(run)
    mean = re.fullmatch(r"Mean score ([+-]\d+\.\d\d) .*", last)[1]
    name = str(run.relative_to(ROOT))
    sentences = re.split(r"(?<=\.) ", README.replace("\n", " "))
    assert [s for s in sentences if name in s and mean in s], (name, mean)


def test_the_fast_agent_s_gif_is_a_won_game_of_its_evaluation() -> None:
    readme = re.search(r"game of seed (\d+)\]\(results/fast-agent/game.gif\) it won (\d+)-(\d+)",
                       README.replace("\n", " "))  # fmt: skip
    results = re.search(r"game.gif\) is its game of seed (\d+), won (\d+)-(\d+)",
                        RESULTS_MD.replace("\n", " "))  # fmt: skip
    assert readme.groups() == results.groups()
    _assert_a_won_game_of_its_evaluation(FAST, readme)


def test_the_learning_rate_drop_s_gif_is_a_won_game_of_its_evaluation() -> None:
    said = re.search(r"lr-drop/1e-4/game.gif\) is the drop's game of seed (\d+), won (\d+)-(\d+)",
                     RESULTS_MD.replace("\n", " "))  # fmt: skip
    _assert_a_won_game_of_its_evaluation(DROP[0], said)


def _assert_a_won_game_of_its_evaluation(run, quoted: re.Match) -> None:
    """``run/game.gif``, quoted as (seed, won, lost), is that game of ``run``'s evaluation."""
    _, matches, _ = _evaluation(run)
    seed, won, lost = map(int, quoted.groups())
    assert matches[seed][0].startswith(f"Game {seed + 1} (seed {seed}): won {won}-{lost} in")
    assert (run / "game.gif").stat().st_size > 0


@pytest.mark.ale
@pytest.mark.parametrize("run", [FAST, *LATER], ids=lambda run: run.name)
def test_the_agents_play_their_quoted_games_again(run) -> None:
    _, matches, _ = _evaluation(run)
    model = Model.from_weights(load(run / "policy.safetensors", policy=True).weights)
    for seed in (0, 1):  # a game is about 2 s: two of the hundred, by their seeds
        [(won, lost, steps)] = play_games(model, "ALE/Pong-v5", 1, seed=seed)
        outcome = "won" if won > lost else "lost"
        assert matches[seed][0] == (
            f"Game {seed + 1} (seed {seed}): {outcome} {won}-{lost} in {steps} steps"
        )


def test_the_games_without_sticky_actions_are_quoted() -> None:
    """The drop's policy on its 100 seeds with ``repeat_action_probability=0``, against the same
    seeds as ``--evaluate`` played them (0.25), as RESULTS.md and the README quote it."""
    first, matches, last = _evaluation(STICKY)
    assert first == (
        "Playing 100 games of ALE/Pong-v5, repeat_action_probability=0.0, with the policy of"
        f" {DROP[0].relative_to(ROOT)}/policy.safetensors, seed 0"
    )
    assert all(matches) and [int(m[2]) for m in matches] == list(range(100))
    _, sticky, _ = _evaluation(DROP[0])
    scores, quoted = _summed(matches, last)
    gains = [x - y for x, y in zip(scores, _summed(sticky)[0], strict=True)]
    gain = sum(gains) / 100
    error = (sum((g - gain) ** 2 for g in gains) / 99) ** 0.5 / 10  # of the mean paired gain
    steps = [
        sum(int(re.search(r"in (\d+) steps", m[0])[1]) for m in ms) / 100
        for ms in (matches, sticky)
    ]
    text = RESULTS_MD.replace("\n", " ")
    assert quoted in text
    assert f"{scores.count(21)} of them 21-0 (the other {100 - scores.count(21)} 21-1)" in text
    assert scores.count(21) + scores.count(20) == 100
    [(game, same)] = Counter(m[0].split(": ")[1] for m in matches).most_common(1)
    steps_each = game.split(" in ")[1].split()[0]
    assert f"{same} of the 100 seeds play the very same {int(steps_each):,}-step game" in text
    assert f"{steps[0]:,.0f} steps a game against {steps[1]:,.0f}" in text
    assert f"{gain:+.2f} a game (standard error {error:.2f})" in text
    sentences = re.split(r"(?<=\.) ", README.replace("\n", " "))
    mean = quoted.split()[2]  # "mean score +X.XX ..."
    assert [s for s in sentences if str(STICKY.relative_to(ROOT)) in s and mean in s]


@pytest.mark.ale
def test_the_script_plays_the_quoted_games_without_sticky_actions_and_evaluate_s_with() -> None:
    script, policy = STICKY / "play.py", DROP[0] / "policy.safetensors"
    for sticky, run, games in (("0.0", STICKY, 2), ("0.25", DROP[0], 1)):
        out = subprocess.run(
            [sys.executable, str(script), str(policy), sticky, str(games)],
            cwd=ROOT, capture_output=True, text=True, timeout=300, check=True,
        ).stdout.splitlines()  # fmt: skip
        _, matches, _ = _evaluation(run)
        assert out[1 : 1 + games] == [m[0] for m in matches[:games]], (sticky, out)
