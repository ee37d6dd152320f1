"""ORC 0.4's own tests and example notebooks, run on orc.

ORC 0.4 users' code must run unchanged on ours (DESIGN.md §1). ORC's release
says what such code is: the source distribution of
``openreservoircomputing==0.4.0`` holds ORC's test suite (``tests/``) and the
eight example notebooks its documentation executes (``examples/*.ipynb``).
This script downloads that distribution from the package index once, into
``benchmarks/.cache/orc04_suite/`` (as the peer venvs are installed; none of
it enters this repository), then

1. runs ORC's tests with our interpreter and the working tree's ``src/``
   first on the path, so that their ``import orc`` is ours. Every failing
   test must be one of :data:`DIFFERENCES` (a deliberate difference
   docs/from-orc.md lists, with the reason); any other failure, and any
   listed test that no longer fails, is reported and makes the exit status 1;
2. runs each notebook's code cells in order, as "Run All" does
   (``workloads/notebook_cells.py``), and the README's quick start as a
   notebook of one cell per Python block, in one fresh process per notebook and
   library: under ours and under ORC 0.4 (``benchmarks/.venvs/orc04``,
   created on first use). A cell that fails under ours and not under ORC 0.4
   makes the exit status 1. Each notebook's figures are put side by side,
   ORC 0.4 left and ours right, in ``benchmarks/.cache/orc04_suite/<name>.png``;
3. writes ``benchmarks/ORC04_SUITE.md`` (``--render`` writes it again from the
   last whole run's results, kept in the cache folder).

    .venv/bin/python benchmarks/orc04_suite.py              # all, ~10 min on 2 cores
    .venv/bin/python benchmarks/orc04_suite.py --no-notebooks
    .venv/bin/python benchmarks/orc04_suite.py --no-tests --notebooks lorenz,ks
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import envs  # noqa: E402

DIST, VERSION = "openreservoircomputing", "0.4.0"
CACHE = envs.BENCH_DIR / ".cache" / "orc04_suite"
REPORT = envs.BENCH_DIR / "ORC04_SUITE.md"
RUNNER = envs.WORKLOADS_DIR / "notebook_cells.py"

_SHAPES = "docs/from-orc.md, 'Components have ORC 0.4's shapes'"

#: ORC 0.4 tests that fail on orc by design: ``module::test`` (the JUnit
#: classname and name) -> why.
DIFFERENCES = {
    "tests.test_readouts::test_ravel": (
        "builds `ParallelLinearReadout(out_dim=3, chunks=5)`, for which ORC "
        "gives each chunk int(3 / 5) = 0 outputs, then puts a `(5, 3, 10)` "
        "`wout` in with `eqx.tree_at`, so the readout returns 15 values while "
        "its `out_dim` says 3. orc refuses a `chunks` that does not divide "
        f"`out_dim` and names the `out_dim` meant ({_SHAPES})."
    ),
    "tests.test_readouts::test_nonlin_and_quadratic_readout": (
        "builds `ParallelNonlinearReadout(out_dim=6, chunks=12)` and "
        "`ParallelQuadraticReadout` likewise (int(6 / 12) = 0 outputs per "
        "chunk in ORC), then puts `(12, 6, 6)` weights in with `eqx.tree_at`. "
        "orc refuses a `chunks` that does not divide `out_dim` "
        f"({_SHAPES})."
    ),
    "tests.forecaster.test_forecast_models::test_multi_seq_par_esn_equiv_manual_concat": (
        "compares multi-sequence training with ORC's own solve "
        "(`jax.scipy.linalg.solve` of the normal equations of the "
        "concatenated states) by `jnp.allclose` (rtol 1e-5) at `beta=1e-6`, "
        "where the ridge matrix's condition number is about 1e11. orc sums "
        "the Gram in other blocks: the two weights differ by 2.6e-6 "
        "relative, and each is 2-3e-6 from the least-squares solution of the "
        "stacked `[F; sqrt(beta) I]` (`numpy.linalg.lstsq`, backward stable); "
        "the ridge objectives agree to 12 digits (measured 2026-11-29)."
    ),
}


def fetch_release() -> Path:
    """The unpacked source distribution of ORC 0.4 (downloaded once)."""
    root = CACHE / f"{DIST}-{VERSION}"
    if (root / "tests").is_dir() and (root / "examples").is_dir():
        return root
    CACHE.mkdir(parents=True, exist_ok=True)
    ours = envs.LIBRARIES["ours"].python
    subprocess.run(
        [str(ours), "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-binary", ":all:", "-d", str(CACHE), f"{DIST}=={VERSION}"],
        check=True, env=envs.child_env(None),
    )  # fmt: skip
    with tarfile.open(CACHE / f"{DIST}-{VERSION}.tar.gz") as archive:
        archive.extractall(CACHE, filter="data")  # files only, inside CACHE
    return root


# ------------------------------------------------------------------ the tests


def _env(lib: envs.Library) -> dict:
    env = envs.child_env(lib)
    env["MPLBACKEND"] = "Agg"
    return env


def outcomes(junit_xml: str) -> dict[str, str]:
    """``module::test`` -> "passed", "failed" or "skipped", from pytest's
    JUnit XML report."""
    result = {}
    for case in ET.fromstring(junit_xml).iter("testcase"):
        key = f"{case.get('classname')}::{case.get('name')}"
        tags = {child.tag for child in case}
        if tags & {"failure", "error"}:
            result[key] = "failed"
        elif "skipped" in tags:
            result[key] = "skipped"
        else:
            result[key] = "passed"
    return result


def judge(results: dict[str, str]) -> tuple[list[str], list[str], list[str]]:
    """``(expected, unexpected, stale)``: failing tests listed in
    :data:`DIFFERENCES`, failing tests not listed, listed tests that did not
    fail (the list must change with the code)."""
    failed = sorted(k for k, v in results.items() if v == "failed")
    expected = [k for k in failed if k in DIFFERENCES]
    unexpected = [k for k in failed if k not in DIFFERENCES]
    stale = sorted(k for k in DIFFERENCES if results.get(k) != "failed")
    return expected, unexpected, stale


def run_tests(root: Path, workers: int) -> dict:
    ours = envs.LIBRARIES["ours"]
    env = _env(ours)
    where = subprocess.run(
        [str(ours.python), "-c", "import orc; print(orc.__file__)"],
        cwd=root, env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    junit = CACHE / "tests.xml"
    junit.unlink(missing_ok=True)  # never a previous run's results
    cmd = [str(ours.python), "-m", "pytest", "tests", "-q", "-p", "no:cacheprovider",
           "-o", "addopts=", f"--junitxml={junit}"]  # fmt: skip
    if workers > 1:
        cmd += ["-n", str(workers)]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if not junit.exists():
        raise RuntimeError(f"ORC's tests did not run:\n{proc.stdout[-3000:]}")
    results = outcomes(junit.read_text())
    return {"orc_file": where, "seconds": seconds, "workers": workers,
            "results": results, "tail": proc.stdout[-3000:]}  # fmt: skip


# -------------------------------------------------------------- the notebooks


def readme_notebook(root: Path, path: Path = CACHE / "README.ipynb") -> Path:
    """ORC's README quick start as the notebook ``path``: one code cell per
    ```python block of its README.md, in order."""
    text = (root / "README.md").read_text()
    blocks = re.findall(r"```python[ \t]*\n(.*?)```", text, flags=re.S)
    cells = [{"cell_type": "code", "source": block} for block in blocks]
    path.write_text(json.dumps({"cells": cells}))
    return path


def run_notebook(lib: envs.Library, notebook: Path, timeout: float) -> dict:
    """``workloads/notebook_cells.py``'s report of ``notebook`` under ``lib``,
    with ``crash`` (why the process ended otherwise than by a cell, or None)."""
    out = CACHE / lib.key
    out.mkdir(parents=True, exist_ok=True)
    report = out / f"{notebook.stem}.json"
    report.unlink(missing_ok=True)
    try:
        proc = subprocess.run(
            [str(lib.python), str(RUNNER), str(notebook), str(out / notebook.stem),
             str(report)],
            env=_env(lib), capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        crash = proc.stderr[-2000:] if proc.returncode not in (0, 1) else None
    except subprocess.TimeoutExpired:
        crash = f"timed out after {timeout:.0f} s"
    result = json.loads(report.read_text()) if report.exists() else {"cells": []}
    result["crash"] = crash
    return result


def side_by_side(name: str, runs: dict[str, dict]) -> Path | None:
    """One PNG of a notebook's figures: a row per figure, ORC 0.4 left, ours
    right (a figure one library did not draw is left blank)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("orc04", "ours")
    names = sorted({f for k in keys for c in runs[k]["cells"] for f in c["figures"]})
    if not names:
        return None
    fig, axes = plt.subplots(
        len(names), 2, figsize=(14, 3.2 * len(names)), squeeze=False
    )
    for row, figure in enumerate(names):
        for col, key in enumerate(keys):
            ax = axes[row][col]
            path = CACHE / key / name / figure
            if path.exists():
                ax.imshow(plt.imread(path))
            ax.set_title(f"{envs.LIBRARIES[key].label}: {figure}", fontsize=9)
            ax.axis("off")
    fig.tight_layout()
    path = CACHE / f"{name}.png"
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


def regressions(runs: dict[str, dict]) -> list[int]:
    """Cells that ran under ORC 0.4 and did not under ours."""
    theirs = {c["index"]: c["status"] for c in runs["orc04"]["cells"]}
    return [c["index"] for c in runs["ours"]["cells"]
            if theirs.get(c["index"]) == "ok" and c["status"] != "ok"]  # fmt: skip


# ----------------------------------------------------------------- the report


def _ran(run: dict) -> str:
    cells = run["cells"]
    ok = sum(c["status"] == "ok" for c in cells)
    text = f"{ok}/{len(cells)}"
    if run.get("crash"):
        text += " (process failed)"
    return text


def _seconds(run: dict) -> str:
    return f"{sum(c['seconds'] for c in run['cells']):.1f}"


def _label(name: str) -> str:
    """A notebook's name in the report (the README's blocks are one)."""
    return "`README.md`'s Python blocks" if name == "README" else f"`{name}.ipynb`"


def _shown(path: str) -> str:
    """``path`` relative to the repository when it is inside it."""
    p = Path(path)
    return (
        str(p.relative_to(envs.REPO_ROOT)) if p.is_relative_to(envs.REPO_ROOT) else path
    )


def _one_line(text: str, limit: int = 400) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def markdown(info: dict, tests: dict | None, notebooks: dict[str, dict]) -> str:
    lines = [
        "# ORC 0.4's own tests and notebooks, run on orc",
        "",
        f"Written by `benchmarks/orc04_suite.py` on {info['date']} ({info['cpu']}, "
        f"{info['cores']} cores; orc at {info['commit']}). The tests and notebooks "
        f"are those of the source distribution of `{DIST}=={VERSION}` (PyPI), "
        "run unchanged: the tests with orc's interpreter importing orc, the "
        "notebooks' code cells in order under orc and under ORC 0.4 "
        "(`benchmarks/.venvs/orc04`), one fresh process each.",
        "",
    ]
    if tests is not None:
        results = tests["results"]
        counts = collections.Counter(results.values())
        expected, unexpected, stale = judge(results)
        lines += [
            "## ORC 0.4's tests",
            "",
            f"{len(results)} tests: **{counts['passed']} passed**, {counts['failed']} "
            f"failed, {counts['skipped']} skipped ({tests['seconds']:.0f} s, "
            f"{tests['workers']} pytest workers), `import orc` being "
            f"`{_shown(tests['orc_file'])}`.",
            "",
        ]
        if expected:
            lines += [
                "| failing test | why (a deliberate difference) |",
                "| :--- | :--- |",
            ]
            lines += [f"| `{k}` | {DIFFERENCES[k]} |" for k in expected]
            lines.append("")
        lines.append(
            "Unexpected failures: "
            + (", ".join(f"`{k}`" for k in unexpected) if unexpected else "none")
            + ". Listed differences that no longer fail: "
            + (", ".join(f"`{k}`" for k in stale) if stale else "none")
            + "."
        )
        lines.append("")
    if notebooks:
        lines += [
            "## ORC 0.4's README and example notebooks",
            "",
            "Cells run (of the code cells), and the seconds the cells took "
            "(compilation included, process start excluded).",
            "",
            "| notebook | orc: cells run | orc: s | ORC 0.4: cells run | ORC 0.4: s | warnings orc raised |",
            "| :--- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for name, runs in notebooks.items():
            ours, theirs = runs["ours"], runs["orc04"]
            n_warn = sum(len(c["warnings"]) for c in ours["cells"])
            lines.append(
                f"| {_label(name)} | {_ran(ours)} | {_seconds(ours)} | {_ran(theirs)} "
                f"| {_seconds(theirs)} | {n_warn} |"
            )
        total = {
            key: sum(
                c["seconds"] for runs in notebooks.values() for c in runs[key]["cells"]
            )
            for key in ("ours", "orc04")
        }
        lines.append(
            f"| all {len(notebooks)} | | {total['ours']:.1f} | | {total['orc04']:.1f} | |"
        )
        lines.append("")
        failures = [(n, k, c) for n, runs in notebooks.items() for k in ("ours", "orc04")
                    for c in runs[k]["cells"] if c["status"] == "error"]  # fmt: skip
        if failures:
            lines += ["Cells that raised:", ""]
            for name, key, cell in failures:
                last = cell["error"].strip().splitlines()[-1]
                lines.append(
                    f"- `{name}` cell {cell['index']} under {key}: {_one_line(last)}"
                )
            lines.append("")
        warned = [(n, c, w) for n, runs in notebooks.items() for c in runs["ours"]["cells"]
                  for w in c["warnings"]]  # fmt: skip
        if warned:
            lines += ["Warnings orc raised (notebook, cell: category: message):", ""]
            for name, cell, (category, message, _) in warned:
                lines.append(
                    f"- `{name}`, cell {cell['index']}: {category}: {_one_line(message)}"
                )
            lines.append("")
        lines += [
            "The figures, side by side (ORC 0.4 left, orc right), are in "
            "`benchmarks/.cache/orc04_suite/<notebook>.png`. Random draws differ "
            "between the libraries for the same seed (docs/from-orc.md, 'Random "
            "draws differ'), so forecasts of chaotic systems part at different "
            "times, and `KS_1D` integrates the equation as written where ORC's "
            "does not (docs/from-orc.md, 'Corrections'), so the KS data differ.",
            "",
        ]
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-tests", action="store_true", help="skip ORC's tests")
    parser.add_argument(
        "--no-notebooks", action="store_true", help="skip the notebooks"
    )
    parser.add_argument("--notebooks", default=None,
                        help="comma-separated notebook names (default: all)")  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=2, help="pytest workers (default 2)"
    )
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds allowed per notebook process (default 1800)")  # fmt: skip
    parser.add_argument("--report", type=Path, default=None,
                        help=f"markdown report to write (default: {REPORT.name} "
                        "for a whole run, else the cache folder's)")  # fmt: skip
    parser.add_argument("--render", action="store_true",
                        help="run nothing: write the report again from the last "
                        "whole run's results (the cache folder's results.json)")  # fmt: skip
    args = parser.parse_args(argv)
    if args.render:
        payload = json.loads((CACHE / "results.json").read_text())
        report = args.report or REPORT
        report.write_text(markdown(**payload))
        print(f"[report] {report}")
        return 0

    root = fetch_release()
    status = 0
    tests = None
    if not args.no_tests:
        print(f"[tests] ORC {VERSION}'s tests on orc ...", flush=True)
        tests = run_tests(root, args.workers)
        expected, unexpected, stale = judge(tests["results"])
        counts = collections.Counter(tests["results"].values())
        print(f"[tests] {counts['passed']} passed, {counts['failed']} failed "
              f"({len(expected)} listed differences) in {tests['seconds']:.0f} s")  # fmt: skip
        for key in unexpected:
            print(f"[tests] UNEXPECTED failure: {key}")
        for key in stale:
            print(f"[tests] listed difference that did not fail: {key}")
        if unexpected or stale:
            print(tests["tail"])
            status = 1
    notebooks = {}
    if not args.no_notebooks:
        ok, message = envs.ensure_env(envs.LIBRARIES["orc04"])
        print(f"[setup] {message}")
        if not ok:
            return 1
        paths = [readme_notebook(root), *sorted((root / "examples").glob("*.ipynb"))]
        if args.notebooks:
            wanted = set(args.notebooks.split(","))
            paths = [p for p in paths if p.stem in wanted]
        for path in paths:
            runs = {key: run_notebook(envs.LIBRARIES[key], path, args.timeout)
                    for key in ("ours", "orc04")}  # fmt: skip
            notebooks[path.stem] = runs
            side_by_side(path.stem, runs)
            worse = regressions(runs)
            print(f"[notebook] {path.stem}: orc {_ran(runs['ours'])} cells "
                  f"({_seconds(runs['ours'])} s), ORC 0.4 {_ran(runs['orc04'])} "
                  f"({_seconds(runs['orc04'])} s)", flush=True)  # fmt: skip
            if worse or runs["ours"]["crash"]:
                print(f"[notebook] {path.stem}: cells that ran under ORC 0.4 only: {worse} "
                      f"{runs['ours']['crash'] or ''}")  # fmt: skip
                status = 1
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=envs.REPO_ROOT,
                            capture_output=True, text=True).stdout.strip()  # fmt: skip
    info = {"date": dt.date.today().isoformat(), "cpu": envs.cpu_name(),
            "cores": len(os.sched_getaffinity(0)), "commit": commit or "?"}  # fmt: skip
    payload = {"info": info, "tests": tests, "notebooks": notebooks}
    whole = not (args.no_tests or args.no_notebooks or args.notebooks)
    if whole:
        (CACHE / "results.json").write_text(json.dumps(payload))
    # a part of the run never overwrites the whole run's report
    report = args.report or (REPORT if whole else CACHE / REPORT.name)
    report.write_text(markdown(**payload))
    print(f"[report] {report}")
    return status


if __name__ == "__main__":
    sys.exit(main())
