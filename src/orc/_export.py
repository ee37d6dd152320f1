"""A trained model's computation as a :mod:`jax.export` artifact."""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import jax

from . import _native
from ._errors import capture_errors
from ._strategy import lowering_for, lowering_targets, use_backend

__all__ = ["export"]


def export(
    fn: Callable,
    *args,
    backend: str | None = None,
    platforms=None,
    **kwargs,
) -> jax.export.Exported:
    """``jax.export`` of ``fn``, a function of arrays that calls orc models.

    ``args``/``kwargs`` are example arrays or :class:`jax.ShapeDtypeStruct`
    (the shapes the artifact accepts); the model itself is closed over, so its
    weights become constants of the artifact. The exported function returns
    ``(result, errors)``: the run-time checks of the orc calls inside (NaN
    inputs, a corrupted matrix, ...) are outputs, an :class:`orc.Errors`
    (see :func:`orc.capture_errors`), since an exported program cannot hold a
    host callback. Call ``errors.raise_if_any()`` after running it.

    ``backend`` picks the computation as :func:`orc.use_backend` does. The
    default (``"native"`` on CPU) calls orc's native kernels, so the artifact
    runs in a process that has imported this version of orc (which registers
    them); ``backend="xla"`` exports plain StableHLO, which any JAX able to
    read the artifact runs (importing orc is still needed to read ``errors``
    back).

    Example
    -------
    >>> exp = orc.export(lambda r: model.forecast(500, r), r0)
    >>> blob = exp.serialize()             # bytes, e.g. to a file
    >>> y, errors = jax.export.deserialize(blob).call(r0)
    >>> errors.raise_if_any()
    """
    checks = [
        jax.export.DisabledSafetyCheck.custom_call(t) for t in _native.target_names()
    ]
    context = use_backend(backend) if backend is not None else contextlib.nullcontext()
    # lowered for other platforms than the CPU (from any process): every
    # branch of orc's platform-dependent code is traced, not the CPU's only
    elsewhere = platforms is not None and set(platforms) - {"cpu"}
    targets = "any" if elsewhere else lowering_targets()
    with context, lowering_for(targets):
        return jax.export.export(
            jax.jit(capture_errors(fn)), platforms=platforms, disabled_checks=checks
        )(*args, **kwargs)
