"""What every reservoir model is: an embedding, a driver and a readout.

:class:`RCModel` is the abstract base of the four model families:
:class:`orc.forecaster.RCForecasterBase`, :class:`orc.control.RCControllerBase`,
:class:`orc.classifier.RCClassifierBase` and
:class:`orc.regression.RCRegressorBase`. It declares the three components and
the sizes read from them once, fills them in (:meth:`RCModel._set_components`),
drives the reservoir with a sequence of inputs (:meth:`RCModel._drive`) and
swaps components. A family adds its own sizes (``control_dim``,
``n_classes``), the fields training fits, the inputs it forces the reservoir
with and what it does with the states (forecast, control, classify, predict).

A model's leaves (``jax.tree.leaves``) come in this order: the driver's,
the readout's, the embedding's, ``seed``, then the family's own (a
controller's cost weights, a classifier's fitted scales, a regressor's
pass-through weights). Model files store fields by name, so the order is not
part of them.
"""

from __future__ import annotations

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from ._bank import declares
from ._random import seed_field
from ._strategy import model_hash
from ._validation import check_dtype
from .drivers import DriverBase, drive_sequence, drive_sequence_stats
from .embeddings import EmbedBase
from .readouts import ReadoutBase

__all__ = ["RCModel"]


class RCModel(eqx.Module):
    """An embedding, a driver and a readout, with the sizes read from them.

    ``in_dim`` is what the model takes (the embedding's input size, less
    what a family adds to it, e.g. a controller's controls), ``out_dim`` the
    readout's outputs, ``res_dim`` the driver's nodes per reservoir;
    ``dtype`` the model's floating type and ``seed`` its seed as data
    (:func:`orc._random.seed_field`; ``None`` for a numpy generator).
    """

    # a model as a static argument of jax.jit: an error that says what to do
    __hash__ = model_hash

    driver: DriverBase
    readout: ReadoutBase
    embedding: EmbedBase
    in_dim: int = eqx.field(static=True)
    out_dim: int = eqx.field(static=True)
    res_dim: int = eqx.field(static=True)
    dtype: object = eqx.field(default=jnp.float64, static=True)
    seed: Array | None = None

    def _set_components(
        self, driver, readout, embedding, dtype, seed, in_dim: int | None = None
    ) -> None:
        """Fill the fields declared here (from a family's ``__init__``);
        ``in_dim`` defaults to the embedding's input size."""
        name = type(self).__name__
        self.driver, self.readout, self.embedding = driver, readout, embedding
        self.in_dim = embedding.in_dim if in_dim is None else in_dim
        self.out_dim = readout.out_dim
        self.res_dim = driver.res_dim
        self.dtype = check_dtype(dtype, name)
        self.seed = seed_field(seed, name)

    def _drive(self, inputs: Array, res_state: Array) -> Array:
        """The states after each row of ``inputs`` (what the embedding takes),
        from ``res_state``: ``(seq_len, *state_shape)``."""
        return drive_sequence(self.driver, self.embedding, inputs, res_state)

    def _fuses_forcing(self, kernels) -> bool:
        """Whether :meth:`_force_stats` applies: the model class declares that
        its forcing is :meth:`_drive` of what the embedding takes (capability
        ``"pipeline_forcing"``, see :mod:`orc._bank`) and ``kernels`` fuse its
        components (:meth:`orc._kernels.Kernels.fuses`)."""
        return declares(self, "pipeline_forcing") and kernels.fuses(
            self.driver, self.embedding
        )

    def _force_stats(
        self, kernels, in_seq, res_state, stats, targets, start, stop, keep
    ):
        """:meth:`_drive` of ``in_seq`` (what the embedding takes) plus the
        ridge statistics of the states (rows ``start:stop`` against prepared
        ``targets``) in one fused pass, for a model :meth:`_fuses_forcing`
        admits; with ``keep=False`` the last state only (``(1,
        *state_shape)``), no history stored."""
        return drive_sequence_stats(
            kernels,
            self.driver,
            self.embedding,
            in_seq.astype(self.dtype),
            jnp.asarray(res_state, self.dtype),
            stats,
            targets,
            start,
            stop,
            keep,
        )

    def set_readout(self, readout: ReadoutBase):
        """A copy of the model with ``readout`` replaced; the new readout
        must read the driver's states (a ``ValueError`` says which shapes
        disagree, rather than training failing deep inside)."""
        states = self._readout_reads()
        if isinstance(readout, ReadoutBase) and states is not None:
            reads = {tuple(readout.state_shape), tuple(readout.bank_shape)}
            if states not in reads:
                raise ValueError(
                    f"{type(self).__name__}.set_readout: {type(readout).__name__} "
                    f"reads states of shape {tuple(readout.state_shape)}, the "
                    f"driver's are {states} (res_dim and chunks must match the "
                    f"driver's)"
                )
        return eqx.tree_at(lambda m: m.readout, self, readout)

    def _readout_reads(self) -> tuple[int, ...] | None:
        """The shape of one state the readout reads: the driver's (``None``
        where a family's readout reads something else, which the family
        checks: a classifier's representation of the states)."""
        return tuple(self.driver.state_shape)

    def set_embedding(self, embedding: EmbedBase):
        """A copy of the model with ``embedding`` replaced."""
        return eqx.tree_at(lambda m: m.embedding, self, embedding)
