"""Griffe extension: show the ORC signatures that ``orc_signature`` attaches.

Constructors decorated with :func:`orc._signatures.orc_signature` are written
``def __init__(self, data_dim, **hyper)`` in the source; their real signature
(ORC 0.4's, every hyperparameter with its default) is built at import time.
Griffe reads the source, so this extension replaces the parameters of each
such ``__init__`` by those of the imported function's ``__signature__``.
"""

from __future__ import annotations

import importlib
import inspect

import griffe

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: griffe.ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: griffe.ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: griffe.ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: griffe.ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: griffe.ParameterKind.var_keyword,
}


def _source(value) -> str:
    """A default as it would be written in the source."""
    if inspect.isclass(value):
        module = {"jax.numpy": "jnp", "numpy": "np"}.get(value.__module__)
        return f"{module}.{value.__name__}" if module else value.__qualname__
    return repr(value)


def _annotation(value) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    return getattr(value, "__name__", None) or str(value)


class OrcSignatures(griffe.Extension):
    def on_function(self, *, func: griffe.Function, **kwargs) -> None:
        if not any("orc_signature" in str(d.value) for d in func.decorators):
            return
        owner = func.parent
        module = importlib.import_module(owner.module.path)
        runtime = getattr(module, owner.name).__init__
        params = []
        for p in inspect.signature(runtime).parameters.values():
            default = None if p.default is p.empty else _source(p.default)
            params.append(
                griffe.Parameter(
                    p.name,
                    annotation=_annotation(p.annotation),
                    kind=_KINDS[p.kind],
                    default=default,
                )
            )
        func.parameters = griffe.Parameters(*params)
