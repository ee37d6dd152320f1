"""Fitting a readout from reservoir states: the common back end of ``train_*``."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from . import _errors, _progress
from ._bank import declares
from ._random import flat_draw, jax_key
from ._ridge import RidgeStats, fit_nrmse, sequence_stats, solve, stats_update
from ._validation import (
    POOR_FIT_NRMSE,
    PoorFitWarning,
    check_float,
)
from .drivers import check_state

# Rows per block of a teacher-forced run. Each block's Gram is one in-place
# BLAS update inside XLA (orc._native), so small blocks cost little: at
# res_dim 2000, T 20000, 1024 rows train within ~5% of 2048 or 8192 and peak
# memory is 30 / 170 MiB lower (one block of states is live at a time).
FORCE_BLOCK = 1024
# Rows per block of streaming training (no history): each block is run and
# then folded into the Gram, and larger blocks mean fewer hand-overs between
# the reservoir run and BLAS (see teacher_forced_stats).
STREAM_BLOCK = 4096

__all__ = [
    "fit_readout",
    "teacher_forced_statistics",
    "teacher_forced_stats",
    "warn_poor_fit",
    "initial_states",
    "check_initial_state",
    "TrainingNoise",
    "training_noise",
]


def fit_readout(
    readout,
    states,
    targets,
    beta,
    *,
    spinup: int = 0,
    block_size: int | None = None,
    batch_size: int | None = None,
):
    """``readout`` with ``wout`` fitted by ridge regression on stored states.

    ``states`` ``(T, *state)`` and raw ``targets`` ``(T, out_dim)``; rows
    ``spinup:`` are used. (Teacher-forced training accumulates while it forces
    instead, see :func:`teacher_forced_fit`.)
    """
    stats = sequence_stats(
        states,
        targets,
        readout.prepare_train,
        readout.prepare_target,
        start=spinup,
        block_size=block_size,
    )
    cmat = solve(stats, jnp.asarray(beta, stats.gram.dtype), batch_size=batch_size)
    return readout.set_wout(cmat)


def check_initial_state(owner, model, initial_res_state, n_traj, multi) -> None:
    """``initial_res_state`` is ``None`` or the driver's state (one per trajectory)."""
    if initial_res_state is None:
        return
    check_state(
        "initial_res_state",
        initial_res_state,
        owner,
        model.driver,
        model.dtype,
        batch=(n_traj,) if multi else (),
    )


def initial_states(model, initial_res_state, n_traj, multi):
    if initial_res_state is not None:
        return jnp.asarray(initial_res_state, model.dtype)
    default = model.driver.default_state()
    if multi:
        return jnp.broadcast_to(default, (n_traj,) + default.shape)
    return default


def teacher_forced_stats(
    readout,
    force,
    inputs,
    targets,
    init,
    *,
    spinup: int = 0,
    block_size: int | None = None,
    keep_states: bool = True,
    progress: bool = False,
    progress_offset=0,
    features=None,
    force_stats=None,
):
    """Run the reservoir over ``inputs`` and accumulate the ridge statistics as it goes.

    ``force(inputs_block, state) -> states_block`` advances the reservoir over
    a block of inputs (a pytree whose leaves share a leading time axis of
    length ``T_in``). State ``t`` (after input ``t``) is paired with
    ``targets[t]`` for ``spinup <= t < len(targets)``. With ``keep_states``
    the reservoir runs over the whole sequence into the returned history
    first, and the statistics are then taken from it: in one update that
    reads the stored rows in place when the features are the states
    themselves, else block by block; otherwise each block's features are folded into the statistics while the
    block is fresh, and memory is that of the statistics plus one block
    whatever ``T_in`` (streaming training). With ``progress`` each
    finished block reports ``progress_offset + steps done`` to
    :func:`orc._progress.tick` (between blocks, never per step).

    ``features(states_block, inputs_block, offset) -> features_block`` replaces
    the default regression features ``readout.prepare_train(states_block)``
    (used for input pass-through, readout bias and state-noise regularisation);
    it must act row by row.

    ``force_stats(inputs, state, stats, prepared_targets, start, stop) ->
    (states, stats) or None`` is an optional fused pass over the whole
    sequence that returns the states together with ``stats`` plus rows
    ``start:stop`` of them (orc._matrix.esn_run_stats: the reservoir run and
    the Gram update overlapped on two cores). It is used when the history is
    kept, the features are the states themselves and no progress is shown
    (it reports nothing between blocks); ``None`` from it means it does not
    apply.

    Returns ``(stats, last_state, states or None)``.
    """
    t_in = jax.tree.leaves(inputs)[0].shape[0]
    t_out = targets.shape[0]
    block = int(min(block_size or FORCE_BLOCK, t_in))
    stream_block = int(min(block_size or STREAM_BLOCK, t_in))
    pad = jnp.zeros((t_in - t_out,) + targets.shape[1:], targets.dtype)
    targets = jnp.concatenate([targets, pad], axis=0)
    valid = (jnp.arange(t_in) >= spinup) & (jnp.arange(t_in) < t_out)

    default_features = features is None
    if features is None:

        def features(states, _inputs, _offset):
            return readout.prepare_train(states)

    state_shape = jax.eval_shape(force, _head(inputs), init)
    f_shape = jax.eval_shape(features, state_shape, _head(inputs), 0)
    y_shape = jax.eval_shape(readout.prepare_target, targets[:1])
    chunks = f_shape.shape[1] if len(f_shape.shape) == 3 else None
    stats = RidgeStats.zeros(
        f_shape.shape[-1], y_shape.shape[-1], chunks, f_shape.dtype
    )
    history = (
        jnp.zeros((t_in,) + state_shape.shape[1:], state_shape.dtype)
        if keep_states
        else None
    )

    def run(carry, offset, size, mode, phase):
        # mode (static): "all" rows enter the fit, "mask" some do (multiply by
        # the validity mask), "skip" none do (no Gram at all). phase (static):
        # "force" runs the reservoir into the history, "fit" reads the states
        # back from it, "both" forces and fits the block while it is fresh.
        state, stats, history = carry
        u, y, keep = jax.tree.map(
            lambda a: jax.lax.dynamic_slice_in_dim(a, offset, size, axis=0),
            (inputs, targets, valid),
        )
        if phase == "fit":
            states = jax.lax.dynamic_slice_in_dim(history, offset, size, axis=0)
        else:
            states = force(u, state)
        if mode != "skip" and phase != "force":
            feats = features(states, u, offset)
            if mode == "mask":
                feats = feats * keep.reshape((-1,) + (1,) * (feats.ndim - 1)).astype(
                    feats.dtype
                )
            stats = stats_update(stats, feats, readout.prepare_target(y))
        if phase == "fit":
            return state, stats, history
        if history is not None:
            history = jax.lax.dynamic_update_slice_in_dim(
                history, states, offset, axis=0
            )
        if progress:
            # unordered, but tied to the block's result so it runs after it
            jax.debug.callback(
                _progress.tick, progress_offset + offset + size, states[-1].ravel()[0]
            )
        return states[-1], stats, history

    def mode(start, stop, phase):
        if phase == "force" or stop <= spinup or start >= t_out:
            return "skip"
        return "all" if start >= spinup and stop <= t_out else "mask"

    def sweep(carry, block, phase):
        n_full, tail = divmod(t_in, block)
        if tail == 1 and n_full:  # no one-sample block (continuous models need two)
            n_full, tail = n_full - 1, block + 1
        # Consecutive full blocks of the same mode run in one loop; typically
        # one unmasked loop (the copy of each block that masking makes is
        # saved) and a masked last block.
        modes = [mode(i * block, (i + 1) * block, phase) for i in range(n_full)]
        i = 0
        while i < n_full:
            j = i
            while j < n_full and modes[j] == modes[i]:
                j += 1
            if j - i == 1:
                carry = run(carry, i * block, block, modes[i], phase)
            else:
                carry = jax.lax.fori_loop(
                    i,
                    j,
                    lambda k, c, m=modes[i]: run(c, k * block, block, m, phase),
                    carry,
                )
            i = j
        if tail and phase == "force" and n_full and carry[2] is not None:
            # The rows left as one more block of the loop's size that ends at
            # the last row, started from the stored state before it: its first
            # block - tail rows are forced again (the same rows from the same
            # state), and the model's force is traced at one size instead of
            # two (a CESN's training on 3999 rows: 3.9 -> 3.1 s to trace and
            # compile; the extra rows cost less than 1024 steps).
            start = t_in - block
            _, stats_, history_ = carry
            carry = run(
                (history_[start - 1], stats_, history_), start, block, "skip", phase
            )
        elif tail:
            start = n_full * block
            carry = run(carry, start, tail, mode(start, start + tail, phase), phase)
        return carry

    # The fused pass is one call that cannot report between blocks, so a run
    # with a progress bar takes the blocked path below.
    # Features that are the states themselves (in the bank's shape) let the
    # statistics read the stored states directly; a readout says so by its
    # declared "linear" capability (orc._bank), it is not probed.
    states_are_features = (
        default_features
        and declares(readout, "linear")
        and readout.states_are_features()
    )
    fusable = keep_states and states_are_features and not progress
    if fusable and force_stats is not None and spinup < t_out:
        fused = force_stats(
            inputs, init, stats, readout.prepare_target(targets), spinup, t_out
        )
        if fused is not None:
            history, stats = fused
            return stats, history[-1], history

    carry = (init, stats, history)
    if keep_states:
        # The whole run first, then the statistics from the stored history:
        # the BLAS threads of the Gram update keep spinning for a while after
        # each call, which would slow down a two-threaded reservoir run
        # interleaved with it (orc._native.esn_run); reading the history
        # back costs one pass over memory.
        carry = sweep(carry, block, "force")
        state, stats, history = carry
        if states_are_features:
            # The features are the states themselves: the statistics of every
            # fitted row in one update that reads them where they are stored
            # (prepare_train only reshapes to the bank; no block slices copied
            # out of the history).
            if spinup < t_out:
                stats = stats_update(
                    stats,
                    readout.prepare_train(history),
                    readout.prepare_target(targets),
                    spinup,
                    t_out,
                )
            carry = (state, stats, history)
        else:
            carry = sweep(carry, block, "fit")
    else:
        # Streaming: blocks of STREAM_BLOCK rows, each run and then folded in
        # while fresh, so memory stays one block whatever the length.
        carry = sweep(carry, stream_block, "both")
    state, stats, history = carry
    return stats, state, history


def _head(inputs):
    return jax.tree.map(lambda a: a[:2], inputs)


def teacher_forced_statistics(
    readout,
    force,
    inputs,
    targets,
    init,
    *,
    spinup: int = 0,
    multi_sequence: bool = False,
    keep_states: bool = True,
    block_size: int | None = None,
    progress: bool = False,
    features=None,
    force_stats=None,
):
    """The ridge statistics of a teacher-forced run, over one or several
    trajectories.

    Returns ``(stats, states)``: ``states`` the whole history, or with
    ``keep_states=False`` the last state. With ``multi_sequence`` every leaf
    of ``inputs``, ``targets`` and ``init`` has a leading trajectory axis and
    the statistics are summed over trajectories (in trajectory order).
    ``features`` and ``force_stats`` are passed on to
    :func:`teacher_forced_stats` (the offset ``features`` receives counts
    steps over all trajectories). The solve is the caller's
    (:func:`orc._fit.fit`).
    """

    def one(u, y, r0, offset=0):
        return teacher_forced_stats(
            readout,
            force,
            u,
            y,
            r0,
            spinup=spinup,
            block_size=block_size,
            keep_states=keep_states,
            progress=progress,
            progress_offset=offset,
            features=None if features is None else _shifted(features, offset),
            force_stats=force_stats,
        )

    if not multi_sequence:
        stats, last, history = one(inputs, targets, init)
        return stats, (history if keep_states else last)
    t_in = jax.tree.leaves(inputs)[0].shape[1]
    first = jax.tree.map(lambda a: a[0], (inputs, targets, init))
    stats, last0, hist0 = one(*first)

    def step(stats, xs):
        i, u, y, r0 = xs
        s, last, history = one(u, y, r0, i * t_in)
        return stats + s, (last, history)

    rest = jax.tree.map(lambda a: a[1:], (inputs, targets, init))
    n_rest = jax.tree.leaves(rest)[0].shape[0]
    stats, (lasts, hists) = jax.lax.scan(
        step, stats, (jnp.arange(1, n_rest + 1), *rest)
    )
    if keep_states:
        return stats, jnp.concatenate([hist0[None], hists], axis=0)
    return stats, jnp.concatenate([last0[None], lasts], axis=0)


def warn_poor_fit(readout, stats, w, beta, targets, spinup, multi_sequence) -> None:
    """:class:`orc.PoorFitWarning` when the ridge fit's NRMSE over its rows
    (:func:`orc._ridge.fit_nrmse`, each output by its std; constant ones
    left out), averaged in the square over the outputs, exceeds
    ``POOR_FIT_NRMSE``: computed from the statistics and the targets' sums,
    whether or not the states were kept. For an ensemble readout it is the
    members' fit (each member fits the whole target)."""
    per_traj = targets if multi_sequence else targets[None]
    prepared = jax.vmap(readout.prepare_target)(per_traj)[:, spinup:]
    prepared = prepared.astype(stats.gram.dtype)
    rows = prepared.shape[0] * prepared.shape[1]
    y_sq = jnp.sum(prepared**2, axis=(0, 1))
    y_sum = jnp.sum(prepared, axis=(0, 1))
    nrmse = fit_nrmse(stats, w, beta, y_sq, y_sum, rows)
    live = ~jnp.isnan(nrmse)
    count = jnp.maximum(live.sum(), 1).astype(nrmse.dtype)
    mean = jnp.sqrt(jnp.sum(jnp.where(live, nrmse**2, 0)) / count)
    _errors.warn(
        live.any() & (mean > POOR_FIT_NRMSE),
        "training: the fitted readout explains less than 19% of its training "
        f"targets' variance (one-step NRMSE above {POOR_FIT_NRMSE}, each output by "
        "its std): check the data (a time or index column, the time axis, noise) "
        "and the reservoir (saturated states: input scaling, bias, spectral "
        "radius).",
        PoorFitWarning,
    )


def _shifted(features, shift):
    return lambda states, inputs, offset: features(states, inputs, offset + shift)


class TrainingNoise(eqx.Module):
    """Noise regularisation of a teacher-forced fit (Jaeger 2002; Wyffels et al. 2008).

    ``input_noise``: Gaussian noise of that standard deviation is added to the
    inputs that force the reservoir (targets stay clean), so the readout learns
    to pull perturbed states back toward the data: the closed loop becomes
    more stable. ``state_noise``: noise added to the states only where they
    enter the regression (the reservoir itself runs clean), a data-dependent
    Tikhonov regulariser. Noise is drawn from ``key``; each block of states
    gets its own draw (``fold_in`` of its offset).
    """

    input_scale: Array
    state_scale: Array
    key: Array
    has_input: bool = eqx.field(static=True)
    has_state: bool = eqx.field(static=True)

    def perturb(self, seq):
        if not self.has_input:
            return seq
        eps = flat_draw(
            jax.random.normal, jax.random.fold_in(self.key, 0), seq.shape, seq.dtype
        )
        return seq + self.input_scale.astype(seq.dtype) * eps

    def states(self, states, offset):
        """``states`` with the state noise of the block starting at ``offset``."""
        if not self.has_state:
            return states
        key = jax.random.fold_in(jax.random.fold_in(self.key, 1), offset)
        eps = flat_draw(jax.random.normal, key, states.shape, states.dtype)
        return states + self.state_scale.astype(states.dtype) * eps

    def features(self, readout):
        """A ``features`` hook for :func:`teacher_forced_stats`, or ``None``."""
        if not self.has_state:
            return None
        return lambda states, _inputs, offset: readout.prepare_train(
            self.states(states, offset)
        )


def training_noise(owner, input_noise, state_noise, noise_seed, dtype):
    """Checked :class:`TrainingNoise`, or ``None`` when both scales are 0."""
    input_noise = check_float("input_noise", input_noise, owner, low=0.0)
    state_noise = check_float("state_noise", state_noise, owner, low=0.0)
    if input_noise == 0 and state_noise == 0:
        return None
    return TrainingNoise(
        jnp.asarray(input_noise, dtype),
        jnp.asarray(state_noise, dtype),
        jax_key(noise_seed, owner),
        input_noise > 0,
        state_noise > 0,
    )
