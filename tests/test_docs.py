"""The documentation site builds strictly, and every example in it runs.

- ``mkdocs build --strict`` (warnings are errors: broken links, missing
  snippet files, docstrings mkdocstrings cannot parse);
- each ``examples/*.py`` in its small mode, checking the files it promises;
- ``examples/cli.sh`` from an empty folder;
- the Python blocks of the getting-started page, in order, in one namespace;
- every public name (``__all__``) of every module on an API page is rendered.
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
    "classification.py": ["classification_confusion.png"],
    "control.py": ["control_pendulum.png"],
    "jit_patterns.py": [],
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


def test_getting_started_code_runs(tmp_path):
    text = (ROOT / "docs" / "getting-started.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
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


def test_api_reference_covers_every_public_name(site):
    import types

    for page in sorted((ROOT / "docs" / "api").glob("*.md")):
        modules = re.findall(r"^::: ([\w.]+)", page.read_text(), flags=re.M)
        html = (site / "api" / page.stem / "index.html").read_text() if modules else ""
        for name in modules:
            module = importlib.import_module(name)
            for public in getattr(module, "__all__", []):
                if public.startswith("_") or isinstance(
                    getattr(module, public), types.ModuleType
                ):
                    continue  # dunders are filtered; submodules have own pages
                assert public in html, f"{name}.{public} missing from {page.name}"
