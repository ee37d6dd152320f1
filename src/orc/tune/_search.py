"""``orc.tune.search``: a population search over a model family's
hyperparameters on a task (:mod:`._task`), evaluated in compiled chunks
(:mod:`._population`)."""

from __future__ import annotations

import contextlib
import csv
import inspect
import math
import numbers
import os
import time
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._defaults import TUNE
from .._progress import ProgressBar, resolve
from .._shard import mesh_axis, place_population
from .._strategy import use_backend
from . import _population
from ._space import AbstractDistribution, LogUniform, check_space, unit_design
from ._task import OWNER, AbstractTask

__all__ = ["search", "SearchResult"]

#: Share of the machine's memory (an accelerator's, else the host's) that the
#: trajectories evaluated side by side (``vmap``) may hold.
MEMORY_SHARE = 0.25

_REASONS = {
    _population.OK: "",
    _population.ILL: "ill-conditioned statistics: minimum-norm solution",
    _population.NONFINITE: "ridge statistics not finite (the reservoir overflowed)",
    _population.NAN_SCORE: "score not finite",
    _population.FAILED: "ridge solve failed (no finite weights)",
}


def reason(task: AbstractTask, code: int) -> str:
    """The ``reason`` column of a candidate with status ``code`` on ``task``
    (a failed output says the task's failure)."""
    if code == _population.DIVERGED:
        return task.output_failure
    return _REASONS[code]


def check_family(owner: str, model_class, task) -> None:
    """``task`` is a task and ``model_class`` a class of its family that
    builds from a traced seed (``construction="jax"``)."""
    if not isinstance(task, AbstractTask):
        raise TypeError(
            f"{owner}: task must be an orc.tune task (Forecast, Classify or "
            f"Regress), got {task!r}"
        )
    if not (isinstance(model_class, type) and issubclass(model_class, task.family)):
        raise TypeError(
            f"{owner}: model_class must be a {task.kind} class for an "
            f"orc.tune.{type(task).__name__} task (e.g. {task.example}), got "
            f"{model_class!r}"
        )
    if "construction" not in inspect.signature(model_class).parameters:
        raise TypeError(
            f"{owner}: {model_class.__name__} cannot be built from a traced seed "
            "(it takes no construction argument); search a family that takes "
            "construction='jax'"
        )


class SearchResult:
    """What :func:`search` found.

    ``rows``: one ``dict`` per candidate (``id``, ``trajectory``, ``seed``,
    each hyperparameter, ``beta``, ``score``, ``status`` ``"ok"``/``"failed"``,
    ``reason``, ``seconds``: its share of its chunk's time); ``best``: the
    best ``ok`` row (``None`` if every candidate failed); ``best_model``:
    that candidate rebuilt and trained by the search's own solve (an
    ordinary orc model; ``orc.save`` it), made on first use: the same
    weights the task's public trainer (``train_RCForecaster``,
    ``train_RCClassifier``, ``train_RCRegressor``) gives that candidate.
    ``higher_is_better`` is the task's metric's (VPT and accuracy higher,
    NRMSE lower)."""

    def __init__(self, rows, columns, higher_is_better, rebuild, metric, log=()):
        self.rows = rows
        #: the hyperparameters drawn on a log scale (and ``beta``)
        self.log_scaled = frozenset(log)
        self.columns = columns
        self.higher_is_better = higher_is_better
        self.metric = metric
        self._rebuild = rebuild
        self._best_model = None
        ok = [r for r in rows if r["status"] == "ok"]
        key = (lambda r: r["score"]) if higher_is_better else (lambda r: -r["score"])
        self.best = max(ok, key=key) if ok else None

    @property
    def best_model(self):
        if self.best is None:
            raise ValueError(
                f"{OWNER}: every candidate failed; see the reason column of .rows"
            )
        if self._best_model is None:
            self._best_model = self._rebuild(self.best)
        return self._best_model

    def scores(self) -> np.ndarray:
        return np.array([r["score"] for r in self.rows], float)

    def to_csv(self, path) -> None:
        """The table as CSV (one row per candidate, ``columns`` order)."""
        with open(path, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=self.columns)
            writer.writeheader()
            for row in self.rows:
                writer.writerow(row)

    def best_so_far(self) -> np.ndarray:
        """The best score among the first ``k`` candidates, for each ``k``
        (NaN until one succeeded)."""
        s = np.array([r["score"] if r["status"] == "ok" else np.nan for r in self.rows])
        if not self.higher_is_better:
            s = -s
        out = np.fmax.accumulate(np.where(np.isnan(s), -np.inf, s))
        out = np.where(np.isinf(out), np.nan, out)
        return out if self.higher_is_better else -out

    def plot(self, path=None):
        """Score against each hyperparameter (failed candidates as crosses at
        the bottom) and the best score so far; saved to ``path`` (PNG at
        200 dpi) if given, else returned as a figure."""
        from ..utils.visualization import plot_search

        return plot_search(self, path)

    def summary(self) -> str:
        """``"N candidates, K ok, best <metric> <score>"``."""
        n_ok = sum(r["status"] == "ok" for r in self.rows)
        best = "none" if self.best is None else f"{self.best['score']:.4g}"
        return f"{len(self.rows)} candidates, {n_ok} ok, best {self.metric} {best}"

    def __repr__(self) -> str:
        return f"SearchResult({self.summary()})"


def _seeds(seeds) -> list[int]:
    if isinstance(seeds, numbers.Integral) and not isinstance(seeds, bool):
        if seeds < 1:
            raise ValueError(f"{OWNER}: seeds must be >= 1, got {seeds}")
        return list(range(int(seeds)))
    if isinstance(seeds, Sequence) and not isinstance(seeds, (str, bytes)) and seeds:
        out = []
        for s in seeds:
            if isinstance(s, bool) or not isinstance(s, numbers.Integral):
                raise TypeError(f"{OWNER}: seeds must be ints, got {s!r}")
            out.append(int(s))
        return out
    raise TypeError(
        f"{OWNER}: seeds must be a count (int >= 1) or a non-empty list of ints, "
        f"got {seeds!r}"
    )


def _betas(beta, ridge_points: int, default: float) -> np.ndarray:
    """The search's ridge strengths (``default``, the task's trainer's,
    without ``beta``)."""
    if beta is None:
        return np.array([default])
    if isinstance(beta, LogUniform):
        return beta.grid(ridge_points)
    if isinstance(beta, AbstractDistribution):
        raise TypeError(
            f"{OWNER}: beta must be a LogUniform (a grid of ridge_points strengths) "
            f"or a list of strengths, got {type(beta).__name__}"
        )
    values = np.atleast_1d(np.asarray(beta, float))
    if values.ndim != 1 or not np.all(np.isfinite(values)) or np.any(values < 0):
        raise ValueError(f"{OWNER}: beta must be finite strengths >= 0, got {beta!r}")
    return values


def _memory_budget() -> int:
    device = jax.devices()[0]
    stats = device.memory_stats() if device.platform != "cpu" else None
    if stats and "bytes_limit" in stats:
        return int(MEMORY_SHARE * stats["bytes_limit"])
    try:
        pages = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        pages = 4 << 30
    return int(MEMORY_SHARE * pages)


def _width(per_trajectory: int, n: int) -> int:
    """Trajectories evaluated side by side: one on a CPU (each runs the
    native kernels, which are fastest one reservoir at a time: a kernel
    advancing 8 draws of a seed with one pass over the pattern fitted them
    in 0.88 s against 0.72 s for 8 calls at N = 500, since each draw's Gram,
    not the shared sparse product, sets a fit's pace; ``benchmarks/TUNE.md``);
    elsewhere as many as ``MEMORY_SHARE`` of the device's memory holds."""
    if jax.devices()[0].platform == "cpu":
        return 1
    return max(1, min(n, _memory_budget() // max(per_trajectory, 1)))


def search(
    model_class,
    space: dict,
    task: AbstractTask,
    *,
    fixed: dict | None = None,
    draws: int = 8,
    seeds=1,
    beta=None,
    ridge_points: int = TUNE.ridge_points,
    sampler: str = "sobol",
    sampler_seed: int = 0,
    points: Sequence[dict] | None = None,
    progress: bool | None = None,
    backend: str | None = None,
    mesh=None,
) -> SearchResult:
    """Search ``model_class``'s hyperparameters on ``task``.

    ``draws`` points of ``space`` (by ``sampler``: ``"sobol"``, scrambled
    quasi-random, the default; ``"random"``), each built with every seed in
    ``seeds``, and each of these trained for every ridge strength of
    ``beta``: ``len(seeds) * draws * len(betas)`` candidates. Candidates of
    one seed and draw share their reservoir run and statistics (one
    factorisation solves every strength); the draws of one seed share its
    matrices (drawn, and their spectral radius computed, once per compiled
    call); those that differ only in the continuous hyperparameters share
    one compiled program.

    Parameters
    ----------
    model_class : a class of the task's family built with
        ``construction="jax"``: a forecaster for :class:`Forecast` (e.g.
        :class:`orc.forecaster.ESNForecaster`), a classifier for
        :class:`Classify` (:class:`orc.classifier.ESNClassifier`), a
        regressor for :class:`Regress` (:class:`orc.regression.ESNRegressor`).
    space : dict
        Constructor argument -> distribution (:class:`Uniform`,
        :class:`LogUniform` traced; :class:`IntUniform`, :class:`Choice`
        static: one program per value) or a fixed value.
    task : :class:`Forecast`, :class:`Classify` or :class:`Regress`
    fixed : dict, optional
        Other constructor arguments (``data_dim``, ``res_dim``, ...).
    draws : int, default 8
    seeds : int or list of ints, default 1
        A count (seeds ``0..seeds-1``) or the seeds.
    beta : LogUniform or list of floats, optional
        Ridge strengths: a :class:`LogUniform`'s ``ridge_points`` log-spaced
        values, or the given ones; default the task's trainer's default.
    points : list of dicts, optional
        The draws themselves instead of the sampler's (each gives a value of
        every hyperparameter of ``space``): known configurations, a
        sampler's asks (Optuna's), or candidates planted in a batch.
    progress : bool, optional
        A bar on stderr (default on a terminal).
    backend : {"native", "xla"}, optional
    mesh : jax.sharding.Mesh, optional
        A mesh of one axis (e.g. ``jax.make_mesh((jax.device_count(),),
        ("population",))``, over several hosts after
        ``jax.distributed.initialize()``): each compiled call's trajectories
        are shared out over its devices, each device training and scoring
        its own with no communication until the scores are gathered (the
        same scores as without a mesh; see ``docs/examples/cluster.md``).

    Returns
    -------
    :class:`SearchResult`
    """
    check_family(OWNER, model_class, task)
    space = check_space(OWNER, space, reserved=("seed", "construction"))
    fixed = dict(check_space(OWNER, fixed or {}, reserved=("seed", "construction")))
    if "beta" in fixed:
        raise ValueError(f"{OWNER}: pass beta as search(beta=...), not in fixed")
    if "beta" in space:
        if beta is not None:
            raise ValueError(f"{OWNER}: beta given twice (in space and as beta=)")
        beta = space.pop("beta")
    for name, value in list(space.items()):
        if not isinstance(value, AbstractDistribution):
            fixed[name] = space.pop(name)
    both = set(space) & set(fixed)
    if both:
        raise ValueError(f"{OWNER}: {sorted(both)} both searched and fixed")
    if points is not None:
        draws = len(points)
    draws = _positive_int("draws", draws)
    ridge_points = _positive_int("ridge_points", ridge_points)
    seed_list = _seeds(seeds)
    betas = _betas(beta, ridge_points, task.default_beta)
    devices = 1
    if mesh is not None:
        axis, devices = mesh_axis(OWNER, mesh, None)

    names = tuple(space)
    traced = tuple(n for n in names if space[n].traced)
    static = tuple(n for n in names if not space[n].traced)
    if points is None:
        design = unit_design(sampler, draws, len(names), sampler_seed)
        values = {n: space[n].from_unit(design[:, i]) for i, n in enumerate(names)}
    else:
        values = _given_points(points, space)

    # trajectories: every seed with every draw (seed-major), grouped by
    # their static values (one compiled program per group)
    trajectories = [(s, d) for s in seed_list for d in range(draws)]
    groups: dict[tuple, list[int]] = {}
    for k, (_, d) in enumerate(trajectories):
        key = tuple((n, values[n][d]) for n in static)
        groups.setdefault(key, []).append(k)

    n_b, n_s = len(betas), len(seed_list)
    scores = np.full((len(trajectories), n_b), np.nan)
    status = np.zeros((len(trajectories), n_b), int)
    seconds = np.zeros(len(trajectories))
    total = len(trajectories) * n_b
    show = resolve(progress, total, min_steps=64)
    bar = ProgressBar(total, "search") if show else None
    done = 0
    try:
        for key, members in groups.items():
            static_kw = dict(fixed, **dict(key))
            example = _example(model_class, static_kw, traced, values, members,
                               trajectories)  # fmt: skip
            task.check_model(OWNER, example)
            width = _width(task.trajectory_bytes(example, n_b), len(members))
            # members are seed-major, with the same draws for every seed; a
            # row of a call is one seed and a block of its draws
            group_draws = [trajectories[k][1] for k in members[: len(members) // n_s]]
            per_call, per_row = _grid(n_s, len(group_draws), width, devices)
            width = min(width, per_row)
            rows = [
                (si, group_draws[b : b + per_row])
                for si in range(n_s)
                for b in range(0, len(group_draws), per_row)
            ]
            for start in range(0, len(rows), per_call):
                call = rows[start : start + per_call]
                grid = _padded(call, per_call)
                v = np.array(
                    [
                        [[values[n][d] for n in traced] for d in _padded(ds, per_row)]
                        for _, ds in grid
                    ],
                    float,
                ).reshape(per_call, per_row, len(traced))
                sd = np.array([seed_list[si] for si, _ in grid], np.int32)
                t0 = time.perf_counter()
                shared = (task, jnp.asarray(betas, example.dtype))
                members_ = (jnp.asarray(v, example.dtype), jnp.asarray(sd))
                if mesh is not None:  # laid out over the mesh's devices
                    shared, members_ = place_population(shared, members_, mesh, axis)
                out = _population.evaluate(
                    model_class, static_kw, traced, *shared, *members_, width,
                    mesh, backend=backend,
                )  # fmt: skip
                sc, st = (np.asarray(a) for a in jax.block_until_ready(out))
                n_call = sum(len(ds) for _, ds in call)
                dt = (time.perf_counter() - t0) / n_call
                for i, (si, ds) in enumerate(call):
                    for j, d in enumerate(ds):
                        k = si * draws + d  # trajectories are seed-major
                        scores[k], status[k], seconds[k] = sc[i, j], st[i, j], dt
                done += n_call * n_b
                if bar is not None:
                    bar.update(done)
    finally:
        if bar is not None:
            bar.close()

    rows = []
    columns = ["id", "trajectory", "seed", *names, "beta", task.metric, "score",
               "status", "reason", "seconds"]  # fmt: skip
    for k, (seed, d) in enumerate(trajectories):
        for b in range(n_b):
            code = int(status[k, b])
            row = {"id": len(rows), "trajectory": k, "seed": seed}
            row.update({n: _plain(values[n][d]) for n in names})
            row["beta"] = float(betas[b])
            failed = code not in (_population.OK, _population.ILL)
            row[task.metric] = float(scores[k, b])
            row["score"] = float(scores[k, b]) if not failed else float("nan")
            row["status"] = "failed" if failed else "ok"
            row["reason"] = reason(task, code)
            row["seconds"] = float(seconds[k] / n_b)
            rows.append(row)

    def rebuild(row):
        kw = dict(fixed)
        kw.update({n: row[n] for n in names})
        model = model_class(**kw, seed=row["seed"], construction="jax")
        with use_backend(backend) if backend else contextlib.nullcontext():
            return _population.train_one(model, task, row["beta"])

    log = {"beta"} | {n for n in names if isinstance(space[n], LogUniform)}
    return SearchResult(rows, columns, task.higher_is_better, rebuild, task.metric, log)


def _plain(v):
    if isinstance(v, (np.floating, float)):
        return float(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    return v


def _given_points(points, space) -> dict:
    """The values of each hyperparameter over the given ``points``."""
    for i, point in enumerate(points):
        if not isinstance(point, dict) or set(point) != set(space):
            got = sorted(point) if isinstance(point, dict) else type(point).__name__
            raise ValueError(
                f"{OWNER}: points[{i}] must give exactly the searched "
                f"hyperparameters {sorted(space)}, got {got}"
            )
    return {
        n: (np.array([float(p[n]) for p in points]) if space[n].traced
            else [p[n] for p in points])
        for n in space
    }  # fmt: skip


def _positive_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{OWNER}: {name} must be an int >= 1, got {value!r}")
    return int(value)


#: Draws of one seed evaluated together at least (where the seed has as
#: many): what depends on the seed alone is computed once for them
#: (:func:`._population.evaluate`), so more draws together share more.
SHARED_DRAWS = 8


def _grid(n_seeds: int, n_draws: int, width: int, devices: int) -> tuple[int, int]:
    """``(rows, draws)`` of each compiled call: a row is one seed and a block
    of ``draws`` of its draws (they share the seed's matrices). About eight
    calls per group (the progress bar's steps), blocks of ``SHARED_DRAWS``
    draws at least where the seed has as many, but enough rows to give
    each of the ``devices`` one, the rows a multiple of ``devices``, and
    every call of one shape (the last padded) so that one program serves
    them all."""
    per = math.ceil(n_seeds * n_draws / 8)
    per = max(width * devices, math.ceil(per / width) * width)
    draws = min(n_draws, max(SHARED_DRAWS, math.ceil(per / devices)))
    while draws > 1 and n_seeds * math.ceil(n_draws / draws) < devices:
        draws = math.ceil(draws / 2)
    total = n_seeds * math.ceil(n_draws / draws)
    rows = min(max(1, per // draws), total)
    return math.ceil(rows / devices) * devices, draws


def _padded(items: list, n: int) -> list:
    """``items`` filled to length ``n`` by repeating the last (whose result
    is not read)."""
    return items + [items[-1]] * (n - len(items))


def _example(model_class, static_kw, traced, values, members, trajectories):
    """A concrete model of the group (the first member's), for its shapes;
    refuses a traced hyperparameter that the model needs concrete (one that
    sets a shape or a static field: it cannot vary within one program)."""
    k = members[0]
    seed, d = trajectories[k]
    kw = dict(static_kw)
    kw.update({n: float(values[n][d]) for n in traced})
    try:
        model = model_class(**kw, seed=seed, construction="jax")
    except TypeError as err:
        raise TypeError(f"{OWNER}: building {model_class.__name__}: {err}") from err
    reference = eqx.partition(model, eqx.is_array)[1]
    for name in traced:

        def build(x, name=name):
            return eqx.filter(
                model_class(**dict(kw, **{name: x}), seed=seed, construction="jax"),
                eqx.is_array,
                inverse=True,
            )

        try:
            static = eqx.filter_eval_shape(build, jnp.asarray(kw[name], model.dtype))
            same = jax.tree.structure(static) == jax.tree.structure(reference)
        except (jax.errors.JAXTypeError, TypeError, ValueError):
            same = False
        if not same:
            raise ValueError(
                f"{OWNER}: {model_class.__name__} needs {name} as a concrete "
                "value (it sets a shape or a static field), so it cannot vary "
                "within one program: search it with orc.tune.Choice([...]) "
                "(one program per value)"
            )
    return model
