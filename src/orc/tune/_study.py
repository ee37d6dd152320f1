"""``orc.tune.study``: an Optuna study whose trials are draws of a search
space, each batch of trials evaluated by one :func:`orc.tune.search` call.

Optuna is an optional dependency (``pip install "orc[tune]"``): it is
imported by :func:`study` only, never by ``import orc.tune``, so the
population search and its random and Sobol samplers work without it.

One *trial* is one draw (a point of the space). Its seeds and ridge
strengths are evaluated by the search (every strength of a seed's reservoir
from one factorisation: they are not Optuna's to sample) and the trial is
told the best score over them. Every candidate's score is stored with its
trial (user attributes), so a result, the table of every candidate of the
study, can be made by any process from the storage alone.

Surviving a dead worker: a persistent storage is an
:class:`optuna.storages.RDBStorage` with a heartbeat. While a batch is
evaluated a thread records its trials' heartbeats; a trial whose heartbeat
stopped (its process was killed) is failed by the next worker that looks
and put back in the queue with the same parameters (Optuna's retry
callback), and the next ask takes it. ``n_trials`` counts the study's
finished draws, so a resumed or second worker runs only what is missing.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import numbers
import os
import re
import socket
import threading
import time
import warnings
from collections.abc import Sequence

import numpy as np

from .._defaults import TUNE
from .._progress import ProgressBar, resolve
from . import _population
from ._search import (
    SearchResult,
    _betas,
    _positive_int,
    _seeds,
    check_family,
    search,
)
from ._space import (
    AbstractDistribution,
    Choice,
    IntUniform,
    LogUniform,
    Uniform,
    check_space,
)
from ._task import AbstractTask

__all__ = ["study", "StudyResult", "SAMPLERS"]

OWNER = "orc.tune.study"

#: The Optuna samplers :func:`study` builds (``sampler=``).
SAMPLERS = ("tpe", "cmaes", "random")

INSTALL = 'pip install "orc[tune]"'

#: Tries to open a database whose tables another worker creates at once.
CREATE_TRIES = 5

#: The study's setup, stored with it: a resumed study must be the same one.
CONFIG_ATTR = "orc_config"


def _optuna():
    try:
        import optuna
    except ImportError as err:
        raise ImportError(
            f"{OWNER} needs Optuna, an optional dependency: {INSTALL}"
        ) from err
    return optuna


@contextlib.contextmanager
def _quiet():
    """Optuna's warnings about what this module does on purpose: its
    experimental heartbeat and retry, and asking (not ``optimize``) with a
    heartbeat (this module records the heartbeats itself)."""
    optuna = _optuna()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        warnings.filterwarnings("ignore", message=".*[Hh]eartbeat.*")
        warnings.filterwarnings("ignore", message=".*failed_trial_callback.*")
        yield


class StudyResult(SearchResult):
    """What :func:`study` found: a :class:`SearchResult` over every candidate
    of the study's finished trials (``rows``: the search's columns and
    ``trial``, the Optuna trial number; ``id`` renumbered over the study)
    with the Optuna study itself (``study``) and the trial numbers this call
    evaluated (``evaluated``). ``best`` is the best ``ok`` candidate of the
    study and ``best_model`` that candidate trained by the search's solve;
    ``study.best_value`` is its score."""

    def __init__(self, optuna_study, evaluated, rows, columns, higher_is_better,
                 rebuild, metric, log):  # fmt: skip
        super().__init__(rows, columns, higher_is_better, rebuild, metric, log)
        self.study = optuna_study
        self.evaluated = tuple(evaluated)

    def __repr__(self) -> str:
        return f"StudyResult({self.study.study_name!r}: {self.summary()})"


def study(
    model_class,
    space: dict,
    task: AbstractTask,
    *,
    fixed: dict | None = None,
    seeds=1,
    beta=None,
    ridge_points: int = TUNE.ridge_points,
    sampler: str = "tpe",
    n_trials: int = 32,
    batch: int = 8,
    storage=None,
    study_name: str | None = None,
    sampler_seed: int = 0,
    progress: bool | None = None,
    heartbeat_interval: int = 30,
    max_retry: int | None = 3,
) -> StudyResult:
    """Search ``model_class``'s hyperparameters with an Optuna study.

    Each trial is one draw of ``space``, suggested by ``sampler``; ``batch``
    trials are asked at once and evaluated by one :func:`search` call
    (every seed of ``seeds`` x every ridge strength of ``beta``), then each
    is told the best score of its candidates (the largest VPT or accuracy,
    the smallest NRMSE). Its user attributes: ``best_seed``, ``best_beta``,
    ``seed_scores`` (each seed's best, in the order of ``seeds``; ``None``
    where all its strengths failed), ``candidates`` (every candidate's
    seed, strength, score, status and reason) and ``worker`` (the host and
    process that evaluated it). A draw whose candidates all failed is told
    ``FAIL`` with ``failed_reason``.

    Parameters
    ----------
    model_class, space, task, fixed, seeds, beta, ridge_points
        As for :func:`search`. ``beta`` is a grid, never sampled by Optuna:
        the search solves every strength of a trajectory from one
        factorisation.
    sampler : {"tpe", "cmaes", "random"}, default "tpe"
        Optuna's TPE (with the constant liar for a batch's running trials),
        CMA-ES (needs the ``cmaes`` package, in ``orc[tune]``) or random
        sampler.
    n_trials : int, default 32
        The study's finished draws when this call returns (a ``COMPLETE``
        trial, or a ``FAIL`` whose candidates all failed): a resumed study
        or another worker's call runs only what is missing, and waits for
        the other workers' running trials (retrying those whose worker
        died).
    batch : int, default 8
        Trials asked and evaluated together.
    storage : str, path or optuna storage, optional
        Where the study lives. ``None`` (the default): in memory, gone with
        the process. A file path (e.g. ``"results/study.db"``) or an
        ``sqlite:///`` URL: an SQLite file, for one machine; any other
        SQLAlchemy URL (``postgresql+psycopg2://user@host/db``): a database
        server, for many workers. A URL or path gets a heartbeat and the
        retry of trials whose worker died; an optuna storage object is
        used as it is.
    study_name : str, optional
        The study in ``storage`` (created, or loaded to resume); default
        ``"orc"`` with a storage. A study loaded must have been run with
        the same model, space, task metric, seeds and strengths.
    sampler_seed : int, default 0
        Seeds the sampler of each batch together with the batch's first
        trial number: one worker's study is reproducible and two workers
        never draw alike.
    progress : bool, optional
        A bar of the study's finished trials on stderr (default on a
        terminal).
    heartbeat_interval : int, default 30
        Seconds between a running trial's heartbeats; one silent for twice
        that is failed and retried.
    max_retry : int or None, default 3
        Retries of a trial whose worker died (``None``: without limit);
        past them it stays failed and a new draw takes its place.

    Returns
    -------
    :class:`StudyResult`
    """
    optuna = _optuna()
    check_family(OWNER, model_class, task)
    if sampler not in SAMPLERS:
        raise ValueError(f"{OWNER}: sampler must be one of {SAMPLERS}, got {sampler!r}")
    if sampler == "cmaes":
        try:
            import cmaes  # noqa: F401
        except ImportError as err:
            raise ImportError(
                f"{OWNER}: sampler='cmaes' needs the cmaes package: {INSTALL}"
            ) from err
    n_trials = _positive_int("n_trials", n_trials)
    batch = _positive_int("batch", batch)
    ridge_points = _positive_int("ridge_points", ridge_points)
    heartbeat_interval = _positive_int("heartbeat_interval", heartbeat_interval)
    if max_retry is not None and (
        isinstance(max_retry, bool)
        or not isinstance(max_retry, numbers.Integral)
        or max_retry < 0
    ):
        raise ValueError(f"{OWNER}: max_retry must be an int >= 0 or None")
    if isinstance(sampler_seed, bool) or not isinstance(sampler_seed, numbers.Integral):
        raise TypeError(f"{OWNER}: sampler_seed must be an int, got {sampler_seed!r}")

    space = check_space(OWNER, space, reserved=("seed", "construction"))
    fixed = dict(check_space(OWNER, fixed or {}, reserved=("seed", "construction")))
    if "beta" in space:
        if beta is not None:
            raise ValueError(f"{OWNER}: beta given twice (in space and as beta=)")
        beta = space.pop("beta")
    dists = {n: d for n, d in space.items() if isinstance(d, AbstractDistribution)}
    fixed.update({n: v for n, v in space.items() if n not in dists})
    seed_list = _seeds(seeds)
    betas = _betas(beta, ridge_points, task.default_beta)
    codecs = {n: _Codec(n, d) for n, d in dists.items()}

    direction = "maximize" if task.higher_is_better else "minimize"
    store, heartbeat = _storage(optuna, storage, heartbeat_interval, max_retry)
    if study_name is None and store is not None:
        study_name = "orc"
    with _quiet():
        the_study = optuna.create_study(
            storage=store, study_name=study_name, direction=direction,
            load_if_exists=True,
        )  # fmt: skip
    _check_same_study(the_study, direction, _config(model_class, dists, fixed,
                                                    task, seed_list, betas))  # fmt: skip

    names = tuple(dists)
    grace = 2 * heartbeat_interval
    worker = f"{socket.gethostname()}:{os.getpid()}"
    evaluated: list[int] = []
    show = resolve(progress, n_trials, min_steps=2)
    bar = ProgressBar(n_trials, "study") if show else None
    poll = max(0.2, min(heartbeat_interval / 2, 5.0))
    try:
        while True:
            with _quiet():
                if heartbeat:
                    optuna.storages.fail_stale_trials(the_study)
            finished, running = _count(the_study, heartbeat, grace)
            if bar is not None:
                bar.update(finished)
            free = n_trials - finished - running
            if free <= 0:
                if finished >= n_trials or not running:
                    break
                time.sleep(poll)  # other workers' trials: done or stale soon
                continue
            # waiting trials first (retries of trials whose worker died)
            trials = _ask(the_study, min(batch, free), worker,
                          store if heartbeat else None)  # fmt: skip
            # the storage's ids (Optuna's own heartbeat uses the attribute)
            beat = _Heartbeat(store, [t._trial_id for t in trials],
                              heartbeat_interval if heartbeat else None)  # fmt: skip
            try:
                trials = _release_surplus(the_study, trials, n_trials, heartbeat,
                                          grace)  # fmt: skip
                if not trials:
                    continue
                the_study.sampler = _sampler(
                    optuna, sampler, sampler_seed, min(t.number for t in trials)
                )
                with _quiet():
                    points = [{n: codecs[n].suggest(t) for n in names} for t in trials]
                result = search(
                    model_class, dists, task, fixed=fixed, points=points,
                    seeds=seed_list, beta=betas, progress=False,
                )  # fmt: skip
                told = _tell_all(optuna, the_study, trials, result, seed_list)
            except BaseException as err:
                for t in trials:
                    with contextlib.suppress(Exception), _quiet():
                        t.set_user_attr("error", f"{type(err).__name__}: {err}")
                    with contextlib.suppress(Exception), _quiet():
                        the_study.tell(t, state=optuna.trial.TrialState.FAIL,
                                       skip_if_finished=True)  # fmt: skip
                raise
            finally:
                beat.stop()
            evaluated.extend(told)
    finally:
        if bar is not None:
            bar.close()

    return _result(the_study, model_class, dists, codecs, fixed, task,
                   evaluated)  # fmt: skip


class _Codec:
    """One hyperparameter: its Optuna suggestion and the value it stands
    for (a :class:`Choice` option that Optuna cannot store is suggested as
    its ``repr``)."""

    def __init__(self, name, dist):
        self.name, self.dist = name, dist
        self.options = None
        if isinstance(dist, Choice):
            plain = all(
                o is None or isinstance(o, (bool, int, float, str))
                for o in dist.options
            )
            if plain:
                self.labels = list(dist.options)
            else:
                self.labels = [repr(o) for o in dist.options]
                if len(set(self.labels)) != len(self.labels):
                    raise ValueError(
                        f"{OWNER}: the options of {name!r} must be None, bools, "
                        "numbers or strings, or have distinct reprs"
                    )
            self.options = dict(zip(self.labels, dist.options, strict=True))
        elif not isinstance(dist, (Uniform, LogUniform, IntUniform)):
            raise TypeError(
                f"{OWNER}: {name!r}: no Optuna distribution for {type(dist).__name__}"
            )

    def suggest(self, trial):
        d, n = self.dist, self.name
        if isinstance(d, Uniform):
            return float(trial.suggest_float(n, d.low, d.high))
        if isinstance(d, LogUniform):
            return float(trial.suggest_float(n, d.low, d.high, log=True))
        if isinstance(d, IntUniform):
            return int(trial.suggest_int(n, d.low, d.high))
        return self.options[trial.suggest_categorical(n, self.labels)]

    def value(self, param):
        """The model's value of a stored Optuna parameter."""
        return self.options[param] if self.options is not None else param


def _storage(optuna, storage, heartbeat_interval, max_retry):
    """``(storage, heartbeat)``: Optuna's storage for ``storage`` and whether
    it records heartbeats (then stale trials are failed and retried)."""
    import sqlalchemy.exc
    from optuna.storages import BaseStorage

    if storage is None:
        return None, False
    if isinstance(storage, BaseStorage):
        return storage, _beats(storage)
    if isinstance(storage, os.PathLike) or (
        isinstance(storage, str) and "://" not in storage
    ):
        path = os.path.abspath(os.fspath(storage))
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            raise FileNotFoundError(
                f"{OWNER}: storage {storage!r}: no folder {folder!r} to hold the "
                "SQLite file"
            )
        url = "sqlite:///" + path
    elif isinstance(storage, str):
        url = storage
    else:
        raise TypeError(
            f"{OWNER}: storage must be None, a file path, a database URL or an "
            f"optuna storage, got {storage!r}"
        )
    if url.startswith("sqlite"):
        # a heartbeat thread and other processes write the file too: wait
        # for its lock rather than fail
        engine = {"connect_args": {"timeout": 60}}
    else:
        engine = {"pool_pre_ping": True}
    retry_class = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    params = inspect.signature(optuna.storages.RDBStorage).parameters
    with _quiet():
        if retry_class is not None and "heartbeat_stale_trial_callback" in params:
            retry = retry_class(max_retry=max_retry)
            callback = {"heartbeat_stale_trial_callback": retry}
        else:  # Optuna < 4.9
            retry = optuna.storages.RetryFailedTrialCallback(max_retry=max_retry)
            callback = {"failed_trial_callback": retry}
        for attempt in range(CREATE_TRIES):
            try:
                store = optuna.storages.RDBStorage(
                    url, engine_kwargs=engine,
                    heartbeat_interval=heartbeat_interval, **callback,
                )  # fmt: skip
                break
            except sqlalchemy.exc.DatabaseError as err:
                # workers started together on a new database: another one
                # created the same tables (or types) at the same time; they
                # exist now, and the next try finds them. PostgreSQL says so
                # with an IntegrityError or ProgrammingError, SQLite with an
                # OperationalError "table ... already exists"
                raced = isinstance(
                    err,
                    (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError),
                ) or "already exists" in str(err)
                if not raced or attempt == CREATE_TRIES - 1:
                    raise
                time.sleep(0.5 * (attempt + 1))
    return store, True


def create_storage(storage) -> None:
    """Create the tables of ``storage`` (a file path or database URL) now.

    ``orc tune --workers`` calls it before it starts its workers, so that
    they find the tables made instead of racing to make them (``_storage``
    retries such a race, for processes started independently)."""
    _storage(_optuna(), storage, heartbeat_interval=60, max_retry=0)


def _beats(storage) -> bool:
    get = getattr(storage, "get_heartbeat_interval", None)
    return get is not None and get() is not None


def _repr(value) -> str:
    """``repr`` without memory addresses (another process has others)."""
    return re.sub(r" at 0x[0-9a-fA-F]+", "", repr(value))


def _config(model_class, dists, fixed, task, seed_list, betas) -> dict:
    return {
        "model": f"{model_class.__module__}.{model_class.__qualname__}",
        "space": {n: _repr(d) for n, d in dists.items()},
        "fixed": {n: _repr(v) for n, v in sorted(fixed.items())},
        "metric": task.metric,
        "seeds": list(seed_list),
        "betas": [float(b) for b in betas],
    }


def _check_same_study(the_study, direction, config) -> None:
    """A study loaded to resume was made by the same setup (its rows and
    values would not compare otherwise); a new one records its setup."""
    if the_study.direction.name.lower() != direction:
        raise ValueError(
            f"{OWNER}: study {the_study.study_name!r} exists and is "
            f"{the_study.direction.name.lower()}d, but this task's "
            f"{config['metric']} is {direction}d: pass another study_name"
        )
    stored = the_study.user_attrs.get(CONFIG_ATTR)
    if stored is None:
        the_study.set_user_attr(CONFIG_ATTR, config)
        return
    stored = json.loads(json.dumps(stored))
    if stored != json.loads(json.dumps(config)):
        diff = sorted(k for k in config if stored.get(k) != config[k])
        raise ValueError(
            f"{OWNER}: study {the_study.study_name!r} exists with another setup "
            f"(its {', '.join(diff)} differ): resume it with the same arguments, "
            "or pass another study_name"
        )


def _retried(trials) -> set[int]:
    """Trial numbers that a later trial retries (failed by the heartbeat)."""
    out = set()
    for t in trials:
        out.update(t.system_attrs.get("retry_history", ()))
    return out


def _count(the_study, heartbeat: bool, grace: float) -> tuple[int, int]:
    """``(finished, running)`` draws of the study. Finished: a ``COMPLETE``
    trial, or one failed because all its candidates did (not one whose
    worker died, which is put back in the queue as a waiting trial).
    Running: a trial running with a heartbeat (a worker records one as soon
    as it asks, then sets ``worker``; one without either, older than the
    grace period, was left by a process killed before its first heartbeat
    and is not waited for). Waiting trials count as neither: the next ask
    takes them."""
    from optuna.trial import TrialState

    trials = the_study.get_trials(deepcopy=False)
    retried = _retried(trials)
    finished = running = 0
    now = time.time()
    for t in trials:
        if t.state == TrialState.COMPLETE:
            finished += 1
        elif t.state == TrialState.FAIL:
            if "failed_reason" in t.user_attrs and t.number not in retried:
                finished += 1
        elif t.state == TrialState.RUNNING and heartbeat:
            started = t.datetime_start.timestamp() if t.datetime_start else now
            if "worker" in t.user_attrs or now - started < grace:
                running += 1
    return finished, running


def _ask(the_study, k: int, worker: str, beating) -> list:
    """``k`` trials (waiting ones first: retries, enqueued draws), each with
    its first heartbeat recorded (in ``beating``, a storage with
    heartbeats) before its ``worker`` is set."""
    trials = []
    with _quiet():
        for _ in range(k):
            t = the_study.ask()
            if beating is not None:
                beating.record_heartbeat(t._trial_id)
            t.set_user_attr("worker", worker)
            trials.append(t)
    return trials


def _release_surplus(the_study, trials, n_trials, heartbeat, grace) -> list:
    """The trials asked, less those that, with another worker's asked at the
    same time, would make the study run more than ``n_trials`` draws: a
    trial not yet given parameters is told ``FAIL`` with ``released`` (it
    was never evaluated); a waiting draw taken from the queue is kept."""
    from optuna.trial import TrialState

    finished, running = _count(the_study, heartbeat, grace)
    surplus = finished + running - n_trials if heartbeat else 0
    keep = []
    for t in reversed(trials):
        if surplus > 0 and not t.params:
            with _quiet():
                t.set_user_attr("released", True)
                the_study.tell(t, state=TrialState.FAIL)
            surplus -= 1
        else:
            keep.append(t)
    return keep[::-1]


def _sampler(optuna, name: str, seed: int, first: int):
    """The batch's sampler, seeded by ``seed`` and the batch's first trial
    number (trial numbers are the storage's: no two workers share one)."""
    s = int(np.random.SeedSequence([int(seed) % 2**32, first]).generate_state(1)[0])
    with _quiet():
        if name == "tpe":
            return optuna.samplers.TPESampler(seed=s, constant_liar=True)
        if name == "cmaes":
            return optuna.samplers.CmaEsSampler(seed=s, warn_independent_sampling=False)
        return optuna.samplers.RandomSampler(seed=s)


def _finite_or_none(x):
    x = float(x)
    return x if math.isfinite(x) else None


def _tell_all(optuna, the_study, trials, result, seed_list) -> list[int]:
    """Tell each trial the best score over its candidates (draw ``d`` of the
    search is the trajectories ``k`` with ``k % draws == d``, seed-major);
    the numbers of the trials told. A trial that another worker failed
    meanwhile (its heartbeat was late: it is queued again) is left to its
    retry, with a warning."""
    from optuna.trial import TrialState

    better = max if result.higher_is_better else min
    draws = len(trials)
    told = []
    for d, t in enumerate(trials):
        rows = [r for r in result.rows if r["trajectory"] % draws == d]
        ok = [r for r in rows if r["status"] == "ok"]
        per_seed = []
        for s in seed_list:
            mine = [r["score"] for r in ok if r["seed"] == s]
            per_seed.append(better(mine) if mine else None)
        candidates = {
            "seed": [r["seed"] for r in rows],
            "beta": [r["beta"] for r in rows],
            "value": [_finite_or_none(r[result.metric]) for r in rows],
            "status": [r["status"] for r in rows],
            "reason": [r["reason"] for r in rows],
            "seconds": [r["seconds"] for r in rows],
        }
        try:
            with _quiet():
                t.set_user_attr("seed_scores", per_seed)
                t.set_user_attr("candidates", candidates)
                if not ok:
                    reasons = sorted({r["reason"] for r in rows})
                    t.set_user_attr("failed_reason", "; ".join(reasons))
                    the_study.tell(t, state=TrialState.FAIL)
                else:
                    best = better(ok, key=lambda r: r["score"])
                    t.set_user_attr("best_seed", best["seed"])
                    t.set_user_attr("best_beta", best["beta"])
                    the_study.tell(t, best["score"])
        except (optuna.exceptions.UpdateFinishedTrialError, ValueError) as err:
            if isinstance(err, ValueError) and "Cannot tell" not in str(err):
                raise
            warnings.warn(
                f"{OWNER}: trial {t.number} was failed by another worker while "
                "this one evaluated it (its heartbeat was late); its retry "
                "evaluates it again",
                RuntimeWarning,
                stacklevel=3,
            )
            continue
        told.append(t.number)
    return told


def _result(the_study, model_class, dists, codecs, fixed, task, evaluated):
    """Every candidate of the study's finished trials, from the storage."""
    from optuna.trial import TrialState

    names = tuple(dists)
    trials = the_study.get_trials(deepcopy=False)
    retried = _retried(trials)
    rows = []
    n_traj = 0
    for t in sorted(trials, key=lambda t: t.number):
        done = t.state == TrialState.COMPLETE or (
            t.state == TrialState.FAIL
            and "failed_reason" in t.user_attrs
            and t.number not in retried
        )
        cand = t.user_attrs.get("candidates")
        if not done or cand is None:
            continue
        params = {n: _plain(codecs[n].value(t.params[n])) for n in names}
        trajectory = {}
        for i, seed in enumerate(cand["seed"]):
            if seed not in trajectory:
                trajectory[seed] = n_traj
                n_traj += 1
            value = cand["value"][i]
            value = float("nan") if value is None else float(value)
            ok = cand["status"][i] == "ok"
            row = {"id": len(rows), "trial": t.number,
                   "trajectory": trajectory[seed], "seed": seed}  # fmt: skip
            row.update(params)
            row["beta"] = float(cand["beta"][i])
            row[task.metric] = value
            row["score"] = value if ok else float("nan")
            row["status"] = cand["status"][i]
            row["reason"] = cand["reason"][i]
            row["seconds"] = float(cand["seconds"][i])
            rows.append(row)
    columns = ["id", "trial", "trajectory", "seed", *names, "beta", task.metric,
               "score", "status", "reason", "seconds"]  # fmt: skip

    def rebuild(row):
        kw = dict(fixed)
        kw.update({n: row[n] for n in names})
        model = model_class(**kw, seed=row["seed"], construction="jax")
        return _population.train_one(model, task, row["beta"])

    log = {"beta"} | {n for n in names if isinstance(dists[n], LogUniform)}
    return StudyResult(the_study, evaluated, rows, columns, task.higher_is_better,
                       rebuild, task.metric, log)  # fmt: skip


def _plain(v):
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


class _Heartbeat:
    """Records the heartbeats of a batch's trials every ``interval`` seconds
    (none without ``interval``) on a thread, until :meth:`stop`."""

    def __init__(self, storage, trial_ids: Sequence[int], interval):
        self._stop = threading.Event()
        self._thread = None
        if interval is None:
            return
        self._storage, self._ids, self._interval = storage, list(trial_ids), interval
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(self._interval):
            for i in self._ids:
                # a missed beat is retried at the next interval; a trial
                # silent for two is failed by whoever looks
                with contextlib.suppress(Exception):
                    self._storage.record_heartbeat(i)

    def stop(self):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
