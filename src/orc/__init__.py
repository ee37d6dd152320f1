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

Training keeps float64 accuracy whatever the model's dtype: a float32 model's
ridge statistics are accumulated and solved in float64 when x64 is on, and
kept in QR form when it is off (see ``orc._ridge``; a float32 Lorenz63 ESN
keeps 95-98% of the float64 model's valid prediction time).

Training solves a ridge regression; when ``G + beta I`` is numerically
singular for the ridge strength (collinear features), the minimum-norm
solution is used and :class:`IllConditionedRidgeWarning` says so (raise
``beta``, or train in float64). Non-finite statistics are an error. A
forecaster's training also checks its own fit: when the readout's one-step
predictions over the fitted rows leave more than 81% of the targets'
variance unexplained (NRMSE above 0.9), :class:`PoorFitWarning` points at the
data or the reservoir.

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

import importlib
from typing import TYPE_CHECKING

from ._version import __version__

if TYPE_CHECKING:  # what the lazy names below resolve to, for tools that read code
    from . import (
        classifier,
        conceptors,
        control,
        data,
        drivers,
        embeddings,
        forecaster,
        initializers,
        io,
        metrics,
        online,
        plasticity,
        readouts,
        regression,
        topologies,
        tune,
        utils,
    )
    from ._config import show_config
    from ._errors import Errors, capture_errors
    from ._export import export
    from ._ridge import IllConditionedRidgeWarning
    from ._strategy import use_backend
    from ._validation import (
        PoorFitWarning,
        PrecisionLossWarning,
        UnregularizedRidgeWarning,
        UntrainedModelWarning,
    )
    from .forecaster._sharding import shard
    from .io import load, save

__all__ = [
    "classifier",
    "conceptors",
    "control",
    "data",
    "drivers",
    "embeddings",
    "forecaster",
    "initializers",
    "io",
    "load",
    "metrics",
    "online",
    "plasticity",
    "save",
    "readouts",
    "regression",
    "topologies",
    "tune",
    "utils",
    "use_backend",
    "shard",
    "show_config",
    "capture_errors",
    "Errors",
    "export",
    "IllConditionedRidgeWarning",
    "PoorFitWarning",
    "PrecisionLossWarning",
    "UnregularizedRidgeWarning",
    "UntrainedModelWarning",
    "__version__",
]

# Submodules and re-exported names are imported on first use (PEP 562), so
# ``import orc`` (and the ``orc`` command's start-up) does not pay for JAX,
# Equinox and every model family until something is used. A re-exported name
# -> the module it comes from:
_NAMES = {
    "show_config": "._config",
    "Errors": "._errors",
    "capture_errors": "._errors",
    "export": "._export",
    "IllConditionedRidgeWarning": "._ridge",
    "use_backend": "._strategy",
    "PoorFitWarning": "._validation",
    "PrecisionLossWarning": "._validation",
    "UnregularizedRidgeWarning": "._validation",
    "UntrainedModelWarning": "._validation",
    "load": ".io",
    "save": ".io",
    "shard": ".forecaster._sharding",
}
#: The other public names, bar ``__version__``: the submodules.
_SUBMODULES = frozenset(__all__) - set(_NAMES) - {"__version__"}


# What ``import orc`` registers with JAX, so that a program exported by
# :func:`export` runs in a fresh process after ``import orc``: orc.Errors'
# serialisation and the native kernels' FFI targets. Both need JAX, which
# ``import orc`` does not import: they are registered now if JAX is already
# imported, else right after the first ``import jax``.
def _register_with_jax() -> None:
    import warnings

    try:
        importlib.import_module("._errors", __name__)
        importlib.import_module("._native", __name__)
    except Exception as err:  # noqa: BLE001 - never break `import jax`
        warnings.warn(
            f"orc could not register its exported-program support with JAX: {err}",
            RuntimeWarning,
            stacklevel=2,
        )


class _AfterJaxImport:
    """A one-shot import hook: runs :func:`_register_with_jax` once the
    ``jax`` package has finished importing."""

    def find_spec(self, name, path=None, target=None):
        if name != "jax":
            return None
        import importlib.util
        import sys

        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then_register(module):
            exec_module(module)
            _register_with_jax()

        loader.exec_module = exec_then_register
        return spec


def _install_jax_hook() -> None:
    import sys

    if "jax" in sys.modules:
        _register_with_jax()
    elif not any(isinstance(f, _AfterJaxImport) for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterJaxImport())


_install_jax_hook()


def __getattr__(name: str):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _NAMES:
        value = getattr(importlib.import_module(_NAMES[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
