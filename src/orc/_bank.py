"""Banks of reservoirs and declared capabilities: what every component shares.

**Banks.** Every reservoir component (embedding, driver, readout) holds a
leading bank axis, ORC's "chunks": one matrix, input weight or readout weight
per reservoir, a single reservoir being a bank of one. The per-reservoir
computation is written once and mapped over the bank with ``jax.vmap``. What
differs between ``ESNDriver`` and ``ParallelESNDriver(chunks=1)`` is only the
*view* of states a user passes and receives: ``(res_dim,)`` for the single
forms (``single=True``, as in ORC 0.4), ``(chunks, res_dim)`` for the
parallel ones. :func:`to_bank` and :func:`to_view` convert at the boundary;
the computation in between never branches on it. A single component also
takes a state in its bank's shape, ``(1, res_dim)`` (it *is* a bank of one,
and ORC 0.4 takes both), and answers in its own view (:func:`as_view`,
:func:`lead_axes`).

**Capabilities.** The fused native passes (a whole teacher-forced run with its
ridge statistics, a whole closed-loop forecast) compute a specific pipeline.
A component states which of them it supports in its own class body,
``capabilities = frozenset({...})``; the statement is not inherited, so a
subclass that changes the computation (a user's ORC-style subclass of
``ParallelESNDriver``, say) runs through the generic path unless it states
the capability again. Nothing is detected by probing methods.
"""

from __future__ import annotations

__all__ = ["Bank", "to_bank", "to_view", "as_view", "lead_axes", "declares"]


class Bank:
    """The shapes of a component over a bank of ``chunks`` reservoirs of
    ``res_dim`` nodes that shows a bank of one without its axis when
    ``single`` (the sparse drivers, the linear readouts): a mixin of
    properties over those three fields, listed before the component's base
    class, whose ORC 0.4 rule it replaces."""

    __slots__ = ()

    @property
    def state_shape(self) -> tuple[int, ...]:
        """``(res_dim,)`` for a single reservoir, else ``(chunks, res_dim)``."""
        return self.bank_shape[self.single :]

    @property
    def bank_shape(self) -> tuple[int, int]:
        """``(chunks, res_dim)``: the shape the computation runs on."""
        return (self.chunks, self.res_dim)

    def _bank(self, x):
        return to_bank(x, self.state_shape, self.bank_shape)

    def _view(self, x):
        return to_view(x, self.bank_shape, self.state_shape)


def to_bank(x, view: tuple[int, ...], bank: tuple[int, ...]):
    """``x`` of shape ``(*lead, *view)`` as ``(*lead, *bank)``."""
    lead = x.shape[: x.ndim - len(view)]
    return x.reshape(tuple(lead) + tuple(bank))


def to_view(x, bank: tuple[int, ...], view: tuple[int, ...]):
    """Inverse of :func:`to_bank`: ``(*lead, *bank)`` as ``(*lead, *view)``."""
    return to_bank(x, bank, view)


def _forms(view: tuple[int, ...], bank: tuple[int, ...]) -> str:
    """The shapes one state may be given in, in words."""
    return f"{view}" if view == bank else f"{view} or {bank} (its bank of one)"


def as_view(x, view, bank, owner: str, name: str, lead: int = 0):
    """``x``, ``lead`` leading axes (a sequence: 1) then one state, with the
    state in the view's shape ``view``.

    The state may be given in the view or in the bank's shape ``bank``; the
    two differ for a single component (``(res_dim,)`` and ``(1, res_dim)``)
    and are one shape for a parallel one (or a component without a bank).
    Any other shape is a ``ValueError`` naming ``owner`` and ``name``.
    """
    view, bank = tuple(view), tuple(bank)
    shape = tuple(x.shape)
    if shape[lead:] == view and len(shape) == lead + len(view):
        return x
    if shape[lead:] == bank and len(shape) == lead + len(bank):
        return x.reshape(shape[:lead] + view)
    if lead:
        raise ValueError(
            f"{owner}: {name} must have {lead} leading axis then one state of "
            f"shape {_forms(view, bank)}, got shape {shape}"
        )
    raise ValueError(
        f"{owner}: {name} must have shape {_forms(view, bank)}, got {shape}"
    )


def lead_axes(x, view, bank) -> int | None:
    """``0`` where ``x`` holds one state (its rank is the view's, or its
    shape is the bank's: a single component's ``(1, res_dim)`` is one state,
    as in ORC 0.4, not a sequence of one), ``1`` where it holds a sequence
    of them (one more axis), ``None`` otherwise. Sizes are checked by
    :func:`as_view` where the state is read."""
    view, bank = tuple(view), tuple(bank)
    shape = tuple(x.shape)
    if len(shape) == len(view) or shape == bank:
        return 0
    if len(shape) == len(view) + 1 or shape[1:] == bank:
        return 1
    return None


def declares(obj, capability: str) -> bool:
    """Whether the class of ``obj`` states ``capability`` in its own body."""
    return capability in type(obj).__dict__.get("capabilities", ())
