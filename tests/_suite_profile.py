"""Where the test suite's time goes: an opt-in pytest plugin, and its report.

Most of the suite's time is JAX tracing and XLA compiling programs, not
running them. This plugin records, per test file, the wall time and the
compile events JAX reports (``jax.monitoring``: backend compile, tracing,
lowering), and per program name (``jit(fit)``, ``jit(forecast)``, ...) how
many were compiled and for how long, and writes one JSON file per process::

    SUITE_PROFILE_DIR=/tmp/prof PYTHONPATH=tests \\
        .venv/bin/python -m pytest -n 2 --dist loadfile -p _suite_profile
    .venv/bin/python tests/_suite_profile.py /tmp/prof     # the tables

Times are wall times of a shared machine: compare files and programs within
one run. Programs compiled in subprocesses (docs examples, the CLI) are not
seen; their files show as wall time without compilation.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import sys
import time
import traceback

import pytest

_COMPILE = "/jax/core/compile/backend_compile_duration"
_TRACE = "/jax/core/compile/jaxpr_trace_duration"
_LOWER = "/jax/core/compile/jaxpr_to_mlir_module_duration"  # lowering
_FINISHED = re.compile(r"Finished XLA compilation of (.+?) in ([\d.e-]+) sec")
_LOWERED = re.compile(
    r"Finished jaxpr to MLIR module conversion (.+?) in ([\d.e-]+) sec"
)


class _Recorder(logging.Handler):
    """Per-program compile times from JAX's compile log (the program's name
    is only in the log line, not in the monitoring event)."""

    def __init__(self, state):
        super().__init__(logging.DEBUG)
        self.state = state

    def emit(self, record):
        message = record.getMessage()
        m = _FINISHED.search(message)
        if m:
            name = re.sub(r"\d+", "N", m.group(1))[:100]
            entry = self.state["programs"].setdefault(name, [0, 0.0, {}, 0.0])
            entry[0] += 1
            entry[1] += float(m.group(2))
            where = self.state["file"]
            entry[2][where] = entry[2].get(where, 0.0) + float(m.group(2))
            site = _site(traceback.extract_stack())
            if site is not None:
                key = f"{name} @ {site}"
                found = self.state["sites"].setdefault(key, [0, 0.0])
                found[0] += 1
                found[1] += float(m.group(2))
        m = _LOWERED.search(message)
        if m:
            name = re.sub(r"\d+", "N", m.group(1))[:100]
            entry = self.state["programs"].setdefault(name, [0, 0.0, {}, 0.0])
            entry[3] += float(m.group(2))


def _site(stack):
    """Where a compilation was asked for: the innermost test-file frame and
    the outermost library (``src/orc``) frame below it, e.g.
    ``tests/test_x.py:12 > orc/drivers.py:300``. An eager operation (one
    compiled per shape) shows the library function a test called outside
    ``jit``, or the library line that ran outside its own program."""
    test = library = None
    for frame in stack:
        if "/tests/" in frame.filename and "_suite_profile" not in frame.filename:
            test, library = (
                f"tests/{frame.filename.split('/tests/')[-1]}:{frame.lineno}",
                None,
            )
        elif "/src/orc/" in frame.filename and library is None:
            library = f"orc/{frame.filename.split('/src/orc/')[-1]}:{frame.lineno}"
    return " > ".join(p for p in (test, library) if p) or None


def pytest_configure(config):
    import jax
    import jax.monitoring

    state = {
        "file": None,
        "files": collections.defaultdict(collections.Counter),
        "programs": {},
        "sites": {},
    }
    config._suite_profile = state

    def on_duration(event, seconds, **_):
        key = {_COMPILE: "compile_s", _TRACE: "trace_s", _LOWER: "lower_s"}.get(event)
        if key:
            state["files"][state["file"]][key] += seconds
            if key == "compile_s":
                state["files"][state["file"]]["compiles"] += 1

    jax.monitoring.register_event_duration_secs_listener(on_duration)
    jax.config.update("jax_log_compiles", True)
    for name in ("jax._src.interpreters.pxla", "jax._src.dispatch"):
        log = logging.getLogger(name)
        log.addHandler(_Recorder(state))
        log.setLevel(logging.WARNING)
        log.propagate = False  # recorded, not printed


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    state = item.config._suite_profile
    state["file"] = item.nodeid.split("::")[0]
    state.setdefault("_t", {})[item.nodeid] = time.perf_counter()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    state = item.config._suite_profile
    start = state.get("_t", {}).pop(item.nodeid, None)
    if start is not None:
        counts = state["files"][state["file"]]
        counts["wall_s"] += time.perf_counter() - start
        counts["tests"] += 1


def pytest_unconfigure(config):
    state = getattr(config, "_suite_profile", None)
    if state is None:
        return
    out = os.environ.get("SUITE_PROFILE_DIR", "suite-profile")
    os.makedirs(out, exist_ok=True)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    path = os.path.join(out, f"{worker}-{os.getpid()}.json")
    with open(path, "w") as fh:
        json.dump(
            {
                "files": {str(k): dict(v) for k, v in state["files"].items()},
                "programs": state["programs"],
                "sites": state["sites"],
            },
            fh,
        )


def report(directory: str, top: int = 40) -> str:
    """The tables of a run's JSON files: files by wall time, programs by
    compile time (with the files that compiled them most)."""
    files: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    programs: dict[str, list] = {}
    sites: collections.Counter = collections.Counter()
    site_counts: collections.Counter = collections.Counter()
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(directory, name)) as fh:
            data = json.load(fh)
        for f, counts in data["files"].items():
            files[f].update(counts)
        for p, (n, s, where, lowering) in data["programs"].items():
            entry = programs.setdefault(p, [0, 0.0, collections.Counter(), 0.0])
            entry[0] += n
            entry[1] += s
            entry[2].update(where)
            entry[3] += lowering
        for key, (n, s) in data.get("sites", {}).items():
            sites[key] += s
            site_counts[key] += n
    total = collections.Counter()
    for counts in files.values():
        total.update(counts)
    lines = [
        "suite: "
        + ", ".join(f"{k} {v:.0f}" for k, v in sorted(total.items()) if k != "tests")
        + f", tests {total['tests']:.0f}",
        "",
        f"{'file':48s} {'wall s':>8s} {'compile':>8s} {'trace':>7s} "
        f"{'lower':>7s} {'programs':>8s} {'tests':>6s}",
    ]
    for f, c in sorted(files.items(), key=lambda kv: -kv[1]["wall_s"])[:top]:
        lines.append(
            f"{f:48s} {c['wall_s']:8.1f} {c['compile_s']:8.1f} {c['trace_s']:7.1f} "
            f"{c['lower_s']:7.1f} {c['compiles']:8.0f} {c['tests']:6.0f}"
        )
    lines += [
        "",
        f"{'compile s':>9s} {'lower s':>8s} {'count':>6s}  program  "
        "(files compiling it most)",
    ]
    by_time = sorted(programs.items(), key=lambda kv: -kv[1][1])
    for p, (n, s, where, lowering) in by_time[:top]:
        most = ", ".join(
            f"{os.path.basename(w or '?')} {t:.0f}" for w, t in where.most_common(3)
        )
        lines.append(f"{s:9.1f} {lowering:8.1f} {n:6d}  {p[:48]}  ({most})")
    lines += ["", f"{'compile s':>9s} {'count':>6s}  program @ where it was asked for"]
    for key, s in sites.most_common(top):
        lines.append(f"{s:9.1f} {site_counts[key]:6d}  {key}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(sys.argv[1] if len(sys.argv) > 1 else "suite-profile"))
