"""Gradient refinement of a search's best candidates.

The continuous hyperparameters (spectral radius, leak rate, input scaling,
bias, ridge strength) are refined by gradient descent (optax's Adam) on a
differentiable validation loss, through the reservoir's build, the
teacher-forced training and its ridge solve: every one of these is a JAX
function of the hyperparameters (DESIGN.md §3: everything that varies is
data). The loss of a candidate on a :class:`Forecast` task is the mean
squared error, in units of the training data's scale, of

* its closed-loop forecasts of ``horizon`` steps from each validation
  window's start (short, so that the gradient of a chaotic forecast stays
  informative), plus
* ``teacher_weight`` times its one-step (teacher-forced) predictions over
  the validation data after the warm-up.

Each start (a row of a search, with its seed) is refined on its own, all of
them in one compiled step (``vmap``). Each parameter is optimised in an
unconstrained form: the logarithm of the positive ones, the logit of the
leak rate, the bias as it is.
"""

from __future__ import annotations

from collections.abc import Mapping

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._progress import ProgressBar, resolve
from ..forecaster.base import RCForecasterBase
from ..forecaster.train import train_RCForecaster
from ._task import Forecast

__all__ = ["refine", "RefineResult", "REFINABLE", "loss_function", "validation_loss"]

OWNER = "orc.tune.refine"

#: The hyperparameters refined, with their unconstrained form (to, from).
REFINABLE = {
    "Wr_spectral_radius": (jnp.log, jnp.exp),
    "leak_rate": (jax.scipy.special.logit, jax.nn.sigmoid),
    "embedding_scaling": (jnp.log, jnp.exp),
    "bias": (lambda x: x, lambda x: x),
    "beta": (jnp.log, jnp.exp),
}


def _optax():
    try:
        import optax
    except ImportError as err:  # an optional extra
        raise ImportError(f"{OWNER} needs optax: pip install 'orc[tune]'") from err
    return optax


class RefineResult:
    """What :func:`refine` found, per start: ``points`` (the refined
    hyperparameters, with ``seed`` and ``beta``), ``start_loss`` and
    ``loss`` (the validation loss at the start and at the refined point),
    ``history`` ``(steps + 1, starts)`` (the loss at every step, NaN where
    a step failed) and ``models`` (each refined point trained by
    ``train_RCForecaster``, made on first use)."""

    def __init__(self, points, start_loss, loss, history, rebuild):
        self.points = points
        self.start_loss = start_loss
        self.loss = loss
        self.history = history
        self._rebuild = rebuild
        self._models = None

    @property
    def models(self):
        if self._models is None:
            self._models = [self._rebuild(p) for p in self.points]
        return self._models

    def __repr__(self) -> str:
        pairs = ", ".join(
            f"{a:.3g} -> {b:.3g}"
            for a, b in zip(self.start_loss, self.loss, strict=True)
        )
        return f"RefineResult(validation loss {pairs})"


def validation_loss(model, task: Forecast, beta, horizon: int, teacher_weight):
    """The differentiable validation loss of ``model`` trained on ``task``
    with ridge strength ``beta`` (see the module doc)."""
    trained, _ = train_RCForecaster(model, task.train, spinup=task.spinup, beta=beta)
    dtype = trained.dtype
    u = task.train.astype(dtype)
    scale2 = jnp.mean(jnp.sum(u**2, axis=1))
    val = task.validation.astype(dtype)
    states = trained._advance_seq(val, trained.driver.default_state())
    starts = np.asarray(task.starts)
    windows = val[starts[:, None] + np.arange(horizon)[None]]
    preds = jax.vmap(lambda r: trained._closed_loop_scan(horizon, r))(
        states[starts - 1]
    )
    closed = jnp.mean(jnp.sum((preds - windows) ** 2, axis=-1)) / scale2
    w = task.warmup
    one_step = trained.readout.batch_readout(states[w - 1 : -1])
    teacher = jnp.mean(jnp.sum((one_step - val[w:]) ** 2, axis=-1)) / scale2
    return closed + teacher_weight * teacher


def loss_function(model_class, task, names, static_kw, horizon, teacher_weight):
    """``loss(theta, seed, task=task)``: the validation loss of the candidate
    whose hyperparameters ``names`` have the unconstrained values ``theta``.
    Under ``jit`` pass ``task`` as an argument: closed over, its data would
    be constants of the program, which XLA then folds at compile time."""
    model_names = [n for n in names if n != "beta"]

    def loss(theta, seed, task=task):
        values = {n: REFINABLE[n][1](theta[i]) for i, n in enumerate(names)}
        kw = dict(static_kw, **{n: values[n] for n in model_names})
        model = model_class(**kw, seed=seed, construction="jax")
        return validation_loss(model, task, values["beta"], horizon, teacher_weight)

    return loss


def refine(
    model_class,
    task: Forecast,
    start,
    *,
    fixed: dict | None = None,
    steps: int = 30,
    learning_rate: float = 0.05,
    horizon: int = 20,
    teacher_weight: float = 1.0,
    progress: bool | None = None,
) -> RefineResult:
    """Refine the continuous hyperparameters of ``start`` by gradient descent
    on a validation loss (see the module doc).

    Parameters
    ----------
    model_class : the searched forecaster class (built with
        ``construction="jax"``).
    task : :class:`Forecast`
    start : a row of :func:`search` (``result.best``) or a list of rows
        (e.g. the best few): each gives ``seed``, ``beta`` and the
        hyperparameters; those of :data:`REFINABLE` are refined, the others
        (e.g. ``res_dim`` of a ``Choice``) are kept, like ``fixed``.
    fixed : dict, optional
        The other constructor arguments (``data_dim``, ``res_dim``, ...).
    steps : int, default 30
        Adam steps. The point with the lowest loss seen is returned.
    learning_rate : float, default 0.05
        In the unconstrained parameters (a step of 0.05 in ``log beta``
        changes ``beta`` by 5%).
    horizon : int, default 20
        Closed-loop steps per window in the loss (at most ``task.horizon``).
    teacher_weight : float, default 1.0
    """
    optax = _optax()
    if not (
        isinstance(model_class, type) and issubclass(model_class, RCForecasterBase)
    ):
        raise TypeError(
            f"{OWNER}: model_class must be a forecaster class, got {model_class!r}"
        )
    if not isinstance(task, Forecast):
        raise TypeError(f"{OWNER}: task must be an orc.tune.Forecast, got {task!r}")
    starts = [start] if isinstance(start, Mapping) else list(start)
    if not starts or not all(isinstance(s, Mapping) for s in starts):
        raise TypeError(f"{OWNER}: start must be a search row (dict) or a list of rows")
    names = [n for n in REFINABLE if n in starts[0]]
    if "beta" not in names or "seed" not in starts[0]:
        raise ValueError(
            f"{OWNER}: each start must give 'seed' and 'beta' (a search row)"
        )
    other = {
        k: v for k, v in starts[0].items() if k not in names and k not in _ROW_KEYS
    }
    for i, s in enumerate(starts):
        others = {k: v for k, v in s.items() if k not in names and k not in _ROW_KEYS}
        if [n for n in REFINABLE if n in s] != names or others != other:
            raise ValueError(
                f"{OWNER}: start[{i}] must refine the same hyperparameters {names} "
                f"and keep the same others {other} as start[0]"
            )
    steps = _count("steps", steps, 0)
    horizon = _count("horizon", horizon, 1)
    if horizon > task.horizon:
        raise ValueError(
            f"{OWNER}: horizon ({horizon}) must be <= task.horizon ({task.horizon})"
        )
    static_kw = dict(fixed or {}, **other)
    model_names = [n for n in names if n != "beta"]

    loss = loss_function(model_class, task, names, static_kw, horizon, teacher_weight)

    theta0 = jnp.asarray(
        [[REFINABLE[n][0](jnp.asarray(float(s[n]))) for n in names] for s in starts]
    )
    seeds = jnp.asarray([int(s["seed"]) for s in starts], jnp.int32)
    opt = optax.adam(learning_rate)

    @eqx.filter_jit
    def step(theta, state, seeds, task):
        value_and_grad = jax.vmap(jax.value_and_grad(loss), in_axes=(0, 0, None))
        value, grad = value_and_grad(theta, seeds, task)
        ok = jnp.isfinite(value) & jnp.all(jnp.isfinite(grad), axis=1)
        grad = jnp.where(ok[:, None], grad, 0.0)
        # optax mixes its int32 step count with floats: standard promotion
        # for its update, whatever the user's setting (a local context)
        with jax.numpy_dtype_promotion("standard"):
            updates, new_state = opt.update(grad, state, theta)
        new_theta = jnp.where(ok[:, None], optax.apply_updates(theta, updates), theta)
        return value, new_theta, new_state

    theta, state = theta0, opt.init(theta0)
    history = []
    best_theta, best_loss = np.asarray(theta0), np.full(len(starts), np.inf)
    show = resolve(progress, steps + 1, min_steps=20)
    bar = ProgressBar(steps + 1, "refine") if show else None
    try:
        for k in range(steps + 1):
            value, new_theta, state = step(theta, state, seeds, task)
            v = np.asarray(value)
            better = np.isfinite(v) & (v < best_loss)
            best_theta = np.where(better[:, None], np.asarray(theta), best_theta)
            best_loss = np.where(better, v, best_loss)
            history.append(np.where(np.isfinite(v), v, np.nan))
            theta = new_theta
            if bar is not None:
                bar.update(k + 1)
    finally:
        if bar is not None:
            bar.close()

    points = []
    for i, s in enumerate(starts):
        p = dict(other)
        p.update(
            {n: float(REFINABLE[n][1](best_theta[i, j])) for j, n in enumerate(names)}
        )
        p["seed"] = int(s["seed"])
        points.append(p)

    def rebuild(p):
        kw = dict(static_kw, **{n: p[n] for n in model_names})
        model = model_class(**kw, seed=p["seed"], construction="jax")
        trained, _ = train_RCForecaster(
            model, task.train, spinup=task.spinup, beta=p["beta"]
        )
        return trained

    history = np.asarray(history)
    return RefineResult(points, history[0], best_loss, history, rebuild)


#: Keys of a search row that are not hyperparameters.
_ROW_KEYS = frozenset(
    {"id", "trajectory", "seed", "score", "status", "reason", "seconds", "vpt", "nrmse"}
)


def _count(name, value, minimum):
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{OWNER}: {name} must be an int >= {minimum}, got {value!r}")
    return value
