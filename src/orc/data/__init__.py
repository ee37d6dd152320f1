"""Benchmark dynamical systems: chaotic, hyper-chaotic and Hamiltonian ODEs, Lorenz 96
and the Kuramoto-Sivashinsky PDE.

Each function returns ``(us, ts)``, a trajectory ``(Nt, dim)`` and its times
``(Nt,)``; see :mod:`orc.data.integrators` for the conventions.
The reservoirpy-style series of :mod:`orc.data.datasets` (``mackey_glass``,
``narma``, ``henon_map``, ``logistic_map``, ``mso``) return plain ``(time, dim)``
arrays instead; its ODEs (``double_scroll``, ``multiscroll``) return ``(us, ts)``.
"""

from orc.data import integrators
from orc.data.datasets import (
    double_scroll,
    henon_map,
    logistic_map,
    mackey_glass,
    mso,
    multiscroll,
    narma,
)
from orc.data.integrators import (
    KS_1D,
    colpitts,
    double_pendulum,
    hyper_lorenz63,
    hyper_xu,
    lorenz63,
    lorenz96,
    rossler,
    sakaraya,
)

__all__ = [
    "integrators",
    "lorenz63",
    "rossler",
    "sakaraya",
    "colpitts",
    "hyper_lorenz63",
    "hyper_xu",
    "double_pendulum",
    "lorenz96",
    "KS_1D",
    "mackey_glass",
    "narma",
    "henon_map",
    "logistic_map",
    "double_scroll",
    "multiscroll",
    "mso",
]
