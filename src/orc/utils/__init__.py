"""Utilities: numerics, regressions and visualization."""

from . import numerics, regressions, visualization
from .numerics import max_eig_arnoldi

__all__ = ["numerics", "regressions", "visualization", "max_eig_arnoldi"]
