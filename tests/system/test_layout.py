"""The layout keeps its promises: the algorithm stands alone, and only training loads Ray."""

from __future__ import annotations

import ast
import doctest
import subprocess
import sys

import pytest

from tests.helpers import ROOT

PARTS = ("core", "envs", "run", "tools")
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def imported(path) -> set[str]:
    """Every module ``path`` imports, at its top, inside a function, or in a doctest."""
    names, tree = set(), ast.parse(path.read_text())
    texts = [ast.get_docstring(n) or "" for n in ast.walk(tree) if isinstance(n, DOCUMENTED)]
    examples = [e.source for text in texts for e in doctest.DocTestParser().get_examples(text)]
    for node in (n for t in [tree, *map(ast.parse, examples)] for n in ast.walk(t)):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


@pytest.mark.parametrize("path", sorted((ROOT / "pong" / "core").glob("*.py")), ids=str)
def test_the_algorithm_imports_nothing_else_of_ours(path) -> None:
    ours = {name for name in imported(path) if name.split(".")[0] == "pong"}
    assert all(name.startswith("pong.core.") for name in ours), ours


def test_the_check_reports_an_import_from_another_part(tmp_path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from pong.run.config import Config\n")
    assert "pong.run.config.Config" in imported(module)
    module.write_text('def f():\n    """\n    >>> import pong.envs.make\n    """\n')
    assert "pong.envs.make" in imported(module)  # a doctest's import too


def test_every_module_belongs_to_a_part() -> None:
    top = sorted(p.name for p in (ROOT / "pong").iterdir() if p.suffix == ".py")
    assert top == ["__init__.py", "__main__.py"]  # python -m pong TOOL
    assert sorted(p.name for p in (ROOT / "pong").iterdir() if p.is_dir() and p.name[0] != "_") == (
        sorted(PARTS)
    )


@pytest.mark.parametrize("path", sorted((ROOT / "pong").rglob("*.py")), ids=str)
def test_no_function_is_longer_than_50_lines(path) -> None:
    long = [
        f"{node.name}: {node.end_lineno - node.lineno + 1} lines"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno >= 50
    ]
    assert long == []


def loads_ray(code: str) -> bool:
    """Whether running ``code`` in a fresh interpreter imports Ray (checked as it exits)."""
    check = "import atexit, sys\natexit.register(lambda: print('ray' in sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-c", check + code], cwd=ROOT, capture_output=True, text=True
    )
    assert done.stdout.splitlines()[-1:] in (["True"], ["False"]), done.stderr
    return done.stdout.splitlines()[-1] == "True"


def test_import_pong_loads_what_its_docstring_says() -> None:
    code = "import sys, pong; print(sorted(m for m in sys.modules if m.startswith('pong')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.stdout.split() == ["['pong']"], done.stderr


def test_import_pong_and_the_model_load_no_ray() -> None:
    assert not loads_ray("import pong, pong.core, pong.envs, pong.run, pong.tools")
    algorithm = "from pong.core.model import Model; from pong.core.rewards import process_rewards"
    assert not loads_ray(f"{algorithm}; from pong.core.rollout import game_gradient, play_game")
    assert loads_ray("from pong.core.worker import RolloutWorker")  # so the test can fail


@pytest.mark.parametrize(
    "command",
    [
        ["pong", "metrics", "results/pong-v5"],
        ["pong", "compare", "results/pong-v5", "results/pong-v5-seed1"],
        ["pong", "export", "results/pong-v5", "{tmp}/policy.safetensors"],
        ["pong", "plot", "results/pong-v5", "--output", "{tmp}/curve.png"],
        ["pong", "plot", "--weights", "results/pong-v5", "--output", "{tmp}/weights.png"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_the_commands_that_do_not_train_load_no_ray(command, tmp_path) -> None:
    argv = [word.format(tmp=tmp_path) for word in command]
    code = f"import runpy\nsys.argv = {argv!r}\nrunpy.run_module('pong', run_name='__main__')"
    assert not loads_ray(code)
