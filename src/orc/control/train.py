"""Training controllers: teacher forcing with controls, then a ridge fit."""

from __future__ import annotations

from typing import TypeVar

import jax.numpy as jnp
from jaxtyping import Array

from .._strategy import compiled
from .._training import (
    check_training_args,
    checked_training_values,
    run_training,
    teacher_forced_fit,
    teacher_forced_sequences,
)
from .._validation import check_data, check_last_dim, check_rank
from .base import RCControllerBase
from .models import ESNController

__all__ = ["train_RCController", "train_ESNController"]

Model = TypeVar("Model", bound=RCControllerBase)


@compiled
def _train(
    model,
    train_seq,
    control_seq,
    target_seq,
    init,
    beta,
    spinup,
    batch_size,
    multi,
    return_states=True,
    progress=False,
):
    tot_seq, extra, targets = teacher_forced_sequences(
        "train_RCController",
        model.dtype,
        train_seq,
        target_seq,
        control_seq=control_seq,
    )
    init, beta = checked_training_values("train_RCController", init, beta)
    tot_control = extra["control_seq"]

    def force(inputs, state):
        return model.force(inputs[0], inputs[1], state)

    readout, states = teacher_forced_fit(
        model.readout,
        force,
        (tot_seq, tot_control),
        targets,
        init,
        beta,
        spinup=spinup,
        multi_sequence=multi,
        keep_states=return_states,
        batch_size=batch_size,
        progress=progress,
    )
    return model.set_readout(readout), states


def train_RCController(
    model: Model,
    train_seq: Array,
    control_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = 8e-8,
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
    beta : float, default 8e-8
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
    if not isinstance(model, RCControllerBase):
        raise TypeError(
            f"{owner}: model must be an RCControllerBase, got {type(model).__name__}"
        )
    if force_kwargs:
        raise TypeError(f"{owner}: unexpected keyword arguments {sorted(force_kwargs)}")
    multi = bool(multi_sequence)
    train_seq, target_seq, spinup = check_training_args(
        owner,
        model,
        train_seq,
        target_seq,
        spinup,
        initial_res_state,
        beta,
        batch_size,
        multi,
    )
    what = "(n_traj, seq_len, control_dim)" if multi else "(seq_len, control_dim)"
    control_seq = check_data("control_seq", control_seq, owner, model.dtype)
    control_seq = check_rank("control_seq", control_seq, train_seq.ndim, owner, what)
    if control_seq.shape[:-1] != train_seq.shape[:-1]:
        raise ValueError(
            f"{owner}: control_seq must have the same length as train_seq "
            f"{tuple(train_seq.shape[:-1])}, got {tuple(control_seq.shape[:-1])}"
        )
    check_last_dim(
        "control_seq", control_seq, model.control_dim, owner, "columns (control_dim)"
    )
    beta, keep = jnp.asarray(beta, model.dtype), bool(return_states)

    def train(init, show):
        args = (model, train_seq, control_seq, target_seq, init, beta, spinup)
        return _train(*args, batch_size, multi, keep, show)

    return run_training(model, train_seq, initial_res_state, multi, progress, train)


def train_ESNController(
    model: ESNController,
    train_seq: Array,
    control_seq: Array,
    target_seq: Array | None = None,
    spinup: int = 0,
    initial_res_state: Array | None = None,
    beta: float = 8e-8,
    multi_sequence: bool = False,
) -> tuple[ESNController, Array]:
    """:func:`train_RCController` for an :class:`ESNController` (type-checked)."""
    if not isinstance(model, ESNController):
        raise TypeError(
            f"train_ESNController: model must be an ESNController, got {type(model).__name__}"
        )
    return train_RCController(
        model,
        train_seq,
        control_seq,
        target_seq,
        spinup,
        initial_res_state,
        beta,
        multi_sequence=multi_sequence,
    )
