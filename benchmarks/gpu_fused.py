"""Experiment (issue 21): the closed-loop ESN forecast as one GPU kernel per
step (Pallas on Triton), measured against the XLA scan that orc runs.

Not part of orc: measured on an H100 (``python benchmarks/gpu.py fused``,
results in benchmarks/GPU.md) it is at best ~10% faster than the scan at
N = 2000 (4.7 vs 5.3 µs per step, float64; 4.4 vs 4.7 float32), slower with
other tilings, 2-4x slower at N = 8000, slower under ``vmap`` (1.4 vs 0.65 µs
per trajectory and step for 64 trajectories), and jax 0.11 deprecates the
Pallas Triton backend it is written for. It is kept, tested on CPU through
Pallas' interpreter (tests/test_fused.py), as the measured baseline for the
next design: a persistent kernel that keeps the reservoir on chip across
steps needs a grid-wide barrier, which a kernel per step replaces by its
launch.

What it does: :func:`orc._kernels.esn_forecast`'s arguments and result. XLA
compiles a step into several kernels (input product, the sparse product's
gather with its tanh, readout), each launched in turn; at N = 2000 a step
is ~1 MB, inside an H100's L2, so launches and latency set its cost. Here a
step is one kernel on the grid ``(C, NP / rows + 1)``: program ``(c, b)``
for ``b < NP / rows`` computes rows ``b * rows ..`` of
``r_{t+1}[c] = leak tanh(W r_t + win u + bias) + (1 - leak) r_t``, forming
``u = y_t[window[c]]`` from ``r_t`` itself (``w`` dot products, each
program its own); the last program of a chunk writes its readout ``y_t[c]``
into row ``t`` of the output, which the kernel updates in place (aliased).
``r_t`` and ``r_{t+1}`` are distinct buffers (a kernel boundary is the only
grid-wide synchronisation), and the step number is a one-element array the
kernel advances itself (a counter computed by XLA would be one more kernel
per step). Products are elementwise multiplies and sums in the model's
dtype (no tensor-core ``dot``: float32 stays float32, not TF32). Arrays are
padded once to powers of two (Triton's blocks) with zeros, and the gathers
are masked, so padding adds no term to any sum; the sums run in another
order than the scan's, so the two agree to rounding per step.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def _pow2(x: int) -> int:
    return 1 << max(0, int(x) - 1).bit_length()


#: Rows of one program (grid ``(C, NP / ROWS + 1)``); 16 was the fastest
#: at N = 2000 on the H100, 64 at N = 8000.
ROWS = 16
#: Elements of one block of the readout's dot products (``rows of wout x
#: columns``; a loop over ``NP`` beyond it).
COLS = 8192
#: Elements of one block of the sparse product (``ROWS x`` non-zeros of a
#: row; a loop over ``KP``), i.e. per program and iteration.
BLOCK = 4096
#: Warps of one program.
WARPS = 4


def _iota(size):
    return jnp.arange(size, dtype=jnp.int32)


def _kernel(
    t_ref,
    r_ref,
    y_in_ref,
    values_ref,
    columns_ref,
    win_ref,
    src_w_ref,
    src_r_ref,
    wout_ref,
    bias_ref,
    leak_ref,
    t_out_ref,
    r_out_ref,
    y_ref,
    *,
    n,
    k,
    w,
    o,
    sizes,
):
    del y_in_ref  # aliased to y_ref: rows other than t are kept as they are
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    chunks, NP, KP, WP, OP, rows, kb = sizes
    c = pl.program_id(0)
    b = pl.program_id(1)
    dtype = r_ref.dtype

    def loop(count, body, init):  # straight-line code when one block suffices
        if count == 1:
            return body(0, init)
        return jax.lax.fori_loop(0, count, body, init)

    @pl.when(b < NP // rows)
    def _():
        # rows b*rows .. of r_{t+1}[c]; first W r_t (its loads depend on
        # nothing computed here, so they are issued first)
        row = b * rows + _iota(rows)

        def product(i, acc):  # kb non-zeros of each row at a time
            jk = i * kb + _iota(kb)
            at = (c * NP + row)[:, None] * KP + jk[None, :]
            live = jnp.broadcast_to((jk < k)[None, :], at.shape)
            values = values_ref[at]
            columns = columns_ref[at]  # absolute offsets in r (chunk included)
            gathered = plgpu.load(r_ref.at[columns], mask=live, other=0)
            return acc + jnp.sum(values * gathered, axis=1)

        wr = loop(KP // kb, product, jnp.zeros((rows,), dtype))

        # u = y_t[window[c]]: w dot products of rows of wout with r_t
        jw = _iota(WP)
        src_w = src_w_ref[pl.ds(c * WP, WP)]  # offsets of the wout rows
        src_r = src_r_ref[pl.ds(c * WP, WP)]  # offsets of their chunks in r
        live_w = (jw < w)[:, None]
        block = min(NP, COLS // WP)

        def readin(i, acc):
            col = (i * block + _iota(block))[None, :]
            wo = plgpu.load(wout_ref.at[src_w[:, None] + col], mask=live_w, other=0)
            rr = plgpu.load(r_ref.at[src_r[:, None] + col], mask=live_w, other=0)
            return acc + jnp.sum(wo * rr, axis=1)

        u = loop(NP // block, readin, jnp.zeros((WP,), dtype))
        win = win_ref[(c * NP + row)[:, None] * WP + jw[None, :]]
        z = wr + (jnp.sum(win * u[None, :], axis=1) + bias_ref[0])
        leak = leak_ref[0]
        new = leak * jnp.tanh(z) + (1 - leak) * r_ref[c * NP + row]
        r_out_ref[c * NP + row] = jnp.where(row < n, new, jnp.zeros_like(new))

    @pl.when(b == NP // rows)
    def _():
        # the last program of a chunk: y_t[c] into row t of the output, in
        # parallel with the rows' programs; the step counter advances
        t = t_ref[0]
        jo = _iota(OP)
        block = min(NP, COLS // OP)

        def readout(i, acc):
            col = i * block + _iota(block)
            wo = wout_ref[(c * OP + jo)[:, None] * NP + col[None, :]]
            return acc + jnp.sum(wo * r_ref[c * NP + col][None, :], axis=1)

        y = loop(NP // block, readout, jnp.zeros((OP,), dtype))
        plgpu.store(y_ref.at[(t * chunks + c) * OP + jo], y, mask=jo < o)

        @pl.when(c == 0)
        def _():
            t_out_ref[0] = t + 1


def esn_forecast_fused(
    values,
    indices,
    win,
    window,
    bias,
    wout,
    r0,
    leak,
    length: int,
    *,
    interpret: bool = False,
    unroll: int = 1,
    rows: int = ROWS,
    warps: int = WARPS,
):
    """:func:`orc._kernels.esn_forecast` (same arguments and result, ``bias``
    and ``leak`` scalars) as one Pallas kernel per step, ``unroll`` steps per
    iteration of the compiled loop; ``interpret`` runs the kernel through
    Pallas' interpreter (any platform, for tests)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as plgpu

    dtype = values.dtype
    chunks, n, k = values.shape
    w = win.shape[-1]
    o = wout.shape[1]
    length = int(length)
    NP = _pow2(n)
    rows = min(_pow2(rows), NP)
    KP, WP, OP = _pow2(k), _pow2(w), _pow2(o)
    kb = max(1, min(KP, BLOCK // rows))
    sizes = (chunks, NP, KP, WP, OP, rows, kb)

    def pad(a, shape):  # zeros after the entries, to the padded shape
        return jnp.pad(a, [(0, p - d) for d, p in zip(a.shape, shape, strict=True)])

    base = (_iota(chunks) * NP)[:, None, None]
    columns = pad(indices.astype(jnp.int32) + base, (chunks, NP, KP)).reshape(-1)
    window = jnp.asarray(window, jnp.int32)
    src_c, src_o = window // o, window % o
    src_w = pad((src_c * OP + src_o) * NP, (chunks, WP)).reshape(-1)
    src_r = pad(src_c * NP, (chunks, WP)).reshape(-1)
    consts = (
        pad(values, (chunks, NP, KP)).reshape(-1),
        columns,
        pad(win.astype(dtype), (chunks, NP, WP)).reshape(-1),
        src_w,
        src_r,
        pad(wout.astype(dtype), (chunks, OP, NP)).reshape(-1),
        jnp.reshape(jnp.asarray(bias, dtype), (1,)),
        jnp.reshape(jnp.asarray(leak, dtype), (1,)),
    )
    r = pad(r0.astype(dtype), (chunks, NP)).reshape(-1)
    y = jnp.zeros((length * chunks * OP,), dtype)
    step = pl.pallas_call(
        functools.partial(_kernel, n=n, k=k, w=w, o=o, sizes=sizes),
        out_shape=(
            jax.ShapeDtypeStruct((1,), jnp.int32),
            jax.ShapeDtypeStruct(r.shape, dtype),
            jax.ShapeDtypeStruct(y.shape, dtype),
        ),
        grid=(chunks, NP // rows + 1),
        input_output_aliases={2: 2},
        interpret=interpret,
        compiler_params=plgpu.CompilerParams(num_warps=warps, num_stages=1),
        name="orc_esn_forecast_step",
    )

    def body(carry, _):
        t, r, y = carry
        return step(t, r, y, *consts), None

    t0 = jnp.zeros((1,), jnp.int32)
    (_, r, y), _ = jax.lax.scan(
        body,
        (t0, r, y),
        None,
        length=length - 1,
        unroll=min(unroll, max(length - 1, 1)),
    )
    # the last output is the readout of the last state (no step after it)
    last = jnp.einsum(
        "con,cn->co",
        wout.astype(dtype),
        r.reshape(chunks, NP)[:, :n],
        precision="highest",
    )
    y = y.reshape(length, chunks, OP)[:, :, :o].at[-1].set(last)
    return y.reshape(length, chunks * o)
