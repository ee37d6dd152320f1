"""Forecasts that diverged are reported, never returned silently.

A closed loop that leaves the attractor (an unstable readout, a polynomial
feature map that overflows) produces values that grow without bound and then
NaN. The forecasting methods look at what they return, once per call, when
it is a concrete array (the call ran outside any ``jax.jit``/``vmap``): the
first step that is non-finite, or whose largest magnitude exceeds a fixed
multiple of the scale of where the forecast started, is reported with a
:class:`DivergenceWarning` naming the step and the cause. Under the user's own
transformation there is nothing concrete to look at until their program ends,
so nothing is checked; :func:`check_forecast` is the check to call there (an
``eqx.error_if``) or anywhere else, e.g. to turn the warning into an error.

The scale of the start is the largest magnitude of the warm-up data when
there is one (``forecast_from_IC``; the limit is then ``BLOWUP_DATA = 10``
times it), else of the first ``REFERENCE_STEPS`` forecast steps (limit
``BLOWUP = 100`` times it: a few steps see less of the attractor than a
warm-up does). A chaotic system stays on its attractor, within the range of a
long enough stretch of its trajectory, so ten times that range is off the
attractor: a closed loop that got there is not forecasting the system any
more, whether or not it goes on to overflow.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._errors import warn_at_caller

__all__ = ["DivergenceWarning", "check_forecast", "report_divergence"]

BLOWUP = 100.0
BLOWUP_DATA = 10.0
REFERENCE_STEPS = 10


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


def _diagnose(out: np.ndarray, reference) -> str | None:
    """The message for the first diverged step of ``out (time, ...)``, or None."""
    steps = out.reshape(out.shape[0], -1)
    factor = BLOWUP if reference is None else BLOWUP_DATA
    limit = factor * _reference(steps, reference)
    # the usual case, every value finite and none large, in one pass (the
    # largest magnitude is NaN or inf if any value is); a forecast called in
    # a loop pays this at every call
    peak = np.abs(steps).max(initial=0.0)
    if np.isfinite(peak) and peak <= limit:
        return None
    finite = np.isfinite(steps).all(axis=1)
    with np.errstate(invalid="ignore"):
        large = np.abs(np.where(np.isfinite(steps), steps, 0.0)).max(axis=1) > limit
    bad = ~finite | large
    if not bad.any():
        return None
    step = int(np.argmax(bad))
    if large[step]:
        peak = float(np.abs(steps[step][np.isfinite(steps[step])]).max())
        cause = (
            f"its magnitude reached {peak:.3g}, more than {factor:g} times the "
            f"scale it started from ({limit / factor:.3g})"
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


def report_divergence(owner: str, out, reference=None):
    """Warn (:class:`DivergenceWarning`) if the concrete forecast ``out`` diverged.

    Returns ``out`` unchanged. A traced ``out`` (inside ``jit``/``vmap``) is
    not looked at.
    """
    if isinstance(out, jax.core.Tracer) or isinstance(reference, jax.core.Tracer):
        return out
    msg = _diagnose(np.asarray(out), reference)
    if msg is not None:
        warn_at_caller(
            f"{owner}: {msg}. The closed loop is unstable for this model: "
            "check the training (a larger ridge `beta`, `input_noise`, more or "
            "better sampled data) before using this forecast.",
            DivergenceWarning,
        )
    return out


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
