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
