"""Forecasts that diverged are reported, never returned silently.

A closed loop that leaves the attractor (an unstable readout, a polynomial
feature map that overflows) produces values that grow without bound and then
NaN. The forecasting methods look at what they return, once per call, when
it is a concrete array (the call ran outside any ``jax.jit``/``vmap``): the
first step that is non-finite, or whose magnitude exceeds a fixed multiple of
the data's scale, is reported with a :class:`DivergenceWarning` naming the
step and the cause. Under the user's own transformation there is nothing
concrete to look at until their program ends, so nothing is checked;
:func:`check_forecast` is the check to call there (an ``eqx.error_if``) or
anywhere else, e.g. to turn the warning into an error.

The scale is the training data's, kept with the model: its readout's
``data_scale`` (:attr:`orc.readouts.ReadoutBase.data_scale`; an
:class:`~orc.forecaster.NVARForecaster` keeps its own ``data_scale``), the
largest magnitude of each output's training targets, set by training. A step
diverged when an output exceeds ``BLOWUP_DATA = 10`` times its scale (an
output's scale is taken as at least ``SCALE_FLOOR`` times the largest, so
that an output that was constant zero in training is not held to zero);
``forecast_from_IC`` allows the warm-up data's range too where that is
larger. So a readout that puts the forecast far off the data's range is
flagged from the first step, however short the forecast, and a forecast of
data that decays (far below the data's range) never is. A chaotic system
stays on its attractor, within the range of a long enough stretch of its
trajectory, so ten times that range is off the attractor: a closed loop that
got there is not forecasting the system any more, whether or not it goes on
to overflow.

Without a known scale (an untrained model, weights set by hand, a model
file written before the scale was kept) the reference is the largest
magnitude of the warm-up data when there is one (limit ``BLOWUP_DATA``
times it), else of the first ``REFERENCE_STEPS`` forecast steps (limit
``BLOWUP = 100`` times it: a few steps see less of the attractor than a
warm-up does).
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _errors
from ._errors import warn_at_caller

__all__ = [
    "DivergenceWarning",
    "check_forecast",
    "report_divergence",
    "report_overflow",
]

BLOWUP = 100.0
BLOWUP_DATA = 10.0
REFERENCE_STEPS = 10
#: An output's training scale counts as at least this fraction of the
#: largest output's (an output constant zero in training).
SCALE_FLOOR = 1e-3


class DivergenceWarning(RuntimeWarning):
    """A forecast became non-finite or grew far beyond where it started.

    The message names the first step (0-based index of the forecast's time
    axis) and the cause. ``warnings.simplefilter("error", DivergenceWarning)``
    turns it into an exception.
    """


def _reference(out, reference):
    if reference is None:
        head = out[: min(REFERENCE_STEPS, out.shape[0])]
        ref = np.max(np.abs(head[np.isfinite(head)]), initial=0.0)
    else:
        ref = np.max(np.abs(np.asarray(reference)), initial=0.0)
    return max(float(ref), float(np.finfo(out.dtype).tiny))


def _scale_reference(out, reference, scale):
    """Per output (the last axis of ``out``), the scale a forecast is judged
    against when the training data's ``scale`` is known (see the module
    doc), as an array broadcasting against ``out``'s rows."""
    s = np.asarray(scale, np.float64)
    s = np.maximum(s, SCALE_FLOOR * s.max(initial=0.0))
    if reference is not None:
        r = np.abs(np.asarray(reference, np.float64))
        if r.size:
            r = r.reshape(-1, r.shape[-1]) if r.ndim else r.reshape(1, 1)
            per = r.max(axis=0) if r.shape[-1] == s.shape[-1] else r.max()
            s = np.maximum(s, per)
    s = np.maximum(s, float(np.finfo(out.dtype).tiny))
    return np.broadcast_to(s, out.shape[1:]).reshape(-1)


def _diagnose(out: np.ndarray, reference, scale=None) -> str | None:
    """The message for the first diverged step of ``out (time, ...)``, or
    None; ``scale``: the training data's per output (see the module doc)."""
    steps = out.reshape(out.shape[0], -1)
    # the usual case, every value finite and none large, in one pass (the
    # largest magnitude is NaN or inf if any value is); a forecast called in
    # a loop pays this at every call
    peak = np.abs(steps).max(initial=0.0)
    if scale is not None and np.shape(scale)[-1:] == out.shape[-1:]:
        factor = BLOWUP_DATA
        s = np.asarray(scale)
        # the smallest per-output limit (a warm-up only raises limits)
        low = max(float(s.min()), SCALE_FLOOR * float(s.max()))
        if np.isfinite(peak) and peak <= factor * low:
            return None
        limit = factor * _scale_reference(out, reference, scale)
    else:
        factor = BLOWUP if reference is None else BLOWUP_DATA
        limit = factor * _reference(steps, reference)
        if np.isfinite(peak) and peak <= limit:
            return None
    finite = np.isfinite(steps).all(axis=1)
    with np.errstate(invalid="ignore"):
        over = np.abs(np.where(np.isfinite(steps), steps, 0.0)) > limit
    large = over.any(axis=1)
    bad = ~finite | large
    if not bad.any():
        return None
    step = int(np.argmax(bad))
    if large[step]:
        j = int(np.argmax(over[step]))
        peak = float(np.abs(steps[step, j]))
        ref = float(np.broadcast_to(limit, steps.shape[1:])[j]) / factor
        if scale is not None and np.shape(limit):
            where = f" in output {j}" if steps.shape[1] > 1 else ""
            cause = (
                f"its magnitude{where} reached {peak:.3g}, more than {factor:g} "
                f"times the scale of the training data ({ref:.3g})"
            )
        else:
            cause = (
                f"its magnitude reached {peak:.3g}, more than {factor:g} times "
                f"the scale it started from ({ref:.3g})"
            )
    else:
        cause = "it became non-finite (NaN or inf)"
    later = (~finite[step:]).any()
    tail = (
        f"; it is non-finite from step {step + int(np.argmax(~finite[step:]))} on"
        if later and finite[step]
        else ""
    )
    return f"the forecast diverged at step {step} of {out.shape[0]}: {cause}{tail}"


def report_divergence(owner: str, out, reference=None, scale=None):
    """Warn (:class:`DivergenceWarning`) if the concrete forecast ``out`` diverged.

    ``reference``: the warm-up data, if any; ``scale``: the training data's
    per output (a readout's ``data_scale``; ``None``: unknown), see the
    module doc. Returns ``out`` unchanged. A traced ``out`` (inside
    ``jit``/``vmap``) is not looked at.
    """
    if any(isinstance(a, jax.core.Tracer) for a in (out, reference, scale)):
        return out
    msg = _diagnose(np.asarray(out), reference, scale)
    if msg is not None:
        warn_at_caller(
            f"{owner}: {msg}. The closed loop is unstable for this model: "
            "check the training (a larger ridge `beta`, `input_noise`, more or "
            "better sampled data) before using this forecast.",
            DivergenceWarning,
        )
    return out


def report_overflow(owner: str, out, dtype, inputs=()) -> None:
    """Warn (:class:`DivergenceWarning`, returned with the results of the
    compiled orc program that calls it, so also under ``jax.jit``) when the
    open-loop outputs ``out`` of checked, finite inputs hold NaN/inf: the
    inputs overflow the model's arithmetic (data far beyond the training's
    scale). Nothing is fed back here, so it is not a forecast's divergence,
    but it is never returned silently either. ``inputs``: the arrays the
    outputs came from; where one is not finite its own error names it and
    nothing is warned here."""
    finite_inputs = jnp.all(jnp.asarray([jnp.all(jnp.isfinite(x)) for x in inputs]))
    _errors.warn(
        ~jnp.all(jnp.isfinite(out)) & finite_inputs,
        f"{owner}: the outputs hold NaN/inf although the inputs are finite: "
        f"they overflow the model's {jnp.dtype(dtype).name} arithmetic. Scale "
        "the data as the training data was scaled.",
        DivergenceWarning,
    )


def check_forecast(forecast, reference=None, *, error: bool = True):
    """Check that ``forecast (time, ...)`` did not diverge.

    A step diverged when it holds NaN/inf or its largest magnitude exceeds
    10 times the largest magnitude of ``reference`` (e.g. the warm-up data)
    when given, else 100 times that of the first 10 steps. Outside ``jax.jit`` the message names the first such step and the
    cause; with ``error=True`` (default) it raises ``ValueError``, else it
    warns (:class:`DivergenceWarning`). Under ``jax.jit`` it is an
    ``eqx.error_if`` on the returned array (raised when the program runs).

    Returns ``forecast``.
    """
    traced = isinstance(forecast, jax.core.Tracer) or isinstance(
        reference, jax.core.Tracer
    )
    if not traced:
        msg = _diagnose(np.asarray(forecast), reference)
        if msg is not None:
            if error:
                raise ValueError(f"check_forecast: {msg}")
            warn_at_caller(f"check_forecast: {msg}", DivergenceWarning)
        return forecast
    out = jnp.asarray(forecast)
    steps = out.reshape(out.shape[0], -1)
    head = steps if reference is None else jnp.asarray(reference)
    if reference is None:
        head = steps[: min(REFERENCE_STEPS, steps.shape[0])]
    ref = jnp.max(jnp.abs(jnp.where(jnp.isfinite(head), head, 0.0)))
    ref = jnp.maximum(ref, jnp.finfo(out.dtype).tiny)
    factor = BLOWUP if reference is None else BLOWUP_DATA
    bad = ~jnp.all(jnp.isfinite(steps)) | jnp.any(jnp.abs(steps) > factor * ref)
    return eqx.error_if(
        forecast,
        bad,
        "check_forecast: the forecast diverged: a step is non-finite or exceeds "
        f"{factor:g} times the scale it started from",
    )


def keep_data_scale(model, targets):
    """``model`` whose readout records the scale of its training ``targets``
    ``(..., out_dim)``: per output, the largest finite magnitude
    (:attr:`orc.readouts.ReadoutBase.data_scale`, what forecasts are judged
    against). A readout without ``with_data_scale`` (not a
    :class:`~orc.readouts.ReadoutBase`) or of another width is left as it is."""
    readout = model.readout
    out_dim = getattr(readout, "out_dim", None)
    if not hasattr(readout, "with_data_scale") or targets.shape[-1] != out_dim:
        return model
    y = jnp.abs(jnp.asarray(targets, readout.dtype)).reshape(-1, out_dim)
    y = jnp.where(jnp.isfinite(y), y, 0.0)
    scale = jnp.max(y, axis=0, initial=0.0)
    return model.set_readout(readout.with_data_scale(scale))
