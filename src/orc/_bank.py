"""Banks of reservoirs and declared capabilities: what every component shares.

**Banks.** Every reservoir component (embedding, driver, readout) holds a
leading bank axis, ORC's "chunks": one matrix, input weight or readout weight
per reservoir, a single reservoir being a bank of one. The per-reservoir
computation is written once and mapped over the bank with ``jax.vmap``. What
differs between ``ESNDriver`` and ``ParallelESNDriver(chunks=1)`` is only the
*view* of states a user passes and receives: ``(res_dim,)`` for the single
forms (``single=True``, as in ORC 0.4), ``(chunks, res_dim)`` for the
parallel ones. :func:`to_bank` and :func:`to_view` convert at the boundary;
the computation in between never branches on it.

**Capabilities.** The fused native passes (a whole teacher-forced run with its
ridge statistics, a whole closed-loop forecast) compute a specific pipeline.
A component states which of them it supports in its own class body,
``capabilities = frozenset({...})``; the statement is not inherited, so a
subclass that changes the computation (a user's ORC-style subclass of
``ParallelESNDriver``, say) runs through the generic path unless it states
the capability again. Nothing is detected by probing methods.
"""

from __future__ import annotations

__all__ = ["to_bank", "to_view", "declares"]


def to_bank(x, view: tuple[int, ...], bank: tuple[int, ...]):
    """``x`` of shape ``(*lead, *view)`` as ``(*lead, *bank)``."""
    lead = x.shape[: x.ndim - len(view)]
    return x.reshape(tuple(lead) + tuple(bank))


def to_view(x, bank: tuple[int, ...], view: tuple[int, ...]):
    """Inverse of :func:`to_bank`: ``(*lead, *bank)`` as ``(*lead, *view)``."""
    return to_bank(x, bank, view)


def declares(obj, capability: str) -> bool:
    """Whether the class of ``obj`` states ``capability`` in its own body."""
    return capability in type(obj).__dict__.get("capabilities", ())
