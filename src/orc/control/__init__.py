"""Controlling systems through a trained reservoir surrogate."""

from .base import ControlResult, RCControllerBase
from .models import ESNController
from .train import train_ESNController, train_RCController

__all__ = [
    "RCControllerBase",
    "ControlResult",
    "ESNController",
    "train_RCController",
    "train_ESNController",
]
