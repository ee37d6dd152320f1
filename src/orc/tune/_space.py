"""Search spaces: what each hyperparameter may take, and the samplers that
draw designs from them.

A search space is a ``dict`` from a constructor argument of the model class
to a distribution (:class:`Uniform`, :class:`LogUniform`, :class:`IntUniform`,
:class:`Choice`) or a fixed value. Every distribution maps a coordinate of
the unit cube to a value (:meth:`AbstractDistribution.from_unit`), so one
sampler of the unit cube serves them all: :func:`unit_design` draws random
(NumPy) or scrambled Sobol (``scipy.stats.qmc``) points.

The continuous ones (:class:`Uniform`, :class:`LogUniform`) are *traced*: a
population of candidates that differ only in them is one compiled program
(their values are array leaves of the models, see DESIGN.md §3). The
discrete ones (:class:`IntUniform`, :class:`Choice`) are *static*: each
value they take (a reservoir size, a density, a readout kind) is a model
structure of its own, compiled once.
"""

from __future__ import annotations

import abc
import math
import numbers
import warnings
from collections.abc import Mapping, Sequence
from typing import ClassVar

import equinox as eqx
import numpy as np

__all__ = [
    "AbstractDistribution",
    "Uniform",
    "LogUniform",
    "IntUniform",
    "Choice",
    "SAMPLERS",
    "check_space",
    "unit_design",
]

#: The samplers :func:`unit_design` knows (``orc.tune.search(sampler=...)``).
SAMPLERS = ("sobol", "random")


def _finite(owner: str, name: str, value) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a real number, got {value!r}")
    value = float(value)
    if not math.isfinite(value):
        raise ValueError(f"{owner}: {name} must be finite, got {value!r}")
    return value


def _interval(owner: str, low, high, *, positive: bool) -> tuple[float, float]:
    """``(low, high)`` as finite floats with ``low < high`` (and ``0 < low``
    where ``positive``)."""
    lo, hi = _finite(owner, "low", low), _finite(owner, "high", high)
    if positive and not 0 < lo < hi:
        raise ValueError(
            f"{owner}: needs 0 < low < high, got low={low!r}, high={high!r}"
        )
    if not lo < hi:
        raise ValueError(f"{owner}: low must be < high, got {low!r}, {high!r}")
    return lo, hi


class AbstractDistribution(eqx.Module):
    """A hyperparameter's distribution over the unit interval's image.

    ``traced``: whether candidates differing in it share one compiled
    program (a continuous value held by the model as an array) or each of
    its values is a program of its own."""

    traced: eqx.AbstractClassVar[bool]

    @abc.abstractmethod
    def from_unit(self, u: np.ndarray) -> np.ndarray | list:
        """The values of coordinates ``u`` in ``[0, 1)``."""


class _Interval(AbstractDistribution):
    """A continuous distribution on ``[low, high]`` (traced), its bounds
    checked by :func:`_interval` (``0 < low`` where ``_positive``)."""

    low: float
    high: float
    traced = True
    _positive: ClassVar[bool]

    def __init__(self, low, high):
        name = type(self).__name__
        self.low, self.high = _interval(name, low, high, positive=self._positive)


class Uniform(_Interval):
    """Uniform on ``[low, high]``."""

    _positive = False

    def from_unit(self, u):
        return self.low + np.asarray(u, float) * (self.high - self.low)


class LogUniform(_Interval):
    """Log-uniform on ``[low, high]`` (``0 < low < high``): every decade
    equally likely, for scales (ridge strength, input scaling, leak)."""

    _positive = True

    def from_unit(self, u):
        lo, hi = math.log(self.low), math.log(self.high)
        return np.exp(lo + np.asarray(u, float) * (hi - lo))

    def grid(self, n: int) -> np.ndarray:
        """``n`` log-spaced values from ``low`` to ``high`` (both included)."""
        return np.geomspace(self.low, self.high, n)


class IntUniform(AbstractDistribution):
    """An integer uniform on ``low..high`` (both included); static (e.g. a
    reservoir size: one compiled program per value drawn)."""

    low: int
    high: int
    traced = False

    def __init__(self, low, high):
        for name, v in (("low", low), ("high", high)):
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral):
                raise TypeError(f"IntUniform: {name} must be an int, got {v!r}")
        if not low <= high:
            raise ValueError(f"IntUniform: low must be <= high, got {low}, {high}")
        self.low, self.high = int(low), int(high)

    def from_unit(self, u):
        n = self.high - self.low + 1
        k = np.minimum((np.asarray(u, float) * n).astype(int), n - 1)
        return [self.low + int(i) for i in k]


class Choice(AbstractDistribution):
    """One of ``options`` (Python values, each a model structure of its own:
    static)."""

    options: tuple
    traced = False

    def __init__(self, options):
        if isinstance(options, (str, bytes)) or not isinstance(options, Sequence):
            raise TypeError(f"Choice: options must be a sequence, got {options!r}")
        if len(options) == 0:
            raise ValueError("Choice: options must not be empty")
        self.options = tuple(options)

    def from_unit(self, u):
        n = len(self.options)
        k = np.minimum((np.asarray(u, float) * n).astype(int), n - 1)
        return [self.options[int(i)] for i in k]


def check_space(owner: str, space, reserved: Sequence[str] = ()) -> dict:
    """``space`` as a ``dict`` of names to distributions or fixed values,
    checked: string keys, none of ``reserved`` (arguments the search sets
    itself)."""
    if not isinstance(space, Mapping):
        raise TypeError(
            f"{owner}: space must be a dict of hyperparameter names to "
            f"distributions (orc.tune.Uniform, ...), got {type(space).__name__}"
        )
    out = {}
    for name, dist in space.items():
        if not isinstance(name, str):
            raise TypeError(f"{owner}: space keys must be strings, got {name!r}")
        if name in reserved:
            raise ValueError(
                f"{owner}: space must not set {name!r}; the search sets it "
                f"(see the {name!r} argument)"
            )
        out[name] = dist
    return out


def unit_design(sampler: str, n: int, dims: int, seed: int) -> np.ndarray:
    """``(n, dims)`` points of the unit cube: ``"sobol"`` (scrambled, from
    ``scipy.stats.qmc``: better spread than random for a small budget; its
    balance is best for ``n`` a power of 2) or ``"random"`` (independent
    uniform draws)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    if dims == 0:
        return np.zeros((n, 0))
    if sampler == "random":
        return np.random.default_rng(seed).random((n, dims))
    from scipy.stats import qmc

    with warnings.catch_warnings():  # "balance properties ... powers of 2"
        warnings.simplefilter("ignore", UserWarning)
        return qmc.Sobol(dims, scramble=True, seed=seed).random(n)
