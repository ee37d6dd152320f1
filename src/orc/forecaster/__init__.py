"""Forecasting dynamical systems with reservoir computers."""

from .._divergence import DivergenceWarning, check_forecast
from .base import CRCForecasterBase, RCForecasterBase
from .hybrid import HybridESNForecaster, KnowledgeDriver, KnowledgeEmbedding
from .models import (
    CESNForecaster,
    DeepESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
    TimeConstantWarning,
)
from .nvar import (
    NVARForecaster,
    nvar_order,
    nvar_stride,
    select_input_noise,
    train_NVARForecaster,
)
from .train import (
    train_CESNForecaster,
    train_EnsembleESNForecaster,
    train_ESNForecaster,
    train_RCForecaster,
)

__all__ = [
    "RCForecasterBase",
    "CRCForecasterBase",
    "ESNForecaster",
    "CESNForecaster",
    "EnsembleESNForecaster",
    "DeepESNForecaster",
    "HybridESNForecaster",
    "KnowledgeEmbedding",
    "KnowledgeDriver",
    "train_RCForecaster",
    "train_ESNForecaster",
    "train_CESNForecaster",
    "train_EnsembleESNForecaster",
    "NVARForecaster",
    "train_NVARForecaster",
    "nvar_order",
    "nvar_stride",
    "select_input_noise",
    "DivergenceWarning",
    "TimeConstantWarning",
    "check_forecast",
]
