"""``orc tune --workers``: one study evaluated by several processes, on
one host (``--workers 2``: the command starts them, waits, then writes its
outputs from the finished study) and on several (the same command run at
once in another process, as another host runs it, against one PostgreSQL
study); SQLite on one host; Ctrl-C; the usage errors.

Each study is read back with Optuna: its budget of COMPLETE trials, each
with parameters of its own (a draw evaluated twice would be two COMPLETE
trials with the same parameters: a retry keeps them), nothing left running
or waiting, and every other trial one released unevaluated (no parameters,
``released``) or stopped by Ctrl-C. The search is the small one of
tests/test_cli_tune.py with ``batch = 1`` (each worker asks one draw at a
time); every ``orc`` process compiles its programs, so there are few.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from _helpers import lorenz_rk4, run_cli
from test_cli_tune import CONFIG, best_row, read_rows

ORC = shutil.which("orc", path=str(Path(sys.executable).parent)) or "orc"
BUDGET = 4
TIMEOUT = 300  # seconds an orc process may take (it compiles its programs)


@pytest.fixture(scope="module")
def optuna():
    return pytest.importorskip("optuna", reason='needs pip install "orc[tune]"')


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    d = tmp_path_factory.mktemp("workers")
    U = lorenz_rk4(1250)
    t = 0.01 * np.arange(1, 1251)
    np.savetxt(d / "l63.csv", np.column_stack([t, U]), delimiter=",",
               header="t,x,y,z", comments="")  # fmt: skip
    (d / "tune.toml").write_text(CONFIG + "batch = 1\n")
    return d


@pytest.fixture(autouse=True)
def cache(workdir, monkeypatch):
    """The processes' compilation cache: the module's, not the user's."""
    monkeypatch.setenv("ORC_CACHE_DIR", str(workdir / "cache"))
    monkeypatch.setenv("ORC_PROGRESS", "0")


def tune(*args, cwd):
    return run_cli("tune", "l63.csv", "--config", "tune.toml", *args, cwd=cwd)


# A suite started in the background (``make test &`` from a script) ignores
# SIGINT, and a process inherits that: Python then installs no
# KeyboardInterrupt handler, and the Ctrl-C test's signal was ignored (twice,
# 2026-11-28). The command is started through this launcher, which restores
# SIGINT's default and execs it (same process), so it gets Ctrl-C as from a
# terminal (a preexec_fn would fork a multithreaded JAX process instead).
_SIGINT_DEFAULT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execvp(sys.argv[1], sys.argv[1:])"
)


def start(*args, cwd, env=None):
    """``orc tune`` in a process of its own (as on another host)."""
    command = [ORC, "tune", "l63.csv", "--config", "tune.toml", *map(str, args)]
    return subprocess.Popen(
        [sys.executable, "-c", _SIGINT_DEFAULT, *command], cwd=cwd,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def worker_pids(stdout: str) -> list[int]:
    line = next(x for x in stdout.splitlines() if x.startswith("started "))
    return [int(p) for p in line.split("(processes ")[1].split(")")[0].split(", ")]


def check_done_once(optuna, storage, name, interrupted=(), budget=BUDGET):
    """The study ``name``: ``budget`` COMPLETE trials of distinct parameters,
    each told by a worker and holding its candidates; none running or
    waiting; every other trial released unevaluated or (``interrupted``:
    their workers' ``host:pid``) failed by Ctrl-C. Its COMPLETE trials."""
    state = optuna.trial.TrialState
    trials = optuna.load_study(study_name=name, storage=storage).get_trials()
    complete = [t for t in trials if t.state == state.COMPLETE]
    assert len(complete) == budget
    keys = {tuple(sorted(t.params.items())) for t in complete}
    assert len(keys) == budget  # no draw evaluated twice
    assert all(len(t.params) == 2 and "candidates" in t.user_attrs for t in complete)
    assert all(len(t.user_attrs["candidates"]["seed"]) == 4 for t in complete)
    for t in trials:
        assert t.state in (state.COMPLETE, state.FAIL), (t.number, t.state)
        if t.state == state.FAIL:
            stopped = t.user_attrs.get("worker") in interrupted
            assert stopped or (t.user_attrs.get("released") and not t.params), t
    return complete


def check_outputs(folder: Path, complete):
    """``folder``'s table has every candidate of the study's COMPLETE
    trials, and its model is the study's best."""
    rows = read_rows(folder / "results.csv")
    assert len(rows) == len(complete) * 4  # 2 seeds x 2 ridge strengths a draw
    assert {int(r["trial"]) for r in rows} == {t.number for t in complete}
    best = max(complete, key=lambda t: t.value)
    assert float(best_row(rows)["score"]) == best.value
    meta = __import__("orc").io.read_metadata(folder / "best.orc")
    assert meta["score"] == best.value
    assert (meta["seed"], meta["beta"]) == (best.user_attrs["best_seed"],
                                            best.user_attrs["best_beta"])  # fmt: skip
    assert meta["spectral_radius"] == best.params["Wr_spectral_radius"]
    assert (folder / "report.png").stat().st_size > 5000
    return rows


def test_workers_need_a_study_in_storage(workdir):
    proc = tune("--out", "x", "--workers", "2", cwd=workdir)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "orc: error: --workers 2 share one study, which needs --storage (e.g. "
        "--storage study.db, or postgresql://user@host/db for several hosts)"
    )
    zero = tune("--out", "x", "--workers", "0", "--storage", "s.db", cwd=workdir)
    assert zero.returncode == 2 and "--workers" in zero.stderr
    assert not (workdir / "x").exists() and not (workdir / "s.db").exists()
    assert "--workers" in run_cli("tune", "--help", cwd=workdir).stdout


def test_each_worker_gets_a_gpu_of_its_own():
    from orc import cli

    def gpu(i):
        client = SimpleNamespace(platform_version="PJRT C API\ncuda 12080")
        return SimpleNamespace(platform="gpu", id=i, local_hardware_id=i,
                               client=client)  # fmt: skip

    gpus = [gpu(0), gpu(1)]
    assert cli._cuda_names(gpus, None) == ["0", "1"]
    assert cli._cuda_names(gpus, "3, GPU-ab") == ["3", "GPU-ab"]
    cpu = SimpleNamespace(platform="cpu", id=0, client=None)
    assert cli._cuda_names([cpu], "0") is None

    base = {"PATH": "/bin"}
    two = cli._worker_envs(2, base, ["3", "5"])
    assert [e["CUDA_VISIBLE_DEVICES"] for e in two] == ["3", "5"]
    assert [e[cli.WORKER_ENV] for e in two] == ["1/2", "2/2"]
    assert all("XLA_PYTHON_CLIENT_PREALLOCATE" not in e for e in two)
    shared = cli._worker_envs(3, base, ["3", "5"])  # two share GPU 3
    assert [e["CUDA_VISIBLE_DEVICES"] for e in shared] == ["3", "5", "3"]
    assert all(e["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false" for e in shared)
    mine = cli._worker_envs(3, dict(base, XLA_PYTHON_CLIENT_MEM_FRACTION=".3"), ["3"])
    assert all("XLA_PYTHON_CLIENT_PREALLOCATE" not in e for e in mine)
    on_cpu = cli._worker_envs(2, base, None)
    assert all(set(e) == {"PATH", cli.WORKER_ENV} for e in on_cpu)
    assert base == {"PATH": "/bin"}


def test_workers_and_another_host_on_one_postgres_study(optuna, postgres_url,
                                                        workdir):  # fmt: skip
    """Two hosts, each running the command with its own --out against one
    study: here with --workers 2 (this process, which starts two), there
    without (a process of its own, started first)."""
    args = ("--storage", postgres_url, "--study-name", "hosts", "--budget", BUDGET)
    there = start(*args, "--out", "there", cwd=workdir)
    try:
        here = tune(*args, "--out", "here", "--workers", 2, cwd=workdir)
        there_out, there_err = there.communicate(timeout=TIMEOUT)
    finally:
        if there.poll() is None:
            there.kill()
    assert here.returncode == 0, here.stderr
    assert there.returncode == 0, there_err[-3000:]
    pids = worker_pids(here.stdout)
    assert len(pids) == 2 and os.getpid() not in pids
    complete = check_done_once(optuna, postgres_url, "hosts")
    # evaluated by the three workers (this process, which starts them,
    # evaluates nothing), each draw by one: the commands' accounts add up
    host = socket.gethostname()
    by = {f"{host}:{p}" for p in [*pids, there.pid]}
    assert {t.user_attrs["worker"] for t in complete} <= by
    counts = []
    for out, whose in ((here.stdout, "this run's 2 workers"), (there_out, "this run")):
        line = next(x for x in out.splitlines() if " draws finished, " in x)
        assert (
            f"{BUDGET} draws finished, " in line
            and f" evaluated by {whose} in " in line
        )
        counts.append(int(line.split(" draws finished, ")[1].split()[0]))
    mine = sum(t.user_attrs["worker"] != f"{host}:{there.pid}" for t in complete)
    assert counts == [mine, BUDGET - mine]
    # each --out is the whole study, whichever command finished first
    rows = check_outputs(workdir / "here", complete)
    assert read_rows(workdir / "there" / "results.csv") == rows
    check_outputs(workdir / "there", complete)


def test_sqlite_workers_stop_on_ctrl_c_and_resume(optuna, workdir):
    """SQLite on one host: its workers wait for the file's lock. Ctrl-C
    stops the command and its workers; the same command then completes the
    study (a trial stopped by Ctrl-C is not counted: a new draw replaces it)."""
    # Ctrl-C right after the command started its workers, whose programs
    # are not in any cache (ORC_COMPILE_CACHE=0): they compile for seconds
    # before their first trial, so the Ctrl-C lands mid-study. Waiting for a
    # trial was not deterministic, nor was a warm cache (64 trials took
    # ~3 s, and under a full run's load a worker finished the study before
    # the test read the "started" line); a worker killed mid-trial is
    # test_tune_study.py's kill -9 test
    budget = 64
    args = ("--out", "lite", "--storage", "lite.db", "--budget", budget,
            "--workers", "2")  # fmt: skip
    first = start(*args, cwd=workdir, env=dict(os.environ, ORC_COMPILE_CACHE="0"))
    try:
        for line in first.stdout:
            if line.startswith("started "):
                pids = worker_pids(line)
                break
        else:
            raise AssertionError(first.stderr.read()[-3000:])
        first.send_signal(signal.SIGINT)  # the command only, not its group
        _, err = first.communicate(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 1 and "aborted" in err, err[-3000:]
    assert "orc: stopping the workers" in err
    for pid in pids:  # stopped, and reaped by the command
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert not (workdir / "lite").exists()

    proc = tune(*args, cwd=workdir)
    assert proc.returncode == 0, proc.stderr
    storage = f"sqlite:///{workdir / 'lite.db'}"
    host = socket.gethostname()
    stopped = {f"{host}:{p}" for p in pids}
    complete = check_done_once(optuna, storage, "orc", interrupted=stopped,
                               budget=budget)  # fmt: skip
    by = {f"{host}:{p}" for p in worker_pids(proc.stdout)}
    # what the first command's workers completed counts (not done again);
    # the rest is the second command's
    workers = {t.user_attrs["worker"] for t in complete}
    assert workers <= by | stopped
    # the second command did the rest, if the first left any: under a full
    # run's load the test read the "started" line late once, and one worker
    # of the first command had completed all 64 trials by the Ctrl-C
    # (2026-11-28); the resume then has nothing to do, which is still right
    first = sum(t.user_attrs["worker"] in stopped for t in complete)
    assert (first == budget) or (workers & by), (first, workers, by)
    check_outputs(workdir / "lite", complete)
