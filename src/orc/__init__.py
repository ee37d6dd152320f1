"""orc: reservoir computing in JAX and Equinox.

Forecast, classify and control dynamical systems with echo state networks and
their relatives. The pipeline is embedding (input -> reservoir drive) -> driver
(reservoir state update) -> readout (state -> output); models compose the three
and are Equinox modules, so ``jax.jit``, ``vmap`` and ``grad`` apply to them.

Precision: reservoir computing usually needs float64. orc never changes JAX's
global configuration; building a float64 model while x64 is off warns and gives
float32. Enable x64 yourself before building models::

    import jax
    jax.config.update("jax_enable_x64", True)

Training solves a ridge regression; when ``G + beta I`` is numerically
singular for the ridge strength (collinear features), the minimum-norm
solution is used and :class:`IllConditionedRidgeWarning` says so (raise
``beta``, or train in float64). Non-finite statistics are an error.

Data entering a model is checked where it enters (``orc._validation.check_data``):
bool and complex arrays are refused, integers and Python lists are converted
to the model's dtype, and float data cast down to a lower-precision model
warns (:class:`PrecisionLossWarning`). ``beta=0`` warns
(:class:`UnregularizedRidgeWarning`), and forecasting, classifying or
computing a control with an untrained model (all-zero readout weights) warns
(:class:`UntrainedModelWarning`).

Errors found while a compiled program runs are returned by it as data and
raised (or warned) when the call returns, so orc's programs hold no host
callback: JAX's persistent compilation cache stores them, and
:func:`export` serialises them. :func:`capture_errors` gives them to you as
a value under your own ``jax.jit``.
"""

from . import (
    classifier,
    control,
    data,
    drivers,
    embeddings,
    forecaster,
    io,
    metrics,
    online,
    readouts,
    regression,
    utils,
)
from ._config import show_config
from ._errors import Errors, capture_errors
from ._export import export
from ._ridge import IllConditionedRidgeWarning
from ._strategy import use_backend
from ._validation import (
    PrecisionLossWarning,
    UnregularizedRidgeWarning,
    UntrainedModelWarning,
)
from .io import load, save

__version__ = "0.5.0.dev0"

__all__ = [
    "classifier",
    "control",
    "data",
    "drivers",
    "embeddings",
    "forecaster",
    "io",
    "load",
    "metrics",
    "online",
    "save",
    "readouts",
    "regression",
    "utils",
    "use_backend",
    "show_config",
    "capture_errors",
    "Errors",
    "export",
    "IllConditionedRidgeWarning",
    "PrecisionLossWarning",
    "UnregularizedRidgeWarning",
    "UntrainedModelWarning",
    "__version__",
]
