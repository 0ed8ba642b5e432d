from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest

from pong.run.checkpoint import FILENAME, save
from pong.run.errors import pasteable, printable
from pong.run.metrics import MetricsLog
from pong.tools import plot
from tests.run.test_checkpoint import make_checkpoint
from tests.run.test_metrics import _games, _row, odd_run, run_module


def test_plot_writes_a_png_of_the_run(tmp_path) -> None:
    log = MetricsLog(tmp_path)
    for update in range(1, 6):
        log.write(_row(update), _games(update))
    log.close()
    out = plot.plot_run(tmp_path)
    assert out == tmp_path / "learning_curve.png"
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


@pytest.mark.parametrize("make", ["missing", "empty"])
def test_plot_of_a_directory_without_metrics_is_one_line(tmp_path, make, capsys) -> None:
    run = tmp_path / "run"
    if make == "empty":
        run.mkdir()
        MetricsLog(run).close()  # headers, no rows
    assert plot.main([str(run)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(run) in err


def test_without_matplotlib_the_line_gives_the_command_that_installs_it(
    tmp_path, monkeypatch, capsys
) -> None:
    """It said a bare ``pip install``, which may be another Python's pip (a newcomer's find)."""
    log = MetricsLog(tmp_path)
    log.write(_row(1), _games(1))
    log.close()
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as where it is not installed
    assert plot.main([str(tmp_path)]) == 2
    assert capsys.readouterr().err == (
        f"python -m pong plot: error: matplotlib is not installed: {pasteable(sys.executable)}"
        " -m pip install -e '.[plot]'\n"
    )


def test_an_output_where_no_png_can_go_is_one_line(tmp_path, capsys) -> None:
    log = MetricsLog(tmp_path)
    log.write(_row(1), _games(1))
    log.close()
    assert plot.main([str(tmp_path), "--output", str(tmp_path / "nodir" / "x.png")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "No such file or directory" in err


def test_several_runs_overlay_their_running_means_by_game_and_by_hour(tmp_path) -> None:
    runs = []
    for name, seconds in (("a", 1800.0), ("b", 900.0)):
        runs.append(tmp_path / name)
        runs[-1].mkdir()
        log = MetricsLog(runs[-1])
        for update in range(1, 5):
            row = _row(update) | {"seconds": seconds, "running_mean": -21.0 + update}
            log.write(row, _games(update))
        log.close()
    assert plot.curve(runs[0]) == ([2, 4, 6, 8], [0.5, 1.0, 1.5, 2.0], [-20.0, -19.0, -18.0, -17.0])
    assert plot.curve(runs[1])[1] == [0.25, 0.5, 0.75, 1.0]
    out = tmp_path / "overlay.png"
    assert plot.main([*map(str, runs), "--output", str(out)]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    assert plot.curve(runs[0], games=5) == ([2, 4], [0.5, 1.0], [-20.0, -19.0])
    assert plot.main([*map(str, runs), "--output", str(out), "--games", "4"]) == 0
    assert out.read_bytes() != data  # drawn again, shorter


def test_several_runs_without_an_output_is_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        plot.main([str(tmp_path / "a"), str(tmp_path / "b")])
    assert exit_info.value.code == 2
    assert (
        capsys.readouterr().err
        == "python -m pong plot: error: several runs need --output FILE.png\n"
    )


@pytest.mark.parametrize("output", ["runs", "runs.pdf", ""])
def test_an_output_that_is_not_a_png_is_refused(output, tmp_path, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        plot.main([str(tmp_path), "--output", output])
    assert exit_info.value.code == 2
    assert (
        f"argument --output: only .png files are written, got {output!r}" in capsys.readouterr().err
    )
    assert list(tmp_path.iterdir()) == []


def test_a_run_given_twice_is_one_line(tmp_path, capsys) -> None:
    assert plot.main([str(tmp_path), f"{tmp_path}/.", "--output", str(tmp_path / "x.png")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert not (tmp_path / "x.png").exists()


def test_weights_draws_the_policy_s_w1_beside_a_file_or_in_a_run_dir(tmp_path, capsys) -> None:
    from PIL import Image

    from pong.run.checkpoint import FILENAME, load, save
    from pong.tools.weights import picture
    from tests.run.test_checkpoint import make_checkpoint

    run = tmp_path / "run"
    run.mkdir()
    save(run / FILENAME, make_checkpoint())
    assert plot.main(["--weights", str(run)]) == 0
    assert capsys.readouterr().out == f"{run / 'weights.png'}\n"
    drawn = np.asarray(Image.open(run / "weights.png"))
    np.testing.assert_array_equal(drawn, picture(load(run).weights["W1"]))
    assert plot.main(["--weights", str(run / FILENAME)]) == 0
    assert (run / "checkpoint-weights.png").read_bytes() == (run / "weights.png").read_bytes()


@pytest.mark.parametrize(
    ("argv", "message"),
    [([], "give either run directories or --weights PATH"), (["--weights", "{tmp}"], "no such")],
)
def test_weights_mistakes_are_one_line(argv, message, tmp_path, capsys) -> None:
    argv = [a.format(tmp=tmp_path) for a in argv]
    try:
        code = plot.main(argv)
    except SystemExit as e:
        code = e.code
    assert code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1].startswith("python -m pong plot: error:") and message in err


@pytest.mark.parametrize("name", ["learning_curve.png", "weights.png"])
def test_a_link_planted_at_a_default_output_in_the_run_is_one_line(tmp_path, name, capsys) -> None:
    (tmp_path / "run").mkdir()
    log = MetricsLog(tmp_path / "run")
    log.write(_row(1), _games(1))
    log.close()
    save(tmp_path / "run" / FILENAME, make_checkpoint())
    victim = tmp_path / "precious.png"
    victim.write_bytes(b"mine")
    (tmp_path / "run" / name).symlink_to(victim)
    argv = (
        [str(tmp_path / "run")]
        if name == "learning_curve.png"
        else ["--weights", str(tmp_path / "run")]
    )
    assert plot.main(argv) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 'run' / name}: a symbolic link; refusing" in err
    assert victim.read_bytes() == b"mine" and (tmp_path / "run" / name).is_symlink()


def test_a_run_whose_name_is_not_utf8_is_drawn_and_named_printably(tmp_path) -> None:
    run = odd_run(tmp_path)
    proc = run_module("pong", "plot", run)
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == f"{printable(run / 'learning_curve.png')}\n"
    assert (run / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    other = tmp_path / "other"
    other.mkdir()
    log = MetricsLog(other)
    log.write(_row(1), _games(1))
    log.close()
    proc = run_module("pong", "plot", run, other, "--output", tmp_path / "both.png")
    assert (proc.returncode, proc.stderr) == (0, "")


def test_buckets_keep_each_bucket_s_least_mean_and_greatest() -> None:
    rows = 5 * plot.POINTS + 3
    buckets = plot.Buckets()
    values = np.random.default_rng(0).normal(size=rows)
    for i, v in enumerate(values):
        buckets.add(i, v)
    lo, mean, hi = buckets.result()
    assert buckets.size == 4 and len(mean) == -(-rows // 4)  # between POINTS and 2 * POINTS
    groups = [values[i : i + 4] for i in range(0, rows, 4)]
    np.testing.assert_array_equal(lo[:, 1], [g.min() for g in groups])
    np.testing.assert_array_equal(hi[:, 1], [g.max() for g in groups])
    np.testing.assert_allclose(mean[:, 1], [g.mean() for g in groups])
    np.testing.assert_allclose(
        mean[:, 0], [np.arange(i, min(i + 4, rows)).mean() for i in range(0, rows, 4)]
    )


def test_a_long_run_is_drawn_in_memory_that_does_not_grow_with_it(tmp_path) -> None:
    from benchmarks.plot_memory import write_run

    plot._pyplot()  # matplotlib's own memory, taken once, is not the run's
    write_run(tmp_path, rows=20_000, games=1)
    tracemalloc.start()
    try:
        plot.plot_run(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The drawing's memory, about 3 MiB; reading the rows as dicts of str took 30 here.
    assert peak < 8 * 2**20, f"{peak / 2**20:.1f} MiB"


def test_what_plot_writes_by_default_beside_the_shipped_results_leaves_git_clean(tmp_path) -> None:
    """``pong plot results/pong-v5`` (and its ``--weights``, and the README's ``runs.png``) write
    beside tracked files; git must not show them as the user's changes."""
    import shutil
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        pytest.skip("not a git checkout")
    shipped = root / "results" / "pong-v5"
    copy = shutil.copytree(shipped, tmp_path / "pong-v5")
    written = [plot.plot_run(copy), plot.plot_weights(copy / "policy.safetensors")]
    paths = [str(shipped / p.relative_to(copy)) for p in written] + [str(root / "runs.png")]
    ignored = subprocess.run(
        ["git", "check-ignore", *paths], cwd=root, capture_output=True, text=True
    ).stdout.splitlines()
    assert sorted(ignored) == sorted(paths)
