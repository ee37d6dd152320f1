"""The GPU forecast as one thread-block cluster (orc._native's CUDA handler,
esn_cluster.cu; issue 21): which forecasts take it, what their CUDA program
holds, that its kernel compiles for Hopper (where NVRTC is found), and on a
GPU with clusters that it gives the scan's forecast."""

import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from orc import _kernels, _native, _strategy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import gpu_persistent  # noqa: E402

needs_native = pytest.mark.skipif(
    not _native.native_available(), reason="orc was built without its native kernels"
)
CHECKS = [jax.export.DisabledSafetyCheck.custom_call(t) for t in _native.target_names()]


def _problem(chunks=1, n=200, k=4, outs=3, dtype=jnp.float64, seed=0):
    """A forecast's arguments: ELL reservoir, embedding of the readout's
    outputs (each chunk reads all of them), readout, state, leak."""
    rng = np.random.default_rng(seed)
    total_out = chunks * outs
    f = lambda x: jnp.asarray(x, dtype)  # noqa: E731
    return [
        f(rng.normal(size=(chunks, n, k)) * 0.8 / np.sqrt(k)),
        jnp.asarray(rng.integers(0, n, (chunks, n, k)), jnp.int32),
        f(rng.uniform(-0.5, 0.5, (chunks, n, 3))),
        jnp.asarray(rng.integers(0, total_out, (chunks, 3)), jnp.int32),
        f(0.1),
        f(rng.normal(size=(chunks, outs, n)) * 0.5 / np.sqrt(n)),
        f(rng.uniform(-0.5, 0.5, (chunks, n))),
        f(0.6),
    ]


@pytest.fixture
def gpu_with_clusters(monkeypatch):
    """Decide as on a Hopper GPU; the index check not reported (outside an
    orc entry point it is a host callback, which a program lowered here for
    CUDA cannot hold)."""
    monkeypatch.setattr(_kernels, "_gpu_has_clusters", lambda: True)
    monkeypatch.setitem(_native._state, "nvrtc_found", True)
    monkeypatch.setattr(_kernels, "report_columns", lambda out, bad: out)


def _cuda_calls(fn, *args):
    with _strategy.lowering_for("any"):  # traced here for a GPU
        exported = jax.export.export(
            jax.jit(fn), platforms=["cuda"], disabled_checks=CHECKS
        )(*args)
    text = exported.mlir_module()
    return set(re.findall(r"custom_call @([A-Za-z0-9_]+)", text)), text


def test_shared_memory_is_the_kernels_layout():
    # N = 2000 in float64, 16 blocks of 256 threads: 125 rows each hold their
    # 40 values, 3 input weights, bias and 8 readout weights (8 bytes each),
    # the state twice (2 x 2000), the blocks' shares twice (2 x 16 x 8), 8
    # warps' partial sums and the readout (9 x 8), the window (3 ints) and
    # the rows' 16-bit columns (125 x 40)
    numbers = 125 * (40 + 3 + 1 + 8) + 2 * 2000 + 2 * 16 * 8 + 9 * 8
    expected = numbers * 8 + 3 * 4 + 125 * 40 * 2
    assert _kernels.cluster_shared_bytes(1, 2000, 40, 3, 8, 16, 256) == expected
    # 32-bit columns from 65536 nodes on
    wide = _kernels.cluster_shared_bytes(1, 2**16, 1, 3, 4, 16, 256)
    narrow = _kernels.cluster_shared_bytes(1, 2**16 - 16, 1, 3, 4, 16, 256)
    assert wide - narrow > 4096 * 2  # the columns doubled, not only the rows added


@needs_native
def test_which_forecasts_take_the_cluster(gpu_with_clusters):
    values, _, win, _, bias, wout, _, leak = _problem(n=2000, k=40)
    assert _kernels.cluster_config(values, win, bias, wout, leak) == (16, 256, 2)
    # a leak rate per node, more than 8 outputs, too many non-zeros, a bias
    # that is not per node: the scan
    assert _kernels.cluster_config(values, win, bias, wout, jnp.full(2000, 0.6)) is None
    many = jnp.zeros((1, 9, 2000), wout.dtype)
    assert _kernels.cluster_config(values, win, bias, many, leak) is None
    big = jnp.zeros((1, 2000, 51), values.dtype)
    assert _kernels.cluster_config(big, win, bias, wout, leak) is None
    assert _kernels.cluster_config(values, win, jnp.zeros(7), wout, leak) is None
    # the XLA backend has no strategy but the reference
    operands = _problem(n=2000, k=40)
    native = _kernels.kernels("native", "any")._branches("forecast", operands, {})
    assert "cuda" in native
    assert _kernels.kernels("xla", "any")._branches("forecast", operands, {}) == {}
    # no NVRTC to compile the kernel with: the scan, not a failure at run time
    _native._state["nvrtc_found"] = False
    assert _kernels.cluster_config(values, win, bias, wout, leak) is None


def test_no_gpu_no_cluster():
    values, _, win, _, bias, wout, _, leak = _problem()
    if jax.default_backend() == "cpu":
        assert not _kernels._gpu_has_clusters()
        assert _kernels.cluster_config(values, win, bias, wout, leak) is None


@needs_native
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_cuda_program_calls_the_cluster_kernel(gpu_with_clusters, dtype):
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs x64")
    args = _problem(chunks=2, dtype=dtype)
    calls, text = _cuda_calls(lambda *a: _kernels.esn_forecast(*a, 50), *args)
    name = _native.cluster_forecast_target(dtype)
    assert calls == {name}
    call = text[text.index(f"custom_call @{name}") :].split("\n")[0]
    assert "cluster = 16" in call and "threads = 256" in call and "lanes = 2" in call
    # the bias reaches the kernel per node, (chunks, n)
    assert re.search(r"tensor<2x200x\w+>, tensor<2x3x200", call)


@needs_native
def test_batched_and_differentiated_forecasts_run_the_scan(gpu_with_clusters):
    args = _problem()
    forecast = lambda *a: _kernels.esn_forecast(*a, 50)  # noqa: E731
    states = jnp.stack([args[6]] * 4)
    ensemble = jax.vmap(forecast, in_axes=(None,) * 6 + (0, None))
    calls, _ = _cuda_calls(ensemble, *args[:6], states, args[7])
    assert calls == set()  # 4 trajectories: one batched scan, not 4 clusters
    grad = jax.grad(lambda r0: forecast(*args[:6], r0, args[7]).sum())
    calls, _ = _cuda_calls(grad, args[6])
    assert calls == set()


@needs_native
def test_the_build_has_the_cuda_handlers(monkeypatch):
    kernels = _native._state["module"]
    names = {"orc_esn_forecast_cluster_f32", "orc_esn_forecast_cluster_f64"}
    assert set(kernels.cuda_handlers()) == names
    assert names <= set(_native.target_names())  # orc.export allows them
    monkeypatch.setitem(_native._state, "nvrtc_found", True)
    assert (
        _native.cluster_forecast_target(jnp.float32) == "orc_esn_forecast_cluster_f32"
    )


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("lanes", [1, 2, 8])
def test_cluster_kernel_compiles_for_hopper(dtype, lanes):
    try:
        log = gpu_persistent.compile_check(dtype, lanes, arch="sm_90", cluster=16)
    except OSError as e:
        pytest.skip(str(e))
    assert "warning" not in log, log


on_gpu_with_clusters = pytest.mark.skipif(
    not _kernels._gpu_has_clusters() or not _native.native_available(),
    reason="needs an NVIDIA GPU of compute capability 9.0 or later",
)


@on_gpu_with_clusters
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
@pytest.mark.parametrize("chunks, n, k", [(1, 2000, 40), (2, 500, 10), (1, 37, 37)])
def test_cluster_forecast_is_the_scans(dtype, chunks, n, k):
    if dtype == jnp.float64 and not jax.config.jax_enable_x64:
        pytest.skip("float64 needs x64")
    args = _problem(chunks, n, k, dtype=dtype, seed=n)
    assert _kernels.cluster_config(args[0], args[2], args[4], args[5], args[7])
    got = jax.jit(lambda *a: _kernels.esn_forecast(*a, 300))(*args)
    with _strategy.use_backend("xla"):
        want = jax.jit(lambda *a: _kernels.esn_forecast(*a, 300))(*args)
    tol = 1e-11 if dtype == jnp.float64 else 2e-5
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=tol, rtol=0)
    # deterministic: the same bits again
    again = jax.jit(lambda *a: _kernels.esn_forecast(*a, 300))(*args)
    assert np.array_equal(np.asarray(got), np.asarray(again))
