"""Shared test utilities: compile counting, small data sets, numpy references."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import monitoring

# What a failed eqx.error_if raises: EquinoxRuntimeError eagerly and under
# eqx.filter_jit, a JaxRuntimeError (XlaRuntimeError in older jaxlib) under
# plain jax.jit; both carry the library's message.
RUNTIME_ERRORS = (
    eqx.EquinoxRuntimeError,
    getattr(jax.errors, "JaxRuntimeError", RuntimeError),
)

#: Whether the tests run on a CPU (JAX's default backend). Some guarantees
#: are the CPU's: bit identity between a batched program and its members run
#: alone (a GPU's batched kernels sum in another order, and an
#: ill-conditioned ridge solve turns that rounding into visible differences),
#: ORC 0.4's exact draws (a GPU fuses their multiply-adds), the native kernels.
ON_CPU = jax.default_backend() == "cpu"

#: Skip mark for tests of a CPU-only guarantee (see ``ON_CPU``).
CPU_ONLY = pytest.mark.skipif(
    not ON_CPU,
    reason="a CPU guarantee (bit identity of batched and single programs, ORC 0.4's "
    "exact draws): the default backend here is " + jax.default_backend(),
)


#: Tolerance between a batched program and its members run alone: 1e-10 on a
#: CPU (where they agree to the last bits), a relative rounding bound elsewhere
#: (a GPU's batched kernels sum in another order; see ``ON_CPU``).
BATCHED = {"rtol": 0, "atol": 1e-10} if ON_CPU else {"rtol": 1e-6, "atol": 1e-8}


def assert_batched(actual, desired, cpu=None):
    """A batched program's result against its member's run alone: on a CPU
    the same bits (or within the tolerance ``cpu``, a dict of
    ``assert_allclose``'s arguments, where the two are different
    computations: a population's score against the public API's); elsewhere
    within :data:`BATCHED`."""
    actual, desired = np.asarray(actual), np.asarray(desired)
    if not ON_CPU:
        np.testing.assert_allclose(actual, desired, **BATCHED)
    elif cpu is None:
        np.testing.assert_array_equal(actual, desired)
    else:
        np.testing.assert_allclose(actual, desired, **cpu)


def assert_fallback_solution(w, x, ref, atol):
    """A ridge fallback's weights ``w (O, F)`` for features ``x (T, F)``
    against the minimum-norm least-squares weights ``ref``: equal on a CPU,
    which computes exactly that solution; elsewhere the fallback is a
    shifted solve (``orc._ridge._shifted_solve``, ``_qr_shifted_solve``: no
    eigen-solver workspace on a GPU), which may differ from it along
    directions the features do not span, so there the check is the fitted
    values ``x w^T``, which every least-squares solution shares."""
    w, x, ref = (np.asarray(a, np.float64) for a in (w, x, ref))
    assert np.all(np.isfinite(w))
    if ON_CPU:
        np.testing.assert_allclose(w, ref, atol=atol)
    else:
        np.testing.assert_allclose(x @ w.T, x @ ref.T, atol=atol * max(1, abs(x).max()))


@contextlib.contextmanager
def on_cpu():
    """Run the block's JAX computations on the CPU device (native-kernel tests
    on a machine whose default device is a GPU)."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


_events: list[str] = []
monitoring.register_event_duration_secs_listener(
    lambda name, *args, **kwargs: _events.append(name)
)
monitoring.register_event_listener(lambda name, *args, **kwargs: _events.append(name))


@contextlib.contextmanager
def count_compiles():
    """Count XLA compilations (and traces) inside the block: programs compiled
    by the backend, and programs loaded from the test run's persistent
    compilation cache (tests/conftest.py) instead."""
    start = len(_events)
    result = {"compiles": 0, "traces": 0}
    try:
        yield result
    finally:
        new = _events[start:]
        result["compiles"] = sum(
            e.endswith(("backend_compile_duration", "compilation_cache/cache_hits"))
            for e in new
        )
        result["traces"] = sum(e.endswith("jaxpr_trace_duration") for e in new)


def block(tree):
    return jax.tree.map(
        lambda x: x.block_until_ready() if hasattr(x, "block_until_ready") else x, tree
    )


#: (dt, x0) -> the samples integrated so far (lorenz_rk4 extends them)
_LORENZ: dict[tuple, list[tuple[float, float, float]]] = {}


def lorenz_rk4(n, dt=0.01, x0=(1.0, 1.0, 1.0), transient=500):
    """Lorenz63 by a fixed-step RK4 with 10 substeps (independent of orc.data).

    In Python floats, the same operations in the same order as numpy on
    3-vectors (the same bits, ~10x faster), and kept per ``(dt, x0)``: a
    later call for as many or fewer samples slices them, one for more
    continues the integration. Many test files call it when imported, and
    every xdist worker imports every file."""
    key = (float(dt), tuple(float(v) for v in x0))
    done = _LORENZ.setdefault(key, [])
    h = key[0] / 10
    x, y, z = done[-1] if done else key[1]
    while len(done) < n + transient:
        for _ in range(10):
            k1 = (10.0 * (y - x), x * (28.0 - z) - y, x * y - 8.0 / 3.0 * z)
            a, b, c = x + h / 2 * k1[0], y + h / 2 * k1[1], z + h / 2 * k1[2]
            k2 = (10.0 * (b - a), a * (28.0 - c) - b, a * b - 8.0 / 3.0 * c)
            a, b, c = x + h / 2 * k2[0], y + h / 2 * k2[1], z + h / 2 * k2[2]
            k3 = (10.0 * (b - a), a * (28.0 - c) - b, a * b - 8.0 / 3.0 * c)
            a, b, c = x + h * k3[0], y + h * k3[1], z + h * k3[2]
            k4 = (10.0 * (b - a), a * (28.0 - c) - b, a * b - 8.0 / 3.0 * c)
            x, y, z = (
                v + h / 6 * (q1 + 2 * q2 + 2 * q3 + q4)
                for v, q1, q2, q3, q4 in zip((x, y, z), k1, k2, k3, k4, strict=True)
            )
        done.append((x, y, z))
    return np.array(done[transient : n + transient], dtype=float)


def noisy_sinusoids(key, n_per_class, n_classes=3, seq_len=100, dim=3, noise=0.1):
    """The users' classification task: class c is a sinusoid of frequency (c+1)/2."""
    t = jnp.linspace(0, 4 * jnp.pi, seq_len)[:, None]
    seqs, labels = [], []
    for c in range(n_classes):
        for _ in range(n_per_class):
            key, sub = jax.random.split(key)
            base = jnp.sin((c + 1) * 0.5 * t * jnp.arange(1, dim + 1, dtype=t.dtype))
            seqs.append(base + noise * jax.random.normal(sub, (seq_len, dim)))
            labels.append(c)
    return jnp.stack(seqs), jnp.array(labels, dtype=jnp.int32)


def driver_memory(driver, n: int) -> float:
    """The memory capacity (delays up to ``2 n``) of a regressor around
    ``driver`` with a ``(1 -> n)`` input layer of scaling 0.1, on 5000
    samples of ``U(-0.8, 0.8)`` noise (1000 held out)."""
    import orc
    from orc.embeddings import LinearEmbedding

    reg = orc.regression.ESNRegressor(1, 1, n)
    reg = eqx.tree_at(
        lambda m: (m.driver, m.embedding),
        reg,
        (driver, LinearEmbedding(1, n, 0.1, seed=1)),
    )
    u = np.random.default_rng(0).uniform(-0.8, 0.8, 5000)
    return float(orc.metrics.memory_capacity(reg, 2 * n, series=u, test_size=1000))


def driver_round_trip(driver, path, drive_dim=None):
    """A forecaster around ``driver`` (3 inputs, embedded to ``drive_dim``,
    default the driver's ``res_dim``), trained on 600 Lorenz63 samples,
    saved to ``path`` and loaded: asserts the states' shape, that they are
    finite, the loaded driver's class and the same forecast bits; returns
    the loaded model."""
    import orc
    from orc.embeddings import LinearEmbedding

    n = driver.res_dim
    model = orc.forecaster.RCForecasterBase(
        driver=driver,
        readout=orc.readouts.LinearReadout(3, n),
        embedding=LinearEmbedding(3, drive_dim or n, 0.08, seed=1),
    )
    model, R = orc.forecaster.train_RCForecaster(model, lorenz_rk4(600), spinup=50)
    assert R.shape == (600, n) and np.isfinite(R).all()
    orc.save(path, model)
    loaded = orc.load(path)
    assert type(loaded.driver) is type(driver)
    np.testing.assert_array_equal(loaded.forecast(20, R[-1]), model.forecast(20, R[-1]))
    return loaded


def valid_prediction_steps(pred, truth, threshold=0.4, scale=None):
    """First step where ||pred - truth|| / scale exceeds threshold (len if never)."""
    pred, truth = np.asarray(pred), np.asarray(truth)
    if scale is None:
        scale = np.sqrt(np.mean(np.sum(truth**2, axis=1)))
    err = np.linalg.norm(pred - truth, axis=1) / scale
    bad = np.nonzero(err > threshold)[0]
    return int(bad[0]) if bad.size else len(err)


def as_np(x):
    return np.asarray(jnp.asarray(x))


def run_cli(*args, cwd) -> subprocess.CompletedProcess:
    """``orc ARGS`` run in this process from ``cwd``: the command line's
    ``main`` with stdout and stderr captured, as a ``CompletedProcess``.

    A subprocess per command costs ~2 s of start-up and compiles every
    program again (tests/test_cli.py's CLI runs took 60 s that way); the
    entry point itself stays tested through subprocesses (``orc --help``,
    the error lines, the docs' CLI example). What the command line sets for
    its own process is kept out of this one: float64 is already on here,
    its persistent compilation cache is not switched on (it would stay on
    for the rest of the test process), and the promotion rules are the
    users' ("standard"), not the strict ones of the test process."""
    from unittest import mock

    from orc import cli

    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(cli, "_configure_jax", lambda: None),
        jax.numpy_dtype_promotion("standard"),
        contextlib.chdir(cwd),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        assert jax.config.jax_enable_x64, "the command line runs in float64"
        code = cli.main([str(a) for a in args])
    return subprocess.CompletedProcess(
        ["orc", *args], code, out.getvalue(), err.getvalue()
    )


def on_device(x, dtype=None):
    """A NumPy value (or anything ``np.asarray`` takes) as a JAX array: a
    transfer, nothing is compiled (``jnp.asarray`` of a NumPy array compiles
    a program, ``stage``, for each shape and dtype; ``jax.device_put`` does
    not)."""
    return jax.device_put(np.asarray(x, dtype=dtype))


def hlo_loops(hlo: str) -> dict[str, dict[str, list[str]]]:
    """Per ``while`` loop of a compiled program's HLO text (keyed by its
    body's name): the computations it runs (name: lines), its body and those
    it calls, transitively (nested loops included); :func:`hlo_text` joins
    them."""
    comps, name = {}, None
    for line in hlo.splitlines():
        head = re.match(r"^(?:ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if head:
            name = head.group(1)
            comps[name] = []
        elif line.startswith("}"):
            name = None
        elif name is not None:
            comps[name].append(line)

    def reached(start):
        todo, seen = [start], set()
        while todo:
            c = todo.pop()
            if c in seen or c not in comps:
                continue
            seen.add(c)
            for line in comps[c]:
                todo += re.findall(
                    r"(?:calls|to_apply|body|condition)=%?([\w.\-]+)", line
                )
                for group in re.findall(r"branch_computations=\{([^}]*)\}", line):
                    todo += [g.strip().lstrip("%") for g in group.split(",")]
        return {c: comps[c] for c in seen}

    bodies = [b for lines in comps.values() for line in lines if " while(" in line
              for b in re.findall(r"body=%?([\w.\-]+)", line)]  # fmt: skip
    return {b: reached(b) for b in bodies}


def hlo_text(*computations: dict[str, list[str]]) -> str:
    """The lines of the union of some :func:`hlo_loops` entries (each
    computation once)."""
    union = {}
    for comps in computations:
        union.update(comps)
    return "\n".join(line for lines in union.values() for line in lines)
