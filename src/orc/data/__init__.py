"""Benchmark dynamical systems: chaotic, hyper-chaotic and Hamiltonian ODEs, Lorenz 96
and the Kuramoto-Sivashinsky PDE.

Each function returns ``(us, ts)``, a trajectory ``(Nt, dim)`` and its times
``(Nt,)``; see :mod:`orc.data.integrators` for the conventions.
The reservoirpy-style series of :mod:`orc.data.datasets` (``mackey_glass``,
``narma``, ``henon_map``, ``logistic_map``, ``mso``) return plain ``(time, dim)``
arrays instead; its ODEs (``double_scroll``, ``multiscroll``,
``rabinovich_fabrikant``) return ``(us, ts)``.
"""

from orc.data import datasets, integrators
from orc.data.datasets import *  # noqa: F403 - its __all__, re-exported
from orc.data.integrators import *  # noqa: F403 - its __all__, re-exported

__all__ = ["integrators", *integrators.__all__, *datasets.__all__]
