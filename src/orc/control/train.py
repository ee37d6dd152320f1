"""Training controllers: teacher forcing with controls, then a ridge fit."""

from __future__ import annotations

from typing import TypeVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

from .._defaults import ESN
from .._fit import (
    AbstractTeacherForcing,
    check_model_type,
    fit,
    next_sample_forcing,
    options,
    ridge,
    start_states,
    teacher_forcing_arguments,
)
from .base import RCControllerBase
from .models import ESNController

__all__ = ["train_RCController", "train_ESNController"]

Model = TypeVar("Model", bound=RCControllerBase)


class Controlling(AbstractTeacherForcing):
    """A controller's teacher-forced problem: the state after
    ``(train_seq[t], control_seq[t])`` is regressed onto the next sample (or
    ``target_seq[t]``). Built by :func:`train_RCController`."""

    owner: str = eqx.field(static=True)
    train_seq: Array
    control_seq: Array
    target_seq: Array | None
    init: Array
    spinup: int = eqx.field(static=True)
    multi: bool = eqx.field(static=True)

    @property
    def rows(self):
        return self.train_seq

    def forcing(self, model, noise):
        seq, extra, targets = next_sample_forcing(
            self.owner,
            model.dtype,
            self.train_seq,
            self.target_seq,
            control_seq=self.control_seq,
        )
        return (seq, extra["control_seq"]), targets

    #: the forcing is the model's pipeline over the outputs and the controls
    pipelined = True

    def force(self, model, inputs, state):
        return model.force(inputs[0], inputs[1], state)

    def pipeline_input(self, model, inputs):
        seq, control = inputs
        return jnp.concatenate([seq, control], axis=-1).astype(model.dtype)


def train_RCController(
    model: Model,
    train_seq: Array,
    control_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = ESN.beta,
    batch_size: int | None = None,
    multi_sequence: bool = False,
    return_states: bool = True,
    progress: bool | None = None,
    **force_kwargs,
) -> tuple[Model, Array]:
    """Train a controller's readout by teacher forcing with outputs and controls.

    The state after ``(train_seq[t], control_seq[t])`` is regressed onto
    ``target_seq[t]`` (default ``train_seq[t + 1]``), skipping ``spinup`` pairs.

    Parameters
    ----------
    model : RCControllerBase
    train_seq : ``(seq_len, data_dim)`` (``(n_traj, seq_len, data_dim)`` with ``multi_sequence``)
    control_seq : same leading shape, ``control_dim`` columns
    target_seq : optional, same leading shape as ``train_seq``
    spinup : int, default 0
    initial_res_state : optional start state (per trajectory with ``multi_sequence``)
    beta : float, optional
        Ridge regularisation (default ORC 0.4's).
    batch_size : int, optional
    multi_sequence : bool, default False
    return_states : bool, default True
        ``False`` trains without storing the state history (memory independent
        of the sequence length) and returns ``(model, last_state)``.
    progress : bool, optional
        Progress bar on stderr (default: on a terminal, for 50000+ steps).
    **force_kwargs : accepted for ORC compatibility; must be empty.

    Returns
    -------
    (model, states) with states ``(seq_len, res_dim)`` (one more row when
    ``target_seq`` is given; a leading trajectory axis with ``multi_sequence``).
    """
    owner = "train_RCController"
    check_model_type(owner, model, RCControllerBase)
    if force_kwargs:
        raise TypeError(f"{owner}: unexpected keyword arguments {sorted(force_kwargs)}")
    seq, target, spinup, extra = teacher_forcing_arguments(
        owner, model, train_seq, target_seq, spinup, multi_sequence,
        control_seq=(control_seq, model.control_dim, "control_dim"),
    )  # fmt: skip
    init = start_states(owner, model, initial_res_state, seq)
    problem = Controlling(owner=owner, train_seq=seq, control_seq=extra["control_seq"],
                          target_seq=target, init=init, spinup=spinup, multi=seq.ndim == 3)  # fmt: skip
    solver = ridge(owner, beta, model.dtype, batch_size=batch_size, data=(seq,))
    return fit(model, problem, solver, options(owner, model.dtype, return_states, progress))  # fmt: skip


def train_ESNController(
    model: ESNController,
    train_seq: Array,
    control_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = ESN.beta,
    multi_sequence: bool = False,
) -> tuple[ESNController, Array]:
    """:func:`train_RCController` for an :class:`ESNController` (type-checked)."""
    check_model_type("train_ESNController", model, ESNController)
    return train_RCController(
        model, train_seq, control_seq, target_seq, spinup, initial_res_state, beta,
        multi_sequence=multi_sequence,
    )  # fmt: skip
