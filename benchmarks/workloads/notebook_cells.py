"""Run a Jupyter notebook's code cells as "Run All" does, and say what each did.

Runs in every library's interpreter (ours and ORC 0.4's venv): it needs the
standard library and matplotlib only, and never imports a library itself
(the cells do).

    python notebook_cells.py NOTEBOOK.ipynb FIGURES_DIR REPORT.json

The cells run in order in one namespace, in the notebook's folder, with
matplotlib's Agg backend. IPython's line magics and shell escapes (lines
starting with ``%`` or ``!``) are left out: they configure the notebook
front end, not the computation. As in Jupyter, the first cell that raises
stops the run; the later cells are reported as not run. After each cell its
open figures are written to ``FIGURES_DIR/cellNN_K.png`` (K counts the
notebook's figures) and closed.

``REPORT.json``: ``{"cells": [{"index", "status" ("ok", "error", "not run"),
"seconds", "stdout" (its end), "warnings" ([category, message, where]),
"figures", "error"}]}``; written after every cell, so a process that dies
keeps what ran. Relative paths are taken from the caller's folder.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import time
import traceback
import warnings

STDOUT_KEPT = 2000  # characters of a cell's output kept in the report


def code_cells(notebook: dict) -> list[str]:
    """The notebook's code cells as Python source, magics and shell escapes
    left out."""
    cells = []
    for cell in notebook["cells"]:
        if cell.get("cell_type") != "code":
            continue
        source = cell["source"]
        text = "".join(source) if isinstance(source, list) else source
        lines = [
            line
            for line in text.splitlines()
            if not line.lstrip().startswith(("%", "!"))
        ]
        cells.append("\n".join(lines) + "\n")
    return cells


def _where(w: warnings.WarningMessage) -> str:
    return f"{os.path.basename(w.filename)}:{w.lineno}"


def run(path: str, figures_dir: str, report_path: str) -> int:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures_dir, report_path = map(os.path.abspath, (figures_dir, report_path))
    with open(path) as f:
        cells = code_cells(json.load(f))
    os.makedirs(figures_dir, exist_ok=True)
    os.chdir(os.path.dirname(os.path.abspath(path)))
    namespace = {"__name__": "__main__"}
    report = {"cells": []}
    n_figures = 0
    failed = False
    for index, source in enumerate(cells):
        entry = {"index": index, "status": "not run", "seconds": 0.0, "stdout": "",
                 "warnings": [], "figures": [], "error": None}  # fmt: skip
        report["cells"].append(entry)
        if failed:
            continue
        out = io.StringIO()
        t0 = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(source, f"<cell {index}>", "exec"), namespace)
                entry["status"] = "ok"
            except Exception:
                entry["status"] = "error"
                entry["error"] = traceback.format_exc()[-3000:]
                failed = True
        entry["seconds"] = round(time.perf_counter() - t0, 3)
        entry["stdout"] = out.getvalue()[-STDOUT_KEPT:]
        entry["warnings"] = [
            [w.category.__name__, str(w.message), _where(w)] for w in caught
        ]
        for number in plt.get_fignums():
            name = f"cell{index:02d}_{n_figures}.png"
            plt.figure(number).savefig(os.path.join(figures_dir, name), dpi=60)
            entry["figures"].append(name)
            n_figures += 1
        plt.close("all")
        _write(report, report_path)  # what ran so far, should the process die
    _write(report, report_path)
    return 1 if failed else 0


def _write(report: dict, path: str) -> None:
    with open(path, "w") as f:
        json.dump(report, f, indent=1)


if __name__ == "__main__":
    sys.exit(run(*sys.argv[1:4]))
