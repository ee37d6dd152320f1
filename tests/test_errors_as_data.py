"""Run-time checks are returned as data, not raised from host callbacks.

orc's compiled entry points return what their checks found (NaN data, a
failed ridge solve, a corrupted matrix) next to their result and raise or
warn when the call returns (orc._errors). So their programs hold no host
callback: JAX's persistent compilation cache stores them (a second process
compiles nothing) and ``orc.export`` serialises them into a fresh process.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import ON_CPU, RUNTIME_ERRORS, lorenz_rk4, noisy_sinusoids, on_cpu
from orc import _errors, _native, _strategy

NATIVE = _native.native_available() and os.environ.get("ORC_NATIVE") != "0"
BACKENDS = ["native", "xla"] if NATIVE else ["xla"]
# what a host callback lowers to in the HLO (CPU and GPU spellings)
CALLBACK_MARKERS = ("callback", "host_compute", "SendToHost", "RecvFromHost")

U_NP = np.asarray(lorenz_rk4(300))
# jax.device_put: jnp.asarray of numpy compiles a program per shape and dtype
U = jax.device_put(U_NP)


def _with_np(at, value, rows=None):
    """U (its first ``rows``) with ``value`` at ``at``, made in numpy (no
    eager program compiled for the tests' own inputs)."""
    u = U_NP[:rows].copy()
    u[at] = value
    return u


def _with(at, value, rows=None):
    return jax.device_put(_with_np(at, value, rows))


def _hlo(fn, *args) -> str:
    return jax.jit(orc.capture_errors(fn)).lower(*args).as_text()


def _esn():
    # 64 nodes: the smallest reservoir whose training takes the fused native
    # fit (orc._ridge.GRAM_KERNEL_MIN_FEATURES)
    return orc.forecaster.ESNForecaster(3, 64, seed=0)


def _trained(backend=None):
    return orc.forecaster.train_RCForecaster(_esn(), U, backend=backend)


def _row(x):
    """The abstract value of one row of ``x`` (``x[-1]``'s shape and dtype)."""
    return jax.ShapeDtypeStruct(x.shape[1:], x.dtype)


@functools.cache
def _programs(backend):
    """(name, function, args) for the main entry points, built under
    ``backend``; one list per backend, shared by the tests below."""
    with orc.use_backend(backend):
        return _build_programs()


def _build_programs():
    # the tests only lower and trace these programs: the trained models they
    # take are abstract (jax.eval_shape: the trained models' shapes and
    # dtypes, the same lowered programs as with the trained weights, and no
    # training compiled for them)
    esn = _esn()
    model, R = jax.eval_shape(orc.forecaster.train_RCForecaster, esn, U)
    seqs, labels = noisy_sinusoids(jax.random.key(0), 2, n_classes=2, seq_len=30)
    cls = orc.classifier.ESNClassifier(3, 2, 30, seed=0)
    trained_cls = jax.eval_shape(orc.classifier.train_RCClassifier, cls, seqs, labels)
    nvar = orc.forecaster.NVARForecaster(3, k=2, s=1, order=2)
    trained_nvar, windows = jax.eval_shape(orc.forecaster.train_NVARForecaster, nvar, U)
    ens = orc.forecaster.EnsembleESNForecaster(3, 40, chunks=2, seed=0)
    return [
        ("train", orc.forecaster.train_RCForecaster, (esn, U)),
        ("forecast", lambda m, r: m.forecast(50, r), (model, _row(R))),
        (
            "forecast_from_IC",
            lambda m, u: m.forecast_from_IC(50, u),
            (model, U_NP[:40]),
        ),
        ("ensemble train", orc.forecaster.train_RCForecaster, (ens, U)),
        ("classifier train", orc.classifier.train_RCClassifier, (cls, seqs, labels)),
        ("classify", lambda m, s: m.classify(s), (trained_cls, np.asarray(seqs)[0])),
        ("nvar train", orc.forecaster.train_NVARForecaster, (nvar, U)),
        (
            "nvar forecast",
            lambda m, u: m.forecast(50, u),
            (trained_nvar, _row(windows)),
        ),
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_entry_programs_hold_no_host_callback(backend):
    with orc.use_backend(backend):
        for name, fn, args in _programs(backend):
            text = _hlo(fn, *args)
            found = [m for m in CALLBACK_MARKERS if m in text]
            assert not found, f"{name}: {found} in the compiled program"
            if backend == "native" and name == "train" and ON_CPU:
                assert "orc_esn_fit" in text  # the native program, checks and all


def _callbacks_off_cpu(jaxpr, on_cpu_only=False):
    """Callback primitives of ``jaxpr`` that a GPU program would hold: all
    but those inside the CPU branch of a ``lax.platform_dependent`` (a
    ``cond`` indexed by ``platform_index``; branch 0 is the CPU's)."""
    found = []
    platform = {
        e.outvars[0] for e in jaxpr.eqns if e.primitive.name == "platform_index"
    }
    for eqn in jaxpr.eqns:
        if "callback" in eqn.primitive.name and not on_cpu_only:
            found.append(eqn.primitive.name)
        subs = []
        if eqn.primitive.name == "cond":
            by_platform = eqn.invars[0] in platform
            for i, branch in enumerate(eqn.params["branches"]):
                subs.append((branch.jaxpr, on_cpu_only or (by_platform and i == 0)))
        else:
            for value in eqn.params.values():
                for item in value if isinstance(value, (tuple, list)) else (value,):
                    if hasattr(item, "jaxpr") and hasattr(item.jaxpr, "eqns"):
                        subs.append((item.jaxpr, on_cpu_only))
                    elif hasattr(item, "eqns"):
                        subs.append((item, on_cpu_only))
        for sub, cpu in subs:
            found += _callbacks_off_cpu(sub, cpu)
    return found


@pytest.mark.parametrize("backend", BACKENDS)
def test_device_programs_hold_no_host_callback(backend):
    # What a GPU lowers (every branch but the CPU's) has no host callback
    # either: a check inside a platform branch cannot reach the program's
    # ledger and would become equinox's callback there (it did for the
    # reservoir's column check in the forecast and the training run)
    # (traced for every platform: in a CPU process only the CPU's branches
    # would be traced otherwise)
    branched = []
    with orc.use_backend(backend), _strategy.lowering_for("any"):
        for name, fn, args in _programs(backend):
            jaxpr = jax.make_jaxpr(orc.capture_errors(fn))(*args).jaxpr
            assert not _callbacks_off_cpu(jaxpr), name
            branched += [name] if "platform_index" in str(jaxpr) else []
    assert "train" in branched and "forecast" in branched, branched


def test_checks_still_raise_eagerly_and_under_filter_jit():
    bad = _with((7, 1), np.nan)
    for call in (
        orc.forecaster.train_RCForecaster,
        eqx.filter_jit(orc.forecaster.train_RCForecaster),
    ):
        with pytest.raises(eqx.EquinoxRuntimeError, match="train_seq"):
            call(_esn(), bad)
    # under the user's own jax.jit there is no Python to return to: the check
    # is threaded onto the result and raised when the program runs
    with pytest.raises(RUNTIME_ERRORS, match="train_seq"):
        jax.block_until_ready(
            jax.jit(lambda m, u: orc.forecaster.train_RCForecaster(m, u)[1])(
                _esn(), bad
            )
        )


def test_ridge_warning_points_at_the_callers_line():
    model = orc.forecaster.ESNForecaster(3, 20, seed=0, dtype=jnp.float32)
    data = jax.device_put(np.zeros((200, 3), np.float32))  # constant states: rank 1 G
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        orc.forecaster.train_RCForecaster(model, data, beta=0.0)
    ours = [w for w in caught if issubclass(w.category, orc.IllConditionedRidgeWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert ours[0].filename == __file__, ours[0].filename


def test_capture_errors_returns_the_checks_as_values():
    bad = _with((3, 0), np.inf)
    train = jax.jit(orc.capture_errors(orc.forecaster.train_RCForecaster))
    (model, R), errors = train(_esn(), bad)
    assert isinstance(errors, orc.Errors)
    found = errors.found()
    # the data check first, in the order the checks were written; what the
    # inf did downstream (the ridge solve's checks) follows it
    assert {kind for kind, _, _ in found} == {"error"}
    assert "train_seq" in found[0][1] and "NaN or inf" in found[0][1]
    assert all("ridge" in msg for _, msg, _ in found[1:])
    with pytest.raises(eqx.EquinoxRuntimeError, match="train_seq"):
        errors.raise_if_any()
    # clean data: nothing found, nothing raised, same model as the plain call
    (model, R), errors = train(_esn(), U)
    assert errors.found() == []
    errors.raise_if_any()
    ref, ref_R = _trained()
    np.testing.assert_array_equal(model.readout.wout, ref.readout.wout)
    np.testing.assert_array_equal(R, ref_R)


def test_capture_errors_under_vmap_reports_any_member():
    # three data sets, the middle one with a NaN: one error, found once
    batch = jax.device_put(np.stack([U_NP, _with_np((5, 2), np.nan), 2 * U_NP]))
    train = jax.jit(
        jax.vmap(
            orc.capture_errors(
                lambda u: orc.forecaster.train_RCForecaster(_esn(), u)[0].readout.wout
            )
        )
    )
    wout, errors = train(batch)
    codes = np.asarray(errors.codes)
    assert codes.shape[0] == 3
    assert np.array_equal(codes[:, 0] >= 0, [False, True, False])
    found = errors.found()
    assert "train_seq" in found[0][1]  # the member's ridge checks follow it
    assert np.array_equal((codes >= 0).any(1), [False, True, False])
    if ON_CPU:  # the batched fit is the member's fit (see _helpers.ON_CPU)
        clean = _trained()[0].readout.wout
        np.testing.assert_allclose(np.asarray(wout)[0], clean, rtol=1e-10, atol=1e-12)


def test_warnings_are_data_too():
    model = orc.forecaster.ESNForecaster(3, 20, seed=0, dtype=jnp.float32)
    data = jax.device_put(np.zeros((200, 3), np.float32))
    train = jax.jit(
        orc.capture_errors(
            lambda m, u: orc.forecaster.train_RCForecaster(m, u, beta=0.0)
        )
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may warn before raise_if_any
        _, errors = train(model, data)
    found = errors.found()
    assert [(k, c) for k, _, c in found] == [
        ("warning", "orc._ridge.IllConditionedRidgeWarning")
    ]
    with pytest.warns(orc.IllConditionedRidgeWarning) as record:
        errors.raise_if_any()
    assert record[0].filename == __file__


def test_nested_entry_points_report_once_from_the_outer_program():
    # forecast_from_IC calls force/forecast inside its own program: their
    # checks are handed to the outermost orc program, not threaded twice
    model, _ = _trained()
    text = _hlo(lambda m, u: m.forecast_from_IC(20, u), model, U_NP[:30])
    assert "callback" not in text
    # the warm-up data is refused by the outer program's own check, named
    # as the caller named it (the nested force's check of its in_seq fires
    # too, but only the first error written is raised)
    nan_ic = _with((0, 0), np.nan, rows=30)
    with pytest.raises(eqx.EquinoxRuntimeError) as err:
        model.forecast_from_IC(20, nan_ic)
    assert str(err.value) == (
        "ESNForecaster: spinup_data contains NaN or inf values (first at row 0)."
    )


# -- across processes --------------------------------------------------------

_CACHE_SCRIPT = """
import sys, jax
from jax import monitoring
events = []
monitoring.register_event_listener(lambda name, **kw: events.append(name))
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_compilation_cache_dir", sys.argv[1])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
import numpy as np, jax.numpy as jnp, orc
# every backend in one process, each on its own reservoir size so that no
# program of one is a program of another (each compiles its own)
for i, backend in enumerate(sys.argv[2].split(",")):
    start = len(events)
    with orc.use_backend(backend):
        u = jnp.asarray(np.sin(np.arange(600)[:, None] * [0.05, 0.07, 0.11]))
        model, R = orc.forecaster.train_RCForecaster(
            orc.forecaster.ESNForecaster(3, 50 + i, seed=1), u)
        fc = model.forecast(100, R[-1])
        fc2 = model.forecast_from_IC(60, u[-40:])
        jax.block_until_ready((fc, fc2))
    ours = events[start:]
    hits = ours.count("/jax/compilation_cache/cache_hits")
    misses = ours.count("/jax/compilation_cache/cache_misses")
    print(backend, hits, misses, float(jnp.sum(fc)), float(jnp.sum(fc2)))
"""

# reads back what _export_write wrote (the paths after the cache script's
# two arguments; run after its counts are printed, so not counted in them)
_EXPORT_READ = """
import equinox as eqx
for path in sys.argv[3:]:
    exp = jax.export.deserialize(open(path + ".bin", "rb").read())
    y, errors = exp.call(jnp.asarray(np.load(path + ".r0.npy")))
    assert errors.found() == [], errors.found()
    np.save(path + ".y2.npy", np.asarray(y))
    tr = jax.export.deserialize(open(path + ".train.bin", "rb").read())
    u = np.load(path + ".u.npy")
    u[10, 1] = np.nan
    w, errors = tr.call(jnp.asarray(u))
    found = errors.found()
    assert found[0][0] == "error" and "train_seq" in found[0][1], found
    try:
        errors.raise_if_any()
    except eqx.EquinoxRuntimeError as e:
        assert "train_seq" in str(e)
    else:
        raise AssertionError("raise_if_any did not raise")
    print("ok", path)
"""


def _python(code: str, *argv: str) -> list[str]:
    """The lines ``code`` printed, run in a fresh Python."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()


def _export_write(path: str, backend: str) -> None:
    """Export a forecast and a training in this process for the CPU, which
    the fresh process that reads them back (``_EXPORT_READ``) runs on; in a
    process whose default device is a GPU, on its CPU device."""
    with on_cpu():
        _export_write_on_cpu(path, backend)


def _export_write_on_cpu(path: str, backend: str) -> None:
    # the forecast's model is the file's trained one (its training program
    # is compiled for the other tests already)
    model, R = _trained(backend)
    exp = orc.export(
        lambda r: model.forecast(100, r), R[-1], backend=backend, platforms=["cpu"]
    )
    with open(path + ".bin", "wb") as f:
        f.write(exp.serialize())
    y, errors = exp.call(R[-1])
    errors.raise_if_any()
    np.save(path + ".r0.npy", np.asarray(R[-1]))
    np.save(path + ".y.npy", np.asarray(y))
    direct = model.forecast(100, R[-1], backend=backend)
    np.save(path + ".direct.npy", np.asarray(direct))
    u = jax.device_put(np.sin(np.arange(600)[:, None] * [0.05, 0.07, 0.11]))
    tr = orc.export(
        lambda u: (
            orc.forecaster.train_RCForecaster(
                orc.forecaster.ESNForecaster(3, 50, seed=1), u
            )[0].readout.wout
        ),
        u,
        backend=backend,
        platforms=["cpu"],
    )
    with open(path + ".train.bin", "wb") as f:
        f.write(tr.serialize())
    np.save(path + ".u.npy", np.asarray(u))


def test_second_process_compiles_nothing_and_exports_round_trip(tmp_path):
    # Two checks across processes, sharing their two process starts:
    # (1) training and both forecasts (and every small program around them)
    # are written to the persistent cache by the first process and read back
    # by the second: no "uses host callbacks" refusal, nothing compiled
    # again. Both processes run every backend; the counts are per backend.
    # (2) a forecast and a training exported here, for every backend, are
    # read back and run by the first (fresh) process, after its counts.
    cache = str(tmp_path / "cache")
    paths = {backend: str(tmp_path / f"fc-{backend}") for backend in BACKENDS}
    for backend, path in paths.items():
        _export_write(path, backend)
    first = _python(_CACHE_SCRIPT + _EXPORT_READ, cache, ",".join(BACKENDS),
                    *paths.values())  # fmt: skip
    second = _python(_CACHE_SCRIPT, cache, ",".join(BACKENDS))
    # (2) the exports
    done = [line for line in first if line.startswith("ok ")]
    assert done == [f"ok {path}" for path in paths.values()], first
    for backend, path in paths.items():
        direct, y = np.load(path + ".direct.npy"), np.load(path + ".y.npy")
        # the artifact gives its bits in another process
        np.testing.assert_array_equal(np.load(path + ".y2.npy"), y, backend)
        if backend == "native":  # the kernel's bits
            np.testing.assert_array_equal(y, direct, backend)
        else:
            # the artifact holds the weights as constants, which XLA may fold
            # and fuse otherwise than the model's arrays (jax 0.12: 4e-15
            # from the direct forecast; jax 0.10: the same bits)
            np.testing.assert_allclose(y, direct, rtol=1e-12, atol=0, err_msg=backend)
    # (1) the cache
    counts = [[line for line in out if line.split()[0] in BACKENDS]
              for out in (first, second)]  # fmt: skip
    runs = {line.split()[0]: (line.split(), other.split())
            for line, other in zip(*counts, strict=True)}  # fmt: skip
    assert sorted(runs) == sorted(BACKENDS), (first, second)
    for backend, (one, two) in runs.items():
        assert two[0] == backend, (first, second)
        hits1, misses1 = int(one[1]), int(one[2])
        hits2, misses2 = int(two[1]), int(two[2])
        assert misses1 >= 3 and hits1 == 0, (backend, one)
        assert misses2 == 0, f"{backend}: second process compiled {misses2} again"
        assert hits2 == misses1, (backend, one, two)
        assert one[3:] == two[3:], backend  # same numbers, bit for bit in repr


def test_errors_is_a_pytree_that_serialises():
    errors = orc.Errors(
        jnp.array([1, -1], jnp.int32),
        (("error", ("a", "b"), None), ("warning", ("w",), "builtins.UserWarning")),
    )
    leaves, treedef = jax.tree.flatten(errors)
    assert len(leaves) == 1
    back = jax.tree.unflatten(treedef, leaves)
    assert back.entries == errors.entries
    assert back.found() == [("error", "b", None)]
    with pytest.raises(eqx.EquinoxRuntimeError, match="^b$"):
        back.raise_if_any()
    empty = orc.Errors(None, ())
    assert empty.found() == [] and empty.raise_if_any() is None


@_strategy.compiled
def _mapped_check(xs):
    """A loop of an orc program whose body checks its element: x < -5 is
    "very small", -5 <= x < 0 "small"."""

    @_errors.loop_body
    def body(x):
        which = jnp.where(x < -5, 1, 0)
        return _errors.check_index(2 * x, x < 0, which, ("small", "very small"))

    return _errors.report_loop(*jax.lax.map(body, xs))


def test_checks_in_an_orc_loop_body_are_codes_of_the_program():
    """Inside one of orc's own loops the program's ledger cannot take a
    check; errors.loop_body returns the body's checks as codes and
    report_loop hands on, per check, the first iteration's that fired. The
    program holds no host callback (JAX would never write it to its
    persistent compilation cache)."""
    np.testing.assert_array_equal(_mapped_check(np.arange(3.0)), [0.0, 2.0, 4.0])
    with pytest.raises(eqx.EquinoxRuntimeError, match="^very small$"):
        _mapped_check(np.array([1.0, -10.0, -1.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="^small$"):
        _mapped_check(np.array([1.0, -1.0, -10.0]))
    text = jax.jit(lambda xs: _errors.collect(_mapped_check, xs)).lower(np.arange(3.0))
    assert "callback" not in text.as_text()
