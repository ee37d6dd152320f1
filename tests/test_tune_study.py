"""orc.tune.study: Optuna studies whose trials are draws evaluated by the
population search. Each trial's value against the candidates stored with it
and against the search run directly; a study resumed after ``kill -9`` of
its process (SQLite) and two workers on one PostgreSQL study, one killed
mid-trial: every draw evaluated to the end once, none lost, the killed
worker's running trials failed by the heartbeat and retried.

The workers are tests/_study_worker.py, which logs every evaluation (a
``start`` line before a batch's search, an ``end`` line after it) to a file
of its own, independently of what the study records.
"""

from __future__ import annotations

import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import _study_worker as worker
import orc
from orc.forecaster import ESNForecaster
from orc.tune import Forecast, LogUniform, Uniform

HERE = Path(__file__).resolve().parent
TIMEOUT = 240  # seconds a worker may take (it compiles its programs first)


@pytest.fixture(scope="module")
def optuna():
    return pytest.importorskip("optuna", reason='needs pip install "orc[tune]"')


def _params_key(params):
    return tuple(sorted((k, float(v)) for k, v in params.items()))


def _read_log(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def _best(values, higher):
    return max(values) if higher else min(values)


def _rows_by_trial(result):
    out = {}
    for row in result.rows:
        out.setdefault(row["trial"], []).append(row)
    return out


# -- values ------------------------------------------------------------------


def test_trial_values_are_the_best_of_their_candidates(optuna):
    # a draw planted in the queue whose candidates all overflow (as in
    # tests/test_tune.py): told FAIL with the search's reason
    storage = optuna.storages.InMemoryStorage()
    planted = optuna.create_study(
        storage=storage, study_name="planted", direction="minimize"
    )
    bad = {"Wr_spectral_radius": 0.9, "leak_rate": 0.6, "embedding_scaling": 1e308,
           "bias": 0.5}  # fmt: skip
    with pytest.warns(UserWarning, match="out of range"):
        planted.enqueue_trial(bad)
        res = worker.run(storage, "planted", n_trials=6, batch=3,
                         log=os.devnull)  # fmt: skip
    study = res.study
    trials = sorted(study.trials, key=lambda t: t.number)
    assert [t.number for t in trials] == list(range(6))
    assert trials[0].state == optuna.trial.TrialState.FAIL
    assert trials[0].params["embedding_scaling"] == 1e308
    assert "not finite" in trials[0].user_attrs["failed_reason"]
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials[1:])
    assert sorted(res.evaluated) == list(range(6))

    # the table: every candidate of every trial, ids renumbered
    n_b = worker.RIDGE_POINTS
    assert len(res.rows) == 6 * len(worker.SEEDS) * n_b
    assert [r["id"] for r in res.rows] == list(range(len(res.rows)))
    by_trial = _rows_by_trial(res)
    assert sorted(by_trial) == list(range(6))
    assert all(r["status"] == "failed" for r in by_trial[0])

    # each value, best seed and strength and per-seed best recomputed from
    # the rows (NRMSE: lower is better)
    for t in trials[1:]:
        rows = [r for r in by_trial[t.number] if r["status"] == "ok"]
        for r in by_trial[t.number]:
            assert {n: r[n] for n in t.params} == t.params
        best = min(rows, key=lambda r: r["score"])
        assert t.value == best["score"]
        assert t.user_attrs["best_seed"] == best["seed"]
        assert t.user_attrs["best_beta"] == best["beta"]
        per_seed = [min((r["score"] for r in rows if r["seed"] == s), default=None)
                    for s in worker.SEEDS]  # fmt: skip
        assert t.user_attrs["seed_scores"] == per_seed
    ok = [r["score"] for r in res.rows if r["status"] == "ok"]
    assert study.best_value == min(ok) == res.best["score"]
    assert study.best_trial.number == res.best["trial"]

    # the first batch's candidates are the search's own for those draws
    # (the planted one included): the trial <-> draw bookkeeping holds
    direct = orc.tune.search(
        ESNForecaster, worker.space(), worker.task(), fixed=worker.FIXED,
        points=[{n: t.params[n] for n in worker.space()} for t in trials[:3]],
        seeds=worker.SEEDS, beta=worker.beta(), ridge_points=n_b, progress=False,
    )  # fmt: skip
    mine = [r for r in res.rows if r["trial"] < 3]
    key = [(r["trial"], r["seed"], r["beta"]) for r in mine]
    ref = {(r["trajectory"] % 3, r["seed"], r["beta"]): r for r in direct.rows}
    for (trial, seed, beta), row in zip(key, mine, strict=True):
        other = ref[(trial, seed, beta)]
        assert (row["status"], row["reason"]) == (other["status"], other["reason"])
        np.testing.assert_array_equal(row["nrmse"], other["nrmse"])

    model = res.best_model
    assert isinstance(model, ESNForecaster) and model.res_dim == 40
    assert float(model.driver.spectral_radius) == res.best["Wr_spectral_radius"]
    assert "6 ok" not in repr(res) and "StudyResult('planted'" in repr(res)


def test_vpt_studies_maximise(optuna):
    task = Forecast(worker.TRAIN, worker.VAL, spinup=50, warmup=60, horizon=150,
                    windows=3, metric="vpt", dt=0.01,
                    lyapunov_exponent=0.906)  # fmt: skip
    res = orc.tune.study(
        ESNForecaster, worker.space(), task, fixed=worker.FIXED, seeds=2,
        beta=[1e-6, 1e-3], sampler="random", n_trials=4, batch=4, progress=False,
    )  # fmt: skip
    assert res.study.direction == optuna.study.StudyDirection.MAXIMIZE
    by_trial = _rows_by_trial(res)
    for t in res.study.trials:
        scores = [r["score"] for r in by_trial[t.number] if r["status"] == "ok"]
        assert t.value == max(scores)
    assert res.study.best_value == max(r["score"] for r in res.rows)
    assert res.best["score"] == res.study.best_value


@pytest.mark.parametrize("sampler", ["random", "cmaes", "tpe"])
def test_samplers_draw_in_the_space_reproducibly(optuna, sampler):
    def draws(seed):
        res = orc.tune.study(
            ESNForecaster, worker.space(), worker.task(), fixed=worker.FIXED,
            seeds=worker.SEEDS, beta=worker.beta(), ridge_points=worker.RIDGE_POINTS,
            sampler=sampler, n_trials=3, batch=3, sampler_seed=seed, progress=False,
        )  # fmt: skip
        return [t.params for t in sorted(res.study.trials, key=lambda t: t.number)]

    first = draws(0)
    assert len(first) == 3
    for params in first:
        for name, dist in worker.space().items():
            assert dist.low <= params[name] <= dist.high
    assert draws(0) == first
    assert draws(1) != first


# -- SQLite: resume after kill -9 --------------------------------------------


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """A folder for the compilation cache of the first worker process, which
    the later ones start from (a copy each): they load its programs (the
    model's construction; the search's own holds a host callback, which
    JAX does not cache) instead of compiling them again."""
    return tmp_path_factory.mktemp("programs")


def _env(tmp, name, programs=None):
    env = dict(os.environ)
    # a compilation cache per process: two processes never write one entry
    env["JAX_COMPILATION_CACHE_DIR"] = cache = str(tmp / f"jax-cache-{name}")
    if programs is not None and any(programs.iterdir()):
        shutil.copytree(programs, cache)
    env["ORC_PROGRESS"] = "0"
    return env


def _start_worker(tmp, name, programs=None, **config):
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(config))
    with open(tmp / f"{name}.err", "w") as err:  # the child keeps its own
        return subprocess.Popen(
            [sys.executable, str(HERE / "_study_worker.py"), str(path)],
            cwd=HERE, env=_env(tmp, name, programs), stdout=subprocess.DEVNULL,
            stderr=err,
        )  # fmt: skip


def _wait_for(condition, proc, what, timeout=TIMEOUT):
    t0 = time.monotonic()
    while not condition():
        if proc is not None and proc.poll() is not None:
            err = Path(proc.args[-1]).with_suffix(".err").read_text()[-4000:]
            raise AssertionError(
                f"the worker exited ({proc.returncode}) before {what}:\n{err}"
            )
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"no {what} within {timeout} s")
        time.sleep(0.05)


def _starts(log, pid):
    return [e for e in _read_log(log) if e["event"] == "start" and e["pid"] == pid]


def _within(timeout, fn, *args):
    """``fn(*args)`` on a daemon thread, failing the test (not hanging it)
    if it has not returned within ``timeout`` seconds."""
    out = {}

    def target():
        try:
            out["value"] = fn(*args)
        except BaseException as err:  # raised in the test's thread below
            out["error"] = err

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise AssertionError(f"the study did not finish within {timeout} s")
    if "error" in out:
        raise out["error"]
    return out["value"]


def _kill(proc):
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _check_every_draw_done_once(optuna, loaded, log, n_trials, killed):
    """The study after a worker was killed: ``n_trials`` COMPLETE draws,
    each evaluated to the end exactly once by the log; the killed worker's
    running trials (``killed``: number -> params) FAIL and each retried
    once, with its parameters, by a COMPLETE trial."""
    state = optuna.trial.TrialState
    trials = loaded.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == state.COMPLETE]
    assert len(complete) == n_trials
    assert not [t for t in trials if t.state in (state.RUNNING, state.WAITING)]
    ends = [e for e in _read_log(log) if e["event"] == "end"]
    ended = [_params_key(p) for e in ends for p in e["points"]]
    assert len(ended) == len(set(ended)) == n_trials  # each draw once
    assert set(ended) == {_params_key(t.params) for t in complete}
    for number, params in killed.items():
        t = next(t for t in trials if t.number == number)
        assert t.state == state.FAIL and "failed_reason" not in t.user_attrs
        retries = [r for r in complete if r.system_attrs.get("failed_trial") == number]
        assert len(retries) == 1 and retries[0].params == params
    return complete


def test_sqlite_study_resumes_after_kill_9(optuna, tmp_path, programs):
    db = tmp_path / "study.db"
    url = f"sqlite:///{db}"
    log = str(tmp_path / "evaluations.jsonl")
    # batches of 3, as test_trial_values_are_the_best_of_their_candidates's:
    # the resumed study here runs the program compiled there
    n_trials, batch = 12, 3
    # the worker hangs in its third batch (after its search): killed there,
    # mid-trial, with two batches told
    a = _start_worker(tmp_path, "a", storage=str(db), study_name="resume",
                      n_trials=n_trials, batch=batch, log=log, hang_at=3)  # fmt: skip
    try:
        _wait_for(lambda: len(_starts(log, a.pid)) == 3, a, "third batch")
        time.sleep(0.2)
        killed_at = datetime.datetime.now()  # Optuna's clock for trial times
        _kill(a)
    finally:
        if a.poll() is None:
            a.kill()
    # its programs were written when compiled, in its first batch (it was
    # killed asleep in its third): the later workers start from them
    shutil.copytree(tmp_path / "jax-cache-a", programs, dirs_exist_ok=True)
    loaded = optuna.load_study(study_name="resume", storage=url)
    state = optuna.trial.TrialState
    before = {t.number: t for t in loaded.get_trials()}
    done = {n: t for n, t in before.items() if t.state == state.COMPLETE}
    running = {n: t.params for n, t in before.items() if t.state == state.RUNNING}
    assert len(done) == 2 * batch
    assert len(running) == batch
    assert all(len(p) == 4 for p in running.values())  # evaluated, not told
    assert all(t.user_attrs["worker"].endswith(f":{a.pid}") for t in done.values())

    # resumed here: the killed worker's trials are failed once their
    # heartbeat is stale (2 x 2 s) and retried; the rest run once
    res = _within(TIMEOUT, worker.run, str(db), "resume", n_trials, batch, log)
    loaded = optuna.load_study(study_name="resume", storage=url)
    complete = _check_every_draw_done_once(optuna, loaded, log, n_trials, running)
    # failed only once stale: the last heartbeat was at most one interval
    # (2 s) before the kill, so not before 4 - 2 = 2 s after it, less the
    # heartbeat thread's scheduling slack
    for number in running:
        failed_at = loaded.trials[number].datetime_complete
        assert failed_at - killed_at >= datetime.timedelta(seconds=1.5)
    after = {t.number: t for t in loaded.get_trials()}
    for n, t in done.items():  # told before the kill: never evaluated again
        assert after[n].state == state.COMPLETE
        assert (after[n].params, after[n].value) == (t.params, t.value)
        assert after[n].user_attrs["worker"] == t.user_attrs["worker"]
        assert n not in res.evaluated
    me = f":{os.getpid()}"
    mine = [t.number for t in complete if t.user_attrs["worker"].endswith(me)]
    assert sorted(res.evaluated) == sorted(mine)
    assert len(mine) == n_trials - len(done)
    assert len(res.rows) == n_trials * len(worker.SEEDS) * worker.RIDGE_POINTS

    # run again: complete, nothing evaluated
    again = worker.run(str(db), "resume", n_trials, batch, log)
    assert again.evaluated == ()
    assert len(again.rows) == len(res.rows)
    # another setup is refused, not mixed into the study
    with pytest.raises(ValueError, match="another setup .*seeds"):
        orc.tune.study(
            ESNForecaster, worker.space(), worker.task(), fixed=worker.FIXED,
            seeds=[0], beta=worker.beta(), ridge_points=worker.RIDGE_POINTS,
            n_trials=n_trials, storage=str(db), study_name="resume",
        )  # fmt: skip


# -- PostgreSQL: two workers, one killed ---------------------------------------


def test_postgres_two_workers_one_killed_mid_trial(optuna, postgres_url, tmp_path,
                                                   programs):  # fmt: skip
    log = str(tmp_path / "evaluations.jsonl")
    n_trials, batch = 14, 2
    common = dict(storage=postgres_url, study_name="two", n_trials=n_trials,
                  batch=batch, log=log, programs=programs)  # fmt: skip
    # a hangs in its second batch and is killed there; b (slowed to a
    # second a batch, so that a gets its second batch) finishes the study
    a = _start_worker(tmp_path, "a", hang_at=2, **common)
    b = _start_worker(tmp_path, "b", sleep=1.0, **common)
    try:
        _wait_for(lambda: len(_starts(log, a.pid)) == 2, a, "a's second batch")
        time.sleep(0.2)
        loaded = optuna.load_study(study_name="two", storage=postgres_url)
        _kill(a)
        state = optuna.trial.TrialState
        trials = loaded.get_trials()
        killed = {t.number: t.params for t in trials
                  if t.state == state.RUNNING
                  and t.user_attrs["worker"].endswith(f":{a.pid}")}  # fmt: skip
        assert len(killed) == batch
        by_a = [t for t in trials if t.state == state.COMPLETE
                and t.user_attrs["worker"].endswith(f":{a.pid}")]  # fmt: skip
        assert len(by_a) == batch
        b.wait(timeout=TIMEOUT)
        assert b.returncode == 0, (tmp_path / "b.err").read_text()[-3000:]
    finally:
        for p in (a, b):
            if p.poll() is None:
                p.kill()
    loaded = optuna.load_study(study_name="two", storage=postgres_url)
    complete = _check_every_draw_done_once(optuna, loaded, log, n_trials, killed)
    workers = {t.user_attrs["worker"].rsplit(":", 1)[1] for t in complete}
    assert workers == {str(a.pid), str(b.pid)}  # both worked on the study


# -- without Optuna ----------------------------------------------------------


def test_without_optuna_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna fails
    with pytest.raises(ImportError, match=r'pip install "orc\[tune\]"'):
        orc.tune.study(ESNForecaster, worker.space(), worker.task(),
                       fixed=worker.FIXED)  # fmt: skip
    # importing orc.tune does not import optuna (the scipy samplers need none)
    code = "import sys, orc.tune; print('optuna' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True,
                         text=True, timeout=120, check=True)  # fmt: skip
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "kwargs, error, words",
    [
        ({"sampler": "sobol"}, ValueError, "sampler must be one of"),
        ({"n_trials": 0}, ValueError, "n_trials must be an int >= 1"),
        ({"batch": 0}, ValueError, "batch must be an int >= 1"),
        ({"storage": "/no/such/folder/x.db"}, FileNotFoundError, "no folder"),
        ({"storage": 3}, TypeError, "storage must be"),
        ({"max_retry": -1}, ValueError, "max_retry"),
    ],
)
def test_bad_study_arguments_are_refused(optuna, kwargs, error, words):
    with pytest.raises(error, match=words):
        orc.tune.study(ESNForecaster, {"bias": Uniform(0, 1)}, worker.task(),
                       fixed=worker.FIXED, **kwargs)  # fmt: skip


def test_a_study_of_the_other_direction_is_refused(optuna, tmp_path):
    db = tmp_path / "d.db"
    optuna.create_study(storage=f"sqlite:///{db}", study_name="orc",
                        direction="maximize")  # fmt: skip
    with pytest.raises(ValueError, match="maximized.*minimized"):
        orc.tune.study(ESNForecaster, {"bias": Uniform(0, 1)}, worker.task(),
                       fixed=worker.FIXED, beta=LogUniform(1e-8, 1e-2),
                       storage=db)  # fmt: skip


def test_processes_creating_one_new_sqlite_study_file_at_once(optuna, tmp_path):
    """Workers started together on a new SQLite file race to create its
    tables (SQLite: OperationalError "table ... already exists"); each one
    retries and finds them, none fails (as ``orc tune --workers`` once did)."""
    from orc.tune import _study

    path = tmp_path / "race.db"
    go = tmp_path / "go"
    # each process, once it has imported what making a storage imports (it
    # makes one of its own first), says so (a file of its own) and waits for
    # the start time in ``go``: it sleeps until just before it and spins the
    # last milliseconds. So the three make the tables within milliseconds of
    # each other: with the library's retry off, one or two of the three
    # failed in each of six runs. (Six processes that imported for a fixed
    # 3 s, and imported Optuna and SQLAlchemy after the start, took nearly
    # twice the CPU time and missed the race in one of three runs: on two
    # cores some were still importing at the start.)
    code = (
        "import os, sys, time; from orc.tune import _study\n"
        "_study.create_storage(sys.argv[2] + '.db')\n"
        "open(sys.argv[2], 'w').close()\n"
        "while not os.path.exists(sys.argv[3]): time.sleep(0.002)\n"
        "t = float(open(sys.argv[3]).read())\n"
        "time.sleep(max(0.0, t - time.time() - 0.01))\n"
        "while time.time() < t: pass\n"
        "_study.create_storage(sys.argv[1])\n"
    )
    ready = [tmp_path / f"ready{i}" for i in range(3)]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(path), str(r), str(go)],
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for r in ready
    ]
    try:
        _wait_for(
            lambda: (
                all(r.exists() for r in ready)
                or any(p.poll() is not None for p in procs)
            ),
            None,
            "imports",
        )
        for p in procs:  # none exited before the start
            assert p.poll() is None, p.communicate()[1][-3000:]
        (tmp_path / "go.tmp").write_text(repr(time.time() + 0.2))
        os.replace(tmp_path / "go.tmp", go)  # whole, at once
        errors = [p.communicate(timeout=TIMEOUT)[1] for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert all(p.returncode == 0 for p in procs), "\n".join(errors)[-3000:]
    _study.create_storage(path)  # made: a later one only opens it
    assert optuna.get_all_study_names(f"sqlite:///{path}") == []
