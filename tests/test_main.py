"""``python -m pong TOOL``: one way in for every tool, and one line for a wrong name."""

from __future__ import annotations

import subprocess
import sys

from pong.__main__ import TOOLS
from tests.helpers import ROOT


def _pong(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pong", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_no_tool_lists_them_all_and_exits_2() -> None:
    proc = _pong()
    assert proc.returncode == 2 and proc.stdout == ""
    assert [line.split()[0] for line in proc.stderr.splitlines()[3:]] == list(TOOLS)


def test_a_wrong_tool_is_one_line_naming_the_tools() -> None:
    proc = _pong("plott", "runs/x")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "no tool 'plott'; one of sweep, plot," in proc.stderr


def test_each_tool_s_help_names_the_command_that_runs_it() -> None:
    for name in ("plot", "metrics"):  # the others load the same way (tests/system/test_layout.py)
        proc = _pong(name, "--help")
        assert proc.returncode == 0 and proc.stdout.startswith(f"usage: python -m pong {name} ")


def test_a_stop_while_a_tool_writes_is_one_line_and_leaves_no_temporary_file(
    tmp_path, monkeypatch, capsys
) -> None:
    """SIGINT in the middle of export's write: the loading handler's os._exit had skipped the
    clean-up and left a 5 MB ``.NAME.<hex>.tmp`` (a tester's find, with plot too)."""
    import os
    import signal
    import time

    from pong.__main__ import main
    from pong.run.checkpoint import FILENAME, save
    from pong.run.stops import STOPS
    from tests.run.test_checkpoint import make_checkpoint

    (tmp_path / "run").mkdir()
    save(tmp_path / "run" / FILENAME, make_checkpoint())

    def stopped(fd: int) -> None:  # where the file is half written
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(30)  # the handler raises in here

    handlers = {sig: signal.getsignal(sig) for sig in STOPS}
    monkeypatch.setattr(os, "fsync", stopped)
    try:
        assert main(["export", str(tmp_path / "run"), str(tmp_path / "out.safetensors")]) == 130
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
    assert capsys.readouterr().err == "Interrupted by SIGINT.\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
