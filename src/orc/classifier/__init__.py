"""Classifying sequences with reservoir computers."""

from .base import RCClassifierBase, feature_dim
from .models import ESNClassifier
from .train import train_ESNClassifier, train_RCClassifier

__all__ = [
    "RCClassifierBase",
    "ESNClassifier",
    "train_RCClassifier",
    "train_ESNClassifier",
    "feature_dim",
]
