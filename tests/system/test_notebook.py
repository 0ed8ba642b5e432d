"""notebooks/learn_pong.ipynb runs top to bottom in a real Jupyter kernel, and its committed
outputs are what the committed code prints now.

Cells tagged ``varies`` print figures that depend on the machine or on the quick
setting (a toy's learning in fewer updates, the order games arrive in); for them
only the kinds of output are compared. Every other cell's text must match.
"""

from __future__ import annotations

import re

import pytest

from tests.helpers import ROOT

nbformat = pytest.importorskip("nbformat", reason="pip install -e '.[notebook]'")
nbclient = pytest.importorskip("nbclient", reason="pip install -e '.[notebook]'")

pytestmark = [pytest.mark.ray, pytest.mark.ale]

NOTEBOOK = ROOT / "notebooks" / "learn_pong.ipynb"  # notebooks/execute.py saves its outputs
ADDRESS = re.compile(r" at 0x[0-9a-f]+")  # object addresses differ from run to run


def texts(cell) -> list[tuple[str, str]]:
    """A code cell's outputs as (kind, text): its streams joined (the kernel may cut them
    anywhere), then each other output, an image as its kind alone."""
    streams = {"stdout": "", "stderr": ""}
    shown = []
    for output in cell.get("outputs", []):
        if output["output_type"] == "stream":
            streams[output["name"]] += ADDRESS.sub("", output["text"])
            continue
        data = output.get("data", {})
        kinds = sorted(k for k in data if k.startswith("image/"))
        if kinds:
            shown.append(("image", ",".join(kinds)))
        elif "text/plain" in data:
            shown.append(("text", ADDRESS.sub("", data["text/plain"])))
    return [(name, text) for name, text in streams.items() if text] + shown


def test_the_notebook_runs_and_its_outputs_are_current(monkeypatch) -> None:
    committed = nbformat.read(NOTEBOOK, as_version=4)
    fresh = nbformat.read(NOTEBOOK, as_version=4)
    monkeypatch.setenv("PONG_NOTEBOOK_QUICK", "1")  # read by the kernel, which inherits it
    where = {"metadata": {"path": NOTEBOOK.parent}}
    nbclient.NotebookClient(fresh, timeout=600, kernel_name="python3", resources=where).execute()
    pairs = zip(committed.cells, fresh.cells, strict=True)
    code = [(old, new) for old, new in pairs if new.cell_type == "code"]
    for number, (old, new) in enumerate(code, start=1):
        assert not any(o["output_type"] == "error" for o in new.outputs), new.outputs
        assert "stderr" not in {kind for kind, _ in texts(new)}, texts(new)  # no warnings
        if "varies" in old.metadata.get("tags", []):
            assert [kind for kind, _ in texts(old)] == [kind for kind, _ in texts(new)], number
        else:
            assert texts(old) == texts(new), f"code cell {number}'s committed output is stale"
    assert NOTEBOOK.stat().st_size < 1_000_000  # readable on GitHub
