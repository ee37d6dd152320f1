"""The documentation site builds strictly, and every example in it runs.

- ``mkdocs build --strict`` (warnings are errors: broken links, missing
  snippet files, docstrings mkdocstrings cannot parse);
- each ``examples/*.py`` in its small mode, checking the files it promises
  (these and the pages' code below in one child process, each as in a fresh
  one: ``_RUNNER``);
- ``examples/cli.sh`` from an empty folder;
- the Python blocks of the home, getting-started and from-reservoirpy pages,
  in order, in one namespace per page. Only a block whose opening fence is
  exactly three backticks and ``python`` runs; a fence with attributes, such
  as ``python title="reservoirpy 0.4.2"``, shows another library's code and
  is skipped. What a page's code prints is checked against its
  ``text title="orc output"`` blocks (same words, numbers within 2 %); the
  reservoirpy scripts are run, when a reservoirpy 0.4.2 environment is at
  hand, and checked against the output the page quotes for them;
- every ``orc.`` name in backticks on the from-reservoirpy page exists, with
  the argument names it is shown with;
- every public name (``__all__``) of every module on an API page is rendered,
  and every public module of ``orc`` has an API page.
"""

from __future__ import annotations

import importlib
import json
import math
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from _helpers import ON_CPU

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLES = {
    "lorenz_forecasting.py": ["lorenz_forecast.png", "lorenz_attractor.png"],
    "classification.py": ["classification_confusion.png", "classification_samples.png"],
    "control.py": ["control_pendulum.png"],
    "jit_patterns.py": ["jit_patterns.png"],
    "conceptors_morphing.py": ["conceptors_morphing.png"],
    "tune_lorenz.py": ["tune_lorenz.png", "tune_lorenz.csv", "tune_lorenz_best.orc"],
    # ks_parallel.py has its own test (tests/test_example_ks.py)
}


def _env(**extra):
    env = dict(os.environ)
    env.pop("JAX_NUMPY_DTYPE_PROMOTION", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NO_MKDOCS_2_WARNING"] = "1"
    env.update(extra)
    return env


def _run_ok(args, cwd, timeout=600, **extra_env):
    """Run ``args`` with the docs' environment; it must exit 0."""
    proc = subprocess.run(
        args,
        cwd=cwd,
        env=_env(**extra_env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_site_builds_with_every_page(site):
    for page in ("index.html", "getting-started/index.html", "api/online/index.html"):
        assert (site / page).is_file(), page
    ks = (site / "examples/ks-parallel/index.html").read_text()
    assert "run_experiment" in ks  # the example's code is included verbatim


# The examples and the pages' code run in one child process, one after the
# other, each as in a fresh process of its own: as ``__main__`` in a new
# namespace, from a folder of its own (``ORC_EXAMPLE_OUT`` for an example),
# with JAX's default precision (float32: x64 is switched off before each, so
# an example or page that forgot to switch it on still shows it), the
# stdout file descriptor of its own, matplotlib's figures closed and its
# settings back to the defaults. A process each paid its start-up (Python,
# JAX, orc, matplotlib) and shared no compiled program with the others (the
# eight compile ~300 programs; one process compiles the same ones): eight
# processes took ~17 s more CPU time than one (of ~85 s, 2026-11-29). It
# runs without JAX's persistent cache, which a user does not have by
# default and which one process would only write to.
_RUNNER = textwrap.dedent(
    """
    import contextlib, json, os, runpy, sys, traceback
    import jax

    jobs, report = json.load(open(sys.argv[1])), sys.argv[2]
    environ = dict(os.environ)


    @contextlib.contextmanager
    def stdout_to(path):
        sys.stdout.flush()
        saved = os.dup(1)
        with open(path, "wb") as f:
            os.dup2(f.fileno(), 1)
            try:
                yield
            finally:
                sys.stdout.flush()
                os.dup2(saved, 1)
                os.close(saved)


    results = {}
    for job in jobs:
        jax.config.update("jax_enable_x64", False)
        os.environ.clear()
        os.environ.update(environ, **job["env"])
        os.chdir(job["cwd"])
        script = job.get("script")
        sys.argv = [script or "-c"]
        sys.path[0] = os.path.dirname(script) if script else ""
        try:
            with stdout_to(job["stdout"]):
                if script:
                    runpy.run_path(script, run_name="__main__")
                else:
                    code = compile(job["code"], job["name"], "exec")
                    exec(code, {"__name__": "__main__"})
            results[job["name"]] = None
        except BaseException:
            results[job["name"]] = traceback.format_exc()
        if "matplotlib" in sys.modules:
            import matplotlib, matplotlib.pyplot

            matplotlib.pyplot.close("all")
            matplotlib.rc_file_defaults()
    with open(report, "w") as f:
        json.dump(results, f)
    """
)


def _page_code(page):
    """The page's text and its Python blocks (the runnable ones), joined."""
    text = (ROOT / "docs" / page).read_text()
    return text, re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.fixture(scope="module")
def runs(request, tmp_path_factory):
    """The examples and pages of this module's selected tests, run in one
    child process (:data:`_RUNNER`): ``name -> (traceback or None, its
    folder, what it printed)``."""
    tmp = tmp_path_factory.mktemp("runs")
    jobs = []
    for item in request.session.items:
        if item.module is not request.module or not hasattr(item, "callspec"):
            continue
        params = item.callspec.params
        if item.originalname == "test_example_runs":
            name = f"examples/{params['script']}"
            job = {"script": str(ROOT / name),
                   "env": {"ORC_EXAMPLE_SMALL": "1"}}  # fmt: skip
        elif item.originalname == "test_page_code_runs":
            name = f"docs/{params['page']}"
            job = {"code": "\n".join(_page_code(params["page"])[1]), "env": {}}
        else:
            continue
        folder = tmp / name.replace("/", "_")
        folder.mkdir()
        if "script" in job:
            job["env"]["ORC_EXAMPLE_OUT"] = str(folder)
        job.update(name=name, cwd=str(folder), stdout=str(folder / "stdout.txt"))
        jobs.append(job)
    (tmp / "jobs.json").write_text(json.dumps(jobs))
    env = _env()
    env.pop("JAX_COMPILATION_CACHE_DIR", None)  # one process: nothing to share
    proc = subprocess.run(
        [sys.executable, "-c", _RUNNER, str(tmp / "jobs.json"), str(tmp / "report.json")],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=600 + 300 * len(jobs),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads((tmp / "report.json").read_text())
    return {
        job["name"]: (
            report[job["name"]],
            Path(job["cwd"]),
            Path(job["stdout"]).read_text(),
            proc.stderr,
        )  # fmt: skip
        for job in jobs
    }


def _ran(runs, name):
    """``name``'s folder and what it printed; it raised nothing."""
    error, folder, stdout, stderr = runs[name]
    assert error is None, f"{name} failed:\n{error[-3000:]}\n{stderr[-2000:]}"
    return folder, stdout


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_example_runs(script, runs):
    folder, _ = _ran(runs, f"examples/{script}")
    for name in EXAMPLES[script]:
        # a figure has pixels; a table or a model file has its rows
        least = 5000 if name.endswith(".png") else 200
        assert (folder / name).stat().st_size > least, name


def test_cli_example_runs(tmp_path):
    proc = _run_ok(["bash", str(ROOT / "examples" / "cli.sh")], tmp_path, timeout=900)
    assert "evaluation:" in proc.stdout and "trained nvar" in proc.stdout
    assert (tmp_path / "forecast.png").stat().st_size > 5000


@pytest.mark.parametrize(
    "page,n_blocks",
    [
        ("index.md", 1),
        ("getting-started.md", 5),
        ("from-reservoirpy.md", 7),
        ("from-reservoircomputing-jl.md", 3),
    ],
)
def test_page_code_runs(page, n_blocks, runs):
    """The Python blocks of a page run, in order, in one namespace."""
    text, blocks = _page_code(page)
    assert len(blocks) >= n_blocks
    _, stdout = _ran(runs, f"docs/{page}")
    _check_printed(text, stdout)


def _check_printed(text, stdout, title="orc output"):
    """The page's ``text`` blocks titled ``title``, joined, are what its code
    printed: the same words in the same order, and numbers within 2 % (they
    may move in the last digits from one machine to another).

    The pages quote CPU runs. On another backend (a GPU) only the words are
    compared and the numbers must be finite: chaotic data integrated there
    (the Lorenz63 series of ``tN = 60``) rounds differently, and after some
    40 Lyapunov times it is another stretch of the attractor, with other
    scores (an H200 printed a one-step NRMSE of 2.60e-4 where the CPU prints
    1.23e-4 for the deep ESN)."""
    shown = re.findall(rf'```text title="{title}"\n(.*?)```', text, flags=re.S)
    if not shown:
        return
    expected, printed = "".join(shown).split(), stdout.split()
    assert len(expected) == len(printed), f"page shows {shown}, code printed {stdout}"

    def number(token):
        try:
            return float(token)
        except ValueError:
            return None

    for want, got in zip(expected, printed, strict=True):
        if number(want) is None:
            assert got == want, f"page shows {want!r}, code printed {got!r}\n{stdout}"
        elif ON_CPU:
            assert number(got) is not None and math.isclose(
                number(got), number(want), rel_tol=0.02, abs_tol=1e-12
            ), f"page shows {want}, code printed {got}\n{stdout}"
        else:
            assert number(got) is not None and math.isfinite(number(got)), (
                f"page shows {want}, code printed {got}\n{stdout}"
            )


RESERVOIRPY = os.environ.get(
    "ORC_RESERVOIRPY_PYTHON", str(ROOT / "benchmarks/.venvs/rpy/bin/python")
)


@pytest.mark.skipif(
    not Path(RESERVOIRPY).is_file(), reason="no reservoirpy 0.4.2 environment"
)
def test_reservoirpy_scripts_print_what_the_page_quotes(tmp_path):
    """The reservoirpy scripts of the from-reservoirpy page, run with
    reservoirpy 0.4.2 (``$ORC_RESERVOIRPY_PYTHON``, default the benchmarks'
    environment) on the arrays the page's first block saves, print the output
    the page quotes for them."""
    text = (ROOT / "docs" / "from-reservoirpy.md").read_text()
    version = subprocess.run(
        [RESERVOIRPY, "-c", "import reservoirpy; print(reservoirpy.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if version != "0.4.2":
        pytest.skip(f"{RESERVOIRPY} has reservoirpy {version or 'missing'}, not 0.4.2")
    title = "reservoirpy 0.4.2"
    scripts = re.findall(rf'```python title="{title}"\n(.*?)```', text, flags=re.S)
    quoted = re.findall(rf'```text title="{title} output"\n(.*?)```', text, flags=re.S)
    assert len(scripts) == len(quoted) == 6
    data_block = re.findall(r"```python\n(.*?)```", text, flags=re.S)[0]
    for exe, code in [(sys.executable, data_block)] + [
        (RESERVOIRPY, c) for c in scripts
    ]:
        proc = _run_ok([exe, "-c", code], tmp_path)
        if exe == RESERVOIRPY:
            block = f'```text title="{title} output"\n{quoted.pop(0)}```'
            _check_printed(block, proc.stdout, f"{title} output")


@pytest.mark.parametrize(
    "page,least", [("from-reservoirpy.md", 50), ("from-reservoircomputing-jl.md", 30)]
)
def test_migration_page_names_exist(page, least):
    """Every ``orc.`` name in backticks on a migration page resolves to an
    object, and the argument names shown with a callable (``orc.x.f(a,
    b=)``) are parameters of it."""
    import inspect

    text = (ROOT / "docs" / page).read_text()
    spans = re.findall(r"`([^`\n]+)`", text)
    checked = 0
    for span in spans:
        for match in re.finditer(r"(?<![\w.])(orc(?:\.\w+)+)(\([^()]*\))?", span):
            name, call = match.groups()
            obj = _resolve(name)
            assert obj is not None, f"{name} does not exist"
            checked += 1
            if not call:
                continue
            params = inspect.signature(obj).parameters
            if any(p.kind is p.VAR_KEYWORD for p in params.values()):
                continue
            inner = re.sub(r"\"[^\"]*\"", "", call[1:-1])
            for item in inner.split(","):
                arg = item.split("=")[0].strip()
                if arg.isidentifier():
                    assert arg in params, f"{name} has no argument {arg!r}"
    assert checked > least  # the pattern finds the page's names


def _public_names(module):
    """``(name, object)`` of ``module.__all__``, without dunders."""
    for public in getattr(module, "__all__", []):
        if not public.startswith("_"):
            yield public, getattr(module, public)


def _resolve(path):
    """The object an anchor such as ``orc.forecaster.ESNForecaster.forecast`` names."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        return obj
    return None


def test_api_reference_covers_every_public_name(site):
    """Every ``::: module`` imports, and every object in its ``__all__`` has an
    entry (an anchor) somewhere in the reference, under this path or another
    (``orc.load`` is ``orc.io.load``). A submodule in ``__all__`` counts when
    each of its public names does."""
    import types

    anchors = set()
    documented = []
    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        modules = re.findall(r"^::: ([\w.]+)", page.read_text(), flags=re.M)
        if not modules:
            continue  # the reference's index page
        html = (site / "api" / page.stem / "index.html").read_text()
        anchors |= set(re.findall(r'id="(orc[\w.]*)"', html))
        for name in modules:
            documented.append(importlib.import_module(name))  # must import
    objects = {id(obj) for obj in map(_resolve, anchors) if obj is not None}

    def covered(obj, seen):
        if isinstance(obj, types.ModuleType):
            if obj.__name__ in seen:
                return True
            seen.add(obj.__name__)
            return all(covered(o, seen) for _, o in _public_names(obj))
        return id(obj) in objects

    missing = [
        f"{module.__name__}.{public}"
        for module in documented
        for public, obj in _public_names(module)
        if not covered(obj, {module.__name__})
    ]
    assert not missing, f"public names missing from the API reference: {missing}"


def test_every_public_module_has_an_api_page():
    """Each module listed in ``orc.__all__`` (and ``orc.utils``'s) has a page."""
    import types

    import orc

    pages = "\n".join(p.read_text() for p in (ROOT / "docs" / "api").glob("*.md"))
    blocks = set(re.findall(r"^::: ([\w.]+)", pages, flags=re.M))
    for parent in (orc, orc.utils):
        for _, obj in _public_names(parent):
            if isinstance(obj, types.ModuleType) and obj.__name__ != "orc.utils":
                assert obj.__name__ in blocks, f"no API page for {obj.__name__}"
