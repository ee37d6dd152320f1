"""Training forecasters: teacher forcing, then a ridge fit of the readout."""

from __future__ import annotations

import functools
import inspect
from typing import ClassVar, TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from .._defaults import ESN
from .._divergence import keep_data_scale
from .._errors import warn_at_caller
from .._fit import (
    AbstractTeacherForcing,
    check_model_type,
    fit,
    next_sample_forcing,
    options,
    ridge,
    start_states,
    teacher_forcing_arguments,
)
from .._validation import check_data, first_index
from .base import RCForecasterBase
from .models import (
    ORC_TIME_CONST,
    TIME_CONST_DT_WARN,
    TIME_CONST_PER_DT,
    CESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
    TimeConstantWarning,
)

__all__ = [
    "train_RCForecaster",
    "train_ESNForecaster",
    "train_CESNForecaster",
    "train_EnsembleESNForecaster",
]

Model = TypeVar("Model", bound=RCForecasterBase)


class Forecasting(AbstractTeacherForcing):
    """A forecaster's teacher-forced problem: the state after ``train_seq[t]``
    is regressed onto the next sample (or ``target_seq[t]``); ``force_kwargs``
    are per-sample arguments of ``model.force`` (``ts`` of a continuous
    model). Built by :func:`train_RCForecaster`.

    ``checked=False`` forces with the model's unchecked step
    (``_advance_seq``, discrete models): a search's candidates, whose data
    were checked once at its front and whose states may overflow, are
    scored as failed instead of stopping the program (:mod:`orc.tune`)."""

    owner: str = eqx.field(static=True)
    train_seq: Array
    target_seq: Array | None
    force_kwargs: dict
    init: Array
    spinup: int = eqx.field(static=True)
    multi: bool = eqx.field(static=True)
    checked: bool = eqx.field(static=True, default=True)

    check_fit: ClassVar[bool] = True

    @property
    def rows(self):
        return self.train_seq

    def forcing(self, model, noise):
        seq, _, targets = next_sample_forcing(
            self.owner, model.dtype, self.train_seq, self.target_seq
        )
        if noise is not None:
            seq = noise.perturb(seq)
        return (seq, self.force_kwargs), targets

    def force(self, model, inputs, state):
        seq, kwargs = inputs
        if not self.checked:
            return model._advance_seq(seq.astype(model.dtype), state)
        return model.force(seq, state, **kwargs)

    def solution(self, model, weights):
        """The model with the solved ``weights``, its readout recording the
        scale of the training targets (``data_scale``: a forecast is judged
        against it, :mod:`orc._divergence`)."""
        model = super().solution(model, weights)
        if self.target_seq is not None:
            targets = self.target_seq
        else:  # the next samples
            targets = self.train_seq[..., 1:, :]
        return keep_data_scale(model, targets)

    @property
    def pipelined(self) -> bool:
        return not self.force_kwargs

    def pipeline_input(self, model, inputs):
        return inputs[0]


def train_RCForecaster(
    model: Model,
    train_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = ESN.beta,
    batch_size: int | None = None,
    multi_sequence: bool = False,
    return_states: bool = True,
    progress: bool | None = None,
    input_noise: float = 0.0,
    state_noise: float = 0.0,
    noise_seed=0,
    backend: str | None = None,
    **force_kwargs,
) -> tuple[Model, Array]:
    """Train any forecaster's readout by teacher forcing and ridge regression.

    The reservoir is forced with ``train_seq``; the state after input ``t`` is
    regressed onto ``target_seq[t]`` (default: the next sample
    ``train_seq[t + 1]``), discarding the first ``spinup`` pairs.

    Data arguments (``train_seq``, ``target_seq``, ``initial_res_state``)
    are converted to the model's dtype: integer arrays and Python lists are
    accepted as in ORC 0.4, float data of a higher precision than the model
    warns (:class:`orc.PrecisionLossWarning`), bool and complex arrays raise
    ``TypeError`` (see :func:`orc._validation.check_data`).

    Parameters
    ----------
    model : RCForecasterBase
        Any forecaster, including custom subclasses.
    train_seq : Array
        ``(seq_len, data_dim)``, or ``(n_traj, seq_len, data_dim)`` with ``multi_sequence``.
    target_seq : Array, optional
        Same leading shape as ``train_seq``; ``target_seq[t]`` is the target of the
        state after ``train_seq[t]``. The reservoir is then also advanced with
        ``target_seq[-1]``, so the last returned state starts a forecast of what
        follows ``target_seq``.
    spinup : int, default 0
        Leading pairs discarded from the fit (per trajectory).
    initial_res_state : Array, optional
        Start state (default zeros); with ``multi_sequence`` one per trajectory.
    beta : float, optional
        Ridge regularisation (default ORC 0.4's), finite and ``>= 0`` (checked also when traced
        under ``jax.jit``). ``beta=0`` (plain least squares) is accepted with
        an :class:`orc.UnregularizedRidgeWarning`.
    batch_size : int, optional
        Solve the per-chunk regressions this many chunks at a time.
    multi_sequence : bool, default False
        Fit one readout on several trajectories (statistics are summed).
    return_states : bool, default True
        With ``False`` the state history is never stored: the regression
        statistics are accumulated block by block while the reservoir runs, so
        memory is ``O(n_features**2)`` whatever the length of ``train_seq``
        (streaming training), and the second return value is only the last
        state (per trajectory), from which a forecast can start. Not part of
        ORC 0.4's API. For continuous-time models each block is interpolated on
        its own samples, so results differ slightly from the stored-state fit.
    progress : bool, optional
        Show a progress bar on stderr (updated between blocks of 4096 steps).
        Default: only on a terminal and for 50000 steps or more;
        ``ORC_PROGRESS=0`` silences it. Not part of ORC 0.4's API.
    input_noise : float, default 0
        Standard deviation of Gaussian noise added to the forcing inputs (the
        targets stay clean): a regulariser that makes closed-loop forecasts
        more stable. Not part of ORC 0.4's API.
    state_noise : float, default 0
        Standard deviation of Gaussian noise added to the states where they
        enter the regression (the reservoir runs clean). Not part of ORC 0.4's API.
    noise_seed : int or PRNG key, default 0
        Seed of both noises.
    backend : {"native", "xla"}, optional
        How training runs: orc's native CPU kernels or XLA only; default the
        enclosing ``orc.use_backend`` block, else ``"xla"`` when ``ORC_NATIVE=0``
        is set and ``"native"`` otherwise. Part of the compiled program's
        identity (see :mod:`orc._strategy`). Not part of ORC 0.4's API.
    **force_kwargs
        Passed to ``model.force`` (``ts=`` for continuous models; with
        ``multi_sequence`` one row per trajectory).

    Returns
    -------
    (model, states) : the trained model and every teacher-forced state,
    ``(seq_len, *state_shape)`` (``(n_traj, seq_len, ...)`` with ``multi_sequence``;
    one more row when ``target_seq`` is given). ESN forecasters have
    ``state_shape = (chunks, res_dim)``. With ``return_states=False``:
    ``(model, last_state)``.

    Example
    -------
    >>> esn, R = train_RCForecaster(ESNForecaster(3, 500), U_train, spinup=100)
    """
    owner = "train_RCForecaster"
    check_model_type(owner, model, RCForecasterBase)
    seq, target, spinup, _ = teacher_forcing_arguments(
        owner, model, train_seq, target_seq, spinup, multi_sequence
    )
    init = start_states(owner, model, initial_res_state, seq)
    kwargs = _check_force_kwargs(owner, model, force_kwargs, seq, target is not None)
    model = _sampled_time_const(model, kwargs.get("ts"))
    _warn_time_const(owner, model, kwargs.get("ts"))
    problem = Forecasting(owner=owner, train_seq=seq, target_seq=target, force_kwargs=kwargs,
                          init=init, spinup=spinup, multi=seq.ndim == 3)  # fmt: skip
    solver = ridge(owner, beta, model.dtype, batch_size=batch_size, data=(seq,))
    opts = options(owner, model.dtype, return_states, progress, input_noise,
                   state_noise, noise_seed, backend)  # fmt: skip
    return fit(model, problem, solver, opts)


def _sampled_time_const(model, ts):
    """``model`` with its ``time_const`` set from the sampling where it was
    built with ``time_const="auto"`` (``time_const_per_dt = factor``; see
    :class:`CESNForecaster`): ORC 0.4's 50 where ``50 dt`` stays within
    ``TIME_CONST_DT_WARN``, else ``factor / dt``. ``dt`` is the mean spacing of
    the (first trajectory's) training times, also when traced. Times that are
    not increasing leave it unchanged (the forcing then reports them)."""
    factor = getattr(model, "time_const_per_dt", None)
    if factor is None or ts is None:
        return model
    old = model.driver.time_const
    gamma = _auto_time_const(_sample_spacing(ts, old.dtype), old, float(factor))
    return eqx.tree_at(lambda m: m.driver.time_const, model, gamma)


@functools.partial(jax.jit, static_argnums=2)
def _auto_time_const(dt, old, factor: float):
    """The rate of :func:`_sampled_time_const` from the spacing ``dt``: one
    small program per dtype (its dozen operations run eagerly compiled a
    program each, ~1 s before a CESN's first training)."""
    gamma = _significant(factor / dt, 9 if old.dtype == jnp.float64 else 6)
    orcs = jnp.asarray(ORC_TIME_CONST, old.dtype)
    gamma = jnp.where(orcs * dt > TIME_CONST_DT_WARN, gamma, orcs)
    return jnp.where(jnp.isfinite(gamma) & (dt > 0), gamma, old)


def _significant(x, digits):
    """``x`` rounded to ``digits`` significant digits, so that the rounding
    error of a sum of sample spacings does not reach the value (``0.5 / dt``
    for ``dt = 0.25`` is 2 exactly, in float64 with 9 digits and in float32
    with 6)."""
    # the power of ten from a table of correctly rounded constants, not from
    # a pow() whose last bit may differ from one platform to another
    exponent = digits - 1 - jnp.floor(jnp.log10(jnp.abs(x)))
    exponent = jnp.clip(jnp.where(jnp.isfinite(exponent), exponent, 0), -30, 30)
    powers = jnp.asarray([10.0**k for k in range(-30, 31)], x.dtype)
    scale = powers[exponent.astype(jnp.int32) + 30]
    return jnp.round(x * scale) / scale


def _sample_spacing(ts, dtype):
    """The mean spacing of the (first trajectory's) times ``ts`` (on the host
    when they are concrete: the same IEEE operations, no programs)."""
    xp = jnp if isinstance(ts, jax.core.Tracer) else np
    first = xp.reshape(xp.asarray(ts), (-1, ts.shape[-1]))[0].astype(dtype)
    return (first[-1] - first[0]) / xp.asarray(first.shape[0] - 1, dtype)


def _warn_time_const(owner, model, ts) -> None:
    """:class:`TimeConstantWarning` when a continuous ESN's fixed
    ``time_const`` times the spacing of concrete training times exceeds
    ``TIME_CONST_DT_WARN`` (traced times: no check)."""
    if not isinstance(model, CESNForecaster) or ts is None:
        return
    if isinstance(ts, jax.core.Tracer) or isinstance(
        model.driver.time_const, jax.core.Tracer
    ):
        return
    dt = float(_sample_spacing(ts, model.driver.time_const.dtype))
    gamma = float(model.driver.time_const)
    if np.isfinite(dt) and dt > 0 and gamma * dt > TIME_CONST_DT_WARN:
        warn_at_caller(
            f"{owner}: {type(model).__name__}'s time_const * dt = {gamma * dt:.3g} "
            f"(time_const {gamma:.3g}, "
            f"training samples {dt:.3g} apart): the reservoir relaxes within a "
            "small fraction of a sample, nearly memoryless and its ODE stiff; "
            "forecasts tend to leave the attractor. time_const='auto' sets it from "
            f"the sampling ({TIME_CONST_PER_DT / dt:.3g} here).",
            TimeConstantWarning,
        )


def _check_t_train(owner, model, t_train, train_seq, has_target):
    """``t_train``: real numbers, one time per sample of ``train_seq`` (one
    more with a ``target_seq``, the time of its appended last row), finite and
    strictly increasing (checked here when concrete, naming ``t_train``; traced
    times are checked by the forcing). A ``train_seq`` that is not a sequence
    of samples is left to :func:`train_RCForecaster`, which names it."""
    t_train = check_data("t_train", t_train, owner, model.dtype)
    shape = getattr(train_seq, "shape", None)
    if shape is None or len(shape) < 2 or 0 in shape:
        return t_train
    lead = tuple(shape)[:-1]
    expected = lead[:-1] + (lead[-1] + 1,) if has_target else lead
    if tuple(t_train.shape) != expected:
        raise ValueError(
            f"{owner}: t_train must have shape {expected}, got {tuple(t_train.shape)}"
        )
    if not isinstance(t_train, jax.core.Tracer):
        times = np.asarray(t_train)
        bad = ~np.isfinite(times)
        bad[..., 1:] |= np.diff(times, axis=-1) <= 0
        if bad.any():
            where = first_index(bad)
            raise ValueError(
                f"{owner}: t_train must be finite and strictly increasing; "
                f"t_train[{', '.join(map(str, where))}] = {float(times[where])} breaks it"
            )
    return t_train


def _check_force_kwargs(owner, model, force_kwargs, train_seq, has_target):
    """Extra ``force`` arguments must be accepted by ``model.force`` and be
    per-sample arrays (e.g. ``ts``), since training forces the sequence in blocks."""
    params = inspect.signature(type(model).force).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    length = train_seq.shape[-2] + (1 if has_target else 0)
    lead = train_seq.shape[:-2] + (length,)
    checked = {}
    for name, value in force_kwargs.items():
        if name not in params and not takes_any:
            raise TypeError(
                f"{owner}: {type(model).__name__}.force() got an unexpected keyword "
                f"argument {name!r}"
            )
        value = jnp.asarray(value) if not hasattr(value, "shape") else value
        if tuple(value.shape[: len(lead)]) != tuple(lead):
            raise ValueError(
                f"{owner}: force argument {name!r} must have one entry per sample, "
                f"leading shape {tuple(lead)}, got {tuple(value.shape)}"
            )
        checked[name] = value
    return checked


_OPTIONS = (
    "return_states",
    "progress",
    "input_noise",
    "state_noise",
    "noise_seed",
    "backend",
)


def _options(owner, options):
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise TypeError(
            f"{owner}: unexpected keyword argument(s) {unknown}; the typed training "
            f"functions accept {list(_OPTIONS)}"
        )
    return options


def train_ESNForecaster(
    model: ESNForecaster,
    train_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = ESN.beta,
    batch_size: int | None = None,
    multi_sequence: bool = False,
    **options,
) -> tuple[ESNForecaster, Array]:
    """:func:`train_RCForecaster` for an :class:`ESNForecaster` (type-checked).

    ``options``: the keyword-only extras of :func:`train_RCForecaster`
    (``return_states``, ``progress``, ``input_noise``, ``state_noise``, ``noise_seed``).
    """
    check_model_type("train_ESNForecaster", model, ESNForecaster)
    return train_RCForecaster(
        model, train_seq, target_seq, spinup, initial_res_state, beta, batch_size,
        multi_sequence,
        **_options("train_ESNForecaster", options),
    )  # fmt: skip


def train_CESNForecaster(
    model: CESNForecaster,
    train_seq: Array,
    t_train: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = ESN.beta,
    batch_size: int | None = None,
    multi_sequence: bool = False,
    **options,
) -> tuple[CESNForecaster, Array]:
    """Train a :class:`CESNForecaster` on samples ``train_seq`` taken at times ``t_train``.

    ``t_train`` is ``(seq_len,)`` (``(n_traj, seq_len)`` with ``multi_sequence``).
    With ``target_seq`` given, ``t_train`` needs one more time than ``train_seq``
    (the time of the appended last target). ``options``: as for
    :func:`train_ESNForecaster`.
    """
    owner = "train_CESNForecaster"
    check_model_type(owner, model, CESNForecaster)
    t_train = _check_t_train(owner, model, t_train, train_seq, target_seq is not None)
    return train_RCForecaster(
        model, train_seq, target_seq, spinup, initial_res_state, beta, batch_size,
        multi_sequence,
        ts=t_train,
        **_options("train_CESNForecaster", options),
    )  # fmt: skip


def train_EnsembleESNForecaster(
    model: EnsembleESNForecaster,
    train_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = ESN.beta,
    batch_size: int | None = None,
    multi_sequence: bool = False,
    **options,
) -> tuple[EnsembleESNForecaster, Array]:
    """:func:`train_RCForecaster` for an :class:`EnsembleESNForecaster` (type-checked).

    ``options``: as for :func:`train_ESNForecaster`.
    """
    check_model_type("train_EnsembleESNForecaster", model, EnsembleESNForecaster)
    return train_RCForecaster(
        model, train_seq, target_seq, spinup, initial_res_state, beta, batch_size,
        multi_sequence,
        **_options("train_EnsembleESNForecaster", options),
    )  # fmt: skip
