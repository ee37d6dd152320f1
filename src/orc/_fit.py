"""The training front: ``fit(model, problem, solver, options)``.

Every teacher-forced trainer (:func:`orc.forecaster.train_RCForecaster`,
:func:`orc.control.train_RCController`, :func:`orc.regression.train_RCRegressor`
and the typed ``train_*`` around them) is a thin function that builds three
checked objects and calls :func:`fit`:

* a **problem** (a final subclass of :class:`AbstractTeacherForcing`, written
  beside its model family): which sequences force the reservoir, which rows
  are regressed onto which targets, how the model is forced and how the
  solution is put into it. Its arguments are checked once, when it is built
  (:func:`teacher_forcing_arguments`);
* a **solver** (lineax-style, :class:`AbstractRidgeSolver`): :class:`Ridge`
  for one ridge strength, :class:`RidgePath` for many strengths sharing one
  factorisation of each Gram. ``beta`` is checked and converted once, in
  :func:`ridge`;
* the **options** of the run (:class:`Options`: keep the history, progress,
  noise, backend).

:func:`fit` runs one compiled program (``_fit``): the reservoir forced over
the data with the ridge statistics accumulated (``orc._training``), then
``solver.weights(stats)``. Errors found while it runs (NaN data, a singular
solve) come back as result codes and are raised or warned when the call
returns (:mod:`orc._errors`); :meth:`AbstractRidgeSolver.compute` gives them
as a value instead (``RESULTS``), which a search over many candidates uses.
"""

from __future__ import annotations

import abc
import numbers
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from . import _errors, _progress
from ._kernels import current
from ._ridge import (
    _FAILED,
    _FALLBACK,
    _NONFINITE,
    _SUCCESSFUL,
    RESULTS,
    RidgeStats,
    _as_result,
    _solve_coded,
    solve,
    symmetric,
)
from ._shard import fit_sharded, placement
from ._strategy import compiled, full_precision
from ._training import (
    check_initial_state,
    initial_states,
    teacher_forced_statistics,
    training_noise,
    warn_poor_fit,
)
from ._validation import (
    argument_array,
    check_beta,
    check_data,
    check_finite,
    check_finite_rows,
    check_int,
    check_last_dim,
    check_rank,
    check_spinup,
    warn_zero_beta,
)

__all__ = [
    "AbstractRidgeSolver",
    "Ridge",
    "RidgePath",
    "ridge",
    "AbstractTeacherForcing",
    "teacher_forcing_arguments",
    "start_states",
    "next_sample_forcing",
    "finite_sequence",
    "Options",
    "options",
    "fit",
    "solved",
    "check_model_type",
    "check_flag",
]

# --------------------------------------------------------------------------- #
# Solvers
# --------------------------------------------------------------------------- #


class AbstractRidgeSolver(eqx.Module):
    """How readout weights are solved from accumulated ridge statistics.

    ``compute(stats)`` returns ``(weights, result)`` and raises nothing
    (``result`` a :class:`orc._ridge.RESULTS` item); ``weights(stats)`` is the
    front's form: a failed solve raises and a fallback warns, through orc's
    error mechanism (also under ``jax.jit``).

    ``population``: whether the weights have a leading axis of candidate
    solutions (one per ridge strength), so that :func:`fit` returns a stacked
    population of models.
    """

    population: ClassVar[bool] = False

    @abc.abstractmethod
    def compute(self, stats: RidgeStats) -> tuple[Array, RESULTS]:
        """Weights ``([C,] O, F)`` and how the solve went."""

    @abc.abstractmethod
    def weights(self, stats: RidgeStats) -> Array:
        """Weights ``([C,] O, F)``; errors raised, fallbacks warned."""


class Ridge(AbstractRidgeSolver):
    """One ridge strength: ``W = Y^T F (F^T F + beta I)^{-1}`` by Cholesky
    (minimum-norm fallback where ``G + beta I`` is not numerically positive
    definite; see :mod:`orc._ridge`). Build it with :func:`ridge`, which
    checks ``beta``.

    ``batch_size``: chunks solved at a time; ``intercept``: feature 0 is the
    constant 1 and its weight (the output bias) is not penalised.
    """

    beta: Array
    batch_size: int | None = eqx.field(static=True, default=None)
    intercept: bool = eqx.field(static=True, default=False)

    def compute(self, stats: RidgeStats) -> tuple[Array, RESULTS]:
        w, code = _solve_coded(stats, self.beta, self.batch_size, self.intercept)
        return w, _as_result(code)

    def weights(self, stats: RidgeStats) -> Array:
        return solve(
            stats, self.beta, batch_size=self.batch_size, intercept=self.intercept
        )


#: From this many strengths on, :class:`RidgePath` solves them from one
#: eigendecomposition of each Gram; below it, one Cholesky solve per strength
#: (:class:`Ridge`'s). Measured on 2 CPU cores (jax 0.10.2, float64, native
#: solve): ``eigh`` of a 200/500/1000-feature Gram costs 14/70/38 Cholesky
#: solves (21/483/2168 ms against 1.5/6.8/57 ms), so eight strengths cost
#: 12/54/456 ms one by one and 166/407/2955 ms by the eigendecomposition.
EIGH_MIN_STRENGTHS = 64


class RidgePath(AbstractRidgeSolver):
    """Many ridge strengths solved from one accumulation of the statistics.

    The reservoir is run and its statistics accumulated once; each strength
    is then solved by :class:`Ridge`'s Cholesky solve (the same bits as a
    training with that one strength, its minimum-norm fallback included).
    From :data:`EIGH_MIN_STRENGTHS` strengths on, one eigendecomposition of
    each Gram solves them all instead: with ``G = V diag(lam) V^T`` and
    ``C = F^T Y``, the weights for every ``beta`` are ``(V diag(1 / (lam +
    beta)) V^T C)^T``, an ``O(F^2 O)`` product per strength after one
    ``O(F^3)`` factorisation (statistics in QR form, float32 models with x64
    off, use the SVD of their ``R`` factor, which keeps the QR form's
    accuracy; directions where ``lam + beta`` is not above the factor's
    rounding level are dropped, the minimum-norm solution, reported as
    ``fallback``). An eigendecomposition costs tens of Cholesky solves on a
    CPU, hence the threshold.

    ``intercept`` (as :class:`Ridge`'s: feature 0 is the constant 1, its
    weight not penalised, a regressor's ``readout_bias``) solves every
    strength by :class:`Ridge`'s Cholesky solve, however many.

    ``compute`` and ``weights`` return ``(B, [C,] O, F)`` for ``B``
    strengths; ``compute``'s result has shape ``(B,)``. This is the solver a
    hyperparameter search over ``beta`` uses (:mod:`orc.tune`).
    """

    betas: Array
    intercept: bool = eqx.field(static=True, default=False)

    population: ClassVar[bool] = True

    def _coded(self, stats: RidgeStats) -> tuple[Array, Array]:
        betas = jnp.asarray(self.betas, stats.gram.dtype)
        if betas.shape[0] < EIGH_MIN_STRENGTHS or self.intercept:
            return jax.lax.map(
                lambda b: _solve_coded(stats, b, None, self.intercept), betas
            )
        with full_precision():
            w, code = _path(stats, betas)
        if stats.weights_dtype is not None:
            w = w.astype(stats.weights_dtype)
        return w, code

    def compute(self, stats: RidgeStats) -> tuple[Array, RESULTS]:
        w, code = self._coded(stats)
        return w, jax.vmap(_as_result)(code)

    def weights(self, stats: RidgeStats) -> Array:
        w, code = self._coded(stats)
        _errors.warn(
            jnp.any(code == _FALLBACK),
            RESULTS[RESULTS.fallback],
            _fallback_warning(),
        )
        bad = code >= _FAILED
        return _errors.check_index(
            w,
            jnp.any(bad),
            jnp.any(code == _NONFINITE).astype(jnp.int32),
            (RESULTS[RESULTS.failed], RESULTS[RESULTS.nonfinite]),
        )


def _fallback_warning():
    from ._ridge import IllConditionedRidgeWarning

    return IllConditionedRidgeWarning


def _path(stats: RidgeStats, betas: Array) -> tuple[Array, Array]:
    """Weights ``(B, [C,] O, F)`` and severity codes ``(B,)`` (the most
    severe over chunks) of every strength in ``betas``."""
    g, c = stats.gram, stats.cross
    finite = jnp.all(jnp.isfinite(g)) & jnp.all(jnp.isfinite(c))
    eps = jnp.finfo(g.dtype).eps
    f = g.shape[-1]
    if stats.form == "qr":
        # G = R^T R = V S^2 V^T, C = R^T z: V^T C = S U^T z
        u, s, vt = jnp.linalg.svd(jnp.nan_to_num(g), full_matrices=False)
        lam = s**2
        proj = s[..., :, None] * jnp.matmul(
            jnp.swapaxes(u, -1, -2), jnp.nan_to_num(c), precision="highest"
        )
        level = (eps * f * jnp.max(s, -1, keepdims=True)) ** 2
    else:  # only the upper triangle of the Gram is kept up to date
        lam, v = jnp.linalg.eigh(symmetric(jnp.nan_to_num(g)))
        vt = jnp.swapaxes(v, -1, -2)
        proj = jnp.matmul(vt, jnp.nan_to_num(c), precision="highest")
        level = eps * f * jnp.max(jnp.abs(lam), -1, keepdims=True)

    def one(beta):
        denom = lam + beta
        keep = denom > level
        inv = jnp.where(keep, 1 / jnp.where(keep, denom, 1), 0)
        w = jnp.matmul(
            jnp.swapaxes(vt, -1, -2), inv[..., :, None] * proj, precision="highest"
        )
        code = jnp.where(jnp.all(keep), _SUCCESSFUL, _FALLBACK)
        code = jnp.where(finite & jnp.isfinite(beta), code, _NONFINITE)
        return jnp.swapaxes(w, -1, -2), code.astype(jnp.int32)

    w, code = jax.vmap(one)(betas)
    return jnp.where(
        code.reshape((-1,) + (1,) * (w.ndim - 1)) == _NONFINITE, jnp.nan, w
    ), code


def _real_number(name: str, value, owner: str, what: str):
    """``value`` unless it is a string, bytes, a bool or an array of a
    non-real dtype (``TypeError`` naming ``name`` and ``what`` it takes)."""
    if isinstance(value, (str, bytes, bool, np.bool_)) or (
        hasattr(value, "dtype")
        and not (
            jnp.issubdtype(value.dtype, jnp.floating)
            or jnp.issubdtype(value.dtype, jnp.integer)
        )
    ):
        raise TypeError(f"{owner}: {name} must be {what}, got {value!r}")
    if not hasattr(value, "dtype") and not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be {what}, got {value!r}")
    return value


def ridge(
    owner: str,
    beta,
    dtype,
    *,
    batch_size: int | None = None,
    intercept: bool = False,
    data=(),
) -> Ridge:
    """The :class:`Ridge` solver of a trainer's ``beta``: the one place where
    ``beta`` is checked and converted.

    ``beta`` is a real number (a Python or NumPy scalar, or a 0-d array, also
    a traced one): finite and ``>= 0`` (a concrete value is checked now, a
    traced one when the computation runs, :func:`orc._validation.check_beta`);
    ``beta=0`` warns :class:`orc.UnregularizedRidgeWarning` (concrete ``beta``
    and ``data``). It is kept as an array of ``dtype`` (the model's).
    """
    what = "a real number (one ridge strength; shape ())"
    _real_number("beta", beta, owner, what)
    if np.ndim(beta) != 0:
        raise ValueError(
            f"{owner}: beta must be {what}, got shape {tuple(np.shape(beta))}; "
            "for several strengths train once per strength or solve the "
            "statistics with orc._fit.RidgePath"
        )
    beta = check_beta(beta, owner)
    warn_zero_beta(beta, owner, *data)
    if batch_size is not None:
        batch_size = check_int("batch_size", batch_size, owner, minimum=1)
    return Ridge(argument_array(beta, dtype), batch_size, bool(intercept))


# --------------------------------------------------------------------------- #
# Problems
# --------------------------------------------------------------------------- #

_NAN_HINT = "Remove or interpolate missing samples before training."


class AbstractTeacherForcing(eqx.Module):
    """A teacher-forced ridge problem: the reservoir is forced with the data
    and the state after input ``t`` is regressed onto target ``t``, skipping
    the first ``spinup`` pairs (per trajectory with ``multi``).

    Final subclasses (one per model family, beside its trainer) choose the
    data, how the model is forced and how the solution enters the model;
    the run and the statistics are :func:`fit`'s.
    """

    owner: eqx.AbstractVar[str]
    spinup: eqx.AbstractVar[int]
    multi: eqx.AbstractVar[bool]
    init: eqx.AbstractVar[Array]

    #: whether the fit's own residual is checked (PoorFitWarning)
    check_fit: ClassVar[bool] = False

    @property
    @abc.abstractmethod
    def rows(self) -> Array:
        """The main input sequence (its rows size the progress bar)."""

    @abc.abstractmethod
    def forcing(self, model, noise):
        """``(inputs, targets)``: the forcing inputs (a pytree of arrays with
        a leading time axis, per trajectory with ``multi``; checked finite;
        ``noise`` applied) and the regression targets."""

    @abc.abstractmethod
    def force(self, model, inputs, state) -> Array:
        """The states after each step of a block of ``inputs`` from ``state``.
        Called inside :func:`orc._errors.inputs_checked` (the inputs come from
        :meth:`forcing`, checked there): an entry point it calls, such as
        ``model.force``, does not check them again."""

    def features(self, model, noise):
        """The regression-features hook of :func:`orc._training.teacher_forced_stats`
        (``None``: the readout's ``prepare_train`` of the states)."""
        return None if noise is None else noise.features(model.readout)

    #: Whether :meth:`force` is the model's pipeline, ``model._drive`` of
    #: :meth:`pipeline_input` (then a fused pass may run it, :meth:`force_stats`).
    pipelined: ClassVar[bool] = False

    def pipeline_input(self, model, inputs) -> Array:
        """What the model's embedding takes for a block of ``inputs`` (from
        :meth:`forcing`); the problems that are :attr:`pipelined` define it."""
        raise NotImplementedError(f"{type(self).__name__} is not pipelined")

    def force_stats(self, model):
        """A fused run-with-statistics pass over :meth:`pipeline_input`
        (:meth:`orc._model.RCModel._force_stats`, where the model and the
        current kernels fuse it), or ``None``."""
        kernels = current()
        if not (self.pipelined and model._fuses_forcing(kernels)):
            return None

        def fused(inputs, state, stats, prepared_targets, start, stop, keep):
            seq = self.pipeline_input(model, inputs)
            return model._force_stats(
                kernels, seq, state, stats, prepared_targets, start, stop, keep
            )

        return fused

    def solution(self, model, weights):
        """``model`` with the solved ``weights``."""
        return model.set_readout(model.readout.set_wout(weights))


def teacher_forcing_arguments(
    owner,
    model,
    train_seq,
    target_seq,
    spinup,
    multi,
    *,
    main: tuple[str, str] = ("train_seq", "data_dim"),
    targets_required: bool = False,
    **per_step,
):
    """The checked data of a teacher-forced fit (done once, at the front).

    ``train_seq`` ``(seq_len, in_dim)`` (``(n_traj, seq_len, in_dim)`` with
    ``multi``), named and described by ``main`` (e.g. ``("in_seq",
    "in_dim")`` for a regressor); ``target_seq``: ``None`` (state ``t``
    targets the next sample ``train_seq[t + 1]``: forecasters, controllers)
    or the same leading shape with ``model.out_dim`` columns; ``per_step``:
    other sequences of the same leading shape, each given as
    ``name=(array, columns, label)``. Returns ``(train_seq, target_seq,
    spinup, per_step_arrays)``; :func:`start_states` checks the initial
    state(s).
    """
    name, label = main
    if targets_required and target_seq is None:
        raise TypeError(f"{owner}: target_seq is required (the outputs to fit)")
    multi = check_flag("multi_sequence", multi, owner)
    rank = 3 if multi else 2
    what = "(n_traj, seq_len, {})" if multi else "(seq_len, {})"
    train_seq = _data(owner, name, train_seq, model)
    train_seq = check_rank(name, train_seq, rank, owner, what.format(label))
    if multi and train_seq.shape[0] == 0:
        raise ValueError(
            f"{owner}: {name} must hold at least one trajectory with "
            f"multi_sequence=True, got shape {tuple(train_seq.shape)}"
        )
    check_last_dim(name, train_seq, model.in_dim, owner, f"features ({label})")
    lead = train_seq.shape[:-1]
    seq_len = train_seq.shape[-2]
    n_targets = seq_len - 1
    same = (owner, name, model, lead, rank, what)
    if target_seq is not None:
        target_seq = _same_lead(*same, "target_seq", target_seq, "out_dim")
        check_last_dim(
            "target_seq", target_seq, model.out_dim, owner, "features (out_dim)"
        )
        n_targets = seq_len
    extra = {}
    for key, (value, columns, what_cols) in per_step.items():
        extra[key] = _same_lead(*same, key, value, what_cols)
        check_last_dim(key, extra[key], columns, owner, f"columns ({what_cols})")
    spinup = check_spinup(
        spinup,
        n_targets,
        owner,
        f"the number of training pairs ({n_targets}; {name} has {seq_len} samples)",
    )
    return train_seq, target_seq, spinup, extra


def start_states(owner, model, initial_res_state, train_seq):
    """The checked initial reservoir state(s) of a fit on ``train_seq``
    (one per trajectory when it is 3-D): ``initial_res_state``, else the
    driver's default state."""
    multi = train_seq.ndim == 3
    n_traj = train_seq.shape[0]
    check_initial_state(owner, model, initial_res_state, n_traj, multi)
    return initial_states(model, initial_res_state, n_traj, multi)


def _same_lead(owner, main, model, lead, rank, what, name, value, label):
    value = _data(owner, name, value, model)
    value = check_rank(name, value, rank, owner, what.format(label))
    if value.shape[:-1] != lead:
        raise ValueError(
            f"{owner}: {name} must have the same length as {main} "
            f"{tuple(lead)}, got {tuple(value.shape[:-1])}"
        )
    return value


def _data(owner, name, x, model):
    """``x`` as data of the model's dtype (:func:`orc._validation.check_data`);
    concrete data holding NaN/inf refused now, naming the first bad row
    (traced data: :func:`finite_sequence` when the program runs)."""
    x = check_data(name, x, owner, model.dtype)
    check_finite_rows(x, name, owner, _NAN_HINT)
    _check_magnitude(owner, name, x)
    return x


def _check_magnitude(owner, name, x) -> None:
    """Concrete data whose sums over its rows could overflow the dtype
    refused, naming it: the regression's statistics add up ``targets x
    features`` over every row (features in [-1, 1]), so a value above
    ``finfo.max / rows`` can make them infinite, which the solve could only
    report without a name. Traced data pass."""
    if isinstance(x, jax.core.Tracer) or x.size == 0:
        return
    rows = int(np.prod(x.shape[:-1])) or 1
    limit = float(np.finfo(x.dtype).max) / rows
    big = float(np.max(np.abs(np.asarray(x))))
    if big > limit:
        raise ValueError(
            f"{owner}: {name} holds values up to {big:.3g}, beyond what the ridge "
            f"statistics over its {rows} rows can sum in {np.dtype(x.dtype)} "
            f"(at most {limit:.3g}); rescale the data (e.g. standardise it)"
        )


def finite_sequence(owner, name, x, dtype):
    """``x`` in ``dtype``, checked for NaN/inf when the program runs (under
    the user's ``jax.jit``); what follows runs on zeros in its place, so
    that a bad sample cannot make an adaptive solve run on without end."""
    x = x.astype(dtype)
    return check_finite(x, name, owner, _NAN_HINT, replace=jnp.zeros_like(x))


def next_sample_forcing(owner, dtype, train_seq, target_seq, **per_step):
    """The forcing and targets of a fit whose targets default to the next
    sample: without ``target_seq`` state ``t`` targets ``train_seq[t + 1]``;
    with it, state ``t`` targets ``target_seq[t]`` and the forcing gets
    ``target_seq[-1]`` appended (other per-step sequences repeat their last
    row), so the last state starts a forecast of what follows. Returns
    ``(forcing, per_step_forcing, targets)``, each checked finite."""
    train_seq = finite_sequence(owner, "train_seq", train_seq, dtype)
    extra = {k: finite_sequence(owner, k, v, dtype) for k, v in per_step.items()}
    if target_seq is None:
        return train_seq, extra, train_seq[..., 1:, :]
    targets = finite_sequence(owner, "target_seq", target_seq, dtype)

    def extend(a, last):
        return jnp.concatenate([a, last[..., -1:, :]], axis=-2)

    return (
        extend(train_seq, targets),
        {k: extend(v, v) for k, v in extra.items()},
        targets,
    )


# --------------------------------------------------------------------------- #
# Options and the front
# --------------------------------------------------------------------------- #


def check_flag(name: str, value, owner: str) -> bool:
    """A Python or NumPy bool (``TypeError`` naming ``name`` otherwise: a
    string such as ``"no"`` is not a flag)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{owner}: {name} must be True or False, got {value!r}")
    return bool(value)


def check_model_type(owner: str, model, cls) -> None:
    """``TypeError`` unless ``model`` is a ``cls``."""
    if not isinstance(model, cls):
        raise TypeError(
            f"{owner}: model must be a{'n' if cls.__name__[0] in 'AEIOU' else ''} "
            f"{cls.__name__}, got {type(model).__name__}"
        )


class Options(eqx.Module):
    """How a fit runs: ``keep_states`` (return the state history, else the
    last state), ``progress`` (a bar on stderr; ``None``: on a terminal for
    long runs), ``noise`` (:class:`orc._training.TrainingNoise` or ``None``)
    and ``backend`` (:mod:`orc._strategy`)."""

    keep_states: bool = eqx.field(static=True, default=True)
    progress: bool | None = eqx.field(static=True, default=None)
    noise: object = None
    backend: str | None = eqx.field(static=True, default=None)


def options(
    owner: str,
    dtype,
    return_states=True,
    progress=None,
    input_noise=0.0,
    state_noise=0.0,
    noise_seed=0,
    backend=None,
) -> Options:
    """Checked :class:`Options` from a trainer's keyword arguments."""
    keep = check_flag("return_states", return_states, owner)
    if progress is not None:
        progress = check_flag("progress", progress, owner)
    noise = training_noise(owner, input_noise, state_noise, noise_seed, dtype)
    return Options(keep, progress, noise, backend)


def fit(
    model,
    problem: AbstractTeacherForcing,
    solver: AbstractRidgeSolver,
    opts,
    *,
    throw: bool = True,
):
    """Train ``model`` on ``problem`` with ``solver``: one compiled program
    (per model structure, shapes and options) that forces the reservoir,
    accumulates the statistics and solves. Returns ``(model, states)``: the
    history with ``opts.keep_states``, else the last state (per trajectory).

    With a population solver (:class:`RidgePath`) the reservoir runs once
    and ``model`` is a stack of models, one per ridge strength (every leaf
    with a leading axis of that length; ``jax.tree.map(lambda x: x[i],
    model)`` is the ``i``-th), for ``eqx.filter_vmap`` over their forecasts.

    ``throw=False`` (lineax's convention) returns ``(model, states,
    result)`` instead: how the solve went as a :class:`RESULTS` value (one
    per strength for a population solver), nothing raised or warned for it,
    so that a search over many candidates scores a failed solve as data.

    A model whose bank :func:`orc.shard` placed on a mesh trains on every
    device's share (:func:`orc._shard.fit_sharded`, the same program traced
    per device)."""
    placed = placement(model)
    if placed is not None and throw:  # a bank placed by orc.shard
        return fit_sharded(model, problem, solver, opts, placed, _fit.__wrapped__)
    steps = int(np.prod(problem.rows.shape[:-1]))

    def run(show):
        return _fit(
            model,
            problem,
            solver,
            opts.keep_states,
            show,
            opts.noise,
            throw,
            backend=opts.backend,
        )

    return _progress.run_with_bar(opts.progress, steps, run)


@compiled
def _fit(model, problem, solver, keep, show, noise, throw=True):
    inputs, targets = problem.forcing(model, noise)
    init = check_finite(
        problem.init,
        "initial_res_state",
        problem.owner,
        "Pass a finite start state (e.g. the last row of the states returned "
        "by a previous call).",
    )
    with _errors.inputs_checked():  # the forcing's data, checked just above
        stats, states = teacher_forced_statistics(
            model.readout,
            lambda u, r: problem.force(model, u, r),
            inputs,
            targets,
            init,
            spinup=problem.spinup,
            multi_sequence=problem.multi,
            keep_states=keep,
            progress=show,
            features=problem.features(model, noise),
            force_stats=problem.force_stats(model),
        )
    if not throw:
        w, result = solver.compute(stats)
        return solved(problem, model, solver, w), states, result
    w = solver.weights(stats)
    if (
        not solver.population
        and problem.check_fit
        and problem.spinup < targets.shape[-2]
    ):
        beta = jnp.asarray(solver.beta, stats.gram.dtype)
        warn_poor_fit(
            model.readout, stats, w, beta, targets, problem.spinup, problem.multi
        )
    return solved(problem, model, solver, w), states


def solved(problem, model, solver: AbstractRidgeSolver, weights):
    """``model`` with the solved ``weights`` put in by ``problem.solution``;
    with a population solver, a stack of models, one per candidate solution
    (every leaf with a leading axis of their number)."""
    if solver.population:
        return eqx.filter_vmap(problem.solution, in_axes=(None, 0))(model, weights)
    return problem.solution(model, weights)
