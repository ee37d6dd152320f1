"""A model file holds only what a constructor allows (issue 47 item 6).

Files edited as an attacker would (checksums fixed up, tests/test_io_safety.py's
``forge``) with values no constructor accepts: leak rates outside (0, 1],
a negative time constant, embedding scaling or spectral radius, a
continuous-mode driver in a discrete forecaster, readout weights scaled by
1e300 or NaN. ``orc.load`` refuses each with a ``ModelFileError`` naming the
field, and the constructors refuse the same values with the same words: one
check decides for both.
"""

from __future__ import annotations

import dataclasses
import math
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import run_cli
from orc._validation import from_fields
from orc.drivers import ParallelESNDriver
from orc.embeddings import ParallelLinearEmbedding
from orc.forecaster import CESNForecaster, ESNForecaster
from orc.io import ModelFileError
from test_io_safety import U, forge, leaf_number, npy_payload, npy_records, split

N = 20


@pytest.fixture(scope="module")
def esn():
    model, _ = orc.forecaster.train_RCForecaster(ESNForecaster(3, N, seed=1), U)
    return model


def _fields(module) -> dict:
    return {f.name: getattr(module, f.name) for f in dataclasses.fields(module)}


def _edit_leaf(tmp_path, model, field, edit, name="m.orc"):
    """Save ``model``, replace the leaf at ``field`` (a path of field names)
    by ``edit(stored array)`` and forge the file's checksums; its path."""
    path = orc.save(tmp_path / name, model)
    header, payload, _ = split(path.read_bytes())
    i = leaf_number(header, *field)
    arrays = npy_records(payload, len(header["leaves"]))
    arrays[i] = np.asarray(edit(arrays[i].copy()), arrays[i].dtype)
    path.write_bytes(forge(header, npy_payload(arrays)))
    return path


def _load_error(path) -> str:
    with pytest.raises(ModelFileError) as info:
        orc.load(path)
    return str(info.value)


def _ctor_error(fn, exc=ValueError) -> str:
    with pytest.raises(exc) as info:
        fn()
    return str(info.value)


@pytest.mark.parametrize("leak", [0.0, 5.0, -0.5])
def test_leak_outside_0_1_is_refused(tmp_path, esn, leak):
    path = _edit_leaf(
        tmp_path, esn, ("driver", "leak"), lambda a: np.full_like(a, leak)
    )
    loaded = _load_error(path)
    built = _ctor_error(
        lambda: ParallelESNDriver(chunks=1, res_dim=N, leak=leak, seed=0)
    )
    assert built == f"ParallelESNDriver: leak must lie in (0.0, 1.0], got {leak}"
    assert loaded.endswith(f"model.driver (ParallelESNDriver): {built}"), loaded


def test_per_node_leak_rates_are_checked_per_node(tmp_path):
    rates = np.linspace(0.2, 1.0, N)
    model = ESNForecaster(3, N, leak_rate=rates, seed=0)
    path = _edit_leaf(
        tmp_path, model, ("driver", "leak"), lambda a: a.__setitem__((0, 7), 0.0) or a
    )
    loaded = _load_error(path)
    bad = rates.copy()[None]
    bad[0, 7] = 0.0
    built = _ctor_error(
        lambda: ParallelESNDriver(chunks=1, res_dim=N, leak=bad, seed=0)
    )
    assert "leak must lie in (0, 1] for every node, got 0.0 at index (0, 7)" in built
    assert loaded.endswith(f"model.driver (ParallelESNDriver): {built}"), loaded
    # the unedited per-node model loads bit for bit
    ok = orc.save(tmp_path / "ok.orc", model)
    assert np.array_equal(orc.load(ok).driver.leak, model.driver.leak)


def test_negative_time_const_is_refused(tmp_path):
    model = CESNForecaster(3, N, time_const=50.0, seed=0)
    path = _edit_leaf(
        tmp_path, model, ("driver", "time_const"), lambda a: -50.0 + 0 * a
    )
    loaded = _load_error(path)
    built = _ctor_error(
        lambda: ParallelESNDriver(
            chunks=1, res_dim=N, mode="continuous", time_const=-50.0, seed=0
        )
    )
    assert built == "ParallelESNDriver: time_const must lie in (0.0, inf), got -50.0"
    assert loaded.endswith(f"model.driver (ParallelESNDriver): {built}"), loaded
    model_words = _ctor_error(lambda: CESNForecaster(3, N, time_const=-50.0))
    assert model_words.endswith("time_const must lie in (0.0, inf), got -50.0")


def test_negative_spectral_radius_is_refused(tmp_path, esn):
    path = _edit_leaf(
        tmp_path, esn, ("driver", "spectral_radius"), lambda a: -3.0 + 0 * a
    )
    loaded = _load_error(path)
    built = _ctor_error(
        lambda: ParallelESNDriver(chunks=1, res_dim=N, spectral_radius=-3.0, seed=0)
    )
    assert (
        built == "ParallelESNDriver: spectral_radius must lie in (0.0, inf), got -3.0"
    )
    assert loaded.endswith(f"model.driver (ParallelESNDriver): {built}"), loaded


def test_negative_embedding_scaling_is_refused(tmp_path, esn):
    path = _edit_leaf(tmp_path, esn, ("embedding", "scaling"), lambda a: -1.0 + 0 * a)
    loaded = _load_error(path)
    built = _ctor_error(lambda: ParallelLinearEmbedding(3, N, -1.0, chunks=1, seed=0))
    assert built == "ParallelLinearEmbedding: scaling must lie in [0.0, inf), got -1.0"
    assert loaded.endswith(f"model.embedding (ParallelLinearEmbedding): {built}"), (
        loaded
    )
    # the models' own argument says the same under its public name
    words = _ctor_error(lambda: ESNForecaster(3, N, embedding_scaling=-1.0))
    assert words == "ESNForecaster: embedding_scaling must lie in [0.0, inf), got -1.0"
    # zero input scaling (a reservoir the input does not drive) stays legal
    assert float(ESNForecaster(3, N, embedding_scaling=0.0).embedding.scaling) == 0.0


@pytest.mark.parametrize(
    "cls, stored, expected",
    [
        (ESNForecaster, "continuous", "discrete"),
        (CESNForecaster, "discrete", "continuous"),
    ],
)
def test_driver_mode_must_match_the_model(tmp_path, cls, stored, expected):
    model = cls(3, N, seed=0)
    path = orc.save(tmp_path / "m.orc", model)
    header, payload, _ = split(path.read_bytes())
    header["tree"]["fields"]["driver"]["fields"]["mode"] = stored
    path.write_bytes(forge(header, payload))
    loaded = _load_error(path)
    # the same invalid value given to a constructor: the model made from
    # its fields with the other driver (orc._validation.from_fields)
    other = ParallelESNDriver(
        chunks=1, res_dim=N, mode=stored, seed=0, spectral_radius=0.8, density=0.02
    )
    fields = dict(_fields(model), driver=other)
    built = _ctor_error(lambda: from_fields(cls, fields))
    assert built == (
        f"{cls.__name__}: driver.mode must be {expected!r} (the model is "
        f"{expected} in time), got {stored!r}"
    )
    assert loaded.endswith(f"model ({cls.__name__}): {built}"), loaded


def test_readout_weights_beyond_the_bound_are_refused(tmp_path, esn):
    path = _edit_leaf(tmp_path, esn, ("readout", "wout"), lambda a: a * 1e300)
    loaded = _load_error(path)
    bound = math.sqrt(np.finfo(np.float64).max)
    huge = esn.readout.wout * 1e300
    built = _ctor_error(
        lambda: from_fields(type(esn.readout), dict(_fields(esn.readout), wout=huge))
    )
    sums = np.abs(np.asarray(huge)).sum(-1)
    first = tuple(int(i) for i in np.argwhere(sums > bound)[0])
    assert built == (
        "ParallelLinearReadout: wout must be finite with each output's sum of "
        f"|weights| at most {bound:.3g} (sqrt of the largest float64), got "
        f"{sums[first]:.3g} at index {first} (chunk, output)"
    )
    assert loaded.endswith(f"model.readout (ParallelLinearReadout): {built}"), loaded
    # below the bound a file loads as written: the bound refuses weights
    # whose outputs cannot be squared, not merely large ones
    path = _edit_leaf(tmp_path, esn, ("readout", "wout"), lambda a: a * 1e100, "b.orc")
    assert np.array_equal(orc.load(path).readout.wout, esn.readout.wout * 1e100)


def test_non_finite_leaves_name_their_field(tmp_path, esn):
    def poison(a):
        a[0, 1, 2] = np.nan
        return a

    path = _edit_leaf(tmp_path, esn, ("readout", "wout"), poison)
    header, _, _ = split(path.read_bytes())
    leaf = leaf_number(header, "readout", "wout")
    assert f"model.readout.wout (leaf {leaf}) holds NaN or inf" in _load_error(path)
    built = _ctor_error(
        lambda: from_fields(
            type(esn.readout),
            dict(_fields(esn.readout), wout=esn.readout.wout.at[0, 1, 2].set(jnp.nan)),
        )
    )
    assert "wout must be finite" in built and "got nan at index (0, 1)" in built


def test_cli_refuses_the_edited_model(tmp_path, esn):
    _edit_leaf(tmp_path, esn, ("readout", "wout"), lambda a: a * 1e300)
    out = tmp_path / "f.csv"
    run = run_cli("forecast", "m.orc", "--steps", "5", "--out", out, cwd=tmp_path)
    assert run.returncode != 0
    assert "wout must be finite" in run.stderr
    assert not out.exists()


def test_traced_hyperparameters_still_build():
    # a population built under vmap (construction="jax") and a model built
    # inside jit with a traced leak rate: values under tracing pass the
    # checks (they cannot be read), the shapes are still checked
    @eqx.filter_vmap
    def population(seed, leak):
        return ESNForecaster(3, N, leak_rate=leak, seed=seed, construction="jax")

    pop = population(jnp.arange(3), jnp.asarray([0.2, 0.5, 0.9]))
    assert pop.driver.leak.shape == (3,)
    np.testing.assert_array_equal(pop.driver.leak, [0.2, 0.5, 0.9])

    @jax.jit
    def leak_of(a):
        return ESNForecaster(3, N, leak_rate=a, construction="jax").driver.leak

    assert float(leak_of(0.3)) == 0.3


# ----------------------------- GRU, deep ESN, set_wout, load's path (item 47 D)
def test_deep_esn_coupling_scaling_is_one_rule(tmp_path):
    from orc.drivers import DeepESNDriver
    from orc.forecaster import DeepESNForecaster

    expected = "DeepESNDriver: coupling_scaling must lie in [0.0, inf), got -0.5"
    assert _ctor_error(lambda: DeepESNDriver(N, coupling_scaling=-0.5, seed=0)) == (
        expected
    )
    # the model's argument of the same name reaches the same rule (it was the
    # coupling embedding's 'scaling' before)
    assert _ctor_error(
        lambda: DeepESNForecaster(3, N, coupling_scaling=-0.5, seed=0)
    ).endswith("coupling_scaling must lie in [0.0, inf), got -0.5")
    _ctor_error(lambda: DeepESNDriver(N, coupling_scaling=float("nan"), seed=0))
    # a built driver whose coupling was edited: its own check names the field
    driver = DeepESNDriver(N, n_layers=3, seed=0)
    edited = eqx.tree_at(
        lambda d: d.couplings[1].scaling, driver, jnp.asarray(-2.0, driver.dtype)
    )
    assert _ctor_error(lambda: from_fields(DeepESNDriver, _fields(edited))) == (
        "DeepESNDriver: coupling_scaling must lie in [0.0, inf), got -2.0 "
        "(couplings[1].scaling)"
    )
    # a file: refused where the edited coupling is rebuilt
    model = DeepESNForecaster(3, N, n_layers=2, seed=0)
    path = orc.save(tmp_path / "deep.orc", model)
    header, payload, _ = split(path.read_bytes())
    coupling = header["tree"]["fields"]["driver"]["fields"]["couplings"]["tuple"][0]
    i = coupling["fields"]["scaling"]["leaf"]
    arrays = npy_records(payload, len(header["leaves"]))
    arrays[i] = np.asarray(-1.0, arrays[i].dtype)
    path.write_bytes(forge(header, npy_payload(arrays)))
    loaded = _load_error(path)
    assert "model.driver.couplings[0]" in loaded
    assert "scaling must lie in [0.0, inf), got -1.0" in loaded
    # zero coupling (layers that do not talk) stays legal
    assert DeepESNDriver(N, coupling_scaling=0.0, seed=0).couplings[0].scaling == 0.0


def test_gru_weights_follow_the_input_rescaling_rule():
    from orc.drivers import GRUDriver

    assert _ctor_error(lambda: GRUDriver(N, input_rescaling=float("inf"), seed=0)) == (
        "GRUDriver: input_rescaling must be finite, got inf"
    )
    gru = GRUDriver(N, input_rescaling=2.0, seed=0)
    for field in ("weight_ih", "weight_hh", "bias"):
        edited = eqx.tree_at(
            lambda d, f=field: getattr(d.gru, f),
            gru,
            getattr(gru.gru, field).at[0].set(jnp.inf),
        )
        words = _ctor_error(lambda e=edited: from_fields(GRUDriver, _fields(e)))
        assert words.startswith(f"GRUDriver: gru.{field}"), words
        assert words.endswith("must be finite, it holds NaN or inf"), words
    assert "(input_rescaling times the initial weights)" in _ctor_error(
        lambda: from_fields(
            GRUDriver,
            _fields(
                eqx.tree_at(lambda d: d.gru.weight_ih, gru, gru.gru.weight_ih * jnp.nan)
            ),
        )
    )


def test_set_wout_applies_the_readouts_weight_rule(esn):
    readout = esn.readout
    bound = orc.readouts.wout_bound(readout.dtype)
    for bad, got in (
        (jnp.zeros_like(readout.wout).at[0, 1, 2].set(2 * bound), f"{2 * bound:.3g}"),
        (readout.wout.at[0, 1, 2].set(jnp.nan), "nan"),
    ):
        words = _ctor_error(lambda b=bad: readout.set_wout(b))
        assert words.startswith(f"{type(readout).__name__}: wout must be finite"), words
        assert f"at most {bound:.3g}" in words
        assert f"got {got} at index (0, 1) (chunk, output)" in words
    # every output's |weights| summing to just below the bound: accepted
    ok = jnp.full_like(readout.wout, 0.99 * bound / readout.wout.shape[-1])
    np.testing.assert_array_equal(readout.set_wout(ok).wout, ok)
    # traced weights (training, jax.jit) pass, as in the constructor
    jax.jit(lambda w: readout.set_wout(w).wout)(readout.wout)


@pytest.mark.parametrize("path", [None, 3, 2.5, ["m.orc"]])
def test_load_names_its_path_argument(path):
    for fn, owner in (
        (orc.load, "orc.load"),
        (orc.io.read_header, "orc.read_header"),
        (orc.io.read_metadata, "orc.read_metadata"),
    ):
        with pytest.raises(TypeError) as err:
            fn(path)
        assert str(err.value) == (
            f"{owner}: path must be a file name (str or os.PathLike), got "
            f"{type(path).__name__}"
        )
    with pytest.raises(TypeError, match="orc.save: path must be a file name"):
        orc.save(path, ESNForecaster(3, N, seed=0))


def test_load_takes_bytes_and_refuses_an_empty_name(tmp_path, esn):
    path = orc.save(tmp_path / "m.orc", esn)
    loaded = orc.load(os.fsencode(path))
    np.testing.assert_array_equal(loaded.readout.wout, esn.readout.wout)
    with pytest.raises(ValueError, match="orc.load: path must be a file name, got an"):
        orc.load("")
