"""The commands' output: one line, not a traceback, when it cannot be written."""

from __future__ import annotations

import shlex
import subprocess
import sys

import pytest

from pong.run.checkpoint import FILENAME, save
from pong.run.directory import Run
from tests.helpers import ROOT
from tests.run.test_checkpoint import make_checkpoint
from tests.run.test_directory import StandInTrainer


@pytest.fixture
def run_dir(tmp_path):
    run = Run.start(tmp_path / "run", make_checkpoint().config, checkpoint_every=10)
    trainer = StandInTrainer(run.config)
    run.open()
    for _ in range(2):
        run.record(trainer.play(), trainer)
    run.close(trainer)
    save(run.directory / FILENAME, trainer.checkpoint())
    return run.directory


@pytest.mark.parametrize(
    "command",
    [
        ["pong", "metrics", "{run}"],
        ["pong", "compare", "{run}"],
        ["pong", "export", "{run}", "{tmp}/policy.safetensors"],
        ["pong", "plot", "{run}", "--output={tmp}/curve.png"],
        ["pong", "sweep", "--help"],  # argparse's own help dropped the error, exit code 0
    ],
)
def test_output_to_a_full_disk_is_one_line(command, run_dir, tmp_path) -> None:
    argv = [a.format(run=run_dir, tmp=tmp_path) for a in command]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", *argv], cwd=ROOT, stdout=full, stderr=subprocess.PIPE, text=True
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr == (
        f"python -m pong {command[1]}: error: could not write the output: No space left on device\n"
    )


@pytest.mark.parametrize(
    ("module", "argv"),
    [
        ("pong.tools.compare", []),
        ("pong.run.metrics", []),
        ("pong.tools.export", ["only-one"]),
        ("pong.tools.plot", ["--games", "x"]),
        ("pong.run.sweep", ["--seeds"]),
    ],
)
def test_a_bad_command_line_is_one_line_naming_the_command(module, argv, capsys) -> None:
    """argparse's usage line is left out: the error is the whole message (OneLineParser)."""
    main = __import__(module, fromlist=["main"]).main
    with pytest.raises(SystemExit) as stopped:
        main(argv)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("python -m pong "), err
    assert err.endswith(" (see --help)\n"), err


@pytest.mark.parametrize("command", ["driver.py --help", "-m pong sweep --help"])
def test_help_with_stdout_closed_is_no_traceback(command) -> None:
    """``--help >&-`` ended in an AttributeError (a tester's find): with no stdout there is
    nothing to write, as argparse's own help has it."""
    done = subprocess.run(
        ["bash", "-c", f"{shlex.quote(sys.executable)} {command} >&-"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


def test_a_closed_stdout_inside_a_file_s_writing_is_not_blamed_on_the_file(tmp_path) -> None:
    """``--evaluate --record x.gif | head`` said 'could not write x.gif: Broken pipe' (a
    tester's find): the pipe's error goes on, for the caller's quiet stop."""
    from pong.run.errors import RunFileError, writing

    with pytest.raises(BrokenPipeError), writing(tmp_path / "x.gif", "no recording was kept"):
        raise BrokenPipeError(32, "Broken pipe")
    with pytest.raises(RunFileError, match="could not write .*x.gif: No space left on device"):
        with writing(tmp_path / "x.gif", "no recording was kept"):
            raise OSError(28, "No space left on device")
