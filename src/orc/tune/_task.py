"""What a search optimises: a task holds the data and scores one trained
candidate (a population of them, under ``vmap``).

:class:`Forecast`: train on ``train``, then forecast ``windows`` windows of
``horizon`` samples of the held-out ``validation`` sequence in closed loop,
each from the state of the reservoir teacher-forced with the validation data
up to the window's start (at least ``warmup`` samples), and score them by
valid prediction time or NRMSE against the training data's scale.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .. import metrics
from .._validation import check_data, check_finite_rows, check_int, check_rank

__all__ = ["Forecast", "METRICS"]

#: Forecast scores: ``"vpt"`` (valid prediction time, higher is better) and
#: ``"nrmse"`` (over the horizon, lower is better).
METRICS = ("vpt", "nrmse")

#: A window whose forecast leaves this many times the training data's scale
#: (or is not finite) counts as diverged: its candidate fails.
DIVERGED_SCALE = 100.0


class Forecast(eqx.Module):
    """A forecasting task.

    Parameters
    ----------
    train : array ``(T, D)``
        The training sequence (teacher forcing, next-sample targets).
    validation : array ``(V, D)``
        Held out for scoring; never used to fit. Windows start at
        ``warmup``, ``warmup + stride``, ... and the last one ends at ``V``.
    spinup : int, default 100
        Training pairs discarded (the reservoir's transient).
    warmup : int, default 100
        Validation samples forced before the first window.
    horizon : int, default 500
        Samples forecast per window.
    windows : int, default 10
    metric : {"vpt", "nrmse"}, default "vpt"
    threshold : float, default 0.4
        The VPT's error threshold (:func:`orc.metrics.valid_prediction_time`).
    dt : float, default 1.0
    lyapunov_exponent : float, optional
        With it the VPT is in Lyapunov times, else in time units (``dt``).
    """

    train: Array
    validation: Array
    spinup: int = eqx.field(static=True)
    warmup: int = eqx.field(static=True)
    horizon: int = eqx.field(static=True)
    windows: int = eqx.field(static=True)
    metric: str = eqx.field(static=True)
    threshold: float = eqx.field(static=True)
    dt: float = eqx.field(static=True)
    lyapunov_exponent: float | None = eqx.field(static=True)

    def __init__(
        self,
        train,
        validation,
        *,
        spinup: int = 100,
        warmup: int = 100,
        horizon: int = 500,
        windows: int = 10,
        metric: str = "vpt",
        threshold: float = 0.4,
        dt: float = 1.0,
        lyapunov_exponent: float | None = None,
    ):
        owner = "orc.tune.Forecast"
        arrays = []
        for name, x in (("train", train), ("validation", validation)):
            x = check_data(name, x, owner, jnp.result_type(float))
            x = check_rank(name, x, 2, owner, "(T, D)")
            check_finite_rows(x, name, owner, "Remove or interpolate missing samples.")
            arrays.append(x)
        train, validation = arrays
        if train.shape[1] != validation.shape[1]:
            raise ValueError(
                f"{owner}: validation must have train's {train.shape[1]} columns, "
                f"got {validation.shape[1]}"
            )
        self.spinup = check_int("spinup", spinup, owner, minimum=0)
        self.warmup = check_int("warmup", warmup, owner, minimum=1)
        self.horizon = check_int("horizon", horizon, owner, minimum=2)
        self.windows = check_int("windows", windows, owner, minimum=1)
        if train.shape[0] < self.spinup + 2:
            raise ValueError(
                f"{owner}: train has {train.shape[0]} samples, fewer than spinup "
                f"({self.spinup}) + 2"
            )
        if validation.shape[0] < self.warmup + self.horizon:
            raise ValueError(
                f"{owner}: validation has {validation.shape[0]} samples, fewer than "
                f"warmup + horizon ({self.warmup} + {self.horizon})"
            )
        if metric not in METRICS:
            raise ValueError(
                f"{owner}: metric must be one of {METRICS}, got {metric!r}"
            )
        self.metric = metric
        self.threshold = float(threshold)
        self.dt = float(dt)
        self.lyapunov_exponent = (
            None if lyapunov_exponent is None else float(lyapunov_exponent)
        )
        self.train, self.validation = train, validation

    @property
    def higher_is_better(self) -> bool:
        return self.metric == "vpt"

    @property
    def starts(self) -> np.ndarray:
        """The first validation index of each window."""
        last = self.validation.shape[0] - self.horizon
        return np.unique(
            np.linspace(self.warmup, last, self.windows).round().astype(int)
        )

    def scale(self, dtype) -> Array:
        """The training data's scale: ``sqrt(mean_t ||u_t||^2)`` for the VPT
        (its normalised error), the standard deviation of all entries for
        the NRMSE."""
        u = self.train.astype(dtype)
        if self.metric == "vpt":
            return jnp.sqrt(jnp.mean(jnp.sum(u**2, axis=1)))
        return jnp.std(u)

    def truths(self, dtype) -> Array:
        """``(W, horizon, D)``: what each window should forecast."""
        idx = self.starts[:, None] + np.arange(self.horizon)[None]
        return self.validation.astype(dtype)[idx]

    def score(self, preds: Array, truths: Array, scale: Array):
        """``(score, diverged)`` of one candidate's window forecasts
        ``(W, horizon, D)``: the mean over windows, and whether a window
        left ``DIVERGED_SCALE`` times the data's scale (or is not finite)."""
        big = jnp.max(jnp.abs(preds), axis=(1, 2))
        diverged = jnp.any(~(big <= DIVERGED_SCALE * scale))
        if self.metric == "vpt":
            per = jax.vmap(
                lambda p, t: metrics.valid_prediction_time(
                    p,
                    t,
                    self.threshold,
                    self.dt,
                    self.lyapunov_exponent,
                    scale=scale,
                )
            )(preds, truths)
        else:
            per = jax.vmap(lambda p, t: metrics.nrmse(p, t, scale=scale))(preds, truths)
        return jnp.mean(per), diverged
