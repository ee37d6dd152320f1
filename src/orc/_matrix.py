"""Random sparse reservoir matrices.

A reservoir matrix ``W`` (``n x n``) has exactly ``k = max(1, round(density * n))``
non-zeros in every row, at distinct uniformly random columns, with standard
normal values, scaled to the requested spectral radius. Storing a fixed number
of entries per row (ELL layout: ``values`` and ``columns`` of shape ``(n, k)``)
makes ``W @ x`` a gather and a row sum with no index bookkeeping, and it maps
with ``vmap`` over a bank of reservoirs unchanged. Components hold a bank:
``(chunks, n, k)``, one matrix per reservoir, ``chunks == 1`` for a single one
(as ORC 0.4's ``BCOO`` of shape ``(chunks, n, n)``: :class:`ReservoirMatrix`
is also a ``BCOO``, whose buffers are views of the ELL layout).

ORC draws ``density * n**2`` positions over the whole matrix instead, so its row
counts vary (binomially); both give the same expected density and, after
normalisation, the same spectral radius. The fixed count also rules out empty
rows, whose nodes would only see their input.

Matrices are drawn on the host with numpy (see :mod:`orc._random`), or
given by the user (the drivers' ``from_matrices``): dense, ``scipy.sparse``
or ``BCOO`` matrices are brought to the same layout (:func:`given_entries`,
:func:`ell_from_entries`).
"""

from __future__ import annotations

import functools
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import sparse as jsparse
from jaxtyping import Array, Float, Int

from . import _errors, _native, _strategy
from ._ridge import RidgeStats, stats_update
from ._validation import check_dtype, check_index_bounds, device_array
from .utils.numerics import spectral_radius_np

__all__ = [
    "ReservoirMatrix",
    "random_reservoir_matrices",
    "distinct_columns",
    "ell_matvec",
    "esn_run",
    "esn_run_stats",
    "esn_run_linear",
    "linear_run_native",
    "esn_forecast",
    "linear_drive",
    "scaling_radius",
    "ell_from_entries",
    "given_array",
    "given_dtype",
    "given_entries",
    "given_dense",
    "acyclic_pattern",
]


def _gather_matvec(values, indices, x):
    # An index outside [0, n) reads NaN instead of being clamped to the edge
    # (XLA's default) or wrapped (a negative one), so a corrupted matrix cannot
    # give a plausible result: unsigned, a negative index is out of range too.
    gathered = x.at[indices.astype(jnp.uint32)].get(mode="fill", fill_value=jnp.nan)
    return jnp.sum(values * gathered, axis=-1)


COLUMN_MESSAGE = (
    "reservoir matrix: a column index lies outside [0, res_dim) (a corrupted or "
    "edited matrix); nothing was computed."
)


def column_guard(indices, n: int):
    """``(indices, bad)``: ``bad`` whether any index lies outside ``[0, n)``,
    and then ``indices`` replaced by zeros (what every kernel accepts; the
    error wins). One pass over the indices per call, not per step."""
    bad = jnp.any((indices < 0) | (indices >= n))
    return jnp.where(bad, jnp.zeros_like(indices), indices), bad


def report_columns(out, bad):
    """``out`` with :data:`COLUMN_MESSAGE` as the program's error if ``bad``."""
    return _errors.check(out, bad, COLUMN_MESSAGE)


def guarded(args, *, default, cpu=None, cuda=None):
    """``lax.platform_dependent`` over ``args`` (``args[0]`` the ELL values
    ``(..., n, k)``, ``args[1]`` their column indices) with an out-of-range
    index refused on every path, the way each path can afford.

    The native CPU kernels check the indices themselves (and fail the call
    with the same words), so the ``cpu`` branch gets them as they are: a
    program that runs it holds no pass over them (~60 us of a short forecast
    at res_dim 2000). The ``cuda`` and ``default`` branches (XLA, the GPU
    cluster kernel) get :func:`column_guard`'s indices. Each branch returns
    whether an index was bad, and the check is made once, outside the
    branches: a check inside one could not hand its code to the program's
    ledger (:mod:`orc._errors`) and would become a host callback in the
    branch a GPU runs. Without ``cpu`` and ``cuda`` this is ``default`` on
    checked indices."""
    n = args[0].shape[-2]

    def checked(fn):
        def branch(*a):
            indices, bad = column_guard(a[1], n)
            return fn(a[0], indices, *a[2:]), bad

        return branch

    if cpu is None and cuda is None:
        out, bad = checked(default)(*args)
    else:
        branches = {}
        if cpu is not None:
            branches["cpu"] = lambda *a: (cpu(*a), jnp.zeros((), bool))
        if cuda is not None:
            branches["cuda"] = checked(cuda)
        out, bad = _strategy.on_platform(*args, **branches, default=checked(default))
    return report_columns(out, bad)


@jax.custom_jvp
def _native_matvec(values, indices, x):
    target = _native.ffi_target(values.dtype)
    call = jax.ffi.ffi_call(
        target, jax.ShapeDtypeStruct(x.shape, x.dtype), vmap_method="expand_dims"
    )
    return call(values, indices, x)


@_native_matvec.defjvp
def _native_matvec_jvp(primals, tangents):
    values, indices, x = primals
    d_values, _, d_x = tangents
    y = _native_matvec(values, indices, x)
    # the product is bilinear; its tangent uses the (transposable) JAX gather
    return y, _gather_matvec(d_values, indices, x) + _gather_matvec(
        values, indices, d_x
    )


def ell_matvec(values, indices, x, native: bool | None = None):
    """``y[i] = sum_j values[i, j] * x[indices[i, j]]``.

    On CPU with the native kernel available (see :mod:`orc._native`) this is a
    custom call; elsewhere, or with ``native=False``, the JAX gather. Both give
    the same values; derivatives always go through the JAX expression.
    """
    use = _strategy.native() if native is None else native
    if use and values.dtype == x.dtype and _native.ffi_target(values.dtype) is not None:
        return _strategy.on_platform(
            values,
            indices,
            x,
            cpu=_native_matvec,
            default=_gather_matvec,
        )
    return _gather_matvec(values, indices, x)


def _esn_run_scan(values, indices, drive, r0, leak):
    """Reference of :func:`esn_run`: one ``lax.scan`` step per input, the run
    of one reservoir mapped over the bank (``indices`` checked by the caller)."""
    return jax.vmap(_esn_run_one, in_axes=(0, 0, 1, 0, None), out_axes=1)(
        values, indices, drive, r0, leak
    )


def _esn_run_one(values, indices, drive, r0, leak):
    def step(r, p):
        r = _esn_step(values, indices, r, p, leak)
        return r, r

    return jax.lax.scan(step, r0, drive)[1]


def _esn_step(values, indices, r, p, leak):
    """One leaky-tanh ESN update ``leak tanh(W r + p) + (1 - leak) r`` of one
    reservoir (``W`` in ELL layout ``(n, k)``)."""
    return leak * jnp.tanh(ell_matvec(values, indices, r) + p) + (1 - leak) * r


@jax.custom_jvp
def _esn_run_native(values, indices, drive, r0, leak):
    call = jax.ffi.ffi_call(
        _native.esn_run_target(values.dtype),
        jax.ShapeDtypeStruct(drive.shape, drive.dtype),
        vmap_method="sequential",
    )
    return call(values, indices, drive, r0, leak)


@_esn_run_native.defjvp
def _esn_run_native_jvp(primals, tangents):
    return _esn_run_native(*primals), jax.jvp(_esn_run_scan, primals, tangents)[1]


def esn_run(values, indices, drive, r0, leak):
    """States of the discrete leaky-tanh ESN forced by ``drive``.

    ``r_t = leak * tanh(W r_{t-1} + drive_t) + (1 - leak) * r_{t-1}`` for a
    bank of ``C`` reservoirs ``W`` in ELL layout (``values``/``indices``
    ``(C, n, k)``), ``drive (T, C, n)`` and ``r0 (C, n)``; returns ``(T, C, n)``. On CPU with the native kernels the whole sequence
    is one call that shares every step between two threads (see
    :mod:`orc._native`); elsewhere a ``lax.scan``. Derivatives go through
    the scan.
    """
    args = (values, indices, drive, r0, jnp.asarray(leak, drive.dtype))
    if _native_run(values, drive, r0):
        return guarded(args, cpu=_esn_run_native, default=_esn_run_scan)
    return guarded(args, default=_esn_run_scan)


def _native_run(values, drive, r0) -> bool:
    """Whether a run of these operands may take the native kernel."""
    return (
        _strategy.native()
        and values.dtype == drive.dtype == r0.dtype
        and _native.esn_run_target(values.dtype) is not None
    )


def _esn_run(values, indices, drive, r0, leak):
    """:func:`esn_run` for checked ``indices`` (inside a branch of
    :func:`guarded`, where a second check could not be reported)."""
    args = (values, indices, drive, r0, jnp.asarray(leak, drive.dtype))
    if _native_run(values, drive, r0):
        return _strategy.on_platform(*args, cpu=_esn_run_native, default=_esn_run_scan)
    return _esn_run_scan(*args)


def linear_drive(win, windows, bias=None):
    """``windows (T, C, w) -> (T, C, n)``: ``win[c] @ windows[t, c]`` (+ ``bias``)
    for input weights ``win (C, n, w)``.

    With a narrow window (the usual few input variables) the product is
    written as ``w`` multiply-adds over the output, which XLA runs ~20x faster
    on CPU than a ``K = w`` contraction followed by a transpose.
    """
    width = win.shape[-1]
    if width <= 16:
        out = sum(win[None, :, :, j] * windows[:, :, None, j] for j in range(width))
    else:
        out = jnp.einsum("cnw,tcw->tcn", win, windows, precision="highest")
    return out if bias is None else out + bias


def _esn_run_linear_plain(values, indices, win, windows, bias, r0, leak):
    """Reference of :func:`_esn_run_linear_native`: the drive, then the run."""
    return _esn_run(values, indices, linear_drive(win, windows, bias), r0, leak)


@jax.custom_jvp
def _esn_run_linear_native(values, indices, win, windows, bias, r0, leak):
    target = _native.esn_run_linear_target(values.dtype)
    steps, chunks, n = windows.shape[0], values.shape[0], values.shape[1]
    call = jax.ffi.ffi_call(
        target,
        jax.ShapeDtypeStruct((steps, chunks, n), values.dtype),
        vmap_method="sequential",
    )
    return call(values, indices, win, windows, bias, r0, leak)


@_esn_run_linear_native.defjvp
def _esn_run_linear_native_jvp(primals, tangents):
    return _esn_run_linear_native(*primals), jax.jvp(
        _esn_run_linear_plain, primals, tangents
    )[1]


def linear_run_native(values, win, windows, bias, r0) -> bool:
    """Whether :func:`esn_run_linear` of these operands takes the native
    kernel (CPU, native backend, one dtype, a scalar bias)."""
    dtype = values.dtype
    return (
        _strategy.native()
        and jnp.ndim(bias) == 0
        and all(a.dtype == dtype for a in (win, windows, r0))
        and _native.esn_run_linear_target(dtype) is not None
    )


def esn_run_linear(values, indices, win, windows, bias, r0, leak):
    """:func:`esn_run` driven by a linear embedding: the drive
    ``linear_drive(win, windows, bias)`` (``win (C, n, w)``, ``windows (T,
    C, w)``), states ``(T, C, n)``.

    On CPU with the native kernels the drive is computed inside the run,
    step by step, exactly as :func:`esn_run_stats` computes it, so the
    states are the same bits as a training's stored states (XLA would sum
    the drive in another order); elsewhere, and for derivatives, the drive
    and then the run."""
    dtype = values.dtype
    args = (values, indices, win, windows, jnp.asarray(bias, dtype), r0)
    args = args + (jnp.asarray(leak, dtype),)
    if linear_run_native(values, win, windows, bias, r0):
        return guarded(args, cpu=_esn_run_linear_native, default=_esn_run_linear_plain)
    return guarded(args, default=_esn_run_linear_plain)


def _esn_fit_plain(
    values, indices, win, windows, bias, r0, leak, gram, cross, targets, start, stop
):
    """Reference of :func:`_esn_fit_native`: the drive, the run, the statistics."""
    states = _esn_run(values, indices, linear_drive(win, windows, bias), r0, leak)
    stats = stats_update(
        RidgeStats(gram, cross, jnp.zeros((), gram.dtype)), states, targets, start, stop
    )
    return states, stats.gram, stats.cross


@functools.partial(jax.custom_jvp, nondiff_argnums=(10, 11))
def _esn_fit_native(
    values, indices, win, windows, bias, r0, leak, gram, cross, targets, start, stop
):
    target = _native.esn_fit_target(values.dtype)
    steps, chunks, n = windows.shape[0], values.shape[0], values.shape[1]
    call = jax.ffi.ffi_call(
        target,
        (
            jax.ShapeDtypeStruct((steps, chunks, n), values.dtype),
            jax.ShapeDtypeStruct(gram.shape, gram.dtype),
            jax.ShapeDtypeStruct(cross.shape, cross.dtype),
        ),
        vmap_method="sequential",
        input_output_aliases={7: 1, 8: 2},  # the sums are updated where they are
    )
    return call(
        values,
        indices,
        win,
        windows,
        bias,
        r0,
        leak,
        gram,
        cross,
        targets,
        start=np.int64(start),
        stop=np.int64(stop),
    )


@_esn_fit_native.defjvp
def _esn_fit_native_jvp(start, stop, primals, tangents):
    return jax.jvp(
        lambda *a: _esn_fit_plain(*a, start, stop), tuple(primals), tuple(tangents)
    )


def esn_run_stats(
    values,
    indices,
    win,
    windows,
    bias,
    r0,
    leak,
    stats: RidgeStats,
    targets,
    start: int,
    stop: int,
) -> tuple[Array, RidgeStats]:
    """:func:`esn_run` driven by a linear embedding, and the ridge statistics
    of its states, in one pass.

    The drive is ``linear_drive(win, windows, bias)`` (``win (C, n, w)``,
    ``windows (T, C, w)``); returns ``(states, stats)`` with ``states``
    ``(T, C, n)`` and ``stats`` plus rows ``start:stop`` (static) of
    ``states`` against ``targets`` ``(T, C, O)``, exactly what
    :func:`orc._ridge.stats_update` adds. On CPU with the native kernels
    this is one call in which the drive is computed step by step (never
    stored) and the run and the Gram update overlap on the two cores (one
    thread runs the reservoir, the other folds finished rows into the
    statistics; see :mod:`orc._native`); elsewhere, and for derivatives, the
    drive, the run and the update follow each other.
    """
    dtype = values.dtype
    leak = jnp.asarray(leak, dtype)
    bias = jnp.asarray(bias, dtype)
    targets = targets.astype(dtype)
    start, stop = int(start), int(stop)
    steps = windows.shape[0]
    if not 0 <= start <= stop <= min(steps, targets.shape[0]):
        raise ValueError(
            f"esn_run_stats: rows [{start}, {stop}) outside a run of "
            f"{steps} steps / {targets.shape[0]} targets"
        )
    args = (values, indices, win, windows, bias, r0, leak, stats.gram, stats.cross)
    args = args + (targets,)
    fusable = (
        _strategy.native()
        and stats.form == "gram"
        and stats.gram.ndim == 3
        and targets.ndim == 3
        and targets.shape[0] == steps
        and bias.ndim == 0
        and all(a.dtype == dtype for a in args if a is not indices)
        and _native.esn_fit_target(dtype) is not None
    )
    if fusable:
        states, gram, cross = guarded(
            args,
            cpu=lambda *a: _esn_fit_native(*a, start, stop),
            default=lambda *a: _esn_fit_plain(*a, start, stop),
        )
        return states, RidgeStats(
            gram, cross, stats.count + (stop - start), weights_dtype=stats.weights_dtype
        )
    states = esn_run(values, indices, linear_drive(win, windows, bias), r0, leak)
    return states, stats_update(stats, states, targets, start, stop)


def _esn_forecast_scan(
    values, indices, win, window, bias, wout, r0, leak, length, unroll=None
):
    """Reference of :func:`esn_forecast`: one ``lax.scan`` step per output;
    ``unroll`` steps per iteration of the compiled loop, by default
    :func:`orc._strategy.scan`'s choice for the platform (``indices`` checked
    by the caller)."""

    def readout(r):
        return jnp.einsum("con,cn->co", wout, r, precision="highest").reshape(-1)

    def step(r, _):
        p = (
            jnp.einsum("cnw,cw->cn", win, readout(r)[window], precision="highest")
            + bias
        )
        r = jax.vmap(_esn_step, in_axes=(0, 0, 0, 0, None))(values, indices, r, p, leak)
        return r, readout(r)

    if unroll is None:
        rest = _strategy.scan(step, r0, None, length=length - 1)[1]
    else:
        rest = jax.lax.scan(step, r0, None, length=length - 1, unroll=unroll)[1]
    return jnp.concatenate([readout(r0)[None], rest], axis=0)


@functools.partial(jax.custom_jvp, nondiff_argnums=(8,))
def _esn_forecast_native(values, indices, win, window, bias, wout, r0, leak, length):
    call = jax.ffi.ffi_call(
        _native.esn_forecast_target(values.dtype),
        jax.ShapeDtypeStruct((length, wout.shape[0] * wout.shape[1]), values.dtype),
        vmap_method="sequential",
    )
    return call(values, indices, win, window, bias, wout, r0, leak)


@_esn_forecast_native.defjvp
def _esn_forecast_native_jvp(length, primals, tangents):
    return _esn_forecast_native(*primals, length), jax.jvp(
        lambda *a: _esn_forecast_scan(*a, length), primals, tangents
    )[1]


# The GPU forecast as one thread-block cluster (orc._native, esn_cluster.cu).
# Configuration: 16 blocks (a Hopper GPC's most), 256 threads, 2 per row: the
# fastest of a sweep over 8/16 blocks, 128-1024 threads and 1-8 threads per row
# at N = 2000 on an H200, in both dtypes (benchmarks/GPU.md).
CLUSTER_CONFIG = (16, 256, 2)
CLUSTER_MAX_OUT = 8  # MAXOUT in esn_cluster.cu
CLUSTER_SHARED = 227 * 1024  # shared memory a block may have on sm_90
# Measured faster than the scan at 80k non-zeros (N = 2000, k = 40: 3.6 vs 5.2
# µs per step in float64, 2.7 vs 4.7 in float32) and slower at 320k (N = 4000,
# k = 80, float32: 7.4 vs 5.6): each block's rows are a sequential share of the
# step, so the kernel stops paying once a block holds more than ~6k non-zeros.
CLUSTER_MAX_NONZEROS = 100_000


def cluster_shared_bytes(chunks, n, k, w, itemsize, cluster, threads) -> int:
    """Shared memory per block of the cluster forecast (esn_cluster.cu's layout)."""
    total = chunks * n
    rows = -(-total // cluster)
    numbers = (
        rows * (k + w + 1 + CLUSTER_MAX_OUT)
        + 2 * total
        + 2 * cluster * CLUSTER_MAX_OUT
        + (threads // 32 + 1) * CLUSTER_MAX_OUT
    )
    return numbers * itemsize + chunks * w * 4 + rows * k * (2 if total < 2**16 else 4)


@functools.cache
def _gpu_has_clusters() -> bool:
    """Whether this process has an NVIDIA GPU of compute capability 9.0 or
    later (thread-block clusters), as its first GPU device says."""
    try:
        device = jax.devices("gpu")[0]
    except RuntimeError:  # no GPU backend
        return False
    capability = getattr(device, "compute_capability", None)
    if device.platform != "gpu" or not capability:
        return False
    try:
        return int(str(capability).split(".")[0]) >= 9
    except ValueError:
        return False


def _broadcasts_to(shape, target) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == target
    except ValueError:
        return False


def cluster_config(values, win, bias, wout, leak) -> tuple | None:
    """``(cluster, threads, lanes)`` when a closed-loop forecast with these
    arguments runs as one thread-block cluster on this process's GPU
    (:mod:`orc._native`), else None (it runs the scan): the native kernels on,
    the build's CUDA handler present, a GPU with clusters, a scalar leak rate,
    at most 8 outputs, at most ``CLUSTER_MAX_NONZEROS`` non-zeros, and the
    block's share fitting in shared memory."""
    chunks, n, k = values.shape
    dtype = values.dtype
    cluster, threads, _ = CLUSTER_CONFIG
    if (
        not _strategy.native()
        or jnp.ndim(leak) != 0
        or not _broadcasts_to(jnp.shape(bias), (chunks, n))
        or not all(a.dtype == dtype for a in (win, wout))
        or wout.shape[0] * wout.shape[1] > CLUSTER_MAX_OUT
        or chunks * n * k > CLUSTER_MAX_NONZEROS
        or cluster_shared_bytes(
            chunks, n, k, win.shape[-1], dtype.itemsize, cluster, threads
        )
        > CLUSTER_SHARED
        or not _gpu_has_clusters()  # before the target: NVRTC is looked for only on a GPU
        or _native.cluster_forecast_target(dtype) is None
    ):
        return None
    return CLUSTER_CONFIG


@functools.cache
def _cluster_call(length: int, config: tuple):
    """The cluster forecast of ``length`` steps as a function of the
    forecast's arrays; under ``vmap`` (ensembles of initial states or
    models) the scan runs instead, which batches well where one cluster per
    trajectory would run them one after another."""
    cluster, threads, lanes = config

    @jax.custom_batching.custom_vmap
    def call(values, indices, win, window, bias, wout, r0, leak):
        chunks, n, _ = values.shape
        ffi = jax.ffi.ffi_call(
            _native.cluster_forecast_target(values.dtype),
            jax.ShapeDtypeStruct((length, wout.shape[0] * wout.shape[1]), values.dtype),
        )
        return ffi(
            values,
            indices,
            win,
            window,
            jnp.broadcast_to(bias, (chunks, n)),
            wout,
            r0,
            leak,
            cluster=np.int64(cluster),
            threads=np.int64(threads),
            lanes=np.int64(lanes),
        )

    @call.def_vmap
    def _batched(axis_size, in_batched, *args):
        del axis_size
        axes = [0 if b else None for b in in_batched]
        out = jax.vmap(lambda *a: _esn_forecast_scan(*a, length), in_axes=axes)(*args)
        return out, True

    return call


@functools.partial(jax.custom_jvp, nondiff_argnums=(8, 9))
def _esn_forecast_cluster(
    values, indices, win, window, bias, wout, r0, leak, length, config
):
    return _cluster_call(length, config)(
        values, indices, win, window, bias, wout, r0, leak
    )


@_esn_forecast_cluster.defjvp
def _esn_forecast_cluster_jvp(length, config, primals, tangents):
    return _esn_forecast_cluster(*primals, length, config), jax.jvp(
        lambda *a: _esn_forecast_scan(*a, length), primals, tangents
    )[1]


# The one-call forecast runs every size natively: it has no per-step loop
# overhead, which is most of a small reservoir's step in the scan (AMD EPYC,
# AVX2, 2000 steps, float64: res_dim 100 1.4 vs 3.2 ms, 500 8.9 vs 16.3 ms,
# 800 15.2 vs 32.0 ms; float32 alike). The kernel itself shares a step
# between two threads from 512 non-zeros per step on, in calls of at least
# 2^20 non-zero-steps (ShareSteps in _native/esn.h).


def esn_forecast(values, indices, win, window, bias, wout, r0, leak, length: int):
    """Closed-loop forecast of a discrete leaky-tanh ESN with a linear
    readout of its own state fed back through a linear embedding.

    ``y_t = concat_c(wout[c] @ r_t[c])`` for ``t = 0..length-1`` from
    ``r_0 = r0 (C, n)``, and ``r_{t+1}[c] = leak tanh(W_c r_t[c] + win[c] @
    y_t[window[c]] + bias) + (1 - leak) r_t[c]``, with ``W`` in ELL layout
    ``(C, n, k)``, ``win (C, n, w)``, ``window (C, w)`` (integer positions in
    ``y``), ``wout (C, o, n)``; returns ``(length, C * o)``. On CPU with the
    native kernels the whole forecast is one call (from 512 non-zeros in
    ``W`` on, in calls long enough, it shares every step between two threads; see
    :mod:`orc._native`); on an NVIDIA GPU with thread-block clusters, where
    :func:`cluster_config` admits it, one cluster kernel; elsewhere, under
    ``vmap`` on a GPU, and for derivatives, a ``lax.scan``.
    """
    dtype = values.dtype
    length = int(length)
    if length < 1:
        raise ValueError(f"esn_forecast: length must be >= 1, got {length}")
    leak = jnp.asarray(leak, dtype)
    bias = jnp.asarray(bias, dtype)
    window = jnp.asarray(window, jnp.int32)
    args = (values, indices, win, window, bias, wout, r0, leak)
    branches = {}
    if (
        _strategy.native()
        and bias.ndim == 0
        and all(a.dtype == dtype for a in (win, wout, r0))
        and _native.esn_forecast_target(dtype) is not None
    ):
        branches["cpu"] = lambda *a: _esn_forecast_native(*a, length)
    config = cluster_config(values, win, bias, wout, leak)
    if config is not None and r0.dtype == dtype:
        branches["cuda"] = lambda *a: _esn_forecast_cluster(*a, length, config)
    return guarded(args, **branches, default=lambda *a: _esn_forecast_scan(*a, length))


class _BCOOModuleMeta(type(eqx.Module), type(jsparse.BCOO)):
    """Metaclass of a class that is both an Equinox module and a ``BCOO``
    (the two bases' metaclasses combined; Python asks for one that derives
    from both)."""


class ReservoirMatrix(eqx.Module, jsparse.BCOO, metaclass=_BCOOModuleMeta):
    """Square sparse matrices with a fixed number of entries per row (ELL).

    A driver's ``wr`` is a bank, one matrix per reservoir: ``values`` and
    ``columns`` of shape ``(chunks, n, k)`` (``chunks == 1`` for a single
    reservoir); indexing a bank (``wr[c]``) gives one matrix, ``(n, k)``.

    It is also a ``jax.experimental.sparse.BCOO``, ORC 0.4's type for ``wr``
    (``isinstance(wr, BCOO)`` holds), whose buffers are views of the ELL
    layout: :attr:`shape` ``(chunks, n, n)`` (``n_batch=1``), :attr:`data`
    ``(chunks, nse)``, :attr:`indices` ``(chunks, nse, 2)``, :attr:`nse`
    ``n * k``, neither sorted nor unique (zeros padding a short row repeat
    column 0, as BCOO's duplicates they add up). So BCOO's methods and the
    ``sparse.bcoo_*`` functions take it as they take ORC's: ``sparse.BCOO.
    todense(wr)`` is the dense ``(chunks, n, n)`` stack, ``sparse.bcoo_
    dot_general``, ``bcoo_slice``, ``sparse.todense``, ``x @ wr``, ``wr * 2``
    work, and those that make a new matrix return a plain ``BCOO``. Its own
    :meth:`todense`, ``wr @ x`` and :meth:`matvec` use the ELL layout, and as
    a pytree it is its two leaves ``values`` and ``columns`` (jit, vmap,
    grad and save/load see those). :meth:`to_bcoo` copies it into a plain
    ``BCOO``.

    Attributes
    ----------
    values : Array, shape ``(chunks, n, k)`` (or ``(n, k)`` for one matrix)
        Entries of each row.
    columns : Array (int32), same shape
        Column of each entry (distinct within a row, unless padded with zeros).
    """

    values: Float[Array, "*chunks n k"]
    columns: Int[Array, "*chunks n k"]

    def __check_init__(self):
        owner = "ReservoirMatrix"
        values, columns = self.values, self.columns
        if not hasattr(values, "dtype") or not hasattr(columns, "dtype"):
            raise TypeError(f"{owner}: values and columns must be arrays")
        if not jnp.issubdtype(values.dtype, jnp.floating):
            raise TypeError(f"{owner}: values must be floating, got {values.dtype}")
        if jnp.dtype(columns.dtype) != jnp.dtype(jnp.int32):
            raise TypeError(f"{owner}: columns must be int32, got {columns.dtype}")
        if values.ndim not in (2, 3) or tuple(columns.shape) != tuple(values.shape):
            raise ValueError(
                f"{owner}: values and columns must share one shape (chunks, n, k) or "
                f"(n, k), got {tuple(values.shape)} and {tuple(columns.shape)}"
            )
        n, k = values.shape[-2:]
        if not 1 <= k <= n:
            raise ValueError(
                f"{owner}: need 1 <= k <= n entries per row, got {k}, n={n}"
            )
        # a column outside [0, n) would be read out of bounds (native path) or
        # clamped (XLA's gather): refuse it wherever the matrix is made
        check_index_bounds(owner, "columns", columns, n)

    @property
    def shape(self) -> tuple[int, ...]:
        """``(chunks, n, n)`` for a bank (as ORC's ``BCOO``), ``(n, n)`` for one matrix."""
        n = self.values.shape[-2]
        return tuple(self.values.shape[:-2]) + (n, n)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nse(self) -> int:
        """Stored entries per matrix, ``n * k`` (BCOO's name)."""
        return self.values.shape[-2] * self.values.shape[-1]

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def data(self) -> Array:
        """Stored entries, ``(chunks, nse)``, row by row (BCOO's ``data``)."""
        shape = self.values.shape[:-2] + (self.nse,)
        if isinstance(self.values, jax.core.ShapedArray):
            # JAX's abstract evaluation of ``sparse.todense`` rebuilds the
            # matrix from abstract leaves and reads the abstract ``data``
            return self.values.update(shape=shape)
        return self.values.reshape(shape)

    @property
    def indices(self) -> Array:
        """``(row, column)`` of each entry of :attr:`data`, ``(chunks, nse, 2)``
        in JAX's default integer type (BCOO's ``indices``)."""
        rows = jnp.broadcast_to(
            jnp.arange(self.values.shape[-2], dtype=int)[:, None], self.columns.shape
        )
        pairs = jnp.stack([rows, self.columns.astype(rows.dtype)], axis=-1)
        return pairs.reshape(self.values.shape[:-2] + (self.nse, 2))

    @property
    def indices_sorted(self) -> bool:
        """``False`` (BCOO's flag): rows come in order, but a row's columns
        do not."""
        return False

    @property
    def unique_indices(self) -> bool:
        """``False`` (BCOO's flag): zeros padding a short row repeat column 0."""
        return False

    @classmethod
    def from_bcoo(cls, matrix) -> ReservoirMatrix:
        """The bank of a ``BCOO`` of shape ``(chunks, n, n)`` (``n_batch=1``),
        e.g. ORC 0.4's ``wr``, in ELL layout (:func:`ell_from_entries`: ``k``
        is the largest row count, shorter rows are padded with zeros, each row
        keeps the order of its entries; duplicate entries are summed by
        ``todense`` as by BCOO's). Runs on the host."""
        data = np.asarray(matrix.data)
        idx = np.asarray(matrix.indices)
        if data.ndim != 2 or idx.shape != data.shape + (2,):
            raise ValueError(
                "ReservoirMatrix.from_bcoo: need a BCOO of shape (chunks, n, n) with "
                f"one batch dimension, got data {data.shape} and indices {idx.shape}"
            )
        entries = [(i[:, 0], i[:, 1], d) for d, i in zip(data, idx, strict=True)]
        values, columns = ell_from_entries(entries, matrix.shape[-1])
        return cls(jnp.asarray(values), jnp.asarray(columns))

    def __getitem__(self, chunk) -> ReservoirMatrix:
        """Matrix ``chunk`` of a bank."""
        if self.values.ndim != 3:
            raise TypeError(
                "ReservoirMatrix: only a bank (chunks, n, n) can be indexed"
            )
        return ReservoirMatrix(self.values[chunk], self.columns[chunk])

    def matvec(self, x: Float[Array, " n"]) -> Float[Array, " n"]:
        """``W @ x`` for one matrix (inside the per-reservoir update, which is
        mapped over the bank)."""
        return ell_matvec(self.values, self.columns, x)

    def __matmul__(self, x):
        """``W @ x`` with ``numpy.matmul``'s broadcasting: for a bank, ``x``
        of shape ``(n,)``, ``(n, m)`` or ``(chunks, n, m)``."""
        x = jnp.asarray(x)
        if self.values.ndim == 3:
            in_axes = (0, 0, 0 if x.ndim == 3 else None)
            return jax.vmap(_matmul_one, in_axes=in_axes)(self.values, self.columns, x)
        return _matmul_one(self.values, self.columns, x)

    def todense(self) -> Array:
        """The dense matrices, ``(chunks, n, n)`` (``(n, n)`` for one)."""
        if self.values.ndim == 3:
            return jax.vmap(_dense_one)(self.values, self.columns)
        return _dense_one(self.values, self.columns)

    def to_bcoo(self) -> jsparse.BCOO:
        """The same matrices as a plain ``jax.experimental.sparse.BCOO`` (the
        same buffers and flags, without the ELL layout)."""
        return jsparse.BCOO(
            (self.data, self.indices),
            shape=self.shape,
            indices_sorted=self.indices_sorted,
            unique_indices=self.unique_indices,
        )


def _matmul_one(values, columns, x):
    if x.ndim == 1:
        return ell_matvec(values, columns, x)
    return jax.vmap(lambda v: ell_matvec(values, columns, v), 1, 1)(x)


def _dense_one(values, columns):
    n = values.shape[-2]
    rows = jnp.broadcast_to(jnp.arange(n)[:, None], columns.shape)
    return jnp.zeros((n, n), values.dtype).at[rows, columns].add(values)


def distinct_columns(
    rng: np.random.Generator, n_rows: int, n_cols: int, k: int
) -> np.ndarray:
    """``k`` distinct uniformly random columns in ``[0, n_cols)`` for each row.

    Floyd's sampling algorithm vectorised over rows: ``O(n_rows * k**2)`` work
    instead of sorting ``n_rows * n_cols`` random keys. Each row is a uniform
    ``k``-subset; the order within a row carries no meaning.
    """
    if not 0 < k <= n_cols:
        raise ValueError(f"distinct_columns: need 0 < k <= n_cols, got k={k}")
    cols = np.empty((n_rows, k), dtype=np.int32)
    for i in range(k):
        j = n_cols - k + i
        t = rng.integers(0, j + 1, size=n_rows)
        taken = (cols[:, :i] == t[:, None]).any(axis=1)
        cols[:, i] = np.where(taken, j, t)
    return cols


def nonzeros_per_row(n: int, density: float) -> int:
    return int(min(n, max(1, round(density * n))))


def scaling_radius(values, columns, use_sparse_eigs: bool = True) -> float:
    """The spectral radius one ELL matrix ``(n, k)`` is scaled by, on the host:
    an Arnoldi estimate when ``use_sparse_eigs`` (exact for ``n <= 200``),
    else the dense eigenvalues' largest modulus.

    The estimate's last bits depend on how BLAS splits Arnoldi's dot
    products and LAPACK's eigvals over threads (OPENBLAS_NUM_THREADS=1 and
    the default gave different matrices on an AMD EPYC); rounded to float32
    (relative 6e-8, below the estimate's own error of 1e-11 .. 1e-5 at
    n >= 1000), the same matrix is scaled to the same bits in every process.
    """
    method = "arnoldi" if use_sparse_eigs else "dense"
    return float(np.float32(spectral_radius_np(values, columns, method=method)))


def random_reservoir_matrices(
    rng: np.random.Generator,
    n: int,
    density: float,
    spectral_radius: float,
    dtype,
    *,
    chunks: int = 1,
    use_sparse_eigs: bool = True,
) -> ReservoirMatrix:
    """A bank of ``chunks`` matrices, each scaled to ``spectral_radius``
    (Arnoldi estimate when ``use_sparse_eigs``, else exact)."""
    k = nonzeros_per_row(n, density)
    vals, cols = [], []
    for _ in range(chunks):
        c = distinct_columns(rng, n, n, k)
        v = rng.standard_normal((n, k))
        rho = scaling_radius(v, c, use_sparse_eigs)
        if not rho > 0:
            raise ValueError(
                "reservoir matrix has spectral radius 0 (a nilpotent draw); use another "
                "seed or a higher density"
            )
        vals.append(v * (spectral_radius / rho))
        cols.append(c)
    return ReservoirMatrix(
        device_array(np.stack(vals), dtype), device_array(np.stack(cols), np.int32)
    )


# --------------------------------------------------------------------------- #
# Matrices given by the user (the components' ``from_matrices``)
# --------------------------------------------------------------------------- #


def ell_from_entries(entries, n: int, dtype=None) -> tuple[np.ndarray, np.ndarray]:
    """The ELL layout ``(values, columns)``, each ``(len(entries), n, k)``, of
    a bank of ``n x n`` matrices given by their stored entries.

    ``entries`` holds one ``(rows, columns, values)`` per matrix (1-D arrays
    of one length, any order). ``k`` is the largest row count (at least 1);
    shorter rows are padded with zeros, which add nothing to a product; each
    row keeps the order of its entries; a position stored twice stays two
    entries, which add up in every product. ``dtype`` defaults to the values'.
    Runs on the host.
    """
    rows = [np.asarray(r, np.intp) for r, _, _ in entries]
    for r in rows:
        if r.size and (r.min() < 0 or r.max() >= n):
            raise ValueError(f"ell_from_entries: a row index lies outside [0, {n})")
    counts = np.stack([np.bincount(r, minlength=n) for r in rows])
    k = max(int(counts.max()), 1)
    if dtype is None:
        dtype = np.result_type(*(np.asarray(v) for _, _, v in entries))
    values = np.zeros((len(entries), n, k), dtype)
    columns = np.zeros((len(entries), n, k), np.int32)
    for c, (r, (_, cols, vals)) in enumerate(zip(rows, entries, strict=True)):
        order = np.argsort(r, kind="stable")
        slot = np.arange(r.size) - np.repeat(
            np.concatenate([[0], np.cumsum(counts[c])[:-1]]), counts[c]
        )
        values[c, r[order], slot] = np.asarray(vals)[order]
        columns[c, r[order], slot] = np.asarray(cols)[order]
    return values, columns


def _refuse_traced(owner: str, name: str, x) -> None:
    """A ``TypeError`` naming ``name`` where ``x`` (any pytree) holds a
    traced value: given matrices are read on the host."""
    if any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree.leaves(x)):
        raise TypeError(
            f"{owner}: {name} must be a concrete array, got a traced value: given "
            "matrices are checked and converted on the host, so build the "
            "component outside jax.jit/vmap"
        )


def acyclic_pattern(values, columns) -> bool:
    """Whether the ELL matrix ``(n, k)`` is nilpotent by its pattern alone:
    the directed graph of its non-zero entries has no cycle (its nodes can be
    ordered so that the matrix is strictly triangular), so ``W^n = 0``
    whatever the values. Runs on the host."""
    from scipy.sparse import coo_array
    from scipy.sparse.csgraph import connected_components

    values, columns = np.asarray(values), np.asarray(columns)
    n = values.shape[0]
    stored = values.ravel() != 0
    rows = np.repeat(np.arange(n), values.shape[1])[stored]
    cols = columns.ravel()[stored]
    if np.any(rows == cols):
        return False
    graph = coo_array((np.ones(rows.size), (rows, cols)), shape=(n, n))
    return connected_components(graph, directed=True, connection="strong")[0] == n


def given_array(owner: str, name: str, x) -> np.ndarray:
    """``x`` (a NumPy or JAX array, a nested sequence, a number) as a NumPy
    array of real numbers, every one finite; the errors name ``name``."""
    _refuse_traced(owner, name, x)
    try:
        arr = np.asarray(x)
    except Exception as err:  # noqa: BLE001 - whatever numpy refuses
        raise TypeError(
            f"{owner}: {name} must be an array of real numbers ({err})"
        ) from err
    if jnp.issubdtype(arr.dtype, jnp.complexfloating):
        raise TypeError(
            f"{owner}: {name} must be real, got dtype {arr.dtype} (pass its real "
            "part if the imaginary part is zero)"
        )
    if not (
        jnp.issubdtype(arr.dtype, jnp.floating)
        or jnp.issubdtype(arr.dtype, jnp.integer)
        or arr.dtype == np.bool_
    ):
        raise TypeError(
            f"{owner}: {name} must hold real numbers, got dtype {arr.dtype}"
        )
    finite = np.isfinite(arr if arr.dtype.kind == "f" else arr.astype(np.float64))
    if not finite.all():
        raise ValueError(
            f"{owner}: {name} contains {int(finite.size - finite.sum())} NaN or "
            "inf entries; every entry must be finite"
        )
    return arr


def given_dtype(owner: str, dtype, *dtypes):
    """The dtype of a component built from given arrays of dtypes ``dtypes``.

    ``dtype`` when given; else float32 where every floating one of ``dtypes``
    is float32 (or narrower), float64 otherwise (also where none is
    floating: integers). Resolved as every constructor's ``dtype`` is
    (:func:`orc._validation.check_dtype`: float64 while JAX's x64 is off
    warns and gives float32).
    """
    if dtype is None:
        floats = [np.dtype(d) for d in dtypes if jnp.issubdtype(d, jnp.floating)]
        narrow = floats and all(d.itemsize <= 4 for d in floats)
        dtype = jnp.float32 if narrow else jnp.float64
    return check_dtype(dtype, owner)


def _sparse_kind(x) -> str | None:
    """``"scipy"``, ``"bcoo"`` or ``"ell"`` for the sparse matrix types a
    user may give, ``None`` for anything else. A scipy or BCOO matrix can
    only exist once its module is imported, so neither is imported here."""
    if isinstance(x, ReservoirMatrix):
        return "ell"
    scipy_sparse = sys.modules.get("scipy.sparse")
    if scipy_sparse is not None and scipy_sparse.issparse(x):
        return "scipy"
    jax_sparse = sys.modules.get("jax.experimental.sparse")
    if jax_sparse is not None and isinstance(x, jax_sparse.BCOO):
        return "bcoo"
    return None


def given_entries(owner: str, W, name: str = "W"):
    """``(entries, n, bank)`` of the square matrix, or bank of matrices, ``W``:
    the stored entries of each matrix (``(rows, columns, values)``, as
    :func:`ell_from_entries` takes them), its size ``n`` and whether ``W`` had
    a bank axis.

    ``W`` may be dense (a NumPy or JAX array or nested lists, ``(n, n)`` or
    ``(chunks, n, n)``: its non-zero entries are kept), a ``scipy.sparse``
    matrix or array ``(n, n)``, a ``jax.experimental.sparse.BCOO`` ``(n, n)``
    or ``(chunks, n, n)`` (entries outside the matrix, BCOO's padding, are
    dropped), a :class:`ReservoirMatrix` (kept entry for entry), or a list
    of ``(n, n)`` matrices of these kinds (a bank). Values must be real and
    finite.
    """
    _refuse_traced(owner, name, W)
    kind = _sparse_kind(W)
    if kind is None and isinstance(W, (list, tuple)) and any(map(_sparse_kind, W)):
        parts = [given_entries(owner, w, f"{name}[{i}]") for i, w in enumerate(W)]
        for i, (_, n_i, bank_i) in enumerate(parts):
            if bank_i or n_i != parts[0][1]:
                raise ValueError(
                    f"{owner}: a list {name} must hold matrices of one shape (N, N); "
                    f"{name}[{i}] differs from {name}[0]"
                )
        return [e for entries, _, _ in parts for e in entries], parts[0][1], True
    dense = given_array(owner, name, W) if kind is None else None
    shape = tuple(W.shape if dense is None else dense.shape)
    if len(shape) not in (2, 3) or shape[-1] != shape[-2] or 0 in shape:
        raise ValueError(
            f"{owner}: {name} must be a square matrix (N, N) or a bank of them "
            f"(chunks, N, N), got shape {shape}"
        )
    if kind == "scipy" and len(shape) != 2:
        raise ValueError(
            f"{owner}: a scipy.sparse {name} must be 2-D (N, N); give a bank as a "
            f"list of matrices, got shape {shape}"
        )
    n, bank = shape[-1], len(shape) == 3
    if kind == "ell":
        values = np.asarray(W.values).reshape((-1,) + W.values.shape[-2:])
        columns = np.asarray(W.columns).reshape(values.shape)
        rows = np.repeat(np.arange(n), values.shape[-1])
        mats = [
            (rows, c.ravel(), v.ravel()) for v, c in zip(values, columns, strict=True)
        ]
    elif kind == "scipy":
        coo = W.tocoo()
        mats = [(coo.row, coo.col, coo.data)]
    elif kind == "bcoo":
        if W.n_dense:
            from jax.experimental import sparse

            W = sparse.bcoo_update_layout(W, n_dense=0, on_inefficient=None)
        # one list of entries (nse, ndim): each batch's entries in their
        # order, led by the batch's position (padding keeps its indices
        # outside the matrix)
        nb = W.n_batch
        batch = tuple(shape[:nb])
        data = np.broadcast_to(np.asarray(W.data), batch + W.data.shape[nb:])
        idx = np.asarray(W.indices)
        idx = np.broadcast_to(idx, batch + idx.shape[nb:])
        where = np.moveaxis(np.indices(batch, dtype=idx.dtype), 0, -1)[..., None, :]
        where = np.broadcast_to(where, idx.shape[:-1] + (nb,))
        idx = np.concatenate([where, idx], axis=-1).reshape(-1, len(shape))
        data = data.reshape(-1)
        inside = np.all((idx >= 0) & (idx < np.asarray(shape)), axis=-1)
        chunk = idx[:, 0] if bank else np.zeros(len(idx), np.intp)
        mats = []
        for c in range(shape[0] if bank else 1):
            m = inside & (chunk == c)
            mats.append((idx[m, -2], idx[m, -1], data[m]))
    else:
        mats = []
        for m in dense.reshape((-1, n, n)):
            r, c = np.nonzero(m)
            mats.append((r, c, m[r, c]))
    if kind is not None:  # a dense W was checked whole
        for i, (_, _, v) in enumerate(mats):
            given_array(owner, f"{name}[{i}]" if bank else name, v)
    return mats, n, bank


def given_dense(owner: str, name: str, x) -> np.ndarray:
    """The dense matrix, or bank of matrices, ``x`` as :func:`given_array`
    checks it, where ``x`` may also be a ``scipy.sparse`` matrix or array, a
    ``jax.experimental.sparse.BCOO`` (duplicate entries summed), or a list of
    matrices some of which are sparse: sparse ones are made dense."""
    _refuse_traced(owner, name, x)

    def dense(m):
        kind = _sparse_kind(m)
        if kind == "ell":
            raise TypeError(
                f"{owner}: {name} must be a dense array, a scipy.sparse matrix or "
                "a BCOO, got a ReservoirMatrix (a reservoir's square W)"
            )
        if kind == "scipy":
            return m.toarray()
        return np.asarray(m.todense()) if kind == "bcoo" else m

    if isinstance(x, (list, tuple)) and any(map(_sparse_kind, x)):
        x = [dense(m) for m in x]
    return given_array(owner, name, dense(x))
