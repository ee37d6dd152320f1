"""The fused forecast step of the GPU experiment (benchmarks/gpu_fused.py).

Not a path of orc (benchmarks/GPU.md says why); kept checked so that the
measured baseline stays reproducible. The kernel runs here through Pallas'
interpreter (the same kernel body, executed by XLA on the CPU) against the
XLA scan that orc runs; its lowering for CUDA needs no GPU (only the device
compiles the Triton module). On an H100 both were compared compiled.
"""

from __future__ import annotations

import contextlib
import re
import sys
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

from orc import _kernels

# the experiment is written for Pallas on Triton, which jax 0.11 deprecates: a
# jax without it skips this file rather than failing a suite that orc passes
pytest.importorskip("jax.experimental.pallas.triton")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import gpu_fused as _fused  # noqa: E402

# the XLA scan as orc runs it: inside a compiled program (one per case; called
# eagerly, each of its operations outside the loop compiled one of its own)
_scan = jax.jit(_kernels._forecast_scan, static_argnums=(0, 9))


def _arrays(chunks, n, k, o, w, dtype, seed=0):
    # cast in numpy, then put on the device (jnp.asarray of numpy compiles a
    # program per shape and dtype; jax.device_put compiles none)
    rng = np.random.default_rng(seed)
    f = lambda x: jax.device_put(np.asarray(x, dtype))  # noqa: E731
    i32 = lambda x: jax.device_put(np.asarray(x, np.int32))  # noqa: E731
    return (
        f(rng.normal(size=(chunks, n, k)) * 0.9 / np.sqrt(k)),  # values
        i32(rng.integers(0, n, size=(chunks, n, k))),  # columns
        f(rng.uniform(-0.5, 0.5, size=(chunks, n, w))),  # win
        i32(rng.integers(0, chunks * o, size=(chunks, w))),
        f(0.1),  # bias
        f(rng.normal(size=(chunks, o, n)) * 0.5 / np.sqrt(n)),  # wout
        f(rng.uniform(-0.5, 0.5, size=(chunks, n))),  # r0
        f(0.6),  # leak
    )


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize(
    "chunks, n, k, o, w, length, rows",
    [
        (1, 100, 4, 3, 3, 25, 64),  # one program per chunk, n below a column block
        (3, 70, 5, 2, 4, 25, 16),  # chunks fed by each other's outputs
        (1, 600, 100, 3, 3, 12, 64),  # rows x k > BLOCK: the product loops over k
        (2, 1100, 7, 1, 5, 8, 32),  # NP x w > COLS: the inputs loop over columns
        (1, 30, 3, 3, 3, 1, 64),  # one output: no step at all
        (1, 30, 3, 3, 3, 2, 64),
    ],
)
def test_kernel_matches_the_scan(dtype, chunks, n, k, o, w, length, rows):
    if dtype == "float64" and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs x64")
    a = _arrays(chunks, n, k, o, w, dtype)
    want = _scan(_kernels._gather_matvec, *a, length)
    got = jax.jit(
        lambda *a: _fused.esn_forecast_fused(*a, length, interpret=True, rows=rows)
    )(*a)
    assert got.shape == want.shape == (length, chunks * o)
    assert got.dtype == want.dtype
    # the same function summed in another order: rounding per step only
    tol = 3e-6 if dtype == "float32" else 1e-13
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=0, atol=tol)


def test_padded_entries_add_nothing_and_divergence_shows():
    # n = 50 pads to 512 state rows and k = 3 to 4 non-zeros a row; padded
    # rows must stay exactly zero (the readout reads them) and masked gathers
    # must add nothing, so a NaN in the state is carried to the outputs, as
    # in the scan, rather than hidden or spread by the padding
    a = list(_arrays(1, 50, 3, 3, 3, "float32"))
    run = jax.jit(lambda *a: _fused.esn_forecast_fused(*a, 6, interpret=True))
    assert np.all(np.isfinite(np.asarray(run(*a))))
    r0 = np.array(a[6])
    r0[0, 7] = np.nan
    a[6] = jax.device_put(r0)
    want = np.isnan(np.asarray(_scan(_kernels._gather_matvec, *a, 6)))
    np.testing.assert_array_equal(np.isnan(np.asarray(run(*a))), want)
    assert want[1:].all()


def _a_gpu_to_lower_for():
    """Where no GPU is attached, an abstract H100 to lower the Triton kernel
    for: jax 0.12 asks Pallas's Triton lowering for the target's kind (a
    device's, or one an abstract mesh names) instead of assuming one."""
    if jax.default_backend() == "gpu" or not hasattr(jax.sharding, "AbstractDevice"):
        return contextlib.nullcontext()
    device = jax.sharding.AbstractDevice(
        device_kind="NVIDIA H100", num_cores=None, platform="gpu"
    )
    mesh = jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)
    return jax.sharding.use_abstract_mesh(mesh)


def test_the_kernel_lowers_for_cuda():
    a = _arrays(1, 300, 6, 3, 3, "float32")
    run = jax.jit(lambda *a: _fused.esn_forecast_fused(*a, 40, unroll=4))
    with warnings.catch_warnings(), _a_gpu_to_lower_for():
        warnings.simplefilter(
            "ignore", DeprecationWarning
        )  # jax 0.11: Pallas on Triton
        lowered = run.trace(*a).lower(lowering_platforms=("cuda",)).as_text()
    calls = re.findall(r"custom_call @([\w$.]+)", lowered)
    # a step is the Triton kernel and nothing else (no cuBLAS product)
    assert set(calls) == {"__gpu$xla.gpu.triton"}, calls
