"""ORC 0.4's constructor signatures, each hyperparameter written once.

ORC's model and component classes spell out the same hyperparameters in every
constructor (``ESNForecaster``, ``CESNForecaster``, ``EnsembleESNForecaster``,
``ESNClassifier`` and ``ESNController`` share nine, in the same order, with the
same defaults). ORC users pass them by position as well as by name, so ours
keep those signatures exactly: names, order, defaults, keyword-only markers.
Instead of copying the list into every class, each hyperparameter's
annotation and default stand once in :data:`PARAMETERS`, and a constructor
names the ones it takes, in ORC's order::

    class ESNForecaster(RCForecasterBase):
        @orc_signature("data_dim", "res_dim", "leak_rate", *ESN_MODEL, "seed", ...)
        def __init__(self, data_dim, res_dim, **hyper): ...

The decorated ``__init__`` is called with every argument bound by name
(defaults filled in), so its body never lists them again; its
``__signature__`` is the full ORC signature, which ``inspect.signature``,
``help()``, IDEs that inspect at run time and the API pages show. A call
that does not fit the signature raises ORC's ``TypeError``, prefixed with the
class name.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable

import diffrax
import jax.numpy as jnp

__all__ = ["REQUIRED", "PARAMETERS", "ESN_MODEL", "INTEGRATION", "orc_signature"]

#: Marks a parameter without default (a required argument).
REQUIRED = inspect.Parameter.empty

#: ``name -> (annotation, default)`` of the constructor parameters, with ORC
#: 0.4's defaults.
PARAMETERS: dict[str, tuple[object, object]] = {
    # sizes
    "data_dim": (int, REQUIRED),
    "res_dim": (int, REQUIRED),
    "in_dim": (int, REQUIRED),
    "out_dim": (int, REQUIRED),
    "n_terms": (int, REQUIRED),
    "chunks": (int, 1),
    "n_classes": (int, REQUIRED),
    "control_dim": (int, REQUIRED),
    "n_layers": (int, 2),
    # model hyperparameters (ORC's model names)
    "leak_rate": (float, 0.6),
    "time_const": (float, 50.0),
    "bias": (float, 1.6),
    "embedding_scaling": (float, 0.08),
    "Wr_density": (float, 0.02),
    "Wr_spectral_radius": (float, 0.8),
    "dtype": (type, jnp.float64),
    "seed": (int, 0),
    "locality": (int, 0),
    "quadratic": (bool, False),
    "periodic": (bool, True),
    "use_sparse_eigs": (bool, True),
    "construction": (str, "orc"),
    "state_repr": (str, "final"),
    "model_space_dim": (int | None, None),
    "input_differences": (bool, False),
    "input_lags": (tuple[int, ...], ()),
    "alpha_1": (float, 100),
    "alpha_2": (float, 1),
    "alpha_3": (float, 5),
    "coupling_scaling": (float, 0.2),
    "input_passthrough": (bool, False),
    "readout_bias": (bool, True),
    # component hyperparameters (ORC's component names)
    "leak": (float, 0.6),
    "spectral_radius": (float, 0.8),
    "density": (float, 0.02),
    "mode": (str, "discrete"),
    "scaling": (float, REQUIRED),
    "eigenval_batch_size": (int | None, None),
    # continuous time (diffrax)
    "solver": (diffrax.AbstractSolver | None, None),
    "stepsize_controller": (diffrax.AbstractStepSizeController | None, None),
    "adjoint": (diffrax.AbstractAdjoint | None, None),
    "max_steps": (int | None, None),
}

#: The reservoir hyperparameters every ESN model takes after its leak rate
#: (``time_const`` for the continuous model), in ORC's order.
ESN_MODEL = (
    "bias",
    "embedding_scaling",
    "Wr_density",
    "Wr_spectral_radius",
    "dtype",
)

#: The diffrax settings of the continuous-time models, in ORC's order.
INTEGRATION = ("solver", "stepsize_controller", "adjoint", "max_steps")

_KW_ONLY = "*"


def _signature(names: tuple[str, ...], overrides: dict) -> inspect.Signature:
    unknown = set(overrides) - set(names)
    if unknown:
        raise TypeError(f"orc_signature: overrides for absent parameters {unknown}")
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)]
    for name in names:
        if name == _KW_ONLY:
            kind = inspect.Parameter.KEYWORD_ONLY
            continue
        annotation, default = PARAMETERS[name]
        default = overrides.get(name, default)
        params.append(
            inspect.Parameter(name, kind, default=default, annotation=annotation)
        )
    return inspect.Signature(params, return_annotation=None)


def orc_signature(*names: str, **overrides) -> Callable[[Callable], Callable]:
    """Give the decorated ``__init__`` the signature ``names`` (``"*"`` starts
    the keyword-only ones), with defaults from :data:`PARAMETERS` unless
    overridden by keyword (``seed=REQUIRED``, ``chunks=5``).

    The decorated function is called as ``init(self, **arguments)`` with
    every parameter present.
    """
    signature = _signature(names, overrides)

    def decorate(init: Callable) -> Callable:
        @functools.wraps(init)
        def __init__(self, *args, **kwargs):
            try:
                bound = signature.bind(self, *args, **kwargs)
            except TypeError as error:
                raise TypeError(f"{type(self).__name__}(): {error}") from None
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            del arguments["self"]
            init(self, **arguments)

        __init__.__signature__ = signature
        del __init__.__wrapped__  # the signature above, not the body's
        return __init__

    return decorate
