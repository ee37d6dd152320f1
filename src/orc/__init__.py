"""orc: reservoir computing in JAX and Equinox.

Forecast, classify and control dynamical systems with echo state networks and
their relatives. The pipeline is embedding (input -> reservoir drive) -> driver
(reservoir state update) -> readout (state -> output); models compose the three
and are Equinox modules, so ``jax.jit``, ``vmap`` and ``grad`` apply to them.

Precision: reservoir computing usually needs float64. orc never changes JAX's
global configuration; enable x64 yourself before building models::

    import jax
    jax.config.update("jax_enable_x64", True)
"""

import warnings as _warnings

import jax as _jax

from . import (
    classifier,
    control,
    data,
    drivers,
    embeddings,
    forecaster,
    readouts,
    utils,
)

__version__ = "0.5.0.dev0"

if not _jax.config.jax_enable_x64:
    _warnings.warn(
        "orc: jax_enable_x64 is off, so models default to float32; reservoir "
        "forecasts usually need float64. Enable it before creating models with "
        "jax.config.update('jax_enable_x64', True).",
        UserWarning,
        stacklevel=2,
    )

__all__ = [
    "classifier",
    "control",
    "data",
    "drivers",
    "embeddings",
    "forecaster",
    "readouts",
    "utils",
    "__version__",
]
