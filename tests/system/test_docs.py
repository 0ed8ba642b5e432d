"""The docs name only what exists: module paths, dotted modules, and the functions,
classes and methods they name beside a module; the README's commands are the ones CI runs.

A name is looked up where the text puts it:

- ``pong/core/model.py``, ``benchmarks/x.py``, ``tests/.../test_x.py``, ``driver.py``:
  the file exists.
- ``pong.core.train.Update.add``: the longest importable prefix is imported and the
  rest looked up on it (``getattr``, or a dataclass field, or ``self.name = ...`` in
  the class's source).
- `` `pong/core/model.py` `Model.rmsprop` ``, and the names listed right after it
  (`` `A`, `B` and `C` ``): looked up in that module; likewise after a dotted name.
- a bare `` `Name.method` ``: in a table row, in the module the row names; in prose,
  in a module its paragraph names, else in whichever of our modules defines ``Name``.
- a bare `` `CamelCaseName` ``: a class of ours (or a Python builtin).
- `` `stem.Name` `` where ``stem`` is one of our files' names (``baseline.OriginalLoop``).

Modules are imported, not run: Ray is imported but never started.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import importlib
import inspect
import re
from functools import cache
from pathlib import Path

import pytest

from tests.helpers import ROOT

DOCS = sorted(
    [ROOT / "README.md", ROOT / "RESULTS.md", ROOT / "benchmarks" / "README.md"]
    + list((ROOT / "docs").glob("*.md")),
)

IDENT = r"[A-Za-z_]\w*"
PATH = re.compile(r"(?<![\w/.-])(?:(?:pong|benchmarks|tests)/[\w/]*\w\.py|driver\.py)(?![\w/])")
DOTTED = re.compile(rf"(?<![\w/.-])pong(?:\.{IDENT})+")
TICKED = re.compile(r"`([^`\n]+)`")
# what may come between a module and the first name after it (a table's next cell)...
FIRST_GAP = re.compile(r"\s*(?:\|\s*)?")
# ...and between the names of a list after it: `a`, `b` and `c`
LIST_GAP = re.compile(r"\s*(?:,|,? and|,? or|/)\s*")


@cache
def source_files() -> dict[str, list[Path]]:
    """Our Python files by stem: pong/, benchmarks/ and driver.py."""
    files = [*ROOT.glob("pong/**/*.py"), *ROOT.glob("benchmarks/*.py"), ROOT / "driver.py"]
    stems: dict[str, list[Path]] = {}
    for f in files:
        if f.stem != "__init__":
            stems.setdefault(f.stem, []).append(f)
    return stems


@cache
def class_homes() -> dict[str, list[str]]:
    """Each top-level class name of ours -> the modules that define it."""
    homes: dict[str, list[str]] = {}
    for files in source_files().values():
        for f in files:
            tree = ast.parse(f.read_text())
            for node in tree.body:
                if isinstance(node, ast.ClassDef):
                    homes.setdefault(node.name, []).append(module_of(f.relative_to(ROOT)))
    return homes


def module_of(path: Path | str) -> str:
    """``pong/core/model.py`` -> ``pong.core.model``."""
    return str(Path(path).with_suffix("")).replace("/", ".")


@cache
def imported(module: str):
    """The module, or the error that importing it raised (as text)."""
    try:
        return importlib.import_module(module)
    except Exception as e:  # any failure is the doc's finding
        return f"{type(e).__name__}: {e}"


def has(obj: object, name: str) -> bool:
    """``obj.name`` exists: an attribute, a dataclass field, or set as ``self.name`` in a class."""
    if hasattr(obj, name):
        return True
    if dataclasses.is_dataclass(obj) and name in {f.name for f in dataclasses.fields(obj)}:
        return True
    if inspect.isclass(obj):
        for klass in inspect.getmro(obj):
            try:
                text = inspect.getsource(klass)
            except (OSError, TypeError):
                continue
            if re.search(rf"\bself\.{re.escape(name)}\b\s*(?::[^=\n]*)?=", text):
                return True
    return False


def lookup(module: str, dotted: str) -> str | None:
    """Why ``dotted`` is not found in ``module`` (``None``: it is)."""
    obj = imported(module)
    if isinstance(obj, str):
        return f"cannot import {module} ({obj})"
    for i, part in enumerate(dotted.split(".") if dotted else []):
        if not has(obj, part):
            where = ".".join([module, *dotted.split(".")[:i]])
            return f"{where} has no {part}"
        obj = getattr(obj, part, None)
    return None


def resolve_dotted(name: str) -> tuple[str | None, str | None]:
    """``pong.core.train.Update.add`` -> (its module, why it is not found, or ``None``)."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if (ROOT / (module.replace(".", "/") + ".py")).is_file() or (
            ROOT / module.replace(".", "/") / "__init__.py"
        ).is_file():
            return module, lookup(module, ".".join(parts[i:]))
    return None, f"no module {name}"


def units(text: str) -> list[tuple[int, str, bool]]:
    """The text cut into (first line number, text, is a table row): a table row each,
    else a paragraph (lines up to a blank one)."""
    out: list[tuple[int, str, bool]] = []
    para: list[str] = []
    start = 0
    for n, line in enumerate([*text.splitlines(), ""], 1):
        if line.lstrip().startswith("|") or not line.strip():
            if para:
                out.append((start, "\n".join(para), False))
                para = []
            if line.strip():
                out.append((n, line, True))
            continue
        if not para:
            start = n
        para.append(line)
    return out


def problems(text: str, name: str = "text") -> list[str]:
    """Every name in ``text`` (Markdown) that does not exist, as ``name:line: what``."""
    found: list[str] = []
    for start, unit, row in units(text):
        for offset, what in unit_problems(unit, row):
            found.append(f"{name}:{start + unit.count(chr(10), 0, offset)}: {what}")
    return found


def unit_problems(unit: str, row: bool) -> list[tuple[int, str]]:
    """The names of one paragraph or table row that do not exist: (offset, what)."""
    found: list[tuple[int, str]] = []
    modules: list[tuple[int, str]] = []  # (offset in unit, module) of each module named

    def say(offset: int, what: str) -> None:
        found.append((offset, what))

    for m in PATH.finditer(unit):
        if (ROOT / m.group()).is_file():
            modules.append((m.start(), module_of(m.group())))
        else:
            say(m.start(), f"{m.group()}: no such file")
    for m in DOTTED.finditer(unit):
        module, why = resolve_dotted(m.group())
        if why:
            say(m.start(), f"{m.group()}: {why}")
        elif module is not None:
            modules.append((m.start(), module))
    modules.sort()
    checked: set[int] = set()
    for m in TICKED.finditer(unit):  # names listed right after a module
        inner = m.group(1)
        if not (PATH.fullmatch(inner) or DOTTED.fullmatch(inner)):
            continue
        module = module_of(inner) if PATH.fullmatch(inner) else resolve_dotted(inner)[0]
        if module is None or (PATH.fullmatch(inner) and not (ROOT / inner).is_file()):
            continue
        # after a module, its names; after a function (`pong.x.save` and `load`), its siblings
        siblings = not (PATH.fullmatch(inner) or module == inner)
        end, gap = m.end(), LIST_GAP if siblings else FIRST_GAP
        while (between := gap.match(unit, end)) and (nxt := TICKED.match(unit, between.end())):
            if not re.fullmatch(rf"{IDENT}(\.{IDENT})*", nxt.group(1)):
                break  # not a name: `--seed`, `x = 0`
            if DOTTED.fullmatch(nxt.group(1)) or (siblings and "." in nxt.group(1)):
                break  # another module, or not a sibling: checked on its own
            checked.add(nxt.start())
            why = lookup(module, nxt.group(1))
            if why:
                say(nxt.start(), f"`{nxt.group(1)}` beside {module}: {why}")
            end, gap = nxt.end(), LIST_GAP
    for m in TICKED.finditer(unit):  # bare Class.method, CamelCase, stem.Name
        inner = m.group(1)
        if m.start() in checked:
            continue
        if re.fullmatch(rf"[A-Z]\w*\.{IDENT}(\.{IDENT})*", inner):
            cls = inner.split(".")[0]
            near = [mod for _, mod in modules if lookup(mod, cls) is None]
            if row and modules:
                places = near or [mod for _, mod in modules]
            else:
                places = near or class_homes().get(cls, [])
            if not places:
                say(m.start(), f"`{inner}`: no class {cls} in any module of ours")
            elif all(lookup(p, inner) for p in places):
                say(m.start(), f"`{inner}`: {lookup(places[0], inner)}")
        elif re.fullmatch(r"[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+", inner):
            if inner not in class_homes() and not hasattr(builtins, inner):
                say(m.start(), f"`{inner}`: no class {inner} in any module of ours")
        elif re.fullmatch(rf"[a-z_]\w*\.[A-Z]\w*(\.{IDENT})*", inner):  # not `checkpoint.npz`
            stem, rest = inner.split(".", 1)
            if stem in source_files():
                homes = [module_of(f.relative_to(ROOT)) for f in source_files()[stem]]
                if all(lookup(h, rest) for h in homes):
                    say(m.start(), f"`{inner}`: {lookup(homes[0], rest)}")
    return found


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_module_and_name_the_docs_give_exists(doc: Path) -> None:
    assert problems(doc.read_text(), str(doc.relative_to(ROOT))) == []


@pytest.mark.parametrize(
    "text",
    [
        "`pong/core/model.py` `Model.upgrade`",
        "Code: `pong/core/rewards.py` `process_rewards` and `discount`.",
        "`pong.core.train.Update.subtract`",
        "`pong.core.trainer`",
        "see pong/core/nothing.py",
        "`tests/test_toy.py` runs it",
        "| the loop | `pong/core/train.py` | `Trainer.fly` |",
        "| RMSProp | `pong/core/model.py` | `Trainer.play` |",  # not in the row's module
        "It calls `Trainer.fly` each update.",
        "`NoSuchWorker` plays the games",
        "`baseline.NewLoop`",
        "`pong.run.checkpoint.save` and `lode` take",
    ],
)
def test_a_made_up_name_is_reported(text: str) -> None:
    assert len(problems(text)) == 1, problems(text)


@pytest.mark.parametrize(
    "text",
    [
        "`pong/core/model.py` `Model.rmsprop`, `Model.from_weights` and `sigmoid`",
        "the sum is `pong.core.train.Update.add`, called by `Trainer.play`",
        "| the actor | `pong/core/worker.py` | `RolloutWorker.compute_gradient` |",
        "`Update.held`, `Trainer.grad_buffer`, `ray.wait`, `env.step`, `ImportError`",
        "`pong.tools.evaluate.play_games` and `baseline.OriginalLoop`; python -m pong plot",
    ],
)
def test_names_that_exist_pass(text: str) -> None:
    assert problems(text) == []


def _readme_block() -> list[str]:
    """The command lines of the README's first code block."""
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.DOTALL)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def test_the_first_screen_is_two_self_contained_lines_and_ci_runs_the_second() -> None:
    lines = _readme_block()
    train, test = (line.split("  #")[0].strip() for line in lines[:2])
    for line in (train, test):  # each makes its own environment: a fresh clone needs no more
        assert line.startswith("python3 -m venv .venv && .venv/bin/pip install -e ")
    assert "driver.py" in train and "pytest" in test
    assert test in (ROOT / ".ci" / "run").read_text().splitlines()
    assert all(line.startswith(".venv/bin/python driver.py --evaluate") for line in lines[2:])


def _version(text: str) -> tuple[int, ...]:
    parts = [int(p) for p in text.split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def test_oldest_txt_pins_the_lower_bounds_docs_versions_md_states() -> None:
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    with open(ROOT / "pyproject.toml", "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    bounds = dict(re.fullmatch(r"([\w-]+)>=([\d.]+)", d).groups() for d in dependencies)
    oldest = (ROOT / "tests" / "oldest.txt").read_text()
    pins = dict(re.findall(r"^([\w-]+)==([\d.]+)$", oldest, re.MULTILINE))
    assert pins.keys() == bounds.keys()
    for name, bound in bounds.items():  # the bound's release, or a patch of it (numpy 1.26.4)
        assert _version(pins[name])[: len(bound.split("."))] == _version(bound), name
    versions = (ROOT / "docs" / "versions.md").read_text()
    for name, bound in bounds.items():
        assert re.search(rf"{name} {re.escape(bound)}\+", versions, re.IGNORECASE), name
    assert "docs/versions.md" in oldest  # where its use is explained


def _anchor(heading: str) -> str:
    """GitHub's anchor of a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("doc", DOCS, ids=[str(d.relative_to(ROOT)) for d in DOCS])
def test_every_relative_link_reaches_a_file_and_heading(doc: Path) -> None:
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if re.match(r"[a-z]+:", target):
            continue  # a web address
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        if not file.exists():
            broken.append(target)
        elif anchor and file.suffix == ".md":
            headings = re.findall(r"^#+ (.*)$", file.read_text(), re.MULTILINE)
            if anchor not in {_anchor(h) for h in headings}:
                broken.append(target)
    assert broken == []


def _not_called() -> list[str]:
    """The words docs/algorithm.md's glossary says a thing is not called."""
    text = (ROOT / "docs" / "algorithm.md").read_text().split("## Glossary", 1)[1]
    rows = re.findall(r"^\| (\w[\w ]*) \| .* \| (.*) \|$", text.split("\n## ", 1)[0], re.M)
    words = [w.strip() for _, cell in rows for w in cell.split(",") if w.strip()]
    assert {"episode", "iteration", "rollout"} <= set(words)  # the test can fail
    return words


@pytest.mark.parametrize(
    "command",
    [["driver.py"], *(["-m", "pong", tool] for tool in ("sweep", "plot", "compare", "metrics"))]
    + [["-m", "pong", "export"]],
    ids=" ".join,
)
def test_help_speaks_the_glossary_s_words(command: list[str]) -> None:
    """Each --help, its flags' old names (kept as aliases) and Ray's class names aside."""
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    prose = re.sub(r"--[\w-]+|RolloutWorker", "", done.stdout).lower()
    assert [w for w in _not_called() if re.search(rf"\b{w}", prose)] == []


def test_the_metrics_files_columns_speak_the_glossary_s_words() -> None:
    from pong.run.metrics import FIELDS, TEXT_FIELDS

    columns = [c for name in FIELDS for c in FIELDS[name] + TEXT_FIELDS[name]]
    assert "running_mean" in columns and "score" in columns
    assert [c for c in columns for w in _not_called() if w.replace(" ", "_") in c] == []


def test_the_benchmarks_take_the_flags_their_readme_gives_in_the_glossary_s_words() -> None:
    """Each ``benchmarks/X.py`` command line in benchmarks/README.md, its optional flags too,
    names only flags the script defines; and no script's flag is a word the glossary refuses."""
    text = (ROOT / "benchmarks" / "README.md").read_text()
    lines = re.findall(r"^\.venv/bin/python (benchmarks/\w+\.py)(.*)$", text, re.MULTILINE)
    assert len(lines) >= 10  # the test can fail
    defined = {}
    for script, rest in lines:
        source = (ROOT / script).read_text()
        defined[script] = set(re.findall(r'add_argument\(\s*"(--[\w-]+)"', source))
        assert set(re.findall(r"--[\w-]+", rest)) <= defined[script], script
    kept = {"--batch-size", "--batch-sizes"}  # Ray's example's flag, kept (docs/algorithm.md)
    flags = {flag for names in defined.values() for flag in names} - kept
    assert [f for f in flags for w in _not_called() if w.replace(" ", "-") in f] == []
