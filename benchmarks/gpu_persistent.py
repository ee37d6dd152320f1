"""Experiment (issue 21): the closed-loop ESN forecast as ONE persistent CUDA
kernel for the whole forecast, measured against the XLA scan that orc runs.

Three kernels. v1 and v2 (below) are not part of orc: measured on an H200
(benchmarks/GPU.md) they are slower than the scan (N = 2000, float64: 7.2 vs
5.5 µs per step; float32 6.5 vs 4.8; N = 8000: 12.4 vs 10.2), the grid
barrier alone costing 1.7-1.8 µs a step and the state's round trips through
L2 the rest. v3 is orc's own cluster kernel (``orc/_native/esn_cluster.cu``,
read from the installed package: the state in distributed shared memory, the
cluster's hardware barrier; 3.5-3.7 µs in float64, 2.6-2.7 in float32 at
N = 2000), launched here through CuPy to sweep its configuration
(:func:`launch_cluster`); orc runs it through its CUDA handler.

Why: the kernel-per-step experiment (``gpu_fused.py``) showed that a launch
and its latency chain cost ~4 µs, so a step below 4 µs needs the whole loop
inside one kernel: a cooperative launch (every block resident at
once, which ``cuLaunchCooperativeKernel`` guarantees or refuses) and a
grid-wide barrier between steps. Per step each block

1. copies the state ``r_t`` (``C n`` numbers, 16 kB at N = 2000 in float64)
   from L2 into its shared memory,
2. forms the readout ``y_t = concat_c(wout[c] @ r_t[c])`` itself (every
   block, redundantly: ``C o n`` multiply-adds, cheaper than a second
   barrier); block 0 writes it to row ``t`` of the output,
3. updates its rows, ``r_{t+1}[c, i] = leak tanh(W_c[i] r_t[c] + win[c, i]
   . y_t[window[c]] + bias[c, i]) + (1 - leak) r_t[c, i]`` (``ROWLANES``
   threads per row, a shuffle reduction), into the other of two state
   buffers,
4. waits at the grid barrier (one counter and one generation word in global
   memory; state loads bypass L1 so that no block reads a stale ``r``).

``esn_forecast_partial`` (``kernel="v2"``) replaces step 2: each block adds
up its own rows' share of the next readout and every block sums the shares
in block order (deterministic; no floating-point atomics).

A block's rows of ``W`` (values and columns), ``win`` and ``wout`` are read
through the read-only cache every step; they fit in L1 (~80 kB per block at
N = 2000 with 32 blocks), so that a step's traffic to L2 would be the state
alone (not checked with a profiler: the session's device time went to the
sweeps).
Same arguments and result as :func:`orc._kernels.esn_forecast` (``bias`` a
scalar or ``(C, n)``, ``leak`` a scalar); the sums run in another order
than XLA's, so the two agree to rounding per step.

Needs CuPy (``cupy-cuda12x``/``13x``) and an NVIDIA GPU; the source
compiles with NVRTC at first use (``compile_check`` compiles it without a GPU
where NVRTC's library is found, for the test suite).

    python benchmarks/gpu_persistent.py --out DIR     # on a GPU machine
    python benchmarks/gpu_persistent.py --kernels v3  # the cluster kernel only
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time

import numpy as np

SOURCE = r"""
typedef DTYPE T;
static_assert(ROWLANES >= 1 && ROWLANES <= 32 && (ROWLANES & (ROWLANES - 1)) == 0,
              "ROWLANES (threads per row) must be a power of two up to 32");

__device__ __forceinline__ T group_sum(T v) {
    // sum over the ROWLANES lanes of a group (a warp's lanes in groups)
#pragma unroll
    for (int off = ROWLANES / 2; off > 0; off >>= 1)
        v += __shfl_down_sync(0xffffffffu, v, off, ROWLANES);
    return v;
}

__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) v += __shfl_down_sync(0xffffffffu, v, off);
    return v;
}

// Every block arrives once per step; the last one resets the counter and
// advances the generation, which the others wait for. Correct only when all
// blocks are resident at once: the kernel is launched cooperatively.
__device__ __forceinline__ void grid_barrier(unsigned int* count,
                                             volatile unsigned int* generation) {
    // the block's writes are ordered before thread 0's fence by the
    // __syncthreads; thread 0's fence makes them visible before its arrival
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned int seen = *generation;
        __threadfence();
        if (atomicAdd(count, 1u) == gridDim.x - 1) {
            atomicExch(count, 0u);
            __threadfence();
            atomicAdd((unsigned int*)generation, 1u);
        } else {
            const long long start = clock64();
            while (*generation == seen) {
                // a block that never arrives (not resident, or a bug) would
                // hang the GPU: stop the kernel with an error after ~1e10 cycles
                if (clock64() - start > 10000000000LL) asm volatile("trap;");
            }
        }
        __threadfence();
    }
    __syncthreads();
}

// This block's rows of r_{t+1} from the state and readout in shared memory:
// ROWLANES threads per row, rows spread over the grid's warps; the loop's trip
// count is uniform in a warp (its lanes shuffle together).
__device__ __forceinline__ void update_rows(
    const T* __restrict__ values, const int* __restrict__ cols,
    const T* __restrict__ win, const int* __restrict__ window,
    const T* __restrict__ bias, T leak, const T* r_sm, const T* y_sm, T* r_next,
    int n, int k, int w, int total) {
    const int lane = threadIdx.x & 31;
    const int per_warp = 32 / ROWLANES;
    const int warps = blockDim.x >> 5;
    const int gwarp = blockIdx.x * warps + (threadIdx.x >> 5), gwarps = gridDim.x * warps;
    const int sub = lane % ROWLANES;
    for (int row0 = gwarp * per_warp; row0 < total; row0 += gwarps * per_warp) {
        const int row = row0 + lane / ROWLANES;
        const bool live = row < total;
        T s = 0;
        if (live) {
            const T* vrow = values + (size_t)row * k;
            const int* crow = cols + (size_t)row * k;
            for (int j = sub; j < k; j += ROWLANES) s += __ldg(vrow + j) * r_sm[__ldg(crow + j)];
        }
        s = group_sum(s);
        if (live && sub == 0) {
            const int c = row / n;
            const T* wr = win + (size_t)row * w;
            const int* wd = window + c * w;
            T p = 0;
            for (int i = 0; i < w; ++i) p += __ldg(wr + i) * y_sm[__ldg(wd + i)];
            const T z = s + (p + __ldg(bias + row));
            r_next[row] = leak * tanh(z) + (1 - leak) * r_sm[row];
        }
    }
}

#define OUTS_AT_ONCE 4

extern "C" __global__ void esn_forecast_persistent(
    const T* __restrict__ values,   // (C n, k)
    const int* __restrict__ cols,   // (C n, k), offsets into the state (chunk included)
    const T* __restrict__ win,      // (C n, w)
    const int* __restrict__ window, // (C, w), positions in y
    const T* __restrict__ wout,     // (C o, n)
    const T* __restrict__ bias,     // (C n)
    T leak,
    T* r_buf,                       // (2, C n), r_buf[0] = r_0
    T* y_out,                       // (length, C o)
    unsigned int* barrier,          // 2 words, zero
    int C, int n, int k, int w, int o, int length) {
    extern __shared__ unsigned char shared_raw[];
    T* r_sm = reinterpret_cast<T*>(shared_raw);  // C n
    T* y_sm = r_sm + C * n;                       // C o
    T* red = y_sm + C * o;                        // warps * OUTS_AT_ONCE
    const int total = C * n, outs = C * o;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;

    for (int t = 0; t < length; ++t) {
        const T* r_cur = r_buf + (size_t)(t & 1) * total;
        T* r_next = r_buf + (size_t)((t + 1) & 1) * total;
        for (int i = threadIdx.x; i < total; i += blockDim.x) r_sm[i] = __ldcg(r_cur + i);
        __syncthreads();

        // y_t, OUTS_AT_ONCE outputs per pass over the state
        for (int j0 = 0; j0 < outs; j0 += OUTS_AT_ONCE) {
            T acc[OUTS_AT_ONCE];
#pragma unroll
            for (int q = 0; q < OUTS_AT_ONCE; ++q) acc[q] = 0;
            for (int i = threadIdx.x; i < n; i += blockDim.x) {
#pragma unroll
                for (int q = 0; q < OUTS_AT_ONCE; ++q) {
                    const int j = j0 + q;
                    if (j < outs) acc[q] += __ldg(wout + (size_t)j * n + i) * r_sm[(j / o) * n + i];
                }
            }
#pragma unroll
            for (int q = 0; q < OUTS_AT_ONCE; ++q) {
                const T s = warp_sum(acc[q]);
                if (lane == 0) red[warp * OUTS_AT_ONCE + q] = s;
            }
            __syncthreads();
            if (threadIdx.x < OUTS_AT_ONCE && j0 + threadIdx.x < outs) {
                T s = 0;
                for (int v = 0; v < warps; ++v) s += red[v * OUTS_AT_ONCE + threadIdx.x];
                y_sm[j0 + threadIdx.x] = s;
                if (blockIdx.x == 0) y_out[(size_t)t * outs + j0 + threadIdx.x] = s;
            }
            __syncthreads();
        }
        if (t == length - 1) break;

        update_rows(values, cols, win, window, bias, leak, r_sm, y_sm, r_next, n, k, w, total);
        grid_barrier(barrier, barrier + 1);
    }
}

// Variant 2: no redundant readout. Each block owns fixed rows; after updating
// them it forms its share of the next readout, sum_i wout[:, i] r_{t+1}[i]
// over its rows, and writes it to partial[(t+1) % 2][block]; after the
// barrier every block sums the blocks' shares in block order (the same order
// in every block and every run: deterministic). mode 1: the barrier alone,
// ``length`` times (its cost per step).
#define MAXOUT 8

extern "C" __global__ void esn_forecast_partial(
    const T* __restrict__ values, const int* __restrict__ cols,
    const T* __restrict__ win, const int* __restrict__ window,
    const T* __restrict__ wout, const T* __restrict__ bias, T leak,
    T* r_buf,      // (2, C n), r_buf[0] = r_0
    T* partial,    // (2, blocks, C o)
    T* y_out,      // (length, C o)
    unsigned int* barrier,
    int C, int n, int k, int w, int o, int length, int mode) {
    extern __shared__ unsigned char shared_raw[];
    T* r_sm = reinterpret_cast<T*>(shared_raw);  // C n
    T* y_sm = r_sm + C * n;                       // C o
    T* red = y_sm + C * o;                        // warps * C o
    const int total = C * n, outs = C * o;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int warps = blockDim.x >> 5;
    const int per_warp = 32 / ROWLANES;
    const int gwarp = blockIdx.x * warps + warp, gwarps = gridDim.x * warps;
    const int sub = lane % ROWLANES;
    if (mode == 1) {
        for (int t = 0; t < length; ++t) grid_barrier(barrier, barrier + 1);
        return;
    }

    // this block's share of the readout of r (this thread's rows), into
    // partial[slot][blockIdx.x]
    auto share = [&](const T* r, int slot) {
        T acc[MAXOUT];
#pragma unroll
        for (int j = 0; j < MAXOUT; ++j) acc[j] = 0;
        if (sub == 0) {
            for (int row0 = gwarp * per_warp; row0 < total; row0 += gwarps * per_warp) {
                const int row = row0 + lane / ROWLANES;
                if (row < total) {
                    const int c = row / n, i = row - c * n;
                    const T x = r[row];
#pragma unroll
                    for (int j = 0; j < MAXOUT; ++j)
                        if (j < outs && j / o == c) acc[j] += __ldg(wout + (size_t)j * n + i) * x;
                }
            }
        }
#pragma unroll
        for (int j = 0; j < MAXOUT; ++j) {
            const T s = warp_sum(acc[j]);
            if (lane == 0 && j < outs) red[warp * outs + j] = s;
        }
        __syncthreads();
        if (threadIdx.x < outs) {
            T s = 0;
            for (int v = 0; v < warps; ++v) s += red[v * outs + threadIdx.x];
            partial[((size_t)slot * gridDim.x + blockIdx.x) * outs + threadIdx.x] = s;
        }
    };

    share(r_buf, 0);
    grid_barrier(barrier, barrier + 1);
    for (int t = 0; t < length; ++t) {
        const int cur = t & 1;
        const T* r_cur = r_buf + (size_t)cur * total;
        T* r_next = r_buf + (size_t)(cur ^ 1) * total;
#pragma unroll 4
        for (int i = threadIdx.x; i < total; i += blockDim.x) r_sm[i] = __ldcg(r_cur + i);
        if (warp == 0) {
            for (int j = 0; j < outs; ++j) {
                T s = 0;
                for (int b = lane; b < gridDim.x; b += 32)
                    s += __ldcg(partial + ((size_t)cur * gridDim.x + b) * outs + j);
                s = warp_sum(s);
                if (lane == 0) {
                    y_sm[j] = s;
                    if (blockIdx.x == 0) y_out[(size_t)t * outs + j] = s;
                }
            }
        }
        __syncthreads();
        if (t == length - 1) break;
        update_rows(values, cols, win, window, bias, leak, r_sm, y_sm, r_next, n, k, w, total);
        __syncthreads();  // r_next's rows of this block written (read back by share)
        share(r_next, cur ^ 1);
        grid_barrier(barrier, barrier + 1);
    }
}
"""


def _cluster_source() -> str:
    """orc's cluster kernel (``orc/_native/esn_cluster.cu``, which orc's CUDA
    handler embeds): the one source both run."""
    import importlib.resources  # noqa: PLC0415

    return (
        importlib.resources.files("orc._native").joinpath("esn_cluster.cu").read_text()
    )


SOURCE_CLUSTER = _cluster_source()

DTYPES = {"float64": "double", "float32": "float"}


def options(dtype: str, lanes: int, cluster: int | None = None, total: int = 0):
    """NVRTC's options for a kernel: the first source's, or with ``cluster``
    (blocks per cluster) the cluster kernel's for a state of ``total`` nodes."""
    opts = (f"-DDTYPE={DTYPES[dtype]}", f"-DROWLANES={int(lanes)}", "-std=c++17")
    if cluster is None:
        return opts
    column = "unsigned short" if total < 2**16 else "int"
    return (*opts, f"-DCLUSTER={int(cluster)}", f"-DCOLT={column}")


def compile_check(
    dtype: str, lanes: int, arch: str = "compute_90", cluster: int | None = None
) -> str:
    """Compile a kernel with NVRTC (no GPU needed) and return its log: the
    first source's, or with ``cluster`` the cluster kernel (``arch`` sm_90
    or later); raises ``RuntimeError`` with the log on a compile error,
    ``OSError`` where NVRTC's library is not found."""
    lib = _nvrtc()
    prog = ctypes.c_void_p()
    source = SOURCE if cluster is None else SOURCE_CLUSTER
    _ok(
        lib,
        lib.nvrtcCreateProgram(
            ctypes.byref(prog), source.encode(), b"esn.cu", 0, None, None
        ),
    )
    opts = [o.encode() for o in (*options(dtype, lanes, cluster), f"-arch={arch}")]
    status = lib.nvrtcCompileProgram(
        prog, len(opts), (ctypes.c_char_p * len(opts))(*opts)
    )
    size = ctypes.c_size_t()
    lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    lib.nvrtcGetProgramLog(prog, log)
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    text = log.value.decode(errors="replace")
    if status != 0:
        raise RuntimeError(
            f"NVRTC could not compile the kernel ({dtype}, lanes {lanes}):\n{text}"
        )
    return text


def _ok(lib, status):
    if status != 0:
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        raise RuntimeError(lib.nvrtcGetErrorString(status).decode())


def _nvrtc():
    """NVRTC's library: ``ORC_NVRTC`` (a path), else the one orc's CUDA
    handler uses (:func:`orc._native.nvrtc_library`, from the NVIDIA wheels),
    else the system's."""
    from orc._native import nvrtc_library  # noqa: PLC0415

    names = [os.environ.get("ORC_NVRTC", ""), nvrtc_library() or ""]
    names += ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    for name in filter(None, names):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise OSError("NVRTC's library (libnvrtc.so) was not found")


_KERNELS: dict = {}


def prepare(values, indices, win, window, bias, wout, r0, leak):
    """The forecast's arguments in the kernel's layout, on the GPU (CuPy)."""
    import cupy as cp  # noqa: PLC0415

    values = cp.asarray(values)
    dtype = values.dtype
    chunks, n, k = values.shape
    total = chunks * n
    cols = (
        cp.asarray(indices, cp.int32)
        + (cp.arange(chunks, dtype=cp.int32) * n)[:, None, None]
    )
    return {
        "values": cp.ascontiguousarray(values.reshape(total, k)),
        "cols": cp.ascontiguousarray(cols.reshape(total, k)),
        "indices": cp.ascontiguousarray(
            cp.asarray(indices, cp.int32).reshape(total, k)
        ),
        "win": cp.ascontiguousarray(cp.asarray(win, dtype).reshape(total, -1)),
        "window": cp.ascontiguousarray(cp.asarray(window, cp.int32)),
        "wout": cp.ascontiguousarray(cp.asarray(wout, dtype).reshape(-1, n)),
        "bias": cp.ascontiguousarray(
            cp.broadcast_to(cp.asarray(bias, dtype), (chunks, n)).reshape(total)
        ),
        "leak": float(leak),
        "r0": cp.asarray(r0, dtype).reshape(total),
        "shape": (chunks, n, k, int(win.shape[-1]), int(wout.shape[1])),
    }


#: The kernels: "v1" forms the readout in every block from the whole state;
#: "v2" sums the blocks' shares of it (``esn_forecast_partial``).
KERNELS = {"v1": "esn_forecast_persistent", "v2": "esn_forecast_partial"}


def launch(prep, length: int, *, blocks=32, threads=256, lanes=8, kernel="v1", mode=0):
    """One cooperative launch for the whole forecast; returns ``(length, C o)``
    (CuPy, asynchronous). ``mode=1`` (v2 only): the grid barrier alone,
    ``length`` times."""
    import cupy as cp  # noqa: PLC0415

    chunks, n, k, w, o = prep["shape"]
    dtype = prep["values"].dtype
    total, outs, warps = chunks * n, chunks * o, threads // 32
    r_buf = cp.empty((2, total), dtype)
    r_buf[0] = prep["r0"]
    y = cp.empty((int(length), outs), dtype)
    barrier = cp.zeros(2, cp.uint32)
    key = (dtype.name, lanes, kernel)
    if key not in _KERNELS:
        _KERNELS[key] = cp.RawKernel(
            SOURCE,
            KERNELS[kernel],
            options=options(dtype.name, lanes),
            enable_cooperative_groups=True,
        )
    fn = _KERNELS[key]
    scalar, i32 = dtype.type, np.int32
    args = [
        prep["values"],
        prep["cols"],
        prep["win"],
        prep["window"],
        prep["wout"],
        prep["bias"],
        scalar(prep["leak"]),
        r_buf,
    ]
    sizes = [i32(chunks), i32(n), i32(k), i32(w), i32(o), i32(length)]
    if kernel == "v1":
        shared = (total + outs + warps * 4) * dtype.itemsize
        args += [y, barrier, *sizes]
    else:
        if outs > 8:
            raise ValueError("v2 reads out at most 8 outputs (MAXOUT)")
        shared = (total + outs + warps * outs) * dtype.itemsize
        partial = cp.zeros((2, int(blocks), outs), dtype)
        args += [partial, y, barrier, *sizes, i32(mode)]
    if shared > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = shared
    fn((int(blocks),), (int(threads),), tuple(args), shared_mem=shared)
    return y


def cluster_shared_bytes(prep, *, cluster: int, threads: int) -> int:
    """Shared memory per block of the cluster kernel (orc's formula)."""
    from orc._kernels import cluster_shared_bytes as shared  # noqa: PLC0415

    chunks, n, k, w, _ = prep["shape"]
    return shared(chunks, n, k, w, prep["values"].dtype.itemsize, cluster, threads)


def launch_cluster(prep, length: int, *, cluster=8, threads=512, lanes=4, mode=0):
    """The whole forecast in one thread-block cluster (``esn_forecast_cluster``:
    the reservoir and the state in the blocks' shared memory, the state
    exchanged through distributed shared memory, the cluster's hardware
    barrier between steps); returns ``(length, C o)`` (CuPy, asynchronous).
    Raises ``ValueError`` where a block's share does not fit in shared memory."""
    import cupy as cp  # noqa: PLC0415

    chunks, n, k, w, o = prep["shape"]
    dtype = prep["values"].dtype
    total, outs = chunks * n, chunks * o
    if outs > 8:
        raise ValueError("the cluster kernel reads out at most 8 outputs (MAXOUT)")
    shared = cluster_shared_bytes(prep, cluster=cluster, threads=threads)
    if shared > 227 * 1024:
        raise ValueError(f"{shared} bytes of shared memory per block (at most 227 kB)")
    y = cp.full((int(length), outs), cp.nan, dtype)  # every row must be written
    key = (dtype.name, lanes, "v3", cluster, total < 2**16)
    if key not in _KERNELS:
        _KERNELS[key] = cp.RawKernel(
            SOURCE_CLUSTER,
            "esn_forecast_cluster",
            options=options(dtype.name, lanes, cluster, total),
        )
    fn = _KERNELS[key]
    if cluster > 8:  # more than 8 blocks: a "non-portable" cluster size
        cp.cuda.driver.funcSetAttribute(
            fn.kernel.ptr,
            14,  # CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED
            1,
        )
    fn.max_dynamic_shared_size_bytes = shared
    i32 = np.int32
    args = (
        prep["values"],
        prep["indices"],  # columns within each chunk: the kernel offsets them
        prep["win"],
        prep["window"],
        prep["wout"],
        prep["bias"],
        cp.asarray(prep["leak"], dtype),
        prep["r0"],
        y,
        *(i32(v) for v in (chunks, n, k, w, o, length, mode)),
    )
    fn((int(cluster),), (int(threads),), args, shared_mem=shared)
    return y


def esn_forecast_persistent(
    values,
    indices,
    win,
    window,
    bias,
    wout,
    r0,
    leak,
    length: int,
    **config,
):
    """:func:`orc._kernels.esn_forecast` as one cooperative kernel (CuPy);
    returns a CuPy array ``(length, C o)``; ``config``: :func:`launch`'s."""
    prep = prepare(values, indices, win, window, bias, wout, r0, leak)
    return launch(prep, length, **config)


def problem(n: int, dtype: str, *, seed: int = 0, density: float = 0.02):
    """A stable random reservoir of orc's layout (one chunk, 3 inputs and
    outputs, spectral radius ~0.8) with a random readout: the forecast's
    arguments as numpy arrays."""
    rng = np.random.default_rng(seed)
    k = max(1, int(round(density * n)))
    values = (rng.normal(size=(1, n, k)) * 0.8 / np.sqrt(k)).astype(dtype)
    indices = np.stack([rng.choice(n, k, replace=False) for _ in range(n)])[
        None
    ].astype(np.int32)
    win = rng.uniform(-0.5, 0.5, size=(1, n, 3)).astype(dtype)
    window = np.arange(3, dtype=np.int32)[None]
    wout = (rng.normal(size=(1, 3, n)) * 0.5 / np.sqrt(n)).astype(dtype)
    r0 = rng.uniform(-0.5, 0.5, size=(1, n)).astype(dtype)
    return [
        values,
        indices,
        win,
        window,
        np.asarray(0.1, dtype),
        wout,
        r0,
        np.asarray(0.6, dtype),
    ]


def main(argv=None) -> None:  # pragma: no cover - needs an NVIDIA GPU
    import cupy as cp  # noqa: PLC0415
    import jax  # noqa: PLC0415

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp  # noqa: PLC0415

    from orc import _kernels  # noqa: PLC0415

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="2000,8000")
    p.add_argument("--length", type=int, default=2000)
    p.add_argument("--out", default=None)
    p.add_argument(
        "--kernels", default="v1,v2,v3", help="comma-separated: v1,v2,v3 (cluster)"
    )
    args = p.parse_args(argv)
    kernels = set(args.kernels.split(","))
    rows: list[dict] = []

    def log(**kw):
        print(json.dumps(kw), flush=True)
        rows.append(kw)
        if args.out:
            os.makedirs(args.out, exist_ok=True)
            with open(os.path.join(args.out, "persistent.json"), "w") as f:
                json.dump(rows, f, indent=1)

    def best(fn, reps=7):
        fn()
        ts = []
        for _ in range(reps):
            t = time.perf_counter()
            fn()
            ts.append(time.perf_counter() - t)
        return float(np.median(ts))

    L = args.length
    scan = jax.jit(
        lambda *a, length: _kernels._forecast_scan(
            _kernels._gather_matvec, *a, length, unroll=16
        ),
        static_argnames="length",
    )
    log(
        device=str(jax.devices()[0].device_kind),
        jax=jax.__version__,
        cupy=cp.__version__,
    )
    for n in map(int, args.sizes.split(",")):
        for dtype in ("float64", "float32"):
            a = problem(n, dtype)
            ja = [jnp.asarray(x) for x in a]
            ref = np.asarray(scan(*ja, length=50))
            scan_s = best(lambda ja=ja: jax.block_until_ready(scan(*ja, length=L)))
            log(N=n, dtype=dtype, form="scan u16 (orc)", us_per_step=scan_s / L * 1e6)
            prep = prepare(*a)
            configs = [
                {"kernel": "v1", "blocks": b, "threads": 512, "lanes": 8}
                for b in (32, 132)
            ]
            configs += [
                {"kernel": "v2", "blocks": b, "threads": t, "lanes": la}
                for b in (16, 32, 66, 132)
                for t in (256, 512, 1024)
                for la in (4, 8)
            ]
            configs += [
                {"kernel": "v2", "mode": 1, "blocks": b, "threads": 512, "lanes": 8}
                for b in (16, 32, 66, 132)
            ]
            configs += [
                {"kernel": "v3", "cluster": c, "threads": t, "lanes": la}
                for c in (8, 16)
                for t in (256, 512, 1024)
                for la in (2, 4, 8)
            ]
            configs += [
                {"kernel": "v3", "mode": 1, "cluster": c, "threads": 512, "lanes": 4}
                for c in (8, 16)
            ]
            configs = [c for c in configs if c["kernel"] in kernels]
            for cfg in configs:
                form = " ".join(f"{k}={v}" for k, v in cfg.items())
                try:
                    row = {}
                    go = launch
                    if cfg["kernel"] == "v3":
                        cfg = {k: v for k, v in cfg.items() if k != "kernel"}
                        go = launch_cluster
                    if cfg.get("mode", 0) == 0:
                        got = go(prep, 50, **cfg).get()
                        row["maxdiff_50"] = float(np.max(np.abs(got - ref)))

                    def run(cfg=cfg, prep=prep, go=go):
                        go(prep, L, **cfg)
                        cp.cuda.runtime.deviceSynchronize()

                    row["us_per_step"] = best(run, reps=5) / L * 1e6
                    log(N=n, dtype=dtype, form=form, **row)
                except Exception as e:  # a configuration the device refuses
                    log(N=n, dtype=dtype, form=form, error=repr(e)[-400:])
    for n in map(int, args.sizes.split(",")):
        for dtype in ("float64", "float32"):
            mine = [r for r in rows if r.get("N") == n and r.get("dtype") == dtype]
            # right to rounding (NaN, an unwritten row, fails) and fastest first
            fast = sorted(
                (r for r in mine if r.get("maxdiff_50", np.inf) < 1e-5),
                key=lambda r: r["us_per_step"],
            )
            for r in mine:
                if "mode=1" in r["form"] and "us_per_step" in r:
                    print(f"BARRIER N={n} {dtype} {r['form']}: {r['us_per_step']:.2f}")
            scan_row = [r for r in mine if r["form"].startswith("scan")]
            if fast and scan_row:
                print(
                    f"SUMMARY N={n} {dtype}: scan {scan_row[0]['us_per_step']:.2f} us/step;"
                    f" best {fast[0]['form']} {fast[0]['us_per_step']:.2f}"
                    f" (maxdiff {fast[0]['maxdiff_50']:.1e}); failed configs"
                    f" {sum('error' in r for r in mine)}"
                )


if __name__ == "__main__":
    sys.exit(main())
