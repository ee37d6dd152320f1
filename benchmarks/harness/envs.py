"""Interpreters of the compared libraries: our venv and cached peer venvs.

The peers live in ``benchmarks/.venvs/<name>``, created with the base interpreter
of the Python running the harness (3.11 here) and their pinned package, and are
reused as long as the pinned version is the one installed.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = BENCH_DIR.parent
VENVS_DIR = BENCH_DIR / ".venvs"
WORKLOADS_DIR = BENCH_DIR / "workloads"


@dataclass(frozen=True)
class Library:
    """One compared library: how to get its interpreter and run its workloads."""

    key: str  # short name used in tables and on the command line
    label: str  # human-readable name
    workload_file: str  # file under benchmarks/workloads
    workloads: tuple[str, ...]  # workloads it implements
    dist: str | None = None  # pip distribution of a peer; None for ours
    version: str | None = None  # pinned version of a peer
    import_name: str = "orc"
    extra_env: dict[str, str] = field(default_factory=dict)
    # further pinned distributions a peer's scripts need, (dist, version)
    extras: tuple[tuple[str, str], ...] = ()

    @property
    def python(self) -> Path:
        if self.dist is None:
            return REPO_ROOT / ".venv" / "bin" / "python"
        return VENVS_DIR / self.key / "bin" / "python"

    @property
    def script(self) -> Path:
        return WORKLOADS_DIR / self.workload_file


LIBRARIES: dict[str, Library] = {
    "ours": Library(
        key="ours",
        label="orc (ours, working tree)",
        workload_file="orc_api.py",
        workloads=("a", "b", "c", "d", "e"),
        # The working tree's src/ comes first, so the benchmark measures the code
        # in this checkout even if the editable install is missing or stale.
        extra_env={"PYTHONPATH": str(REPO_ROOT / "src")},
    ),
    "orc04": Library(
        key="orc04",
        label="ORC 0.4.0",
        workload_file="orc_api.py",
        workloads=("a", "b", "c", "d", "e"),
        dist="openreservoircomputing",
        version="0.4.0",
    ),
    "rpy": Library(
        key="rpy",
        label="reservoirpy 0.4.2",
        workload_file="reservoirpy_api.py",
        workloads=("a", "b", "c", "e"),
        dist="reservoirpy",
        version="0.4.2",
        import_name="reservoirpy",
        # reservoirpy.hyper.parallel_research imports tqdm, which reservoirpy
        # does not require (benchmarks/tune_reservoirpy.py)
        extras=(("tqdm", "4.70.1"),),
    ),
}

# Environment variables that change threading or numerics; recorded in reports.
RECORDED_ENV_VARS = (
    "OPENBLAS_NUM_THREADS",
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "XLA_FLAGS",
    "JAX_PLATFORMS",
    "JAX_ENABLE_X64",
    "TF_CPP_MIN_LOG_LEVEL",
)


def child_env(lib: Library | None) -> dict[str, str]:
    """Environment of a workload subprocess: the caller's, minus venv leakage."""
    env = dict(os.environ)
    for var in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"):
        env.pop(var, None)
    env.setdefault("JAX_PLATFORMS", "cpu")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    if lib is not None:
        env.update(lib.extra_env)
    return env


def base_python() -> str:
    """The interpreter the venvs are created from: the base of the running one."""
    return getattr(sys, "_base_executable", None) or sys.executable


def installed_version(python: Path, dist: str) -> str | None:
    """Version of ``dist`` installed for ``python``, or None."""
    if not python.exists():
        return None
    code = (
        "import importlib.metadata as m, sys\n"
        "try:\n    print(m.version(sys.argv[1]))\n"
        "except m.PackageNotFoundError:\n    print('')\n"
    )
    proc = subprocess.run(
        [str(python), "-c", code, dist],
        capture_output=True,
        text=True,
        env=child_env(None),
    )
    out = proc.stdout.strip()
    return out or None


def ensure_env(lib: Library, log=print) -> tuple[bool, str]:
    """Create or repair the venv of a peer library; return (ok, message)."""
    if lib.dist is None:
        if lib.python.exists():
            return True, f"using {lib.python}"
        return False, f"{lib.python} not found (run `make test` or create .venv)"
    want = lib.version
    have = installed_version(lib.python, lib.dist)
    pins = [(lib.dist, want), *lib.extras]
    missing = [(d, v) for d, v in pins if installed_version(lib.python, d) != v]
    if not missing:
        return True, f"reusing {lib.python.parent.parent} ({lib.dist}=={have})"
    venv_dir = lib.python.parent.parent
    try:
        if not lib.python.exists():
            log(f"[setup] creating {venv_dir} with {base_python()}")
            VENVS_DIR.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [base_python(), "-m", "venv", str(venv_dir)],
                check=True,
                env=child_env(lib),
            )
        reqs = [f"{d}=={v}" for d, v in missing]
        log(f"[setup] pip install {' '.join(reqs)} into {venv_dir} "
            f"({lib.dist} found: {have})")  # fmt: skip
        subprocess.run(
            [
                str(lib.python),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                *reqs,
            ],
            check=True,
            env=child_env(lib),
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        return False, f"could not set up {venv_dir}: {exc}"
    for d, v in pins:
        have = installed_version(lib.python, d)
        if have != v:
            return False, f"{venv_dir}: installed {d} is {have}, wanted {v}"
    return True, f"created {venv_dir} ({', '.join(f'{d}=={v}' for d, v in pins)})"


_VERSIONS_CODE = """
import importlib.metadata as m, json, platform, sys
out = {"python": platform.python_version(), "executable": sys.executable}
for d in sys.argv[1:]:
    try:
        out[d] = m.version(d)
    except m.PackageNotFoundError:
        out[d] = None
try:
    import numpy
    cfg = numpy.show_config(mode="dicts")
    blas = cfg.get("Build Dependencies", {}).get("blas", {})
    out["numpy_blas"] = blas.get("name")
except Exception:
    pass
print(json.dumps(out))
"""


def env_versions(lib: Library) -> dict:
    """Python and key package versions seen by a library's interpreter."""
    if not lib.python.exists():
        return {"error": f"{lib.python} not found"}
    dists = ["numpy", "scipy", "jax", "jaxlib", "equinox"]
    if lib.dist:
        dists.append(lib.dist)
    proc = subprocess.run(
        [str(lib.python), "-c", _VERSIONS_CODE, *dists],
        capture_output=True,
        text=True,
        env=child_env(lib),
    )
    try:
        info = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (proc.stderr or proc.stdout)[-500:]}
    if lib.dist is None:
        info["orc"] = _ours_version(lib)
    return info


def _ours_version(lib: Library) -> str:
    proc = subprocess.run(
        [
            str(lib.python),
            "-c",
            "import orc; print(getattr(orc, '__version__', 'unknown'))",
        ],
        capture_output=True,
        text=True,
        env=child_env(lib),
    )
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["?"])[-1]
        return f"not importable ({last[:200]})"
    return proc.stdout.strip()


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` says."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"
