"""A population of candidates trained and scored as one compiled program.

One *trajectory* is a model built from one seed and one draw of the traced
hyperparameters: the reservoir is forced once over the training data and its
ridge statistics are solved for every ridge strength of the search from one
factorisation (:class:`orc._fit.RidgePath`); the validation data are forced
once, and the closed-loop forecasts of every strength x window run as one
batched loop (``vmap``). The trajectories of a chunk run in one program
(``lax.map``): one after the other on a CPU, where each uses the native
kernels at full speed, or ``width`` at a time (``vmap``) where memory
allows on an accelerator.

Nothing a candidate does reaches its neighbours: the solve reports a result
code instead of raising (``fit(..., throw=False)``), a forecast that leaves
the data's scale is scored as diverged, and each trajectory's arrays are its
own.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._fit import Options, RidgePath, fit
from .._ridge import RESULTS
from .._strategy import compiled, resolve
from ..forecaster.train import Forecasting

__all__ = [
    "evaluate",
    "train_one",
    "trajectory_bytes",
    "OK",
    "ILL",
    "NONFINITE",
    "DIVERGED",
]

OWNER = "orc.tune.search"

#: Status codes of a candidate (the table's ``status``/``reason`` columns).
OK, ILL, NONFINITE, DIVERGED, NAN_SCORE = 0, 1, 2, 3, 4


def build(model_class, static_kw: dict, names: tuple, values, seed):
    """One candidate model: ``values`` (traced scalars, one per name in
    ``names``) and ``seed`` (a traced int) over ``static_kw``."""
    kw = dict(static_kw)
    kw.update(zip(names, values, strict=True))
    return model_class(**kw, seed=seed, construction="jax")


def _trajectory(model_class, static_kw, names, task, betas, backend, xs):
    values, seed = xs
    model = build(model_class, static_kw, names, values, seed)
    dtype = model.dtype
    init = model.driver.default_state()
    problem = Forecasting(owner=OWNER, train_seq=task.train.astype(dtype),
                          target_seq=None, force_kwargs={}, init=init,
                          spinup=task.spinup, multi=False,
                          checked=False)  # fmt: skip
    opts = Options(keep_states=True, progress=False, backend=backend)
    models, _, result = fit(
        model, problem, RidgePath(betas.astype(dtype)), opts, throw=False
    )
    # every window starts from the state forced with the validation data
    # before it: one teacher-forced pass, shared by every strength
    states = model._advance_seq(task.validation.astype(dtype), init)
    starts = states[np.asarray(task.starts) - 1]
    truths, scale = task.truths(dtype), task.scale(dtype)

    def per_strength(readout):
        m = model.set_readout(readout)
        preds = jax.vmap(lambda r: m._closed_loop_scan(task.horizon, r))(starts)
        return task.score(preds, truths, scale)

    scores, diverged = eqx.filter_vmap(per_strength)(models.readout)
    status = jnp.where(result == RESULTS.fallback, ILL, OK)
    status = jnp.where(diverged, DIVERGED, status)
    status = jnp.where(jnp.isfinite(scores), status, NAN_SCORE)
    status = jnp.where(result == RESULTS.nonfinite, NONFINITE, status)
    return scores, status.astype(jnp.int32)


def train_one(model, task, beta):
    """``model`` trained on ``task`` for the ridge strength ``beta`` by the
    search's own solve (a path of one strength: the same weights the
    search scored), its checks raised as any trainer's."""
    dtype = model.dtype
    problem = Forecasting(owner=OWNER, train_seq=task.train.astype(dtype),
                          target_seq=None, force_kwargs={},
                          init=model.driver.default_state(), spinup=task.spinup,
                          multi=False)  # fmt: skip
    solver = RidgePath(jnp.asarray([beta], dtype))
    opts = Options(keep_states=True, progress=False)  # the search's path
    models, _ = fit(model, problem, solver, opts)
    return jax.tree.map(lambda a: a[0] if eqx.is_array(a) else a, models)


@compiled
def evaluate(model_class, static_kw, names, task, betas, values, seeds, width):
    """Scores and status codes ``(K, B)`` of ``K`` trajectories (``values``
    ``(K, len(names))``, ``seeds`` ``(K,)``) for the ``B`` ridge strengths
    ``betas``, ``width`` trajectories at a time."""
    backend = resolve(None)

    def one(xs):
        v, s = xs
        return _trajectory(
            model_class, static_kw, names, task, betas, backend, (tuple(v), s)
        )

    return jax.lax.map(one, (values, seeds), batch_size=None if width == 1 else width)


def trajectory_bytes(model, task, n_betas: int) -> int:
    """Memory one trajectory holds at once: the stored training states and
    validation states, the statistics and their factorisation, the weights
    and the batched forecasts (with their states)."""
    item = np.dtype(model.dtype).itemsize
    state = int(np.prod(model.driver.default_state().shape))
    feats = state  # features of a linear readout; a quadratic one as many
    chunks = max(int(getattr(model, "chunks", 1) or 1), 1)
    per_chunk = feats // chunks
    t, v = task.train.shape[0], task.validation.shape[0]
    d = task.train.shape[1]
    w = len(task.starts)
    total = (
        (t + v) * state
        + 4 * chunks * per_chunk**2
        + n_betas * chunks * d * per_chunk
        + n_betas * w * (task.horizon * d + 2 * state)
    )
    return int(total * item)
