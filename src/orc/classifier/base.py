"""Base class of reservoir classifiers.

A sequence is driven through the reservoir and summarised by one feature
vector — the final state (``state_repr="final"``) or the mean state after
``spinup`` steps (``"mean"``) — which the readout maps to class scores; the
probabilities are their softmax. Training fits the readout by ridge regression
onto one-hot labels. Features are computed in the scan carry, so no state
history is stored.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._compose import check_model
from .._random import seed_field
from .._strategy import compiled
from .._validation import (
    check_data,
    check_dtype,
    check_finite,
    check_int,
    check_rank,
    check_state,
    warn_if_untrained,
)
from ..drivers import DriverBase, drive_sequence
from ..embeddings import EmbedBase
from ..readouts import ReadoutBase

__all__ = ["RCClassifierBase"]

STATE_REPRS = ("final", "mean")


class RCClassifierBase(eqx.Module):
    """Reservoir classifier: embedding → driver → feature → readout → softmax.

    Parameters
    ----------
    driver, readout, embedding : components (``readout.out_dim == n_classes``)
    n_classes : int
    state_repr : {"final", "mean"}, default "final"
    dtype : dtype, default float64
    seed : int, default 0
    """

    driver: DriverBase
    readout: ReadoutBase
    embedding: EmbedBase
    in_dim: int = eqx.field(static=True)
    out_dim: int = eqx.field(static=True)
    res_dim: int = eqx.field(static=True)
    n_classes: int = eqx.field(static=True)
    state_repr: str = eqx.field(default="final", static=True)
    dtype: object = eqx.field(default=jnp.float64, static=True)
    seed: Array | None = None

    def __init__(
        self,
        driver: DriverBase,
        readout: ReadoutBase,
        embedding: EmbedBase,
        n_classes: int,
        state_repr: str = "final",
        dtype=jnp.float64,
        seed=0,
    ) -> None:
        name = type(self).__name__
        if state_repr not in STATE_REPRS:
            raise ValueError(
                f"{name}: state_repr must be 'final' or 'mean', got {state_repr!r}"
            )
        self.n_classes = check_int("n_classes", n_classes, name, minimum=2)
        if readout.out_dim != self.n_classes:
            raise ValueError(
                f"{name}: readout.out_dim ({readout.out_dim}) must equal n_classes "
                f"({self.n_classes})"
            )
        self.driver = driver
        self.readout = readout
        self.embedding = embedding
        self.in_dim = embedding.in_dim
        self.out_dim = readout.out_dim
        self.res_dim = driver.res_dim
        self.state_repr = state_repr
        self.dtype = check_dtype(dtype, name)
        self.seed = seed_field(seed, type(self).__name__)

    def __check_init__(self):
        name = type(self).__name__
        if self.state_repr not in STATE_REPRS:
            raise ValueError(
                f"{name}: state_repr must be 'final' or 'mean', got {self.state_repr!r}"
            )
        check_int("n_classes", self.n_classes, name, minimum=2)
        if self.readout.out_dim != self.n_classes:
            raise ValueError(
                f"{name}: readout.out_dim ({self.readout.out_dim}) must equal "
                f"n_classes ({self.n_classes})"
            )
        check_model(self, self.in_dim, None)

    def _check_seq(self, in_seq, name="in_seq"):
        in_seq = check_data(name, in_seq, type(self).__name__, self.dtype)
        in_seq = check_rank(name, in_seq, 2, type(self).__name__, "(seq_len, data_dim)")
        if in_seq.shape[1] != self.in_dim:
            raise ValueError(
                f"{type(self).__name__}: {name} must have {self.in_dim} columns "
                f"(data_dim), got shape {tuple(in_seq.shape)}"
            )
        return in_seq.astype(self.dtype)

    def _initial(self, res_state):
        if res_state is None:
            return self.driver.default_state()
        res_state = check_state(
            "res_state", res_state, type(self).__name__, self.driver, self.dtype
        )
        return jnp.asarray(res_state, self.dtype)

    @compiled
    def force(
        self, in_seq: Float[Array, "seq_len data_dim"], res_state: Array
    ) -> Array:
        """Teacher-force with ``in_seq``; states ``(seq_len, res_dim)``."""
        in_seq = self._check_seq(in_seq)

        return drive_sequence(
            self.driver, self.embedding, in_seq, self._initial(res_state)
        )

    def __call__(
        self, in_seq: Array, res_state: Array | None = None, spinup: int = 0
    ) -> Array:
        """Same as :meth:`classify`."""
        return self.classify(in_seq, res_state, spinup)

    def features(
        self, in_seq: Array, res_state: Array | None = None, spinup: int = 0
    ) -> Array:
        """The feature vector of a sequence: final state or mean state after ``spinup``."""
        in_seq = self._check_seq(in_seq)
        spinup = check_int("spinup", spinup, type(self).__name__, minimum=0)
        if spinup >= in_seq.shape[0]:
            raise ValueError(
                f"{type(self).__name__}: spinup ({spinup}) must be less than the "
                f"sequence length ({in_seq.shape[0]})"
            )
        r0 = self._initial(res_state)

        def advance(r, u):
            return self.driver.advance(self.embedding.embed(u), r)

        if self.state_repr == "final":
            return jax.lax.scan(lambda r, u: (advance(r, u), None), r0, in_seq)[0]

        def step(carry, xs):
            r, total = carry
            u, keep = xs
            r = advance(r, u)
            return (r, total + jnp.where(keep, r, 0.0)), None

        keep = jnp.arange(in_seq.shape[0]) >= spinup
        (_, total), _ = jax.lax.scan(step, (r0, jnp.zeros_like(r0)), (in_seq, keep))
        return total / (in_seq.shape[0] - spinup)

    def classify(
        self,
        in_seq: Float[Array, "seq_len data_dim"],
        res_state: Array | None = None,
        spinup: int = 0,
        *,
        backend: str | None = None,
    ) -> Float[Array, " n_classes"]:
        """Class probabilities ``(n_classes,)`` of one sequence (softmax of the readout).

        ``spinup`` (static) skips leading states when ``state_repr="mean"``.
        Batch with ``jax.vmap(model.classify)(seqs)``. Non-finite ``in_seq`` or
        ``res_state`` raise (also under ``jax.jit``); an untrained model (all-zero
        readout weights) warns outside ``jax.jit``. ``backend`` as for
        :meth:`orc.forecaster.RCForecasterBase.forecast`.
        """
        probs = self._classify(in_seq, res_state, spinup, backend=backend)
        warn_if_untrained(self, f"{type(self).__name__}.classify")
        return probs

    @compiled
    def _classify(self, in_seq, res_state, spinup):
        owner = type(self).__name__
        in_seq = check_finite(self._check_seq(in_seq), "in_seq", owner)
        if res_state is not None:
            res_state = check_finite(self._initial(res_state), "res_state", owner)
        return jax.nn.softmax(
            self.readout.readout(self.features(in_seq, res_state, spinup))
        )

    def set_readout(self, readout: ReadoutBase):
        """A copy of the model with ``readout`` replaced."""
        return eqx.tree_at(lambda m: m.readout, self, readout)

    def set_embedding(self, embedding: EmbedBase):
        """A copy of the model with ``embedding`` replaced."""
        return eqx.tree_at(lambda m: m.embedding, self, embedding)
