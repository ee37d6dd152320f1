"""orc.save / orc.load: bit-exact round trips and a clear refusal for every bad file."""

from __future__ import annotations

import functools
import hashlib
import json
import struct

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc.io import MAGIC, ModelFileError

U = jnp.asarray(np.sin(np.linspace(0, 60, 900))[:, None] * np.array([1.0, 0.5, -0.7]))


def _same(a, b):
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        x.dtype == y.dtype and bool(jnp.array_equal(x, y))
        for x, y in zip(la, lb, strict=True)
    )


def _forecasters():
    t = jnp.arange(900.0) * 0.05
    esn, R = orc.forecaster.train_RCForecaster(orc.forecaster.ESNForecaster(3, 60), U)
    yield "esn", esn, lambda m: m.forecast(40, R[-1])
    par = orc.forecaster.ESNForecaster(6, 30, chunks=3, locality=1, quadratic=True)
    par, Rp = orc.forecaster.train_RCForecaster(par, jnp.concatenate([U, -U], axis=1))
    yield "parallel", par, lambda m: m.forecast(40, Rp[-1])
    ens = orc.forecaster.EnsembleESNForecaster(3, 30, chunks=2)
    ens, Re = orc.forecaster.train_RCForecaster(ens, U)
    yield "ensemble", ens, lambda m: m.forecast(40, Re[-1])
    cesn = orc.forecaster.CESNForecaster(3, 30)
    cesn, Rc = orc.forecaster.train_CESNForecaster(cesn, U[:300], t[:300])
    yield "cesn", cesn, lambda m: m.forecast(t[:30], Rc[-1])
    seqs = jnp.stack([U[i : i + 50] * (1 + (i % 3)) for i in range(0, 600, 20)])
    labels = jnp.asarray([(i // 20) % 3 for i in range(0, 600, 20)], dtype=jnp.int32)
    clf = orc.classifier.train_RCClassifier(
        orc.classifier.ESNClassifier(3, 3, 40), seqs, labels
    )
    yield "classifier", clf, lambda m: jax.vmap(m.classify)(seqs)
    ctrl = orc.control.ESNController(2, 1, 40)
    ctrl, Rk = orc.control.train_RCController(ctrl, U[:-1, :2], U[1:, 2:])
    yield "controller", ctrl, lambda m: m.apply_control(jnp.ones((20, 1)), Rk[-1])


@functools.cache
def _trained() -> dict:
    """name -> (model, run), trained on first use: not when the file is
    collected (every xdist worker collects every file)."""
    return {name: (model, run) for name, model, run in _forecasters()}


@pytest.mark.parametrize(
    "name", ["esn", "parallel", "ensemble", "cesn", "classifier", "controller"]
)
def test_round_trip_is_bit_identical(name, tmp_path):
    model, run = _trained()[name]
    path = orc.save(tmp_path / "model.orc", model)
    loaded = orc.load(path)
    assert type(loaded) is type(model)
    assert _same(model, loaded)
    np.testing.assert_array_equal(run(loaded), run(model))
    header = orc.io.read_header(path)
    assert header["hyperparameters"]["res_dim"] == model.res_dim
    assert header["hyperparameters"]["dtype"] == str(jnp.dtype(model.dtype))


def test_custom_model_and_float32(tmp_path):
    custom = orc.forecaster.RCForecasterBase(
        driver=orc.drivers.TaylorDriver(3, 20, seed=1, dtype=jnp.float32),
        readout=orc.readouts.NonlinearReadout(3, 20, [jnp.tanh], dtype=jnp.float32),
        embedding=orc.embeddings.LinearEmbedding(3, 20, 0.1, dtype=jnp.float32, seed=2),
        dtype=jnp.float32,
    )
    orc.save(tmp_path / "c.orc", custom)
    loaded = orc.load(tmp_path / "c.orc", cls=orc.forecaster.RCForecasterBase)
    assert _same(custom, loaded) and loaded.readout.nonlin_list == (jnp.tanh,)
    assert loaded.driver.wr.values.dtype == jnp.float32


def _saved(tmp_path):
    esn = orc.forecaster.ESNForecaster(3, 30)
    return orc.save(tmp_path / "m.orc", esn), esn


def test_truncated_file(tmp_path):
    path, _ = _saved(tmp_path)
    data = path.read_bytes()
    for cut in (len(data) - 10, len(MAGIC) + 4, len(MAGIC) + 100):
        path.write_bytes(data[:cut])
        with pytest.raises(ModelFileError, match="truncated"):
            orc.load(path)


def test_corrupted_payload_and_header(tmp_path):
    path, _ = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[-20] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="checksum"):
        orc.load(path)
    path, _ = _saved(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(MAGIC) + 8 + 3] = ord("}")
    path.write_bytes(bytes(data))
    with pytest.raises(ModelFileError, match="corrupted header"):
        orc.load(path)
    path.write_bytes(b"not a model at all")
    with pytest.raises(ModelFileError, match="not an orc model file"):
        orc.load(path)


def _rewrite_header(path, edit):
    data = path.read_bytes()
    start = len(MAGIC)
    (n,) = struct.unpack("<Q", data[start : start + 8])
    header = json.loads(data[start + 8 : start + 8 + n])
    edit(header)
    blob = json.dumps(header).encode()
    head = MAGIC + struct.pack("<Q", len(blob)) + blob
    # a valid header checksum (format 2), so the edit itself is what is judged
    path.write_bytes(head + hashlib.sha256(head).digest() + data[start + 8 + n + 32 :])


def test_unknown_format_version(tmp_path):
    path, _ = _saved(tmp_path)
    _rewrite_header(path, lambda h: h.update(format_version=99))
    with pytest.raises(ModelFileError, match="format version 99"):
        orc.load(path)


def test_class_mismatch(tmp_path):
    path, _ = _saved(tmp_path)
    with pytest.raises(ModelFileError, match="not a orc.classifier"):
        orc.load(path, cls=orc.classifier.ESNClassifier)
    # a class whose fields changed since the file was written
    _rewrite_header(path, lambda h: h["tree"]["fields"].update(extra_field=1))
    with pytest.raises(ModelFileError, match="incompatible version"):
        orc.load(path)


def test_missing_file_and_unsaveable_model_leave_files_intact(tmp_path):
    with pytest.raises(FileNotFoundError):
        orc.load(tmp_path / "nope.orc")
    path, esn = _saved(tmp_path)
    before = path.read_bytes()
    bad = orc.forecaster.RCForecasterBase(
        driver=esn.driver,
        readout=orc.readouts.ParallelNonlinearReadout(3, 30, [lambda x: x**3]),
        embedding=esn.embedding,
    )
    with pytest.raises(TypeError, match="lambda"):
        orc.save(path, bad)
    assert path.read_bytes() == before  # the old file is untouched
    assert [p.name for p in tmp_path.iterdir()] == ["m.orc"]  # no temporary left
    assert _same(orc.load(path), esn)


def test_save_rejects_non_modules(tmp_path):
    with pytest.raises(TypeError, match="Equinox module"):
        orc.save(tmp_path / "x.orc", {"a": 1})
    assert isinstance(
        orc.load(orc.save(tmp_path / "d.orc", orc.drivers.ESNDriver(10, seed=0))),
        eqx.Module,
    )


def test_fields_added_since_a_file_was_written(tmp_path):
    """A classifier file written before the classifier gained its fitted
    fields (``ppv_thresholds``, ``difference_scale``, ``selected_beta``,
    declared with ``metadata={"added_field": True}``) loads them as None; any
    other missing field is still an incompatible file, even one whose
    default is None (``seed``)."""
    clf = orc.classifier.ESNClassifier(2, 2, 10, state_repr="mean", seed=0)
    path = orc.save(tmp_path / "clf.orc", clf)
    added = ("ppv_thresholds", "difference_scale", "selected_beta")

    def drop(*names):
        def edit(h):
            for name in names:
                del h["tree"]["fields"][name]

        return edit

    _rewrite_header(path, drop(*added))
    loaded = orc.load(path)
    assert all(getattr(loaded, name) is None for name in added)
    np.testing.assert_array_equal(
        np.asarray(loaded.readout.wout), np.asarray(clf.readout.wout)
    )
    _rewrite_header(path, drop("seed"))
    with pytest.raises(ModelFileError, match="incompatible version"):
        orc.load(path)
