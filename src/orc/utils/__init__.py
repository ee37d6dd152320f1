"""Utilities: numerics, regressions and visualization.

``visualization`` (matplotlib) is imported on first use, so models and
training, which use :mod:`numerics`, never import matplotlib.
"""

import importlib
from typing import TYPE_CHECKING

from . import numerics, regressions
from .numerics import max_eig_arnoldi

if TYPE_CHECKING:  # what the lazy name below resolves to, for tools that read code
    from . import visualization

__all__ = ["numerics", "regressions", "visualization", "max_eig_arnoldi"]


def __getattr__(name: str):
    if name == "visualization":
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
