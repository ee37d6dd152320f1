"""Argument checks shared by every public entry point.

Shapes, ranks, dtypes and configuration are checked in Python, at trace time,
and raise ``ValueError``/``TypeError`` naming the argument. Values only known at
run time (NaN data, singular solves) are checked with :func:`orc._errors.check`
by the callers: returned as data by orc's compiled programs and raised when
they return, an ``eqx.error_if`` under the user's own ``jax.jit``.
"""

from __future__ import annotations

import dataclasses
import numbers
import weakref

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _errors

__all__ = [
    "device_array",
    "argument_array",
    "check_int",
    "check_float",
    "check_dtype",
    "check_rank",
    "check_last_dim",
    "check_static_int",
    "check_finite",
    "check_finite_rows",
    "check_input_finite",
    "ode_max_steps",
    "default_float_dtype",
    "check_leaf",
    "check_dtype_field",
    "check_index_bounds",
    "run_check_inits",
    "from_fields",
    "check_data",
    "check_beta",
    "warn_zero_beta",
    "warn_if_untrained",
    "PrecisionLossWarning",
    "UnregularizedRidgeWarning",
    "UntrainedModelWarning",
]


def default_float_dtype():
    """The float dtype JAX uses right now: float64 with x64 enabled, else float32."""
    return (
        jnp.dtype(jnp.float64) if jax.config.jax_enable_x64 else jnp.dtype(jnp.float32)
    )


def check_dtype(dtype, owner: str):
    """Resolve ``dtype`` to a canonical float dtype (float32 or float64).

    ``None`` means the JAX default float dtype. Asking for float64 while x64 is
    off gives float32, the dtype JAX will actually use, with a warning.
    """
    if dtype is None:
        return default_float_dtype()
    try:
        resolved = jnp.dtype(dtype)
    except TypeError as err:
        raise TypeError(
            f"{owner}: dtype must be jnp.float32 or jnp.float64, got {dtype!r}"
        ) from err
    if resolved not in (jnp.dtype(jnp.float32), jnp.dtype(jnp.float64)):
        raise TypeError(
            f"{owner}: dtype must be jnp.float32 or jnp.float64, got {dtype!r}"
        )
    if resolved == jnp.dtype(jnp.float64) and not jax.config.jax_enable_x64:
        _errors.warn_at_caller(
            f"{owner}: dtype float64 was requested but jax_enable_x64 is off, so "
            "float32 is used. Enable it before creating models with "
            "jax.config.update('jax_enable_x64', True).",
            UserWarning,
        )
        return jnp.dtype(jnp.float32)
    return resolved


def check_int(
    name: str,
    value,
    owner: str,
    *,
    minimum: int | None = None,
    maximum: int | None = None,
) -> int:
    """A Python integer (bools refused), optionally within ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{owner}: {name} must be an int, got {value!r}")
    value = int(value)
    if minimum is not None and value < minimum:
        raise ValueError(f"{owner}: {name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{owner}: {name} must be <= {maximum}, got {value}")
    return value


def check_float(
    name: str,
    value,
    owner: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """A real number within [low, high] (ends open when asked).

    Traced values (a model built inside ``jax.jit``) cannot be checked in Python;
    they pass through unchanged.
    """
    if isinstance(value, jax.core.Tracer):
        return value
    try:
        v = float(np.asarray(value))
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{owner}: {name} must be a real number, got {value!r}"
        ) from err
    if not np.isfinite(v):
        raise ValueError(f"{owner}: {name} must be finite, got {v}")
    bad_low = low is not None and (v <= low if low_open else v < low)
    bad_high = high is not None and (v >= high if high_open else v > high)
    if bad_low or bad_high:
        lo = "-inf" if low is None else f"{low}"
        hi = "inf" if high is None else f"{high}"
        lb = "(" if low_open or low is None else "["
        hb = ")" if high_open or high is None else "]"
        raise ValueError(f"{owner}: {name} must lie in {lb}{lo}, {hi}{hb}, got {v}")
    return v


def check_leak_rates(name: str, value, owner: str, res_dim: int, chunks=None):
    """Per-node leak rates: an array ``(res_dim,)`` (or ``(chunks, res_dim)``;
    any leading count when ``chunks`` is ``None``), real, every entry in
    (0, 1]. Returns a float64 NumPy array; a traced array (a model built
    inside ``jax.jit``) is checked for its shape only and returned as is."""
    shape = tuple(np.shape(value))
    n_ok = len(shape) == 1 or (
        len(shape) == 2 and (chunks is None or shape[0] == chunks)
    )
    if not n_ok or shape[-1] != res_dim:
        per_res = (
            "(res_dim,)"
            if chunks in (None, 1)
            else f"(res_dim,) or ({chunks}, {res_dim})"
        )
        raise ValueError(
            f"{owner}: {name} must be a number or one rate per node, shape "
            f"{per_res} with res_dim = {res_dim}, got shape {shape}"
        )
    if isinstance(value, jax.core.Tracer):
        return value
    try:
        rates = np.asarray(value)
        if not (
            np.issubdtype(rates.dtype, np.floating)
            or np.issubdtype(rates.dtype, np.integer)
        ):
            raise TypeError
        rates = rates.astype(np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{owner}: {name} must be real numbers, got dtype "
            f"{getattr(value, 'dtype', type(value).__name__)}"
        ) from err
    bad = ~(np.isfinite(rates) & (rates > 0) & (rates <= 1))
    if bad.any():
        i = first_index(bad)
        raise ValueError(
            f"{owner}: {name} must lie in (0, 1] for every node, got "
            f"{rates[i]} at index {i if len(i) > 1 else i[0]}"
        )
    return rates


def first_index(bad: np.ndarray) -> tuple[int, ...]:
    """The index (row-major order) of the first true entry of ``bad``, which
    has one, as a tuple of ints: where a refused value is."""
    return tuple(int(i) for i in np.argwhere(bad)[0])


def check_static_int(name: str, value, owner: str, *, minimum: int = 0) -> int:
    """A loop length or similar that must be a concrete Python int under tracing."""
    if isinstance(value, jax.core.Tracer):
        raise TypeError(
            f"{owner}: {name} must be a concrete Python int, but it is being traced "
            "by jax.jit. Mark it static (jax.jit(..., static_argnames=...)) or call "
            "the method through eqx.filter_jit, which keeps Python ints static."
        )
    if isinstance(value, (np.ndarray, np.generic, jax.Array)) and np.ndim(value) == 0:
        if np.issubdtype(np.asarray(value).dtype, np.integer):
            value = int(value)
    return check_int(name, value, owner, minimum=minimum)


def device_array(x, dtype) -> jax.Array:
    """``jnp.asarray(x, dtype)``, converted on the host first when ``x`` is
    host data (a Python number, a NumPy array or scalar): JAX compiles a
    program for every conversion it makes itself, one per new shape and
    dtype (~20-90 ms each, at every model size a process builds), and none
    for an array that already has the dtype asked for."""
    return jnp.asarray(argument_array(x, dtype), dtype)


def argument_array(x, dtype):
    """``x`` in ``dtype`` as an argument of a compiled program: host data (a
    Python number, a NumPy array or scalar) as a NumPy array, which the
    program takes as it is, JAX arrays and tracers with ``jnp.asarray``.
    ``jnp.asarray`` of a host scalar runs a transfer of its own, ~150 us on a
    CPU (more than a small model's whole training call adds in Python); a
    NumPy argument costs the call nothing."""
    if isinstance(x, (numbers.Number, np.ndarray, np.generic)):
        return np.asarray(x, dtype=jnp.dtype(dtype))
    return jnp.asarray(x, dtype)


def _host_array(name: str, x, owner: str, kind: str) -> np.ndarray:
    """``x`` (a list, scalar or other object without a dtype) as a NumPy
    array; ``TypeError`` naming ``name`` when NumPy cannot make one (a
    ragged list). Its dtype is the caller's to judge."""
    try:
        return np.asarray(x)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"{owner}: {name} must be an array of {kind}, got "
            f"{type(x).__name__} that is not one ({err})"
        ) from err


def check_rank(name: str, x, ndim: int | tuple[int, ...], owner: str, what: str = ""):
    """``x`` is array-like of the given rank(s); returns it as a JAX array
    (text, ``None`` and other objects: ``TypeError`` naming ``name``)."""
    if not hasattr(x, "shape"):
        held = _host_array(name, x, owner, "numbers")
        if held.dtype.kind not in "biufc":
            raise TypeError(
                f"{owner}: {name} must be an array of numbers, got "
                f"{type(x).__name__} {x!r:.40}"
            )
        x = jnp.asarray(held)
    ranks = (ndim,) if isinstance(ndim, int) else ndim
    if x.ndim not in ranks:
        expect = " or ".join(f"{r}-D" for r in ranks)
        extra = f" {what}" if what else ""
        raise ValueError(
            f"{owner}: {name} must be {expect}{extra}, got shape {tuple(x.shape)}"
        )
    return x


def check_last_dim(name: str, x, size: int, owner: str, what: str = "features"):
    if x.shape[-1] != size:
        raise ValueError(
            f"{owner}: {name} must have {size} {what} in its last axis, "
            f"got shape {tuple(x.shape)}"
        )
    return x


def check_spinup(spinup, length: int, owner: str, what: str) -> int:
    """``spinup`` is an int in ``[0, length)``; ``what`` names ``length`` in the
    message (e.g. ``"seq_len (200)"``)."""
    spinup = check_int("spinup", spinup, owner, minimum=0)
    if spinup >= length:
        raise ValueError(f"{owner}: spinup ({spinup}) must be less than {what}")
    return spinup


def _nonfinite_message(owner: str, name: str, hint: str, where: str = "") -> str:
    """The one wording of a NaN/inf refusal (``where``: e.g. ``" (first at row 7)"``)."""
    msg = f"{owner}: {name} contains NaN or inf values{where}."
    return msg + " " + hint if hint else msg


def _lead_axes(ndim: int) -> int:
    """How many leading axes name where a NaN/inf is: none for a scalar, the
    index of 1-D data, trajectory and row of 3-D data ``(n_traj, seq_len,
    features)``, else the row (the first axis)."""
    return 0 if ndim == 0 else 2 if ndim == 3 else 1


def _nonfinite_messages(owner: str, name: str, hint: str, shape):
    """The messages of :func:`check_finite` for data of ``shape``, one per
    position its leading axes name (:func:`_lead_axes`), as an
    :class:`orc._errors.IndexedMessages`; ``None`` for a scalar."""
    lead = _lead_axes(len(shape))
    if lead == 0:
        return None
    if lead == 2:
        where = " (first at trajectory {0}, row {1})"
    else:
        where = " (first at index {0})" if len(shape) == 1 else " (first at row {0})"
    # the words of _nonfinite_message, braces of the names and hint escaped
    fmt = _nonfinite_message(
        *(t.replace("{", "{{").replace("}", "}}") for t in (owner, name, hint)),
        where,
    )
    return _errors.IndexedMessages(fmt, tuple(shape[:lead]))


def check_finite(x, name: str, owner: str, hint: str = "", *, replace=None):
    """Raise at run time (also under jit) if ``x`` contains NaN or inf.

    The message names where the first bad value is, as
    :func:`check_finite_rows` does for concrete data (the same words, eager
    or under any ``jax.jit``): its row for 2-D data ``(seq_len, features)``,
    trajectory and row for 3-D ``(n_traj, seq_len, features)``, index for
    1-D.

    ``replace``: a finite value of ``x``'s shape that the program goes on
    with when the check fails (see :func:`orc._errors.check`), for data that
    would make what follows run forever (an adaptive ODE solve retrying a
    non-finite vector field)."""
    x = jnp.asarray(x)
    msgs = _nonfinite_messages(owner, name, hint, x.shape)
    bad = ~jnp.isfinite(x)
    if msgs is None:
        msg = _nonfinite_message(owner, name, hint)
        return _errors.check(x, jnp.any(bad), msg, replace=replace)
    if x.size == 0:  # nothing to refuse
        return x
    per_position = jnp.any(bad.reshape(msgs.shape + (-1,)), axis=-1).reshape(-1)
    index = jnp.argmax(per_position)  # the first bad position
    return _errors.check_index(x, jnp.any(per_position), index, msgs, replace=replace)


def check_input_finite(x, name: str, owner: str, hint: str = "", *, replace=None):
    """:func:`check_finite` of data a public entry point (``force``,
    ``predict``, ``forecast_from_IC``) was given by its caller.

    Left out where the entry point is traced inside a loop or branch body of
    another orc program, or in its :func:`orc._errors.inputs_checked` block
    (:func:`orc._errors.called_in_program_loop`: training forces the
    reservoir block by block with ``model.force``): there the data is that
    program's own, checked at its top level where the user gave it, and a
    check in a loop body could not become one of its codes (it would be a
    host callback in the program)."""
    if _errors.called_in_program_loop():
        return jnp.asarray(x)
    return check_finite(x, name, owner, hint, replace=replace)


def check_finite_rows(x, name: str, owner: str, hint: str = "") -> None:
    """Refuse concrete data holding NaN or inf now, before any program runs.

    ``x`` (a NumPy or JAX array, or a list) is looked at on the host; the
    error (:class:`equinox.EquinoxRuntimeError`, what :func:`check_finite`
    raises when the program returns) has :func:`check_finite`'s message,
    which says where the first bad value is: its row for 2-D data
    ``(seq_len, features)``, trajectory and row for 3-D ``(n_traj,
    seq_len, features)``, index for 1-D. Traced values (a call under
    ``jax.jit``) and values that are not real numbers pass through:
    :func:`check_finite` and :func:`check_data` report them.
    """
    if _is_traced(x):
        return
    try:
        a = np.asarray(x)
    except (TypeError, ValueError):
        return
    if not np.issubdtype(a.dtype, np.floating) or np.isfinite(a).all():
        return
    msgs = _nonfinite_messages(owner, name, hint, a.shape)
    if msgs is None:
        raise eqx.EquinoxRuntimeError(_nonfinite_message(owner, name, hint))
    first = np.argwhere(~np.isfinite(a))[0][: len(msgs.shape)]
    raise eqx.EquinoxRuntimeError(msgs[int(np.ravel_multi_index(first, msgs.shape))])


#: Step limit of an adaptive ODE solve when none is given (``max_steps=None``):
#: ``ODE_STEPS_MIN + ODE_STEPS_PER_INTERVAL * intervals``, ``intervals`` the
#: sample intervals the solve spans. A CESN at ``time_const * dt = 50`` took up
#: to 60 steps per sample with Tsit5 and orc's default controller, the data
#: systems at ``dt = 1`` up to 90; an unbounded solve whose vector field turns
#: non-finite retries forever.
ODE_STEPS_MIN = 4096
ODE_STEPS_PER_INTERVAL = 256


def ode_max_steps(max_steps, intervals: int, adaptive: bool) -> int | None:
    """The ``max_steps`` an ODE solve over ``intervals`` sample intervals gets.

    ``max_steps`` given (an int) is used as it is. ``None`` means a bound:
    ``ODE_STEPS_MIN + ODE_STEPS_PER_INTERVAL * intervals`` for an adaptive
    step-size controller (which retries a rejected step, forever when the
    vector field is NaN); ``None`` (no bound) stays for a fixed-step one
    (``adaptive=False``), whose step count is fixed by the grid.
    """
    if max_steps is not None or not adaptive:
        return max_steps
    return ODE_STEPS_MIN + ODE_STEPS_PER_INTERVAL * max(int(intervals), 1)


def check_esn_arguments(
    owner: str,
    *,
    res_dim,
    Wr_density,
    Wr_spectral_radius,
    embedding_scaling,
    bias,
    leak_rate=None,
    time_const=None,
) -> None:
    """Check the ESN models' hyperparameters under their public names."""
    check_int("res_dim", res_dim, owner, minimum=1)
    check_float("Wr_density", Wr_density, owner, low=0.0, high=1.0, low_open=True)
    check_float("Wr_spectral_radius", Wr_spectral_radius, owner, low=0.0, low_open=True)
    check_float("embedding_scaling", embedding_scaling, owner, low=0.0)
    check_float("bias", bias, owner)
    if leak_rate is not None and np.ndim(leak_rate) == 0:
        check_float("leak_rate", leak_rate, owner, low=0.0, high=1.0, low_open=True)
    elif leak_rate is not None:
        check_leak_rates("leak_rate", leak_rate, owner, res_dim)
    if time_const is not None:
        check_float("time_const", time_const, owner, low=0.0, low_open=True)


# --------------------------------------------------------------------------- #
# Invariants of built components
# --------------------------------------------------------------------------- #
# A component's ``__check_init__`` states what its fields must satisfy. Equinox
# runs it after every constructor, and ``orc.load`` runs it on every module it
# rebuilds from a file, so a file can only describe a model its constructor
# could have built (shapes, dtypes and indices consistent with the static
# fields). These checks never convert or warn: they only refuse.

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def check_dtype_field(owner: str, dtype) -> None:
    """A component's ``dtype`` field is float32 or float64."""
    try:
        resolved = np.dtype(dtype)
    except TypeError as err:
        raise TypeError(
            f"{owner}: dtype must be float32 or float64, got {dtype!r}"
        ) from err
    if resolved not in _FLOATS:
        raise TypeError(f"{owner}: dtype must be float32 or float64, got {dtype!r}")


def set_field_defaults(module) -> None:
    """Store every field of the Equinox module ``module`` (being constructed)
    that its ``__init__`` has not set yet at its declared default, so a
    constructed module holds all its fields.

    Equinox's flatten (0.13) tells a plain module from a wrapped function by
    counting the instance's attributes: a module that leaves fields at their
    class defaults flattens with different static metadata than the copy
    unflattening makes of it (when five are left, the gradient's metadata
    and the model's differ and ``jax.tree.map(f, grad, model)`` fails). Base
    classes call this first in ``__init__``; what a subclass sets afterwards
    replaces the defaults.
    """
    for field in dataclasses.fields(module):
        if field.name in module.__dict__:
            continue
        if field.default is not dataclasses.MISSING:
            object.__setattr__(module, field.name, field.default)
        elif field.default_factory is not dataclasses.MISSING:
            object.__setattr__(module, field.name, field.default_factory())


def init_component(component, dtype, **sizes) -> None:
    """What a component base class's ``__init__`` sets (``DriverBase``,
    ``EmbedBase``, ``ReadoutBase``): every field's declared default
    (:func:`set_field_defaults`), its sizes, each a positive int, and its
    dtype."""
    owner = type(component).__name__
    set_field_defaults(component)
    for name, value in sizes.items():
        setattr(component, name, check_int(name, value, owner, minimum=1))
    component.dtype = check_dtype(dtype, owner)


def check_component(component, *sizes: str) -> None:
    """What a component base class's ``__check_init__`` checks: the static
    fields ``sizes`` positive ints, ``chunks`` >= 0, ``dtype`` float32/64."""
    owner = type(component).__name__
    for name in sizes:
        check_int(name, getattr(component, name), owner, minimum=1)
    check_int("chunks", component.chunks, owner, minimum=0)
    check_dtype_field(owner, component.dtype)


def check_leaf(owner: str, name: str, value, shape, dtype=None) -> None:
    """The array field ``name`` has exactly ``shape`` (and ``dtype``)."""
    if not isinstance(value, (jax.Array, np.ndarray)):
        raise TypeError(f"{owner}: {name} must be an array, got {type(value).__name__}")
    if tuple(value.shape) != tuple(shape):
        raise ValueError(
            f"{owner}: {name} must have shape {tuple(shape)}, got {tuple(value.shape)}"
        )
    if dtype is not None and np.dtype(value.dtype) != np.dtype(dtype):
        raise TypeError(
            f"{owner}: {name} must have dtype {np.dtype(dtype)}, got {value.dtype}"
        )


def run_check_inits(obj) -> None:
    """Check ``obj``, an Equinox module, by the invariants its constructor
    checks: the ``__check_init__`` of each class in ``type(obj).__mro__`` that
    defines one, in that order (as Equinox runs them after ``__init__``). For
    modules made without their constructor (:func:`from_fields`,
    :func:`orc.load`); the first failed invariant's error propagates."""
    for klass in type(obj).__mro__:
        check = klass.__dict__.get("__check_init__")
        if check is not None:
            check(obj)


def from_fields(cls, fields: dict):
    """An instance of the Equinox module ``cls`` holding ``fields`` (every
    field of the class, no other), checked by :func:`run_check_inits`: how
    a component is made from arrays a user gives (the ``from_matrices``
    constructors) without running its constructor's random draw."""
    names = {f.name for f in dataclasses.fields(cls)}
    if set(fields) != names:
        raise TypeError(
            f"{cls.__name__}: fields {sorted(fields)} given, the class has {sorted(names)}"
        )
    obj = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(obj, name, value)
    run_check_inits(obj)
    return obj


def module_fields(module) -> dict:
    """Every field of the Equinox module ``module``, by name."""
    return {f.name: getattr(module, f.name) for f in dataclasses.fields(module)}


def replace_fields(module, **changes):
    """A copy of ``module`` with ``changes`` to its fields (static ones and
    ``None`` either side too, which ``eqx.tree_at`` cannot address), made
    and checked by :func:`from_fields`."""
    return from_fields(type(module), {**module_fields(module), **changes})


def check_index_bounds(owner: str, name: str, indices, size: int) -> None:
    """Every entry of the integer array ``indices`` lies in ``[0, size)``.

    A traced array (a component built inside ``jax.jit``/``vmap``) cannot be
    read here; the compute paths then refuse out-of-range indices themselves.
    """
    if isinstance(indices, jax.core.Tracer):
        return
    idx = np.asarray(indices)
    if idx.size == 0:
        return
    low, high = int(idx.min()), int(idx.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        raise ValueError(f"{owner}: {name} must lie in [0, {size}), found {bad}")


# --------------------------------------------------------------------------- #
# Data entering a model, the ridge strength, untrained models
# --------------------------------------------------------------------------- #


class PrecisionLossWarning(UserWarning):
    """Data of a higher floating-point precision than the model's was cast
    down to the model's dtype (e.g. float64 data into a float32 model). The
    message names the argument and both dtypes; cast the data yourself
    (``x.astype(model.dtype)``) to silence it."""


class UnregularizedRidgeWarning(UserWarning):
    """A ridge fit was asked for with ``beta=0``: plain (unregularised)
    least squares, legal but ill-posed when the features are collinear and
    prone to unstable closed loops. Use a small positive ``beta``."""


class PoorFitWarning(UserWarning):
    """A forecaster's readout fits its own training targets badly: the
    one-step predictions over the fitted rows leave more than
    ``POOR_FIT_NRMSE**2`` (81%) of the targets' variance unexplained. The
    next sample of a deterministic system is what a trained reservoir
    predicts best, so this points at the data (a time or index column, the
    wrong axis, noise) or at saturated states (input scaling, bias, spectral
    radius), not at a hard system."""


#: One-step training NRMSE (per-dimension std normalisation) from which a
#: forecaster's training warns :class:`PoorFitWarning`.
POOR_FIT_NRMSE = 0.9


class UntrainedModelWarning(UserWarning):
    """A model whose readout weights are all zero (never trained) was asked
    to forecast, classify or compute a control: every output is zero."""


def _is_traced(x) -> bool:
    return isinstance(x, jax.core.Tracer)


def _warn(msg: str, category: type[Warning]) -> None:
    """Warn ``msg`` once per call: as a returned check inside a compiled orc
    program (so a cached program still warns on every call), else now,
    attributed to the user's line."""
    if _errors._current_ledger() is not None:
        _errors.warn(jnp.asarray(True), msg, category)
    else:
        _errors.warn_at_caller(msg, category)


def check_sequence(
    name: str,
    seq,
    owner: str,
    dtype,
    width: int,
    what: str,
    min_len: int = 1,
    why: str = "",
):
    """``seq`` as a sequence ``(seq_len, width)`` of real data of ``dtype``
    (:func:`check_data`, :func:`check_rank`) with at least ``min_len`` rows:
    the input check of every model's entry points. ``what`` names the width
    (``"data_dim"``, ``"control_dim"``); ``why`` says where a ``min_len``
    above one comes from."""
    seq = check_data(name, seq, owner, dtype)
    if seq.ndim == 3:
        raise ValueError(
            f"{owner}: {name} must be 2-D (seq_len, {what}), one sequence per "
            f"call, got shape {tuple(seq.shape)}; for a batch of sequences map "
            "the call over its first axis with jax.vmap"
        )
    seq = check_rank(name, seq, 2, owner, f"(seq_len, {what})")
    if seq.shape[1] != width:
        raise ValueError(
            f"{owner}: {name} must have {width} columns ({what}), got shape "
            f"{tuple(seq.shape)}"
        )
    if seq.shape[0] < min_len:
        if min_len == 1:
            raise ValueError(f"{owner}: {name} is empty")
        raise ValueError(
            f"{owner}: {name} must have at least {min_len} samples{why}, got shape "
            f"{tuple(seq.shape)}"
        )
    return seq


def check_data(name: str, x, owner: str, dtype):
    """``x`` as real-valued data of the model's float ``dtype``.

    Every public entry point passes the data it receives (sequences, states,
    references, controls) through here, at trace time, before anything else
    touches it. What each kind of input does, and why:

    - **float arrays of the model's dtype** are returned unchanged (a NumPy
      array stays a NumPy array).
    - **float arrays of a lower precision** (float16, bfloat16, float32 into a
      float64 model) are converted up: exact, no warning.
    - **float arrays of a higher precision** (float64 into a float32 model)
      are converted down with a :class:`PrecisionLossWarning` naming the
      argument and both dtypes, once per call (inside orc's compiled programs
      the warning is returned with the result, so it is repeated on every
      call, not only when the program is compiled). Not an error: NumPy
      creates float64 by default and the cast is what the model's precision
      asks for; ORC 0.4 casts silently.
    - **integer arrays and Python lists, tuples or scalars of numbers** are
      accepted, as ORC 0.4 accepts them (``jnp.asarray``), and converted to
      the model's dtype without warning: numbers written in Python or stored
      as integers carry no precision of their own to lose (integers beyond
      2**24 in float32, 2**53 in float64, round to the nearest float).
    - **bool arrays** raise ``TypeError``: a boolean array passed as data is
      almost always a mask passed by mistake, and True/False read as 1/0 is
      not a measurement. Convert explicitly (``x.astype(float)``) if meant.
    - **complex arrays** raise ``TypeError``: converting would silently drop
      the imaginary part (what ``astype`` does, with at most a
      ``ComplexWarning``). Pass ``jnp.real(x)``, or the real and imaginary
      parts as separate features.
    - anything else (strings, objects, ragged lists) raises ``TypeError``.

    Shapes are not checked here (see :func:`check_rank`).
    """
    target = np.dtype(dtype)
    declared = hasattr(x, "dtype") and hasattr(x, "shape")
    if not declared:
        x = _host_array(name, x, owner, "real numbers")
    src = np.dtype(x.dtype)
    if src == np.dtype(bool):
        raise TypeError(
            f"{owner}: {name} must hold real numbers (float or int), got a bool "
            "array; convert it explicitly (e.g. x.astype(float)) if the values "
            "are meant as data"
        )
    if jnp.issubdtype(src, jnp.complexfloating):
        raise TypeError(
            f"{owner}: {name} must be real-valued, got complex dtype {src}; orc "
            "does not drop the imaginary part silently: pass jnp.real(x), or the "
            "real and imaginary parts as separate features"
        )
    if not (jnp.issubdtype(src, jnp.floating) or jnp.issubdtype(src, jnp.integer)):
        raise TypeError(
            f"{owner}: {name} must be an array of real numbers, got dtype {src}"
        )
    if src == target:
        return x
    if (
        declared
        and jnp.issubdtype(src, jnp.floating)
        and jnp.finfo(src).bits > jnp.finfo(target).bits
    ):
        _warn(
            f"{owner}: {name} has dtype {src} but the model is {target}; it is "
            f"cast down to {target} (precision is lost). Cast it yourself "
            f"({name}.astype(model.dtype)) or build the model with "
            f"dtype={src} to silence this warning.",
            PrecisionLossWarning,
        )
    if declared:
        return x.astype(target)
    return jnp.asarray(x, target)


def check_beta(beta, owner: str):
    """The ridge strength ``beta``: finite and >= 0, also when it is traced.

    A concrete value is checked now (``ValueError``/``TypeError`` naming
    ``beta``); a traced one (``jax.jit`` with ``beta`` an argument, ``vmap``
    over it) with :func:`orc._errors.check`, raised when the call returns or
    the user's program runs. Returns ``beta``. Call it where ``beta`` is
    used, inside the compiled program, so the check is one of its own.
    """
    if not _is_traced(beta):
        if np.ndim(beta) == 0:
            check_float("beta", beta, owner, low=0.0)
        elif not np.all(np.isfinite(np.asarray(beta)) & (np.asarray(beta) >= 0)):
            raise ValueError(f"{owner}: beta must be finite and >= 0, got {beta!r}")
        return beta
    return _errors.check(
        beta,
        ~(jnp.isfinite(beta) & (beta >= 0)),
        f"{owner}: beta (the ridge regularisation) must be finite and >= 0; it "
        "is negative or NaN/inf.",
        # what runs on until the error is raised: no second, misleading report
        # (an ill-conditioned or non-finite solve) from the bad beta
        replace=jnp.ones_like(beta),
    )


def warn_zero_beta(beta, owner: str, *data) -> None:
    """Warn (:class:`UnregularizedRidgeWarning`) when ``beta`` is 0.

    Ridge with ``beta=0`` is ordinary least squares: legal (ORC 0.4 accepts
    it), but unregularised. Only a concrete ``beta`` with concrete ``data`` is
    looked at (a call outside ``jax.jit``); traced calls are not warned about.
    """
    if _is_traced(beta) or any(_is_traced(a) for a in data):
        return
    try:
        value = float(np.asarray(beta))
    except (TypeError, ValueError):
        return
    if value == 0.0:
        _errors.warn_at_caller(
            f"{owner}: beta=0 gives an unregularised least-squares fit (no ridge "
            "penalty), which is ill-posed when the features are collinear and "
            "often makes closed-loop forecasts unstable; use a small positive "
            "beta (e.g. 1e-8).",
            UnregularizedRidgeWarning,
        )


def _readout_weights(model):
    """The trained weights of ``model`` (``readout.wout``, or ``wout`` on
    the model itself), or ``None`` when it has none an untrained model would
    hold as zeros."""
    readout = getattr(model, "readout", None)
    w = getattr(readout, "wout", None) if readout is not None else None
    if w is None:
        w = getattr(model, "wout", None)
    if not isinstance(w, (jax.Array, np.ndarray)) or _is_traced(w):
        return None
    return w


# Weights already seen to be non-zero, by id (weakly held: an entry goes
# with its array), so that a model forecasting in a loop reads them once.
_TRAINED: dict[int, weakref.ref] = {}


def _seen_trained(w) -> bool:
    ref = _TRAINED.get(id(w))
    return ref is not None and ref() is w


def _remember_trained(w) -> None:
    key = id(w)

    def forget(ref, key=key):
        if _TRAINED.get(key) is ref:
            del _TRAINED[key]

    try:
        _TRAINED[key] = weakref.ref(w, forget)
    except TypeError:  # an array type without weak references: not cached
        pass


def warn_if_untrained(model, owner: str) -> None:
    """Warn (:class:`UntrainedModelWarning`) when ``model``'s readout weights
    are all zero, i.e. it was never trained and every output is zero.

    Only a concrete model is looked at (a call outside ``jax.jit``); under
    the user's transformations nothing is checked. The test reads the
    weights (small: ``out_dim x features``), not the data, and only until
    they are once found non-zero (immutable arrays, remembered weakly).
    """
    w = _readout_weights(model)
    if w is None or w.size == 0 or _seen_trained(w):
        return
    if np.any(np.asarray(w)):
        if isinstance(w, jax.Array):  # immutable, unlike a NumPy array
            _remember_trained(w)
    else:
        _errors.warn_at_caller(
            f"{owner}: the model has not been trained: its readout weights "
            "(wout) are all zero, so every output is zero. Train it first "
            "(e.g. with the train_* function of its module) or set trained "
            "weights with set_readout.",
            UntrainedModelWarning,
        )
