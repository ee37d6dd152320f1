"""A population of candidates trained and scored as one compiled program.

One *trajectory* is a model built from one seed and one draw of the traced
hyperparameters, trained by its task (:mod:`._task`) for every ridge
strength of the search: the reservoir is forced once over the training data
and its ridge statistics are solved for every strength from one
accumulation (:class:`orc._fit.RidgePath`); the task then scores every
strength at once (a forecaster's validation windows as one batched closed
loop, a classifier's validation features or a regressor's validation states
computed once and read by every strength's readout). The trajectories of a
call run in one program, as a grid of seeds times draws: the draws of one
seed share what depends on the seed alone (its matrices, drawn and scaled
to their spectral radius once), and run one after the other on a CPU, where
each uses the native kernels at full speed, or ``width`` at a time
(``vmap``) where memory allows on an accelerator.

Nothing a candidate does reaches its neighbours: the solve reports a result
code instead of raising (``throw=False``), outputs that fail (a diverged
forecast, predictions that are not finite) are scored as failed, and each
trajectory's arrays are its own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .. import _errors
from .._ridge import RESULTS
from .._shard import population_map
from .._strategy import compiled, resolve
from ._task import member

__all__ = [
    "evaluate",
    "train_one",
    "OK",
    "ILL",
    "NONFINITE",
    "DIVERGED",
    "NAN_SCORE",
    "FAILED",
]

#: Status codes of a candidate (the table's ``status``/``reason`` columns):
#: ``DIVERGED`` is a task's failed outputs (its ``output_failure``),
#: ``FAILED`` a ridge solve that gave no finite weights.
OK, ILL, NONFINITE, DIVERGED, NAN_SCORE, FAILED = 0, 1, 2, 3, 4, 5


def build(model_class, static_kw: dict, names: tuple, values, seed):
    """One candidate model: ``values`` (traced scalars, one per name in
    ``names``) and ``seed`` (a traced int) over ``static_kw``."""
    kw = dict(static_kw)
    kw.update(zip(names, values, strict=True))
    return model_class(**kw, seed=seed, construction="jax")


def _trajectory(model_class, static_kw, names, task, betas, backend, xs):
    values, seed = xs
    model = build(model_class, static_kw, names, values, seed)
    models, result = task.fit(model, betas, throw=False, backend=backend)
    scores, failed = task.evaluate(model, models)
    status = jnp.where(result == RESULTS.fallback, ILL, OK)
    status = jnp.where(failed, DIVERGED, status)
    status = jnp.where(jnp.isfinite(scores), status, NAN_SCORE)
    status = jnp.where(result == RESULTS.failed, FAILED, status)
    status = jnp.where(result == RESULTS.nonfinite, NONFINITE, status)
    return scores, status.astype(jnp.int32)


def train_one(model, task, beta):
    """``model`` trained on ``task`` for the ridge strength ``beta`` by the
    search's own solve (a path of one strength: the same weights the
    search scored), its checks raised as any trainer's."""
    models, _ = task.fit(model, jnp.asarray([beta], model.dtype))
    return member(models, 0)


@compiled
def evaluate(
    model_class, static_kw, names, task, betas, values, seeds, width, mesh=None
):
    """Scores and status codes ``(G, D, B)`` of ``G`` rows of ``D`` draws,
    each row one seed (``values`` ``(G, D, len(names))``, ``seeds``
    ``(G,)``; a seed may fill several rows), for the ``B`` ridge strengths
    ``betas``.

    The draws of a row are one loop whose seed is fixed: what depends on
    the seed alone (the reservoir's random pattern and values, its spectral
    radius by Arnoldi iteration, the input matrix and bias draws) is
    loop-invariant, and XLA computes it once per row, before the loop,
    instead of once per draw; each draw scales it. Measured on Lorenz63 at
    N = 500 (2 CPU cores): the draw and its Arnoldi iteration cost ~0.1 s of
    a ~0.6 s trajectory (``benchmarks/TUNE.md``).

    ``width`` draws at a time (``vmap``) where memory allows on an
    accelerator, one at a time on a CPU. With ``mesh`` (a
    :class:`jax.sharding.Mesh` of one axis, ``G`` a multiple of its size)
    the rows are shared out over its devices, each running its own with no
    communication (:func:`orc._shard.population_map`), and the scores are
    gathered at the end."""
    backend = resolve(None)

    def run(shared, members):
        task, betas = shared

        @_errors.loop_body  # its checks come back as codes, not host callbacks
        def one_seed(xs):
            draws, seed = xs

            @_errors.loop_body
            def one(v):
                return _trajectory(
                    model_class,
                    static_kw,
                    names,
                    task,
                    betas,
                    backend,
                    (tuple(v), seed),
                )

            batch = None if width == 1 else width
            return _errors.report_loop(*jax.lax.map(one, draws, batch_size=batch))

        return _errors.report_loop(*jax.lax.map(one_seed, members))

    if mesh is None:
        return run((task, betas), (values, seeds))
    return population_map(run, (task, betas), (values, seeds), mesh, mesh.axis_names[0])
