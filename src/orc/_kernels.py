"""Kernel strategies: how the reservoir's passes are computed.

An ESN model runs a handful of passes over a bank of ``C`` reservoirs whose
matrices are in ELL layout (``values``/``indices`` ``(C, n, k)``, see
:mod:`orc._matrix`):

- ``matvec``: ``W @ x``;
- ``run``: the states of a run forced by a known drive ``(T, C, n)``;
- ``run_linear``: the same run with the drive of a linear embedding
  computed inside it (:func:`linear_drive`);
- ``run_stats``: ``run_linear`` and the ridge statistics of its states;
- ``forecast``: the closed loop of a linear readout fed back by a linear
  embedding.

Three strategies compute them, each for its platform and each saying which
operands it takes (:meth:`Strategy.accepts`):

- :class:`XLA`, the reference: JAX scans, on every platform, for every
  operand; derivatives of every pass go through it;
- :class:`NativeCPU`: orc's C++ kernels (:mod:`orc._native`), one call per
  pass on CPU;
- :class:`GPUCluster`: the closed-loop forecast as one thread-block cluster
  on an NVIDIA GPU with clusters (``esn_cluster.cu``).

A :class:`Kernels` object is the choice a compiled entry point makes once,
at its front (:func:`orc._strategy.compiled`): the backend (``"native"``:
the three, ``"xla"``: the reference alone) and the platforms the program is
lowered for. Each pass is a method of it that puts, per platform, the first
strategy that accepts the operands, and the reference elsewhere, into the
program (:meth:`Kernels.on_platform`). :meth:`Kernels.fuses` says which
models the fused passes compute (discrete ESN drivers with one leak rate,
linear embeddings and readouts); the pipelines (:mod:`orc.drivers`) ask it
once and run their general loops otherwise.

The choice reaches the passes through the components' own methods (whose
signatures are ORC 0.4's): :func:`current` gives the one the front chose.
"""

from __future__ import annotations

import functools
from typing import ClassVar

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from . import _errors, _native, _strategy
from ._bank import declares
from ._ridge import RidgeStats, stats_update

__all__ = [
    "Kernels",
    "Strategy",
    "XLA",
    "NativeCPU",
    "GPUCluster",
    "current",
    "kernels",
    "linear_drive",
    "ell_matvec",
    "esn_run",
    "esn_run_linear",
    "esn_run_stats",
    "esn_forecast",
    "cluster_config",
]


# -- the reference's pieces ---------------------------------------------------


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
    return jnp.where(bad, 0, indices), bad


def report_columns(out, bad):
    """``out`` with :data:`COLUMN_MESSAGE` as the program's error if ``bad``."""
    return _errors.check(out, bad, COLUMN_MESSAGE)


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


def _esn_step(matvec, values, indices, r, p, leak):
    """One leaky-tanh ESN update ``leak tanh(W r + p) + (1 - leak) r`` of one
    reservoir (``W`` in ELL layout ``(n, k)``)."""
    return leak * jnp.tanh(matvec(values, indices, r) + p) + (1 - leak) * r


def _run_scan(matvec, values, indices, drive, r0, leak):
    """The run as one ``lax.scan`` step per input, the run of one reservoir
    mapped over the bank."""

    def one(values, indices, drive, r0, leak):
        # rematerialised when differentiated: a reverse pass (the gradients of
        # orc.tune.refine) keeps each step's state and recomputes the rest,
        # instead of keeping the gathered neighbours (k per node) and tanh's
        # output of every step. Without derivatives the program is the same.
        @functools.partial(jax.checkpoint, prevent_cse=False)
        def step(r, p):
            r = _esn_step(matvec, values, indices, r, p, leak)
            return r, r

        return jax.lax.scan(step, r0, drive)[1]

    return jax.vmap(one, in_axes=(0, 0, 1, 0, None), out_axes=1)(
        values, indices, drive, r0, leak
    )


def _forecast_scan(
    matvec, values, indices, win, window, bias, wout, r0, leak, length, unroll=None
):
    """The closed loop as one ``lax.scan`` step per output; ``unroll`` steps
    per iteration of the compiled loop, by default :func:`orc._strategy.scan`'s
    choice for the platform."""

    def readout(r):
        return jnp.einsum("con,cn->co", wout, r, precision="highest").reshape(-1)

    def step(r, _):
        p = (
            jnp.einsum("cnw,cw->cn", win, readout(r)[window], precision="highest")
            + bias
        )
        r = jax.vmap(functools.partial(_esn_step, matvec), in_axes=(0, 0, 0, 0, None))(
            values, indices, r, p, leak
        )
        return r, readout(r)

    if unroll is None:
        rest = _strategy.scan(step, r0, None, length=length - 1)[1]
    else:
        rest = jax.lax.scan(step, r0, None, length=length - 1, unroll=unroll)[1]
    return jnp.concatenate([readout(r0)[None], rest], axis=0)


def _forecasts_scan(
    matvec, values, indices, win, window, bias, wouts, r0s, leak, length
):
    """:func:`_forecast_scan` of every readout ``wouts (B, C, o, n)`` from
    every start ``r0s (S, C, n)``: ``(B, S, length, C * o)``."""

    def one(wout, r0):
        return _forecast_scan(
            matvec, values, indices, win, window, bias, wout, r0, leak, length
        )

    return jax.vmap(jax.vmap(one, in_axes=(None, 0)), in_axes=(0, None))(wouts, r0s)


# -- the strategies -----------------------------------------------------------


class Strategy:
    """One way to compute the passes on one platform.

    ``platform`` is where it runs (a :func:`jax.lax.platform_dependent` key,
    ``"default"`` for any). :meth:`accepts` says whether it computes a pass
    for these operands; the passes take the operands as
    :class:`Kernels`'s methods prepare them (``leak`` and ``bias`` arrays of
    the values' dtype). ``checks_columns``: the strategy refuses
    out-of-range column indices itself, with :data:`COLUMN_MESSAGE`'s words,
    so the program makes no pass over them for it. Strategies hold no state
    of a computation; they are static parts of a program."""

    platform: ClassVar[str] = "default"
    checks_columns: ClassVar[bool] = False

    def accepts(self, name: str, *operands) -> bool:
        """Whether this strategy computes pass ``name`` for ``operands``."""
        return False

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class XLA(Strategy):
    """The reference: JAX scans on every platform, for every operand;
    ``matvec`` is the sparse product its steps use (the gather, or on CPU
    the native product where the backend allows it)."""

    def __init__(self, matvec=_gather_matvec):
        self.matvec_fn = matvec

    def run(self, values, indices, drive, r0, leak):
        return _run_scan(self.matvec_fn, values, indices, drive, r0, leak)

    def forecast(self, values, indices, win, window, bias, wout, r0, leak, *, length):
        return _forecast_scan(
            self.matvec_fn, values, indices, win, window, bias, wout, r0, leak, length
        )

    def forecasts(self, *operands, length):
        return _forecasts_scan(self.matvec_fn, *operands, length)


# The native kernels: custom calls whose derivatives go through the reference
# (the same function; XLA's JVP of a custom call does not exist).


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


def _cpu_matvec(values, indices, x):
    """The sparse product on CPU with the native backend: the native kernel
    for operands of one dtype it was built for, else the gather."""
    if values.dtype == x.dtype and _native.ffi_target(values.dtype) is not None:
        return _native_matvec(values, indices, x)
    return _gather_matvec(values, indices, x)


@jax.custom_jvp
def _native_run(values, indices, drive, r0, leak):
    call = jax.ffi.ffi_call(
        _native.esn_run_target(values.dtype),
        jax.ShapeDtypeStruct(drive.shape, drive.dtype),
        vmap_method="sequential",
    )
    return call(values, indices, drive, r0, leak)


@_native_run.defjvp
def _native_run_jvp(primals, tangents):
    reference = functools.partial(_run_scan, _cpu_matvec)
    return _native_run(*primals), jax.jvp(reference, primals, tangents)[1]


def _linear_reference(values, indices, win, windows, bias, r0, leak):
    """The drive, then the run (the CPU run native where it may be)."""
    drive = linear_drive(win, windows, bias)
    if _native_accepts_run(values, drive, r0):
        return _native_run(values, indices, drive, r0, leak)
    return _run_scan(_cpu_matvec, values, indices, drive, r0, leak)


@jax.custom_jvp
def _native_run_linear(values, indices, win, windows, bias, r0, leak):
    steps, chunks, n = windows.shape[0], values.shape[0], values.shape[1]
    call = jax.ffi.ffi_call(
        _native.esn_run_linear_target(values.dtype),
        jax.ShapeDtypeStruct((steps, chunks, n), values.dtype),
        vmap_method="sequential",
    )
    return call(values, indices, win, windows, bias, r0, leak)


@_native_run_linear.defjvp
def _native_run_linear_jvp(primals, tangents):
    return _native_run_linear(*primals), jax.jvp(_linear_reference, primals, tangents)[
        1
    ]


def _stats_reference(operands, rows):
    """The run and the statistics update of ``rows = (start, stop, keep)``."""
    values, indices, win, windows, bias, r0, leak, gram, cross, targets = operands
    start, stop, keep = rows
    states = _linear_reference(values, indices, win, windows, bias, r0, leak)
    stats = stats_update(
        RidgeStats(gram, cross, jnp.zeros((), gram.dtype)), states, targets, start, stop
    )
    return _kept(states, keep), stats.gram, stats.cross


def _kept(states, keep: bool):
    """``states (T, ...)``, or with ``keep=False`` the last one ``(1, ...)``."""
    return states if keep else states[-1:]


@functools.partial(jax.custom_jvp, nondiff_argnums=(10,))
def _native_run_stats(
    values, indices, win, windows, bias, r0, leak, gram, cross, targets, rows
):
    start, stop, keep = rows
    steps, chunks, n = windows.shape[0], values.shape[0], values.shape[1]
    call = jax.ffi.ffi_call(
        _native.esn_fit_target(values.dtype),
        (
            # one row: the kernel keeps the last state only (no history)
            jax.ShapeDtypeStruct((steps if keep else 1, chunks, n), values.dtype),
            jax.ShapeDtypeStruct(gram.shape, gram.dtype),
            jax.ShapeDtypeStruct(cross.shape, cross.dtype),
        ),
        vmap_method="sequential",
        input_output_aliases={7: 1, 8: 2},  # the sums are updated where they are
    )
    operands = (values, indices, win, windows, bias, r0, leak, gram, cross, targets)
    return call(*operands, start=np.int64(start), stop=np.int64(stop))


@_native_run_stats.defjvp
def _native_run_stats_jvp(rows, primals, tangents):
    return jax.jvp(lambda *a: _stats_reference(a, rows), primals, tangents)


def _native_closed_loop(target, shape, reference):
    """A native closed-loop kernel (``target(dtype)``, results of
    ``shape(wout, r0, length)``) over the operands of
    :meth:`Kernels.forecast`, its derivatives through ``reference`` (the
    scan over the native product)."""

    @functools.partial(jax.custom_jvp, nondiff_argnums=(8,))
    def call(values, indices, win, window, bias, wout, r0, leak, length):
        kernel = jax.ffi.ffi_call(
            target(values.dtype),
            jax.ShapeDtypeStruct(shape(wout, r0, length), values.dtype),
            vmap_method="sequential",
        )
        return kernel(values, indices, win, window, bias, wout, r0, leak)

    @call.defjvp
    def _(length, primals, tangents):
        return call(*primals, length), jax.jvp(
            lambda *a: reference(_cpu_matvec, *a, length), primals, tangents
        )[1]

    return call


#: one closed loop: ``(length, C o)``
_native_forecast = _native_closed_loop(
    _native.esn_forecast_target,
    lambda wout, r0, length: (length, wout.shape[0] * wout.shape[1]),
    _forecast_scan,
)
#: every readout ``(B, C, o, n)`` from every start ``(S, C, n)``: ``(B, S, length, C o)``
_native_forecasts = _native_closed_loop(
    _native.esn_forecast_batch_target,
    lambda wouts, r0s, length: (
        (wouts.shape[0], r0s.shape[0], length) + (wouts.shape[1] * wouts.shape[2],)
    ),
    _forecasts_scan,
)


def _native_accepts_run(values, drive, r0) -> bool:
    return (
        values.dtype == drive.dtype == r0.dtype
        and _native.esn_run_target(values.dtype) is not None
    )


def _one_dtype(dtype, *arrays) -> bool:
    return all(a.dtype == dtype for a in arrays)


class NativeCPU(Strategy):
    """orc's C++ kernels on CPU (:mod:`orc._native`): each pass one call,
    for operands of one dtype the build has kernels for and (the linear
    passes) one scalar bias; the fused statistics for a Gram of one
    problem per reservoir. Every size runs natively: a call has no per-step
    loop overhead, which is most of a small reservoir's step in a scan
    (AMD EPYC, AVX2, 2000-step forecast, float64: res_dim 100 1.4 vs 3.2
    ms, 500 8.9 vs 16.3 ms, 800 15.2 vs 32.0 ms); the kernels share a step
    between two threads from 512 non-zeros per step on, in calls of at
    least 2^20 non-zero-steps (ShareSteps in ``_native/esn.h``)."""

    platform = "cpu"
    checks_columns = True

    def accepts(self, name, *a) -> bool:
        dtype = a[0].dtype
        if name == "matvec":
            values, _, x = a
            return x.dtype == dtype and _native.ffi_target(dtype) is not None
        if name == "run":
            values, _, drive, r0, _ = a
            return _native_accepts_run(values, drive, r0)
        if name == "run_linear":
            values, _, win, windows, bias, r0, _ = a
            return (
                jnp.ndim(bias) == 0
                and _one_dtype(dtype, win, windows, r0)
                and _native.esn_run_linear_target(dtype) is not None
            )
        if name == "run_stats":
            values, _, win, windows, bias, r0, leak, gram, cross, targets = a
            return (
                gram.ndim == 3
                and targets.ndim == 3
                and targets.shape[0] == windows.shape[0]
                and jnp.ndim(bias) == 0
                and _one_dtype(dtype, win, windows, bias, r0, leak, gram, cross)
                and targets.dtype == dtype
                and _native.esn_fit_target(dtype) is not None
            )
        if name in ("forecast", "forecasts"):
            values, _, win, window, bias, wout, r0, leak = a
            target = (
                _native.esn_forecast_target
                if name == "forecast"
                else _native.esn_forecast_batch_target
            )
            return (
                jnp.ndim(bias) == 0
                and _one_dtype(dtype, win, wout, r0)
                and target(dtype) is not None
            )
        return False

    def matvec(self, values, indices, x):
        return _native_matvec(values, indices, x)

    def run(self, values, indices, drive, r0, leak):
        return _native_run(values, indices, drive, r0, leak)

    def run_linear(self, values, indices, win, windows, bias, r0, leak):
        return _native_run_linear(values, indices, win, windows, bias, r0, leak)

    def run_stats(self, *operands, start, stop, keep):
        return _native_run_stats(*operands, (start, stop, keep))

    def forecast(self, *operands, length):
        return _native_forecast(*operands, length)

    def forecasts(self, *operands, length):
        return _native_forecasts(*operands, length)


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
    arguments fits one thread-block cluster on this process's GPU, else None:
    the build's CUDA handler present, a GPU with clusters, a scalar leak
    rate, at most 8 outputs, at most ``CLUSTER_MAX_NONZEROS`` non-zeros, and
    the block's share fitting in shared memory. (Whether the backend allows
    it is the :class:`Kernels`' business.)"""
    chunks, n, k = values.shape
    dtype = values.dtype
    cluster, threads, _ = CLUSTER_CONFIG
    if (
        jnp.ndim(leak) != 0
        or not _broadcasts_to(jnp.shape(bias), (chunks, n))
        or not _one_dtype(dtype, win, wout)
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
        scan = functools.partial(_forecast_scan, _gather_matvec)
        out = jax.vmap(lambda *a: scan(*a, length), in_axes=axes)(*args)
        return out, True

    return call


@functools.partial(jax.custom_jvp, nondiff_argnums=(8, 9))
def _cluster_forecast(
    values, indices, win, window, bias, wout, r0, leak, length, config
):
    return _cluster_call(length, config)(
        values, indices, win, window, bias, wout, r0, leak
    )


@_cluster_forecast.defjvp
def _cluster_forecast_jvp(length, config, primals, tangents):
    return _cluster_forecast(*primals, length, config), jax.jvp(
        lambda *a: _forecast_scan(_gather_matvec, *a, length), primals, tangents
    )[1]


class GPUCluster(Strategy):
    """The closed-loop forecast as one thread-block cluster on an NVIDIA GPU
    of compute capability 9.0 or later, where :func:`cluster_config` admits
    the operands (its other passes are the reference's)."""

    platform = "cuda"

    def accepts(self, name, *a) -> bool:
        if name != "forecast":
            return False
        values, _, win, window, bias, wout, r0, leak = a
        return (
            r0.dtype == values.dtype
            and cluster_config(values, win, bias, wout, leak) is not None
        )

    def forecast(self, values, indices, win, window, bias, wout, r0, leak, *, length):
        config = cluster_config(values, win, bias, wout, leak)
        return _cluster_forecast(
            values, indices, win, window, bias, wout, r0, leak, length, config
        )


# -- the choice ---------------------------------------------------------------


class Kernels:
    """The strategies a program uses: for the ``"native"`` backend
    :class:`NativeCPU` on CPU and :class:`GPUCluster` on NVIDIA GPUs, the
    :class:`XLA` reference elsewhere and for what they do not accept; for
    ``"xla"`` the reference alone. ``targets`` (``"cpu"`` or ``"any"``,
    :func:`orc._strategy.lowering_targets`) are the platforms the program
    is lowered for: for the CPU alone only the CPU's branch is traced.
    Made by :func:`kernels` (one object per choice)."""

    def __init__(self, backend: str, targets: str):
        self.backend, self.targets = backend, targets
        self.native = backend == "native"
        self.strategies = (NativeCPU(), GPUCluster()) if self.native else ()
        self.reference = XLA(self.matvec if self.native else _gather_matvec)

    def __repr__(self) -> str:
        return f"Kernels({self.backend!r}, {self.targets!r})"

    def on_platform(self, *args, default, cpu=None, cuda=None):
        """:func:`orc._strategy.on_platform` for this choice's targets."""
        return _strategy.on_platform(
            *args, default=default, cpu=cpu, cuda=cuda, targets=self.targets
        )

    def _accepting(self, name: str, args: tuple) -> list:
        """The strategies that compute pass ``name`` for ``args``."""
        return [s for s in self.strategies if s.accepts(name, *args)]

    def _branches(self, name: str, args: tuple, static: dict) -> dict:
        """``{platform: pass}`` of the strategies that accept ``args``."""
        return {
            s.platform: functools.partial(getattr(s, name), **static)
            for s in self._accepting(name, args)
        }

    def _guarded(self, name: str, args: tuple, **static):
        """Pass ``name`` over ``args`` (``args[0]`` the ELL values ``(..., n,
        k)``, ``args[1]`` their column indices), per platform by the
        strategy that accepts them, with an out-of-range index refused on
        every path the way each can afford: a strategy that checks columns
        itself gets them as they are (a program that runs it holds no pass
        over them: ~60 us of a short forecast at res_dim 2000); the others
        get :func:`column_guard`'s. Each branch returns whether an index was
        bad and the check is made once, outside the branches: a check inside
        one could not hand its code to the program's ledger
        (:mod:`orc._errors`) and would become a host callback in the branch
        a GPU runs."""
        n = args[0].shape[-2]

        def checked(fn, checks_columns):
            def branch(*a):
                if checks_columns:
                    return fn(*a), jnp.zeros((), bool)
                indices, bad = column_guard(a[1], n)
                return fn(a[0], indices, *a[2:]), bad

            return branch

        chosen = {
            s.platform: checked(
                functools.partial(getattr(s, name), **static), s.checks_columns
            )
            for s in self._accepting(name, args)
        }
        default = checked(functools.partial(getattr(self, "_" + name), **static), False)
        out, bad = self.on_platform(*args, **chosen, default=default)
        return report_columns(out, bad)

    # -- the passes (public) and their references (the default branches) --

    def matvec(self, values, indices, x):
        """``y[i] = sum_j values[i, j] * x[indices[i, j]]`` (no column check:
        the gather reads NaN for an index out of range, the native kernel
        refuses it)."""
        branches = self._branches("matvec", (values, indices, x), {})
        return self.on_platform(values, indices, x, **branches, default=_gather_matvec)

    def run(self, values, indices, drive, r0, leak):
        """States ``(T, C, n)`` of ``r_t = leak tanh(W r_{t-1} + drive_t) +
        (1 - leak) r_{t-1}`` for ``drive (T, C, n)``, ``r0 (C, n)``."""
        args = (values, indices, drive, r0, jnp.asarray(leak, drive.dtype))
        return self._guarded("run", args)

    def _run(self, values, indices, drive, r0, leak):
        # inside a guarded branch: the indices are checked already
        branches = self._branches("run", (values, indices, drive, r0, leak), {})
        return self.on_platform(
            values, indices, drive, r0, leak, **branches, default=self.reference.run
        )

    def run_linear(self, values, indices, win, windows, bias, r0, leak):
        """:meth:`run` driven by :func:`linear_drive` ``(win, windows, bias)``
        (``win (C, n, w)``, ``windows (T, C, w)``). Natively the drive is
        computed inside the run step by step, as :meth:`run_stats` computes
        it, so the states are the same bits as a training's stored states
        (XLA would sum the drive in another order)."""
        dtype = values.dtype
        args = (values, indices, win, windows, jnp.asarray(bias, dtype), r0)
        return self._guarded("run_linear", args + (jnp.asarray(leak, dtype),))

    def _run_linear(self, values, indices, win, windows, bias, r0, leak):
        return self._run(values, indices, linear_drive(win, windows, bias), r0, leak)

    def accelerates(self, name: str, *operands) -> bool:
        """Whether a strategy other than the reference computes pass ``name``
        for ``operands`` (as :meth:`run_linear` etc. prepare them)."""
        return bool(self._branches(name, operands, {}))

    def run_stats(
        self,
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
        keep: bool = True,
    ) -> tuple[Array, RidgeStats]:
        """:meth:`run_linear` and the ridge statistics of its states, rows
        ``start:stop`` (static) against ``targets (T, C, O)``, exactly what
        :func:`orc._ridge.stats_update` adds; with ``keep=False`` (static) the
        last state ``(1, C, n)`` instead of the states. Natively one call in
        which the run and the Gram update overlap on the two cores (one thread
        runs the reservoir, the other folds finished rows into the
        statistics; without ``keep`` the rows pass through a ring of a few
        blocks, no history is stored); otherwise the run, then the update."""
        dtype = values.dtype
        leak, bias = jnp.asarray(leak, dtype), jnp.asarray(bias, dtype)
        targets = targets.astype(dtype)
        start, stop, keep = int(start), int(stop), bool(keep)
        steps = windows.shape[0]
        if not 0 <= start <= stop <= min(steps, targets.shape[0]):
            raise ValueError(
                f"esn_run_stats: rows [{start}, {stop}) outside a run of "
                f"{steps} steps / {targets.shape[0]} targets"
            )
        args = (values, indices, win, windows, bias, r0, leak, stats.gram, stats.cross)
        args = args + (targets,)
        if stats.form == "gram" and self.accelerates("run_stats", *args):
            states, gram, cross = self._guarded(
                "run_stats", args, start=start, stop=stop, keep=keep
            )
            count = stats.count + (stop - start)
            return states, RidgeStats(
                gram, cross, count, weights_dtype=stats.weights_dtype
            )
        states = self.run(values, indices, linear_drive(win, windows, bias), r0, leak)
        return _kept(states, keep), stats_update(stats, states, targets, start, stop)

    def _run_stats(self, *operands, start, stop, keep):
        values, indices, win, windows, bias, r0, leak, gram, cross, targets = operands
        states = self._run_linear(values, indices, win, windows, bias, r0, leak)
        stats = stats_update(
            RidgeStats(gram, cross, jnp.zeros((), gram.dtype)),
            states,
            targets,
            start,
            stop,
        )
        return _kept(states, keep), stats.gram, stats.cross

    def forecast(self, values, indices, win, window, bias, wout, r0, leak, length):
        """Closed loop of a discrete leaky-tanh ESN with a linear readout of
        its own state fed back through a linear embedding: ``y_t =
        concat_c(wout[c] @ r_t[c])`` for ``t = 0..length-1`` from ``r_0 =
        r0 (C, n)``, ``r_{t+1}[c] = leak tanh(W_c r_t[c] + win[c] @
        y_t[window[c]] + bias) + (1 - leak) r_t[c]``; ``win (C, n, w)``,
        ``window (C, w)`` (positions in ``y``), ``wout (C, o, n)``; returns
        ``(length, C * o)``. Natively one call on CPU, one cluster kernel on
        a GPU that admits it; elsewhere, under ``vmap`` on a GPU, and for
        derivatives, a ``lax.scan``."""
        args = (values, indices, win, window, bias, wout, r0, leak)
        return self._closed_loops("forecast", "esn_forecast", args, length)

    def _closed_loops(self, name, kernel, args, length):
        """Pass ``name`` (:meth:`forecast`, :meth:`forecasts`) of ``args``
        with the window, bias and leak in the passes' types."""
        values, indices, win, window, bias, wout, r0, leak = args
        dtype = values.dtype
        length = int(length)
        if length < 1:
            raise ValueError(f"{kernel}: length must be >= 1, got {length}")
        args = (values, indices, win, jnp.asarray(window, jnp.int32))
        args = args + (jnp.asarray(bias, dtype), wout, r0, jnp.asarray(leak, dtype))
        return self._guarded(name, args, length=length)

    def _forecast(self, *operands, length):
        return self.reference.forecast(*operands, length=length)

    def forecasts(self, values, indices, win, window, bias, wouts, r0s, leak, length):
        """:meth:`forecast` of every readout ``wouts (B, C, o, n)`` from every
        start ``r0s (S, C, n)`` of one reservoir: ``(B, S, length, C *
        o)``. Natively one call on CPU whose steps advance all ``B * S``
        states together (each non-zero of the reservoir read once per step
        for all of them: the validation forecasts of a tuning candidate,
        :class:`orc.tune.Forecast`); elsewhere the reference's ``vmap`` of
        the scan."""
        args = (values, indices, win, window, bias, wouts, r0s, leak)
        return self._closed_loops("forecasts", "esn_forecast_batch", args, length)

    def _forecasts(self, *operands, length):
        return self.reference.forecasts(*operands, length=length)

    def fuses(self, driver, embedding=None, readout=None) -> bool:
        """Whether the fused passes (:meth:`run`, :meth:`run_linear`,
        :meth:`run_stats`, :meth:`forecast`) compute these components' work:
        a driver class that declares ``"esn_kernels"`` in discrete mode with
        one leak rate for all nodes; with ``embedding``, one that declares
        ``"linear"``; with ``readout``, one that declares ``"linear"`` and is
        the plain product of its weights (``linear_weights``). The same for
        every backend: the reference computes what the others do."""
        if not (
            declares(driver, "esn_kernels")
            and driver.mode == "discrete"
            and np.ndim(driver.leak) == 0
        ):
            return False
        if embedding is not None and not declares(embedding, "linear"):
            return False
        if readout is not None:
            return declares(readout, "linear") and readout.linear_weights() is not None
        return True


@functools.cache
def kernels(backend: str, targets: str) -> Kernels:
    """The :class:`Kernels` of a backend and lowering targets (one object each)."""
    return Kernels(backend, targets)


def current() -> Kernels:
    """The kernels the compiled entry point being traced chose at its front
    (:func:`orc._strategy.compiled`); outside one, those a call made now
    would choose."""
    return kernels(_strategy.resolve(None), _strategy.lowering_targets())


# The passes as functions of the current choice, for the components' methods
# and the tests.


def ell_matvec(values, indices, x):
    """:meth:`Kernels.matvec` of :func:`current`."""
    return current().matvec(values, indices, x)


def esn_run(values, indices, drive, r0, leak):
    """:meth:`Kernels.run` of :func:`current`."""
    return current().run(values, indices, drive, r0, leak)


def esn_run_linear(values, indices, win, windows, bias, r0, leak):
    """:meth:`Kernels.run_linear` of :func:`current`."""
    return current().run_linear(values, indices, win, windows, bias, r0, leak)


def esn_run_stats(*operands, keep=True):
    """:meth:`Kernels.run_stats` of :func:`current` (its operands ``values``
    to ``stop``)."""
    return current().run_stats(*operands, keep=keep)


def esn_forecast(values, indices, win, window, bias, wout, r0, leak, length: int):
    """:meth:`Kernels.forecast` of :func:`current`."""
    return current().forecast(
        values, indices, win, window, bias, wout, r0, leak, length
    )


def esn_forecasts(values, indices, win, window, bias, wouts, r0s, leak, length: int):
    """:meth:`Kernels.forecasts` of :func:`current`."""
    return current().forecasts(
        values, indices, win, window, bias, wouts, r0s, leak, length
    )
