"""Run learn_pong.ipynb top to bottom in a Jupyter kernel and save it with its outputs.

Run (after ``pip install -e '.[notebook]'``), when the notebook or the code it
calls changes: ``.venv/bin/python notebooks/execute.py``.
``tests/system/test_notebook.py`` fails while the saved outputs are stale.
"""

from pathlib import Path

import nbclient
import nbformat

NOTEBOOK = Path(__file__).resolve().parent / "learn_pong.ipynb"

if __name__ == "__main__":
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    where = {"metadata": {"path": NOTEBOOK.parent}}
    nbclient.NotebookClient(notebook, timeout=600, kernel_name="python3", resources=where).execute()
    nbformat.write(notebook, NOTEBOOK)
    print(f"{NOTEBOOK}: {NOTEBOOK.stat().st_size / 1e3:.0f} kB")
