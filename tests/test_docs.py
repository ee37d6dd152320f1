"""The documentation site builds strictly, and every example in it runs.

- ``mkdocs build --strict`` (warnings are errors: broken links, missing
  snippet files, docstrings mkdocstrings cannot parse);
- each ``examples/*.py`` in its small mode, checking the files it promises;
- ``examples/cli.sh`` from an empty folder;
- the Python blocks of the home and getting-started pages, in order, in one
  namespace per page;
- every public name (``__all__``) of every module on an API page is rendered,
  and every public module of ``orc`` has an API page.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
EXAMPLES = {
    "lorenz_forecasting.py": ["lorenz_forecast.png", "lorenz_attractor.png"],
    "classification.py": ["classification_confusion.png", "classification_samples.png"],
    "control.py": ["control_pendulum.png"],
    "jit_patterns.py": ["jit_patterns.png"],
    # ks_parallel.py has its own test (tests/test_example_ks.py)
}


def _env(**extra):
    env = dict(os.environ)
    env.pop("JAX_NUMPY_DTYPE_PROMOTION", None)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["NO_MKDOCS_2_WARNING"] = "1"
    env.update(extra)
    return env


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


@pytest.mark.parametrize("script", sorted(EXAMPLES))
def test_example_runs(script, tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        cwd=tmp_path,
        env=_env(ORC_EXAMPLE_SMALL="1", ORC_EXAMPLE_OUT=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for name in EXAMPLES[script]:
        assert (tmp_path / name).stat().st_size > 5000, name


def test_cli_example_runs(tmp_path):
    proc = subprocess.run(
        ["bash", str(ROOT / "examples" / "cli.sh")],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "evaluation:" in proc.stdout and "trained nvar" in proc.stdout
    assert (tmp_path / "forecast.png").stat().st_size > 5000


@pytest.mark.parametrize("page,n_blocks", [("index.md", 1), ("getting-started.md", 5)])
def test_page_code_runs(page, n_blocks, tmp_path):
    """The Python blocks of a page run, in order, in one namespace."""
    text = (ROOT / "docs" / page).read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= n_blocks
    code = "\n".join(blocks)
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


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
