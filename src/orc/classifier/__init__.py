"""Classifying sequences with reservoir computers."""

from .base import RCClassifierBase, feature_dim
from .models import ESNClassifier
from .train import (
    fit_features,
    loo_ridge,
    train_ESNClassifier,
    train_RCClassifier,
)

__all__ = [
    "RCClassifierBase",
    "ESNClassifier",
    "train_RCClassifier",
    "train_ESNClassifier",
    "feature_dim",
    "loo_ridge",
    "fit_features",
]
