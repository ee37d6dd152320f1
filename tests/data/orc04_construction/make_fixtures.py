"""Regenerate ``fixtures.npz`` and ``components.json`` from ORC 0.4 itself.

Run with an interpreter that has ORC 0.4 installed (PyPI
``openreservoircomputing==0.4.0``, which imports as ``orc``), never the one with
this project::

    python3 -m venv /tmp/orc04
    /tmp/orc04/bin/pip install openreservoircomputing==0.4.0
    /tmp/orc04/bin/python tests/data/orc04_construction/make_fixtures.py

``fixtures.npz``: the random matrices ORC 0.4 builds (``wr`` of its drivers,
``win`` of its embeddings, both of its models) for a few small cases. Every
array is recorded, in the JSON string ``index``, with its layout and a SHA-256
digest of its bytes (``data`` in its own dtype, ``indices`` as little-endian
int64); the arrays themselves are kept for the first seed of most cases, for
diagnostics (``indices`` as int16), and every ``wr.data``, whose last bits
depend on the CPU (``other_cpus.json``: the digests ORC 0.4 gave on the CPUs
the fixtures were made on before, merged in when they are made again).

``components.json``: every public attribute of ORC 0.4's components and models
(type; shape and dtype for arrays; BCOO layout), and the shapes of their
outputs, for tests of this project's component view against ORC's.
"""

from __future__ import annotations

import dataclasses
import importlib.metadata
import json
import platform
import warnings
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

# this script's own directory is on sys.path when it runs
from fixture_format import case_name, digest  # noqa: E402
from jax.experimental import sparse  # noqa: E402

from orc import drivers, embeddings, readouts  # noqa: E402
from orc.classifier.models import ESNClassifier  # noqa: E402
from orc.control.models import ESNController  # noqa: E402
from orc.forecaster.models import (  # noqa: E402
    CESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
)

HERE = Path(__file__).parent
SEEDS = (0, 7)
DENSITY = 0.05
RHO = 0.9
# (res_dim, chunks, dtype, use_sparse_eigs, eigenval_batch_size); 30 is below
# ORC's dense switch (res_dim < 100), 120 above it. The models below reuse the
# res_dim-30 layouts (and the embeddings their shapes), so that the tests
# compile each layout once.
RESERVOIRS = (
    (30, 1, "float64", True, None),
    (30, 3, "float32", True, None),
    (120, 1, "float64", True, None),
    (120, 3, "float32", True, 2),
    (120, 1, "float32", False, None),
)
# name -> (class, kwargs without seed)
EMBEDDINGS = {
    "LinearEmbedding": (
        embeddings.LinearEmbedding,
        dict(in_dim=3, res_dim=30, scaling=0.1),
    ),
    "LinearEmbedding_f32": (
        embeddings.LinearEmbedding,
        dict(in_dim=3, res_dim=30, scaling=0.1, dtype=jnp.float32),
    ),
    "ParallelLinearEmbedding": (
        embeddings.ParallelLinearEmbedding,
        dict(in_dim=6, res_dim=30, scaling=0.2, chunks=3, locality=1),
    ),
    "EnsembleLinearEmbedding": (
        embeddings.EnsembleLinearEmbedding,
        dict(in_dim=3, res_dim=30, scaling=0.1, chunks=3),
    ),
}
SHARED = dict(Wr_density=DENSITY, Wr_spectral_radius=RHO)
MODELS = {
    # ORC's defaults (density 0.02, spectral radius 0.8, scaling 0.08, float64)
    "ESNForecaster": (ESNForecaster, dict(data_dim=6, res_dim=50, chunks=3)),
    "ESNForecaster_parallel": (
        ESNForecaster,
        dict(
            data_dim=6,
            res_dim=30,
            chunks=3,
            locality=1,
            embedding_scaling=0.2,
            dtype=jnp.float32,
            **SHARED,
        ),
    ),
    "CESNForecaster": (
        CESNForecaster,
        dict(data_dim=3, res_dim=30, chunks=3, dtype=jnp.float32, **SHARED),
    ),
    "EnsembleESNForecaster": (
        EnsembleESNForecaster,
        dict(data_dim=3, res_dim=30, chunks=3, dtype=jnp.float32, **SHARED),
    ),
    "ESNClassifier": (
        ESNClassifier,
        dict(data_dim=3, n_classes=4, res_dim=30, **SHARED),
    ),
    "ESNController": (
        ESNController,
        dict(data_dim=3, control_dim=2, res_dim=30, **SHARED),
    ),
}
MODEL_SEEDS = (0, 12345)


def cpu_name() -> str:
    """The CPU model, as /proc/cpuinfo names it (the machine's own word)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def keep_other_cpu(new_index: dict) -> None:
    """Before the fixtures are replaced: the wr.data digests of the previous
    fixtures' CPU that differ from this CPU's go to ``other_cpus.json``.

    ORC 0.4 scales each reservoir by its spectral radius, computed by an
    eigenvalue solver (LAPACK through OpenBLAS, XLA's dots) whose kernels
    depend on the CPU: on another CPU the same seed gives a matrix that
    differs in its last bits (about 10 ulp), and so it does from one jax
    release to another. Every digest recorded here is ORC 0.4's own output
    on some CPU with some jax."""
    old_path, path = HERE / "fixtures.npz", HERE / "other_cpus.json"
    if not old_path.exists():
        return
    old = json.loads(str(np.load(old_path)["index"]))
    other = json.loads(path.read_text()) if path.exists() else {}
    cpu = old.get("cpu", "the first fixtures' CPU (not recorded)")
    if "jax_version" in old:  # its eigenvalues moved with jax too (0.10 -> 0.12)
        cpu = f"{cpu}, jax {old['jax_version']}"
    for prefix, entry in old.items():
        if isinstance(entry, dict) and "wr" in entry:
            sha = entry["wr"]["data_sha"]
            if sha != new_index[prefix]["wr"]["data_sha"]:
                other.setdefault(prefix, {})[cpu] = sha
    path.write_text(json.dumps(other, indent=1, sort_keys=True) + "\n")


def kw_repr(kw: dict) -> dict:
    return {k: (jnp.dtype(v).name if k == "dtype" else v) for k, v in kw.items()}


def bcoo_meta(wr) -> dict:
    return dict(
        shape=list(wr.shape),
        data_shape=list(wr.data.shape),
        data_dtype=wr.data.dtype.name,
        indices_shape=list(wr.indices.shape),
        indices_dtype=wr.indices.dtype.name,
        n_batch=wr.n_batch,
        indices_sorted=bool(wr.indices_sorted),
        unique_indices=bool(wr.unique_indices),
        data_sha=digest(wr.data),
        indices_sha=digest(wr.indices),
    )


def store(out: dict, index: dict, prefix: str, wr=None, win=None, keep=False):
    """Digests and layout into ``index``; the arrays too when ``keep``."""
    entry = index.setdefault(prefix, {})
    if wr is not None:
        entry["wr"] = bcoo_meta(wr)
        # every wr.data is kept: its last bits depend on the CPU (see
        # other_cpus.json), and on another CPU the test compares to these
        out[f"{prefix}/wr_data"] = np.asarray(wr.data)
        if keep:
            out[f"{prefix}/wr_indices"] = np.asarray(wr.indices).astype(np.int16)
    if win is not None:
        entry["win"] = dict(
            shape=list(win.shape), dtype=win.dtype.name, sha=digest(win)
        )
        if keep:
            out[f"{prefix}/win"] = np.asarray(win)


def fixtures() -> dict:
    out: dict[str, np.ndarray] = {}
    index: dict = {
        "orc_version": importlib.metadata.version("openreservoircomputing"),
        "jax_version": jax.__version__,
        "backend": jax.default_backend(),
        "cpu": cpu_name(),
        "seeds": list(SEEDS),
        "density": DENSITY,
        "spectral_radius": RHO,
        "reservoirs": [list(r) for r in RESERVOIRS],
        "embeddings": {k: kw_repr(kw) for k, (_, kw) in EMBEDDINGS.items()},
        "models": {k: [cls.__name__, kw_repr(kw)] for k, (cls, kw) in MODELS.items()},
        "model_seeds": list(MODEL_SEEDS),
    }
    first = SEEDS[0]
    for res_dim, chunks, dtype, use_sparse, batch in RESERVOIRS:
        for seed in SEEDS:
            drv = drivers.ParallelESNDriver(
                res_dim,
                spectral_radius=RHO,
                density=DENSITY,
                dtype=getattr(jnp, dtype),
                chunks=chunks,
                seed=seed,
                use_sparse_eigs=use_sparse,
                eigenval_batch_size=batch,
            )
            prefix = f"{case_name(res_dim, chunks, dtype, use_sparse, batch)}/s{seed}"
            # arrays of the first seed, except the biggest case (digests only)
            keep = seed == first and res_dim * chunks < 300
            store(out, index, prefix, wr=drv.wr, keep=keep)
            if chunks == 1:  # the single-reservoir class builds the same wr
                single = drivers.ESNDriver(
                    res_dim,
                    spectral_radius=RHO,
                    density=DENSITY,
                    dtype=getattr(jnp, dtype),
                    seed=seed,
                    use_sparse_eigs=use_sparse,
                    eigenval_batch_size=batch,
                )
                assert digest(single.wr.data) == digest(drv.wr.data)
            # the Taylor drivers share the construction
            taylor = drivers.ParallelTaylorDriver(
                2,
                res_dim,
                spectral_radius=RHO,
                density=DENSITY,
                dtype=getattr(jnp, dtype),
                chunks=chunks,
                seed=seed,
                use_sparse_eigs=use_sparse,
                eigenval_batch_size=batch,
            )
            assert digest(taylor.wr.data) == digest(drv.wr.data)
            assert digest(taylor.wr.indices) == digest(drv.wr.indices)

    for name, (cls, kw) in EMBEDDINGS.items():
        for seed in SEEDS:
            win = cls(**kw, seed=seed).win
            store(out, index, f"{name}/s{seed}", win=win, keep=seed == first)

    for name, (cls, kw) in MODELS.items():
        for seed in MODEL_SEEDS:
            model = cls(**kw, seed=seed)
            prefix = f"{name}/s{seed}"
            keep = seed == MODEL_SEEDS[0]
            wr, win = model.driver.wr, model.embedding.win
            store(out, index, prefix, wr=wr, win=win, keep=keep)
            index[prefix]["wout"] = dict(
                shape=list(model.readout.wout.shape),
                dtype=model.readout.wout.dtype.name,
                all_zero=bool(jnp.all(model.readout.wout == 0)),
            )
    out["index"] = np.asarray(json.dumps(index, sort_keys=True))
    return out


# ------------------------------------------------------------ components.json


def describe(value, depth: int = 0) -> dict:
    if isinstance(value, sparse.BCOO):
        return dict(
            type=type(value).__name__,
            shape=list(value.shape),
            dtype=value.dtype.name,
            data_shape=list(value.data.shape),
            indices_shape=list(value.indices.shape),
            indices_dtype=value.indices.dtype.name,
            nse=int(value.nse),
            n_batch=value.n_batch,
            n_sparse=value.n_sparse,
            n_dense=value.n_dense,
            indices_sorted=bool(value.indices_sorted),
            unique_indices=bool(value.unique_indices),
        )
    if isinstance(value, (jax.Array, np.ndarray)):
        return dict(
            type=type(value).__name__, shape=list(value.shape), dtype=str(value.dtype)
        )
    if isinstance(value, eqx.Module) and depth < 4:
        fields = {f.name: f for f in dataclasses.fields(value)}
        attrs = {}
        names = sorted(set(vars(value)) | set(fields))
        for name in names:
            if name.startswith("_"):
                continue
            entry = describe(getattr(value, name), depth + 1)
            entry["in_vars"] = name in vars(value)  # False: a class default
            if name in fields:
                entry["static"] = bool(fields[name].metadata.get("static", False))
            else:
                entry["static"] = None  # set in __init__ but not a declared field
            attrs[name] = entry
        return dict(
            type=type(value).__name__,
            module=type(value).__module__,
            mro=[c.__name__ for c in type(value).__mro__ if c not in (object,)][:6],
            fields=list(fields),
            attributes=attrs,
        )
    if value is None or isinstance(value, (bool, int, float, str)):
        return dict(type=type(value).__name__, value=value)
    try:
        if value in (jnp.float64, jnp.float32):
            return dict(type=type(value).__name__, value=jnp.dtype(value).name)
    except TypeError:
        pass
    if isinstance(value, (list, tuple)):
        return dict(
            type=type(value).__name__,
            len=len(value),
            items=[describe(v, depth + 1) for v in value],
        )
    if callable(value) and hasattr(value, "__name__"):
        return dict(type=type(value).__name__, name=value.__name__)
    return dict(type=type(value).__name__, module=type(value).__module__)


def shape_of(fn, *args):
    try:
        out = fn(*args)
    except Exception as err:  # record, never hide, what ORC refuses
        return dict(error=f"{type(err).__name__}: {err}"[:300])
    leaves = jax.tree_util.tree_leaves(out)
    if len(leaves) == 1:
        return dict(shape=list(leaves[0].shape), dtype=str(leaves[0].dtype))
    return dict(shapes=[list(x.shape) for x in leaves])


def component_facts() -> dict:
    key = jax.random.key(1)
    T = 5

    def driver_io(d):
        state = d.default_state()
        proj = jax.random.normal(key, state.shape, state.dtype)
        seq = jnp.stack([proj] * T)
        return dict(
            default_state=shape_of(d.default_state),
            advance=shape_of(d.advance, proj, state),
            call_single=shape_of(d, proj, state),
            call_sequence=shape_of(d, seq, jnp.stack([state] * T)),
        )

    def embedding_io(e):
        x = jax.random.normal(key, (e.in_dim,))
        return dict(
            embed=shape_of(e.embed, x),
            call_single=shape_of(e, x),
            call_sequence=shape_of(e, jnp.stack([x] * T)),
        )

    def readout_io(r, chunks):
        state = jnp.zeros((chunks, r.res_dim) if chunks else (r.res_dim,))
        return dict(
            readout=shape_of(r.readout, state),
            call_single=shape_of(r, state),
            call_sequence=shape_of(r, jnp.stack([state] * T)),
            prepare_train=shape_of(r.prepare_train, jnp.stack([state] * T)),
        )

    sin = [jnp.sin]
    comps = {
        "ESNDriver(res_dim=50)": drivers.ESNDriver(50, seed=0),
        "ParallelESNDriver(res_dim=50, chunks=3)": drivers.ParallelESNDriver(
            50, chunks=3, seed=0
        ),
        "TaylorDriver(n_terms=3, res_dim=50)": drivers.TaylorDriver(3, 50, seed=0),
        "ParallelTaylorDriver(n_terms=3, res_dim=50, chunks=3)": (
            drivers.ParallelTaylorDriver(3, 50, chunks=3, seed=0)
        ),
        "GRUDriver(res_dim=50)": drivers.GRUDriver(50, seed=0),
        "LinearEmbedding(in_dim=3, res_dim=50, scaling=0.1)": (
            embeddings.LinearEmbedding(3, 50, 0.1, seed=0)
        ),
        "ParallelLinearEmbedding(in_dim=6, res_dim=50, scaling=0.1, chunks=3, locality=1)": (
            embeddings.ParallelLinearEmbedding(6, 50, 0.1, chunks=3, locality=1, seed=0)
        ),
        "EnsembleLinearEmbedding(in_dim=3, res_dim=50, scaling=0.1, chunks=3)": (
            embeddings.EnsembleLinearEmbedding(3, 50, 0.1, chunks=3, seed=0)
        ),
        "LinearReadout(out_dim=3, res_dim=50)": readouts.LinearReadout(3, 50),
        "ParallelLinearReadout(out_dim=6, res_dim=50, chunks=3)": (
            readouts.ParallelLinearReadout(6, 50, chunks=3)
        ),
        "NonlinearReadout(out_dim=3, res_dim=50, nonlin_list=[sin])": (
            readouts.NonlinearReadout(3, 50, sin)
        ),
        "ParallelNonlinearReadout(out_dim=6, res_dim=50, nonlin_list=[sin], chunks=3)": (
            readouts.ParallelNonlinearReadout(6, 50, sin, chunks=3)
        ),
        "QuadraticReadout(out_dim=3, res_dim=50)": readouts.QuadraticReadout(3, 50),
        "ParallelQuadraticReadout(out_dim=6, res_dim=50, chunks=3)": (
            readouts.ParallelQuadraticReadout(6, 50, chunks=3)
        ),
        "EnsembleLinearReadout(out_dim=3, res_dim=50, chunks=3)": (
            readouts.EnsembleLinearReadout(3, 50, chunks=3)
        ),
    }
    facts = {}
    for name, comp in comps.items():
        entry = describe(comp)
        if isinstance(comp, drivers.DriverBase):
            entry["io"] = driver_io(comp)
        elif isinstance(comp, embeddings.EmbedBase):
            entry["io"] = embedding_io(comp)
        else:
            chunks = comp.chunks
            if isinstance(
                comp,
                (readouts.LinearReadout, readouts.NonlinearReadout),
            ):
                chunks = 0  # the single forms take (res_dim,) states
            entry["io"] = readout_io(comp, chunks)
        facts[name] = entry

    models = {
        "ESNForecaster(data_dim=3, res_dim=50)": ESNForecaster(3, 50),
        "ESNForecaster(data_dim=6, res_dim=50, chunks=3, locality=1)": ESNForecaster(
            6, 50, chunks=3, locality=1
        ),
        "CESNForecaster(data_dim=3, res_dim=50)": CESNForecaster(3, 50),
        "EnsembleESNForecaster(data_dim=3, res_dim=50, chunks=3)": (
            EnsembleESNForecaster(3, 50, chunks=3)
        ),
        "ESNClassifier(data_dim=3, n_classes=4, res_dim=50)": ESNClassifier(3, 4, 50),
        "ESNController(data_dim=3, control_dim=2, res_dim=50)": ESNController(3, 2, 50),
    }
    for name, model in models.items():
        entry = describe(model)
        state = model.driver.default_state()
        x = jnp.zeros((T, model.in_dim))
        io = {"driver.default_state": shape_of(model.driver.default_state)}
        if isinstance(model, CESNForecaster):
            ts = jnp.linspace(0.0, 0.4, T)
            io["force(in_seq[T,in_dim], state, ts)"] = shape_of(
                model.force, x, state, ts
            )
            io["forecast(ts, state)"] = shape_of(model.forecast, ts, state)
        elif isinstance(model, ESNClassifier):
            io["force(in_seq[T,in_dim], state)"] = shape_of(model.force, x, state)
            io["classify(in_seq[T,in_dim])"] = shape_of(model.classify, x)
        elif isinstance(model, ESNController):
            u = jnp.zeros((T, model.control_dim))
            io["force(in_seq[T,in_dim], control_seq[T,control_dim], state)"] = shape_of(
                model.force, x, u, state
            )
            io["apply_control(control_seq[T,control_dim], state)"] = shape_of(
                model.apply_control, u, state
            )
        else:
            io["force(in_seq[T,in_dim], state)"] = shape_of(model.force, x, state)
            io["forecast(T, state)"] = shape_of(model.forecast, T, state)
        entry["io"] = io
        facts[name] = entry
    return dict(
        generated_with=dict(
            orc=importlib.metadata.version("openreservoircomputing"),
            jax=jax.__version__,
            jaxlib=importlib.metadata.version("jaxlib"),
            equinox=importlib.metadata.version("equinox"),
            python=platform.python_version(),
            jax_enable_x64=True,
            T=T,
            note="seed=0 everywhere; io entries give output shapes for a state/"
            "input of the documented shape; T is the sequence length used",
        ),
        components=facts,
    )


def main() -> None:
    assert importlib.metadata.version("openreservoircomputing") == "0.4.0"
    warnings.filterwarnings("ignore", message="Reservoir dimension is less than 100")
    out = fixtures()
    keep_other_cpu(json.loads(str(out["index"])))
    np.savez_compressed(HERE / "fixtures.npz", **out)
    facts = component_facts()
    (HERE / "components.json").write_text(
        json.dumps(facts, indent=1, sort_keys=False) + "\n"
    )


if __name__ == "__main__":
    main()
