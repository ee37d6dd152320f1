"""ORC 0.4's random construction (``orc._orc04``) against ORC 0.4's own matrices.

The fixtures in ``tests/data/orc04_construction`` were written by ORC 0.4 in its
own environment (see ``make_fixtures.py`` there); ORC is not needed here. Every
comparison is bit for bit: SHA-256 digests of the bytes, plus the arrays
themselves (kept for one seed of most cases) for a readable failure.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import sparse

import orc
from _helpers import CPU_ONLY
from orc._orc04 import (
    orc04_components,
    orc04_embedding,
    orc04_ensemble_embedding,
    orc04_model_seeds,
    orc04_nse,
    orc04_reservoir,
)

# ORC 0.4's numbers were recorded on a CPU; a GPU fuses the draws'
# multiply-adds and differs in the last bit (see _helpers.ON_CPU)
pytestmark = CPU_ONLY

DATA = Path(__file__).parent / "data" / "orc04_construction"
# digest and case names as the generator wrote them (one definition for both)
_spec = importlib.util.spec_from_file_location(
    "orc04_fixture_format", DATA / "fixture_format.py"
)
_format = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_format)
digest, case_name = _format.digest, _format.case_name
Z = np.load(DATA / "fixtures.npz")
INDEX = json.loads(str(Z["index"]))
OTHER_CPUS = json.loads((DATA / "other_cpus.json").read_text())
SEEDS = INDEX["seeds"]
MODEL_SEEDS = INDEX["model_seeds"]
DTYPES = {"float64": jnp.float64, "float32": jnp.float32}


def hyper(kw: dict) -> dict:
    return {k: (DTYPES[v] if k == "dtype" else v) for k, v in kw.items()}


def assert_bits(actual, stored, what: str) -> None:
    a, s = np.asarray(actual), np.asarray(stored)
    assert a.shape == s.shape, f"{what}: shape {a.shape} != {s.shape}"
    if np.array_equal(a.view(np.uint8), s.view(np.uint8)):
        return
    diff = np.abs(a.astype(np.float64) - s.astype(np.float64))
    raise AssertionError(
        f"{what}: not bit for bit; {np.count_nonzero(diff)} differ, "
        f"max |diff| {diff.max():.3g}"
    )


def check_wr(prefix: str, data, indices, shape, flags) -> None:
    meta = INDEX[prefix]["wr"]
    assert list(shape) == meta["shape"]
    assert list(data.shape) == meta["data_shape"]
    assert data.dtype.name == meta["data_dtype"]
    assert list(indices.shape) == meta["indices_shape"]
    assert indices.dtype.name == meta["indices_dtype"]
    assert flags == (meta["indices_sorted"], meta["unique_indices"])
    if f"{prefix}/wr_indices" in Z:
        assert_bits(
            np.asarray(indices).astype(np.int16),
            Z[f"{prefix}/wr_indices"],
            f"{prefix} wr.indices",
        )
    assert digest(indices) == meta["indices_sha"], f"{prefix}: wr.indices differ"
    check_wr_data(prefix, data)


def check_wr_data(prefix: str, data) -> None:
    """wr.data bit for bit as ORC 0.4 gives it on the fixtures' CPU or on
    another CPU or jax release it was recorded on (``other_cpus.json``: an
    AMD EPYC with jax 0.10.2 and 0.12.0.1, which Python 3.12 installs); on a
    CPU never recorded, equal to the fixtures' within the spread of the
    spectral-radius normalisation.

    ORC 0.4 divides each reservoir by its spectral radius, which an
    eigenvalue solver computes (LAPACK through OpenBLAS, XLA's dots) with
    kernels chosen for the CPU: ORC's own matrix for a seed differs from CPU
    to CPU in its last bits (up to ~10 ulp measured between an AVX-512 Xeon
    and the first fixtures' CPU), a common factor per reservoir. Our
    construction matched ORC 0.4 bit for bit on both CPUs, and under jax
    0.12.0.1 (this file against fixtures that ORC 0.4 made under it, on
    Python 3.12: all passed, 2026-11-30)."""
    sha = digest(data)
    if (
        sha == INDEX[prefix]["wr"]["data_sha"]
        or sha in OTHER_CPUS.get(prefix, {}).values()
    ):
        return
    stored = Z[f"{prefix}/wr_data"]
    eps = np.finfo(stored.dtype).eps
    a = np.asarray(data)
    assert a.dtype == stored.dtype and a.shape == stored.shape
    np.testing.assert_allclose(a, stored, rtol=32 * eps, atol=0, err_msg=prefix)
    # ... and the difference is one factor per reservoir (the normalisation)
    for chunk, ref in zip(a, stored, strict=True):
        ratio = chunk[ref != 0] / ref[ref != 0]
        assert np.ptp(ratio) <= 4 * eps, f"{prefix}: not a common factor"


def check_win(prefix: str, win) -> None:
    meta = INDEX[prefix]["win"]
    assert list(win.shape) == meta["shape"] and win.dtype.name == meta["dtype"]
    if f"{prefix}/win" in Z:
        assert_bits(win, Z[f"{prefix}/win"], f"{prefix} win")
    assert digest(win) == meta["sha"], f"{prefix}: win differs"


# Layouts checked through ``jax.jit(jax.vmap(...))`` over the seeds; the others
# seed by seed, outside any transformation (as ORC runs), which also compiles
# the layouts the model tests reuse (each layout compiles once, ~1-3 s; the
# float64 ones of 30 and 120 nodes, one chunk, are the model tests').
TRANSFORMED = {case_name(120, 3, "float32", True, 2)}


def test_fixtures_come_from_orc04():
    assert INDEX["orc_version"] == "0.4.0"
    assert INDEX["backend"] == "cpu"
    cases = INDEX["reservoirs"]
    assert TRANSFORMED <= {case_name(*c) for c in cases}
    assert {c[0] for c in cases} == {30, 120}  # both sides of ORC's switch at 100
    assert {c[1] for c in cases} == {1, 3}
    assert {c[2] for c in cases} == {"float64", "float32"}
    assert {c[3] for c in cases} == {True, False}  # Arnoldi and dense above 100
    assert len(SEEDS) == 2


@pytest.mark.parametrize(
    "case", INDEX["reservoirs"], ids=[case_name(*c) for c in INDEX["reservoirs"]]
)
def test_reservoir_bit_for_bit(case):
    """Both sides of ORC's dense switch (30 < 100 <= 120), the Arnoldi path in
    float64 and float32, eigen batches, and the dense solver forced."""
    res_dim, chunks, dtype, use_sparse, batch = case
    build = functools.partial(
        orc04_reservoir,
        res_dim=res_dim,
        density=INDEX["density"],
        spectral_radius=INDEX["spectral_radius"],
        chunks=chunks,
        dtype=DTYPES[dtype],
        use_sparse_eigs=use_sparse,
        eigenval_batch_size=batch,
    )
    if case_name(*case) in TRANSFORMED:
        wr = jax.jit(jax.vmap(build))(jnp.asarray(SEEDS))
        assert wr.shape == (len(SEEDS), chunks, res_dim, res_dim)
        # (sliced in numpy: each eager slice of a JAX array compiles)
        data, indices = np.asarray(wr.data), np.asarray(wr.indices)
        got = [(data[i], indices[i], wr.shape[1:]) for i in range(len(SEEDS))]
    else:
        built = [build(seed) for seed in SEEDS]
        assert all(isinstance(w, sparse.BCOO) and w.n_batch == 1 for w in built)
        got = [(w.data, w.indices, w.shape) for w in built]
        wr = built[0]
    assert got[0][0].shape == (chunks, orc04_nse(res_dim, INDEX["density"]))
    for seed, (data, indices, shape) in zip(SEEDS, got, strict=True):
        check_wr(
            f"{case_name(*case)}/s{seed}",
            data,
            indices,
            shape,
            (wr.indices_sorted, wr.unique_indices),
        )


@pytest.mark.parametrize("name", list(INDEX["embeddings"]))
def test_embedding_win_bit_for_bit(name):
    kw = hyper(INDEX["embeddings"][name])
    dims = {k: kw.pop(k) for k in ("in_dim", "res_dim", "scaling")}
    make = orc04_ensemble_embedding if name.startswith("Ensemble") else orc04_embedding
    fn = functools.partial(make, **dims, **kw)
    for seed in SEEDS:
        check_win(f"{name}/s{seed}", fn(seed))


def check_components(prefix: str, comps: dict, i=None) -> None:
    # (a batch sliced in numpy: each eager slice of a JAX array compiles)
    pick = (lambda a: a) if i is None else (lambda a: np.asarray(a)[i])
    wr = comps["wr"]
    shape = wr.shape if i is None else wr.shape[1:]
    check_wr(
        prefix,
        pick(wr.data),
        pick(wr.indices),
        shape,
        (wr.indices_sorted, wr.unique_indices),
    )
    check_win(prefix, pick(comps["win"]))
    wout, meta = np.asarray(pick(comps["wout"])), INDEX[prefix]["wout"]
    assert list(wout.shape) == meta["shape"] and wout.dtype.name == meta["dtype"]
    assert meta["all_zero"] and not np.any(wout)


@pytest.mark.parametrize("name", list(INDEX["models"]))
def test_model_components_bit_for_bit(name):
    """``orc04_components`` reproduces a whole model from the model seed."""
    model_name, kw = INDEX["models"][name]
    for seed in MODEL_SEEDS:
        comps = orc04_components(model_name, seed=seed, **hyper(kw))
        check_components(f"{name}/s{seed}", comps)


def test_model_components_under_jit_and_vmap():
    """The whole model recipe is a pure function of the model seed."""
    model_name, kw = INDEX["models"]["ESNClassifier"]
    build = jax.jit(jax.vmap(lambda s: orc04_components(model_name, seed=s, **kw)))
    comps = build(jnp.asarray(MODEL_SEEDS))
    for i, seed in enumerate(MODEL_SEEDS):
        check_components(f"ESNClassifier/s{seed}", comps, i)


def test_model_seeds_feed_the_components():
    """A model's ``win`` is the embedding built from the derived seed."""
    seeds = orc04_model_seeds(MODEL_SEEDS[1])
    assert set(seeds) == {"driver", "readout", "embedding"}
    assert all(v.dtype == jnp.uint32 and v.shape == () for v in seeds.values())
    _, kw = INDEX["models"]["ESNClassifier"]
    win = orc04_embedding(seeds["embedding"], kw["data_dim"], kw["res_dim"], 0.08)
    check_win(f"ESNClassifier/s{MODEL_SEEDS[1]}", win)
    # positional and keyword forms agree
    kw = {k: v for k, v in kw.items() if k not in ("data_dim", "n_classes", "res_dim")}
    a = orc04_components("ESNClassifier", 3, 4, 30, seed=MODEL_SEEDS[1], **kw)
    check_win(f"ESNClassifier/s{MODEL_SEEDS[1]}", a["win"])


def test_independent_of_threefry_partitionable_flag():
    """ORC's environment (jax >= 0.5) draws with the partitionable layout; the
    functions force it, whatever the caller's setting."""
    with jax.threefry_partitionable(False):
        win = orc04_embedding(SEEDS[1], 3, 30, 0.1)
        seeds = orc04_model_seeds(MODEL_SEEDS[1])
    check_win(f"LinearEmbedding/s{SEEDS[1]}", win)
    ref = orc04_model_seeds(MODEL_SEEDS[1])
    assert all(int(seeds[k]) == int(ref[k]) for k in ref)


def test_nse_and_argument_errors():
    assert orc04_nse(30, 0.05) == 45  # ceil(0.05 * 900) in Python floats
    assert orc04_nse(120, 0.05) == 720
    assert orc04_nse(50, 0.02) == 50
    assert orc04_nse(10, 7) == 7
    with pytest.raises(ValueError):
        orc04_nse(10, 1.0)
    with pytest.raises(ValueError):
        orc04_reservoir(0, 30, spectral_radius=-1.0)
    with pytest.raises(ValueError):
        orc04_embedding(0, 5, 30, 0.1, chunks=2)
    with pytest.raises(ValueError, match="unknown ORC 0.4 model"):
        orc04_components("NoSuchModel", 3, 30)
    with pytest.raises(TypeError, match="unexpected"):
        orc04_components("ESNClassifier", 3, 4, 30, chunks=2)
    with pytest.raises(TypeError, match="missing"):
        orc04_components("ESNController", 3, res_dim=30)


# --------------------------------------------------------------------------- #
# The option on the models and components: construction="orc04"
# --------------------------------------------------------------------------- #

# Reservoir layouts (size, density, chunks, dtype) of the fixtures' (30
# nodes at density 0.05 in one chunk, r30_c1_float64; 50 nodes at the
# default density in three chunks, the model ESNForecaster's): their
# programs, compiled above, are reused (each new layout compiles ~2 s).
_MODEL_CASES = [
    ("ESNForecaster", orc.forecaster.ESNForecaster, (3, 30), {"Wr_density": 0.05}),
    (
        "ESNForecaster",
        orc.forecaster.ESNForecaster,
        (6, 50),
        {"chunks": 3, "locality": 1},
    ),
    (
        "EnsembleESNForecaster",
        orc.forecaster.EnsembleESNForecaster,
        (3, 50),
        {"chunks": 3},
    ),
    ("CESNForecaster", orc.forecaster.CESNForecaster, (3, 30), {"Wr_density": 0.05}),
    ("ESNClassifier", orc.classifier.ESNClassifier, (3, 4, 30), {"Wr_density": 0.05}),
    ("ESNController", orc.control.ESNController, (3, 2, 30), {"Wr_density": 0.05}),
]


# the dense view of a ReservoirMatrix or a BCOO as one program per layout
# (eager, every operation of the scatter compiles one of its own)
_todense = jax.jit(lambda w: w.todense())


@pytest.mark.parametrize(
    "name, cls, args, kw", _MODEL_CASES, ids=[c[0] + str(c[2]) for c in _MODEL_CASES]
)
def test_models_built_with_orc04_construction_hold_orcs_matrices(name, cls, args, kw):
    """``construction="orc04"``: the model's ``wr`` (every chunk, as a dense
    matrix) and ``win`` are bit for bit ORC 0.4's for that seed
    (:func:`orc04_components`, itself checked above against ORC's own
    fixtures); the ELL bank is padded to the longest row."""
    model = cls(*args, seed=7, construction="orc04", **kw)
    ref = orc04_components(name, *args, seed=7, **kw)
    np.testing.assert_array_equal(
        np.asarray(_todense(model.driver.wr)), np.asarray(_todense(ref["wr"]))
    )
    np.testing.assert_array_equal(
        np.asarray(model.embedding.win), np.asarray(ref["win"])
    )
    rows = np.asarray(ref["wr"].indices)[..., 0]
    longest = max(np.bincount(r, minlength=args[-1]).max() for r in rows)
    assert model.driver.wr.values.shape[-1] == max(longest, 1)


@pytest.mark.parametrize("case", [0, 1, 2], ids=["single", "parallel", "ensemble"])
def test_float32_models_hold_orcs_float64_input_draw(case):
    """ORC 0.4's models never pass their dtype to the embedding: a float32
    ESN's ``win`` is drawn in float64 (x64 on), and orc's float32 model holds
    that draw in float32 (drawn in float32 it would be other numbers); its
    reservoir is drawn in float32, as ORC's. One case per layout."""
    name, cls, args, kw = _MODEL_CASES[case]
    model = cls(*args, seed=7, construction="orc04", dtype=jnp.float32, **kw)
    ref = orc04_components(name, *args, seed=7, dtype=jnp.float32, **kw)
    assert model.embedding.win.dtype == jnp.float32 and ref["win"].dtype == jnp.float64
    np.testing.assert_array_equal(
        np.asarray(model.embedding.win), np.asarray(ref["win"]).astype(np.float32)
    )
    np.testing.assert_array_equal(
        np.asarray(_todense(model.driver.wr)), np.asarray(_todense(ref["wr"]))
    )


def test_orc04_construction_components_train_forecast_and_save(tmp_path):
    # the layout of the fixture r120_c1_float64_arn (its program)
    d = orc.drivers.ESNDriver(120, density=0.05, seed=3, construction="orc04")
    ref = orc04_reservoir(3, 120, density=0.05)
    np.testing.assert_array_equal(np.asarray(_todense(d.wr)), np.asarray(_todense(ref)))
    emb = orc.embeddings.ParallelLinearEmbedding(
        6, 20, 0.1, chunks=3, locality=1, seed=4, construction="orc04"
    )
    np.testing.assert_array_equal(
        np.asarray(emb.win),
        np.asarray(orc04_embedding(4, 6, 20, 0.1, jnp.float64, 3, 1)),
    )
    U = np.asarray(orc.data.lorenz63(tN=24, dt=0.01)[0])
    # the driver's layout above: its reservoir's program (max error 0.10)
    model = orc.forecaster.ESNForecaster(
        3, 120, Wr_density=0.05, seed=0, construction="orc04"
    )
    model, R = orc.forecaster.train_RCForecaster(model, U[:2000])
    R = np.asarray(R)
    pred = np.asarray(model.forecast(50, R[-1]))
    assert np.max(np.abs(pred - U[2000:2050])) < 0.5
    path = orc.save(tmp_path / "m.orc", model)
    loaded = orc.load(path)
    assert loaded.driver.construction == "orc04"
    np.testing.assert_array_equal(loaded.forecast(50, R[-1]), pred)
    with pytest.raises(ValueError, match="construction must be one of"):
        orc.drivers.ESNDriver(20, seed=0, construction="orc05")
