"""Fitting a readout from reservoir states: the common back end of ``train_*``."""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array

from . import _errors, _progress
from ._bank import declares
from ._random import flat_draw, jax_key
from ._ridge import (
    GRAM_KERNEL_MIN_FEATURES,
    STATS_GROUP,
    RidgeStats,
    fit_nrmse,
    sequence_stats,
    solve,
    stats_update,
)
from ._validation import (
    POOR_FIT_NRMSE,
    PoorFitWarning,
    argument_array,
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
    instead, see :func:`teacher_forced_statistics`.)
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
    themselves, else block by block; otherwise each block's features are
    folded into the statistics while the block is fresh, and memory is that
    of the statistics plus one block whatever ``T_in`` (streaming training).
    With ``progress`` each finished block reports ``progress_offset + steps
    done`` to :func:`orc._progress.tick` (between blocks, never per step).

    Both modes give the same bits (on CPU, where the update groups rows by
    :data:`orc._ridge.STATS_GROUP`): the fitted rows are folded in the same
    groups counted from ``spinup``, in order, whichever blocks they arrive
    in (a group cut by the end of a block is carried over, see
    :class:`_Fold`), and the features are computed on the same blocks of
    ``STREAM_BLOCK`` rows in both modes.

    ``features(states_block, inputs_block, offset) -> features_block`` replaces
    the default regression features ``readout.prepare_train(states_block)``
    (used for input pass-through, readout bias and state-noise regularisation);
    it must act row by row.

    ``force_stats(inputs, state, stats, prepared_targets, start, stop, keep) ->
    (states, stats)``, where the model has one, is a fused pass over the whole
    sequence that returns the states (with ``keep=False`` the last one,
    ``(1, *state)``: no history is stored) together with ``stats`` plus rows
    ``start:stop`` of them (orc._kernels.Kernels.run_stats: the reservoir run and
    the Gram update overlapped on two cores). It is used when the features
    are the states themselves, at least
    :data:`orc._ridge.GRAM_KERNEL_MIN_FEATURES` of them (below that the fused
    kernel sums in other blocks than :func:`orc._ridge.stats_update`, and
    overlaps nothing) and no progress is shown (it reports nothing between
    blocks).

    Returns ``(stats, last_state, states or None)``.
    """
    t_in = jax.tree.leaves(inputs)[0].shape[0]
    t_out = targets.shape[0]
    block = int(min(block_size or FORCE_BLOCK, t_in))
    stream_block = int(min(block_size or STREAM_BLOCK, t_in))
    pad = jnp.zeros((t_in - t_out,) + targets.shape[1:], targets.dtype)
    targets = jnp.concatenate([targets, pad], axis=0)

    default_features = features is None
    if features is None:

        def features(states, _inputs, _offset):
            return readout.prepare_train(states)

    # The states are rows of the start state's shape and dtype (each block's
    # last row is the next block's start state; checked in `run`), so the
    # model's force is not traced for their shape: a trace of its own costs
    # a fifth of a CESN's first training (its ODE solve traced twice).
    head = _head(inputs)
    rows = jax.tree.leaves(head)[0].shape[0]
    state_shape = jax.ShapeDtypeStruct((rows,) + jnp.shape(init), jnp.result_type(init))
    f_shape = jax.eval_shape(features, state_shape, head, 0)
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

    def run(carry, offset, size, plan, phase):
        # plan (static): how the block's rows fold into the statistics
        # (_Fold; None: no row of it enters the fit). phase (static): "force"
        # runs the reservoir into the history, "fit" reads the states back
        # from it, "both" forces and fits the block while it is fresh.
        state, stats, history, pending = carry
        u, y = jax.tree.map(
            lambda a: jax.lax.dynamic_slice_in_dim(a, offset, size, axis=0),
            (inputs, targets),
        )
        if phase == "fit":
            states = jax.lax.dynamic_slice_in_dim(history, offset, size, axis=0)
        else:
            states = force(u, state)
            _check_states(states, state_shape, size)
        if plan is not None and phase != "force":
            stats, pending = plan.fold(
                stats, pending, features(states, u, offset), readout.prepare_target(y)
            )
        if phase == "fit":
            return state, stats, history, pending
        if history is not None:
            history = jax.lax.dynamic_update_slice_in_dim(
                history, states, offset, axis=0
            )
        if progress:
            # unordered, but tied to the block's result so it runs after it
            jax.debug.callback(
                _progress.tick, progress_offset + offset + size, states[-1].ravel()[0]
            )
        return states[-1], stats, history, pending

    def force_all(carry, block):
        # The history's blocks, all of the loop's size: block k starts at
        # k * block, the last at t_in - block, so that it ends at the last
        # row, from the stored state before it: the rows it shares with the
        # block before are forced again (the same rows from the same state:
        # the same bits). One loop over ceil(t_in / block) blocks traces the
        # model's force once (a tail block of its own size would trace and
        # compile it a second time: a CESN's training on 2400 rows, 11.2 ->
        # 6.9 s to trace and compile; the extra rows cost less than a block).
        n_blocks = -(-t_in // block)
        if n_blocks == 1:
            return run((*carry, None), 0, block, None, "force")[:3]
        last = t_in - block

        def body(k, c):
            state, stats_, history_, pending_ = c
            offset = jnp.minimum(k * block, last)
            if last % block:  # the last block overlaps the one before
                state = jnp.where(k == n_blocks - 1, history_[offset - 1], state)
            return run(
                (state, stats_, history_, pending_), offset, block, None, "force"
            )

        return jax.lax.fori_loop(0, n_blocks, body, (*carry, None))[:3]

    def sweep(carry, block, phase):
        n_full, tail = divmod(t_in, block)
        if tail == 1 and n_full:  # no one-sample block (continuous models need two)
            n_full, tail = n_full - 1, block + 1
        spans = [(i * block, block) for i in range(n_full)]
        if tail:
            spans.append((n_full * block, tail))
        plans, carried = [], 0
        for start, size in spans:
            plan = None
            if phase != "force":
                plan, carried = _Fold.plan(start, start + size, spinup, t_out, carried)
            plans.append(plan)
        # rows of an unfinished group carried between blocks (see _Fold)
        pending = None
        if any(p is not None and (p.pending or p.hi > p.mid) for p in plans):
            pending = (
                jnp.zeros((STATS_GROUP,) + f_shape.shape[1:], stats.gram.dtype),
                jnp.zeros((STATS_GROUP,) + y_shape.shape[1:], stats.gram.dtype),
            )
        carry = (*carry, pending)
        # Consecutive full blocks with the same plan run in one loop;
        # typically one loop and a first and last block of their own.
        i = 0
        while i < n_full:
            j = i
            while j < n_full and plans[j] == plans[i]:
                j += 1
            if j - i == 1:
                carry = run(carry, i * block, block, plans[i], phase)
            else:
                carry = jax.lax.fori_loop(
                    i,
                    j,
                    lambda k, c, p=plans[i]: run(c, k * block, block, p, phase),
                    carry,
                )
            i = j
        if tail:
            carry = run(carry, n_full * block, tail, plans[-1], phase)
        return carry[:3]

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
    fusable = (
        states_are_features
        and not progress
        and f_shape.shape[-1] >= GRAM_KERNEL_MIN_FEATURES
    )
    if fusable and force_stats is not None and spinup < t_out:
        states, stats = force_stats(
            inputs,
            init,
            stats,
            readout.prepare_target(targets),
            spinup,
            t_out,
            keep_states,
        )
        return stats, states[-1], (states if keep_states else None)

    carry = (init, stats, history)
    if keep_states:
        # The whole run first, then the statistics from the stored history:
        # the BLAS threads of the Gram update keep spinning for a while after
        # each call, which would slow down a two-threaded reservoir run
        # interleaved with it (orc._native.esn_run); reading the history
        # back costs one pass over memory.
        carry = force_all(carry, block)
        state, stats, history = carry
        if states_are_features:
            # The features are the states themselves: the statistics of every
            # fitted row in one update that reads them where they are stored
            # (prepare_train only reshapes to the bank; no block slices copied
            # out of the history). It folds the rows in groups counted from
            # spinup, as the streaming blocks below do.
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
            # the features of the blocks streaming training computes (the
            # same offsets, hence the same state noise) and folds
            carry = sweep(carry, stream_block, "fit")
    else:
        # Streaming: blocks of STREAM_BLOCK rows, each run and then folded in
        # while fresh, so memory stays one block whatever the length.
        carry = sweep(carry, stream_block, "both")
    state, stats, history = carry
    return stats, state, history


class _Fold(NamedTuple):
    """How the fitted rows of one block fold into the ridge statistics.

    The fitted rows ``spinup:t_out`` are folded in groups of
    :data:`orc._ridge.STATS_GROUP` rows counted from ``spinup`` (the last
    one shorter), the groups in order, whatever blocks the rows arrive in, so
    that every way of cutting the rows into blocks (a stored history read in
    one update, streaming blocks) folds the same groups: the same bits (see
    :func:`orc._ridge.stats_update`). Indices are relative to the block's
    first row: ``pending`` rows of an unfinished group come in from earlier
    blocks (held in a buffer of one group); the block's rows ``lo:lo + head``
    complete it, and with ``close`` that group is folded (``pending + head``
    rows, a whole group or the last one); rows ``lo + head:mid`` are folded in
    place, and rows ``mid:hi`` (fewer than a group, more rows to come) go to
    the buffer for the next block. Without ``close`` the block ended inside
    the group: its rows join the buffer.
    """

    pending: int
    head: int
    close: bool
    lo: int
    mid: int
    hi: int

    @staticmethod
    def plan(b0: int, b1: int, spinup: int, t_out: int, pending: int):
        """The plan of block ``b0:b1`` with ``pending`` rows of a group
        carried in, and the number of rows it carries out: ``(plan or None,
        carried)``."""
        f0, f1 = max(b0, spinup), min(b1, t_out)
        if f0 >= f1:  # no fitted row (before spinup, or after t_out)
            return None, pending
        head = min(STATS_GROUP - pending, f1 - f0) if pending else 0
        a = f0 + head
        close = bool(pending) and (pending + head == STATS_GROUP or a == t_out)
        if pending and not close:  # the block ends inside the group
            return _Fold(pending, head, False, f0 - b0, a - b0, a - b0), pending + head
        if f1 == t_out:  # the last rows: fold them all, the last group included
            mid = f1
        else:
            mid = a + (f1 - a) // STATS_GROUP * STATS_GROUP
        return _Fold(pending, head, close, f0 - b0, mid - b0, f1 - b0), f1 - mid

    def fold(self, stats, pending, feats, targets):
        """``stats`` plus this block's share of the fitted rows of ``feats``
        and ``targets`` (the block's features and prepared targets), and the
        buffer of the unfinished group after it."""
        a = self.lo + self.head
        if self.pending and self.close:
            rows = jnp.concatenate(
                [
                    pending[0][: self.pending],
                    feats[self.lo : a].astype(pending[0].dtype),
                ]
            )
            ys = jnp.concatenate(
                [
                    pending[1][: self.pending],
                    targets[self.lo : a].astype(pending[1].dtype),
                ]
            )
            stats = stats_update(stats, rows, ys)
        elif self.head:
            pending = (
                pending[0]
                .at[self.pending : self.pending + self.head]
                .set(feats[self.lo : a].astype(pending[0].dtype)),
                pending[1]
                .at[self.pending : self.pending + self.head]
                .set(targets[self.lo : a].astype(pending[1].dtype)),
            )
        if self.mid > a:
            stats = stats_update(stats, feats, targets, a, self.mid)
        if self.hi > self.mid:
            n = self.hi - self.mid
            pending = (
                pending[0]
                .at[:n]
                .set(feats[self.mid : self.hi].astype(pending[0].dtype)),
                pending[1]
                .at[:n]
                .set(targets[self.mid : self.hi].astype(pending[1].dtype)),
            )
        return stats, pending


def _check_states(states, expected, size: int) -> None:
    """Trace time: ``force`` returned one state per input row, each of the
    start state's shape and dtype (the contract of every model's force)."""
    want = (size,) + tuple(expected.shape[1:])
    if tuple(jnp.shape(states)) != want or jnp.result_type(states) != expected.dtype:
        raise TypeError(
            f"force must return the states {want} {expected.dtype} (one per input "
            f"row, each of the start state's shape and dtype), got "
            f"{tuple(jnp.shape(states))} {jnp.result_type(states)}"
        )


def _head(inputs):
    return jax.tree.map(lambda a: a[:2], inputs)


def teacher_forced_statistics(
    readout,
    force,
    inputs,
    targets,
    init,
    *,
    multi_sequence: bool = False,
    keep_states: bool = True,
    features=None,
    **run,
):
    """The ridge statistics of a teacher-forced run, over one or several
    trajectories.

    Returns ``(stats, states)``: ``states`` the whole history, or with
    ``keep_states=False`` the last state. With ``multi_sequence`` every leaf
    of ``inputs``, ``targets`` and ``init`` has a leading trajectory axis and
    the statistics are summed over trajectories (in trajectory order).
    ``features`` and the keywords ``run`` (``spinup``, ``block_size``,
    ``progress``, ``force_stats``) are those of :func:`teacher_forced_stats`,
    which runs each trajectory (the offset ``features`` receives counts
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
            keep_states=keep_states,
            progress_offset=offset,
            features=None if features is None else _shifted(features, offset),
            **run,
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

    Scales given as traced values (``jax.jit`` with the scale an argument,
    ``vmap`` over it; ``traced``) are checked finite and >= 0 when the
    program runs, by :meth:`perturb` at its top level, and a bad one is
    used as 0 until the error is raised (:mod:`orc._errors`).

    ``shard`` (``(mesh axis, devices, columns)``, see :meth:`sharded`): the noise of
    one device's share of a bank placed by :func:`orc.shard`, the slice of
    the whole model's draw that its columns and reservoirs see, so that a
    placed model trains to the bits of the unplaced one.
    """

    input_scale: Array
    state_scale: Array
    key: Array
    has_input: bool = eqx.field(static=True)
    has_state: bool = eqx.field(static=True)
    owner: str = eqx.field(static=True, default="training")
    traced: bool = eqx.field(static=True, default=False)
    shard: tuple[str, int, bool] | None = eqx.field(static=True, default=None)

    def sharded(self, axis: str, devices: int, columns: bool = True) -> TrainingNoise:
        """This noise inside ``shard_map`` over ``devices`` along ``axis``:
        each device's states are its block of reservoirs (the bank's chunk
        axis), its inputs its block of columns (``columns``) or all of them
        (an ensemble's, whose every member reads the whole input)."""
        return dataclasses.replace(self, shard=(axis, devices, columns))

    def _draw(self, key, shape, dtype, along: int | None):
        """Standard normals of ``shape``; with ``shard``, this device's block
        along axis ``along`` of the draw of the whole model's shape (each
        device draws it all and keeps its block: the state noise of a placed
        bank costs every device the whole bank's draw; ``along=None``: the
        whole draw, on every device alike). The draw is kept out
        of the fusion that adds it (``optimization_barrier``): fused into a
        sliced or an unsliced sum, XLA's CPU code computed some normals one
        rounding apart, and a placed model must train to the same bits."""
        if self.shard is None or along is None:
            return jax.lax.optimization_barrier(
                flat_draw(jax.random.normal, key, shape, dtype)
            )
        axis, devices, _ = self.shard
        along %= len(shape)
        width = shape[along]
        whole = (*shape[:along], width * devices, *shape[along + 1 :])
        eps = jax.lax.optimization_barrier(
            flat_draw(jax.random.normal, key, whole, dtype)
        )
        start = jax.lax.axis_index(axis) * width
        return jax.lax.dynamic_slice_in_dim(eps, start, width, axis=along)

    def _scale(self, scale):
        """``scale``, or 0 where a traced one is not finite and >= 0."""
        if not self.traced:
            return scale
        return jnp.where(jnp.isfinite(scale) & (scale >= 0), scale, 0.0)

    def check(self, x):
        """``x``, with the errors of traced scales that are negative or
        NaN/inf (one per scale, naming it): a check of the calling program,
        made where the forcing is prepared (:meth:`perturb`)."""
        if not self.traced:
            return x
        for name, scale, used in (
            ("input_noise", self.input_scale, self.has_input),
            ("state_noise", self.state_scale, self.has_state),
        ):
            if used:
                x = _errors.check(
                    x,
                    ~(jnp.isfinite(scale) & (scale >= 0)),
                    f"{self.owner}: {name} must be finite and >= 0; it is "
                    "negative or NaN/inf.",
                )
        return x

    def perturb(self, seq):
        seq = self.check(seq)
        if not self.has_input:
            return seq
        columns = self.shard is None or self.shard[2]
        along = -1 if columns else None
        eps = self._draw(jax.random.fold_in(self.key, 0), seq.shape, seq.dtype, along)
        return seq + self._scale(self.input_scale).astype(seq.dtype) * eps

    def states(self, states, offset):
        """``states`` with the state noise of the block starting at ``offset``."""
        if not self.has_state:
            return states
        key = jax.random.fold_in(jax.random.fold_in(self.key, 1), offset)
        eps = self._draw(key, states.shape, states.dtype, -2)
        return states + self._scale(self.state_scale).astype(states.dtype) * eps

    def features(self, readout):
        """A ``features`` hook for :func:`teacher_forced_stats`, or ``None``."""
        if not self.has_state:
            return None
        return lambda states, _inputs, offset: readout.prepare_train(
            self.states(states, offset)
        )


def _noise_scale(name, value, owner):
    """A noise scale: a concrete real number >= 0 (checked now), or a traced
    real scalar (checked when the program runs, :meth:`TrainingNoise.check`)."""
    if not isinstance(value, jax.core.Tracer):
        return check_float(name, value, owner, low=0.0)
    if jnp.ndim(value) != 0:
        raise ValueError(
            f"{owner}: {name} must be a number (a scalar), got a traced array of "
            f"shape {tuple(jnp.shape(value))}; vmap over it to train one model "
            "per value"
        )
    if not (
        jnp.issubdtype(value.dtype, jnp.floating)
        or jnp.issubdtype(value.dtype, jnp.integer)
    ):
        raise TypeError(
            f"{owner}: {name} must be a real number, got dtype {value.dtype}"
        )
    return value


def training_noise(owner, input_noise, state_noise, noise_seed, dtype):
    """Checked :class:`TrainingNoise`, or ``None`` when both scales are 0.

    Either scale may be traced (``jax.jit``/``vmap`` over it, as over
    ``beta``): it is then checked when the program runs and its noise is
    always drawn (a scale of 0 adds zeros)."""
    input_noise = _noise_scale("input_noise", input_noise, owner)
    state_noise = _noise_scale("state_noise", state_noise, owner)
    traced_in = isinstance(input_noise, jax.core.Tracer)
    traced_state = isinstance(state_noise, jax.core.Tracer)
    has_input = traced_in or input_noise > 0
    has_state = traced_state or state_noise > 0
    if not (has_input or has_state):
        return None
    return TrainingNoise(
        argument_array(input_noise, dtype),
        argument_array(state_noise, dtype),
        jax_key(noise_seed, owner),
        has_input,
        has_state,
        owner,
        traced_in or traced_state,
    )
