"""Griffe extension: show the values of the defaults taken from ``orc._defaults``.

Constructors take their defaults from the one declaration of the
hyperparameters (``leak_rate: float = ESN.leak_rate``, see
:mod:`orc._defaults`). Griffe reads the source, so the API pages would show
``ESN.leak_rate``; this extension shows the value there (``0.6``).
"""

from __future__ import annotations

import importlib
import re

import griffe

_DEFAULTS = importlib.import_module("orc._defaults")
_REFERENCE = re.compile(rf"({'|'.join(_DEFAULTS.__all__)})\.(\w+)")


class OrcSignatures(griffe.Extension):
    def on_function(self, *, func: griffe.Function, **kwargs) -> None:
        for parameter in func.parameters:
            match = _REFERENCE.fullmatch(str(parameter.default))
            if match:
                family, name = match.groups()
                value = getattr(getattr(_DEFAULTS, family), name)
                parameter.default = repr(value)
