"""The compiled entry points' wrapper (``orc._strategy.compiled``): arguments
split as ``eqx.filter_jit`` splits them, non-array results returned as traced,
one trace per signature, and compiled methods bound as pytrees that keep the
method's name, docstring and signature."""

from __future__ import annotations

import inspect
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc import _native, _strategy


def _counting():
    traces = []

    @_strategy.compiled
    def fn(x, n, label):
        traces.append((x.shape, n, label))
        return {"y": x * n, "n": n * 2, "label": label.upper(), "rows": x.shape[0]}

    return fn, traces


def test_arrays_traced_other_leaves_static_one_trace_per_signature():
    fn, traces = _counting()
    a = fn(jnp.arange(3.0), 2, "a")
    assert a["n"] == 4 and type(a["n"]) is int  # a Python int, as traced
    assert a["label"] == "A" and a["rows"] == 3
    np.testing.assert_allclose(a["y"], [0.0, 2.0, 4.0])
    # new array values, NumPy or JAX: no new trace
    b = fn(np.array([1.0, 1.0, 1.0]), 2, "a")
    np.testing.assert_allclose(b["y"], [2.0, 2.0, 2.0])
    assert len(traces) == 1
    # a new static value or shape: a new trace, with its own static results
    c = fn(jnp.arange(5.0), 3, "b")
    assert (c["n"], c["label"], c["rows"]) == (6, "B", 5)
    assert len(traces) == 2
    # back to the first signature: its results, not the last trace's
    d = fn(jnp.ones(3), 2, "a")
    assert (d["n"], d["label"], d["rows"]) == (4, "A", 3)
    assert len(traces) == 2


def test_backend_is_part_of_the_program_identity():
    seen = []

    @_strategy.compiled
    def fn(x):
        seen.append(_strategy.resolve(None))
        return x + 1

    fn(jnp.zeros(2), backend="xla")
    fn(jnp.zeros(2), backend="native")
    fn(jnp.zeros(2), backend="xla")
    assert seen == ["xla", "native"]


def test_works_under_jit_vmap_and_grad():
    @_strategy.compiled
    def fn(x, power):
        return jnp.sum(x**power)

    x = jnp.arange(1.0, 4.0)
    assert jax.jit(lambda v: fn(v, 2))(x) == pytest.approx(14.0)
    np.testing.assert_allclose(jax.vmap(lambda v: fn(v, 2))(x[:, None]), x**2)
    np.testing.assert_allclose(jax.grad(lambda v: fn(v, 2))(x), 2 * x)


@pytest.fixture(scope="module")
def model():
    return orc.forecaster.ESNForecaster(data_dim=3, res_dim=20, seed=0)


def test_bound_method_keeps_name_doc_and_signature(model):
    force = model.force
    plain = inspect.signature(type(model).force.__wrapped__)
    assert list(inspect.signature(force).parameters) == list(plain.parameters)[1:]
    assert force.__doc__ == type(model).force.__doc__ and force.__doc__
    assert force.__name__ == "force"
    assert force.__qualname__.endswith(".force")
    assert "force" in repr(force)


def test_bound_method_is_a_pytree_of_the_model(model):
    force = model.force
    assert jax.tree_util.tree_leaves(force) == jax.tree_util.tree_leaves(model)
    u = jnp.asarray(np.random.default_rng(0).standard_normal((6, 3)), model.dtype)
    r0 = jnp.zeros((1, 20), model.dtype)
    direct = force(u, r0)
    # passed into a jitted function (the model's leaves traced there), and
    # through eqx.filter_jit: the same states
    through_jit = jax.jit(lambda f, x, r: f(x, r))(force, u, r0)
    through_eqx = eqx.filter_jit(lambda f, x, r: f(x, r))(force, u, r0)
    np.testing.assert_array_equal(np.asarray(direct), np.asarray(through_jit))
    np.testing.assert_array_equal(np.asarray(direct), np.asarray(through_eqx))
    # rebuilt from its leaves: bound to the rebuilt model
    leaves, tree = jax.tree_util.tree_flatten(force)
    again = jax.tree_util.tree_unflatten(tree, leaves)
    np.testing.assert_array_equal(np.asarray(again(u, r0)), np.asarray(direct))


def test_public_methods_bound_cheaply_keep_their_face(model):
    """``forecast``-like methods (plain Python around an entry point) are
    bound like the compiled ones: same name, doc and signature as declared."""
    for name in ("forecast", "forecast_from_IC"):
        bound = getattr(model, name)
        declared = getattr(type(model), name)
        assert bound.__name__ == name and bound.__doc__ == declared.__doc__
        plain = inspect.signature(declared.__wrapped__)
        assert list(inspect.signature(bound).parameters) == list(plain.parameters)[1:]
        assert jax.tree_util.tree_leaves(bound) == jax.tree_util.tree_leaves(model)


def test_forecasts_start_their_host_copies_off_cpu(model, monkeypatch):
    """Results a forecast's divergence check reads on the host (the forecast,
    the codes, the warm-up data) have their copies started right after the
    program is dispatched when they live off CPU, so the transfers overlap;
    on CPU, for tracers and for NumPy inputs nothing is asked."""
    copied = []
    array_type = type(jnp.zeros(1))
    real = array_type.copy_to_host_async
    monkeypatch.setattr(
        array_type,
        "copy_to_host_async",
        lambda self: (copied.append(self.shape), real(self))[1],
    )
    r = jnp.zeros((1, 20), model.dtype)
    warm = jnp.ones((8, 3), model.dtype)
    # where the arrays live is the one thing patched (the programs stay
    # those of this machine: a patched default backend would trace a CPU's
    # program for a GPU's lowering)
    monkeypatch.setattr(_strategy, "_on_host", lambda a: True)
    model.forecast(5, r)
    model.forecast_from_IC(5, warm)
    assert copied == []  # on CPU devices: host memory already
    monkeypatch.setattr(_strategy, "_on_host", lambda a: False)
    out = model.forecast(5, r)
    assert (5, 3) in copied and len(copied) == 2  # the forecast and the codes
    copied.clear()
    model.forecast_from_IC(5, np.ones((8, 3)))  # NumPy data: on the host already
    model.forecast_from_IC(5, warm)
    assert copied.count((8, 3)) == 1 and copied.count((5, 3)) == 2
    copied.clear()
    jax.jit(lambda m, s: m.forecast(5, s))(model, r)  # traced: nothing to copy
    assert copied == []
    # the same values either way
    monkeypatch.undo()
    np.testing.assert_array_equal(np.asarray(out), np.asarray(model.forecast(5, r)))
    # and the placement itself, unpatched: an array on a CPU device is host
    # memory, one on an accelerator is not
    assert _strategy._on_host(jax.device_put(np.ones(2), jax.devices("cpu")[0]))
    for device in jax.devices():
        on_host = _strategy._on_host(jax.device_put(np.ones(2), device))
        assert on_host == (device.platform == "cpu")


def test_platform_branches_traced_only_where_they_can_be_lowered():
    # In a CPU process a program is lowered for the CPU only: on_platform
    # traces the CPU's branch alone; lowering_for("any") (orc.export for a
    # GPU) traces them all, in a program of its own (not jit's cached one)
    traced = []

    @_strategy.compiled
    def fn(x):
        def branch(name):
            def run(x):
                traced.append(name)
                return x * 2.0

            return run

        return _strategy.on_platform(
            x, cpu=branch("cpu"), cuda=branch("cuda"), default=branch("default")
        )

    x = jnp.arange(3.0)
    assert jax.default_backend() != "cpu" or _strategy.lowering_targets() == "cpu"
    want = {"cpu"} if jax.default_backend() == "cpu" else {"cpu", "cuda", "default"}
    np.testing.assert_array_equal(fn(x), [0.0, 2.0, 4.0])
    assert set(traced) == want
    traced.clear()
    with _strategy.lowering_for("any"):
        np.testing.assert_array_equal(fn(x), [0.0, 2.0, 4.0])
        jaxpr = str(jax.make_jaxpr(lambda x: fn(x))(x))
    # in a CPU process a program of its own; elsewhere the first program
    # was traced for any platform already, and is used again
    assert set(traced) == ({"cpu", "cuda", "default"} if want == {"cpu"} else set())
    assert "platform_index" in jaxpr
    traced.clear()
    fn(x)  # back outside the block: the first program again, no new trace
    assert traced == []


def test_export_for_a_gpu_holds_no_cpu_kernel():
    u = jnp.asarray(np.sin(np.arange(300)[:, None] * [0.05, 0.07, 0.11]))
    model, R = orc.forecaster.train_RCForecaster(
        orc.forecaster.ESNForecaster(3, 30, seed=1), u
    )
    on_cpu = orc.export(lambda r: model.forecast(20, r), R[-1], platforms=["cpu"])
    on_gpu = orc.export(lambda r: model.forecast(20, r), R[-1], platforms=["cuda"])
    gpu_calls = set(re.findall(r"custom_call @(\w+)", on_gpu.mlir_module()))
    # the CPU's targets: every orc target but the GPU forecast's (which an
    # export made on a machine with a GPU of compute capability 9.0 holds)
    cpu_kernels = set(_native.target_names()) - set(_native._CLUSTER_TARGETS.values())
    assert cpu_kernels and not gpu_calls & cpu_kernels, gpu_calls
    if _native.native_available() and _strategy.resolve(None) == "native":
        assert "orc_esn_forecast" in on_cpu.mlir_module()
