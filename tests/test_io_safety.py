"""Model files are data: crafted, corrupted and edited files end in ModelFileError
(nothing they name is imported or run, nothing crashes), old files still load,
and saving behaves like a careful tool (umask, symlinks, temporaries).

The v1 fixtures in ``tests/data`` were written by orc at format version 1
(commit 0524cc4) with ``model_v1_expected.npz`` holding what each model
computed then (a 10-step forecast, class probabilities or controlled outputs).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import random
import re
import signal
import stat
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc.io import MAGIC, ModelFileError

DATA = Path(__file__).parent / "data"
# numpy, as the tests' own arithmetic on it (an eager jnp operation compiles)
U = np.sin(np.linspace(0, 60, 400))[:, None] * np.array([1.0, 0.5, -0.7])
# modules whose import has side effects (printing, opening a browser, creating
# a virtual environment): none may be imported by loading a file
SIDE_EFFECT_MODULES = ("this", "antigravity", "webbrowser", "venv.__main__", "cProfile")


# --------------------------------------------------------------------------- #
# Reading and forging files (what an attacker can do: checksums recomputed)
# --------------------------------------------------------------------------- #


def split(data: bytes):
    """``(header dict, payload bytes, version)`` of a model file's bytes."""
    start = len(MAGIC)
    (n,) = struct.unpack("<Q", data[start : start + 8])
    header = json.loads(data[start + 8 : start + 8 + n])
    rest = data[start + 8 + n :]
    if header["format_version"] >= 2:
        rest = rest[32:]
    return header, rest, header["format_version"]


def forge(header: dict, payload: bytes, version: int | None = None) -> bytes:
    """A file with this header and payload and every checksum made valid, at
    ``version``'s layout (default: the version the header states)."""
    if version is None:
        version = header["format_version"]
    header = dict(header, format_version=version)
    header["payload_nbytes"] = len(payload)
    header["payload_sha256"] = hashlib.sha256(payload).hexdigest()
    blob = json.dumps(header).encode()
    head = MAGIC + struct.pack("<Q", len(blob)) + blob
    digest = hashlib.sha256(head).digest() if version >= 2 else b""
    return head + digest + payload


def npy_records(payload: bytes, n: int) -> list[np.ndarray]:
    f = io.BytesIO(payload)
    return [np.load(f, allow_pickle=False) for _ in range(n)]


def npy_payload(arrays) -> bytes:
    buf = io.BytesIO()
    for a in arrays:
        np.lib.format.write_array(buf, np.asarray(a), allow_pickle=False)
    return buf.getvalue()


def same(a, b) -> bool:
    """Same tree, dtypes and values (NaN equal to NaN), compared in numpy (an
    eager jnp comparison compiles programs for every leaf's shape)."""
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        x.dtype == y.dtype
        and np.array_equal(np.asarray(x), np.asarray(y), equal_nan=True)
        for x, y in zip(la, lb, strict=True)
    )


@pytest.fixture(scope="module")
def esn():
    model, R = orc.forecaster.train_RCForecaster(
        orc.forecaster.ESNForecaster(3, 50, seed=2), U
    )
    return model, np.asarray(R)[-1]


@pytest.fixture()
def saved(tmp_path, esn):
    model, _ = esn
    path = orc.save(tmp_path / "m.orc", model)
    return path, model


def leaf_number(header, *fields):
    node = header["tree"]
    for f in fields:
        node = node["fields"][f]
    return node["leaf"]


@pytest.fixture()
def quiet_world(tmp_path, monkeypatch, capfd):
    """Run in an empty directory; afterwards assert that nothing printed the
    Zen of Python or anything but a one-line CLI error, no file was created
    and no side-effect module was imported."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    before = {m for m in SIDE_EFFECT_MODULES if m in sys.modules}
    yield work
    out, err = capfd.readouterr()
    assert "Zen of Python" not in out + err
    assert all(line.startswith("orc: error: ") for line in err.splitlines()), err
    assert list(work.iterdir()) == []
    imported = {m for m in SIDE_EFFECT_MODULES if m in sys.modules} - before
    assert not imported, f"loading imported {imported}"


# --------------------------------------------------------------------------- #
# Crafted files from the issue
# --------------------------------------------------------------------------- #


def test_main_module_class_is_refused(saved, quiet_world):
    path, _ = saved
    header, payload, _ = split(path.read_bytes())
    header["model_class"] = "venv.__main__:X"
    header["tree"]["module"] = "venv.__main__:X"
    path.write_bytes(forge(header, payload))
    with pytest.raises(
        ModelFileError, match=r"venv\.__main__:X.*not in orc's allowlist"
    ):
        orc.load(path)
    assert not (quiet_world / ".venv").exists()


def test_import_with_output_is_refused(saved, quiet_world):
    path, _ = saved
    header, payload, _ = split(path.read_bytes())
    header["tree"]["fields"]["readout"]["module"] = "this:x"
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match=r"model\.readout.*'this:x'"):
        orc.load(path)


def test_partial_of_a_profiler_is_refused(saved, quiet_world, tmp_path):
    """A readout leaf replaced by ``equinox.Partial(cProfile.run, <command>)``."""
    path, _ = saved
    marker = tmp_path / "pwned"
    header, payload, _ = split(path.read_bytes())
    header["tree"]["fields"]["readout"]["fields"]["wout"] = {
        "module": "equinox:Partial",
        "fields": {
            "func": {"function": "cProfile:run"},
            "args": {"tuple": [f"open({str(marker)!r}, 'w').write('x')"]},
            "keywords": {"dict": {}},
        },
    }
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match=r"model\.readout\.wout.*equinox:Partial"):
        orc.load(path)
    # the same through the CLI: refused with exit code 2, nothing run
    from orc.cli import main

    assert main(["forecast", str(path), "--steps", "5"]) == 2
    assert not marker.exists()


def test_function_names_outside_the_allowlist(tmp_path, quiet_world):
    model = orc.forecaster.RCForecasterBase(
        driver=orc.drivers.ESNDriver(20, seed=1),
        readout=orc.readouts.NonlinearReadout(3, 20, [jnp.tanh]),
        embedding=orc.embeddings.LinearEmbedding(3, 20, 0.1, seed=2),
    )
    path = orc.save(tmp_path / "f.orc", model)
    header, payload, _ = split(path.read_bytes())
    fn = header["tree"]["fields"]["readout"]["fields"]["nonlin_list"]["tuple"]
    assert fn == [{"function": "jax.numpy.tanh"}]
    for name in ("os:system", "builtins.eval", "subprocess.Popen", "webbrowser:open"):
        fn[0] = {"function": name}
        path.write_bytes(forge(header, payload))
        with pytest.raises(ModelFileError, match=r"nonlin_list\[0\].*not in orc's"):
            orc.load(path)
    # a registered class where a function belongs
    fn[0] = {"function": "orc.drivers.ESNDriver"}
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match="is not a function"):
        orc.load(path)


@pytest.mark.parametrize("bad", [50, 51, 2**30, -1])
def test_out_of_range_indices_are_refused_at_load(saved, bad):
    path, model = saved
    header, payload, _ = split(path.read_bytes())
    i = leaf_number(header, "driver", "wr", "columns")
    arrays = npy_records(payload, len(header["leaves"]))
    arrays[i] = arrays[i].copy()
    arrays[i][0, 7, 0] = bad
    path.write_bytes(forge(header, npy_payload(arrays)))
    with pytest.raises(ModelFileError, match=r"model\.driver\.wr.*\[0, 50\)"):
        orc.load(path)
    # a file of format version 1 (no header checksum) is checked too
    header, payload, _ = split((DATA / "model_v1_esn.orc").read_bytes())
    i = leaf_number(header, "driver", "wr", "indices")
    arrays = npy_records(payload, len(header["leaves"]))
    n = header["hyperparameters"]["res_dim"]
    arrays[i] = arrays[i].copy()
    arrays[i].reshape(-1)[7] = bad - 50 + n  # the same distance past the end
    path.write_bytes(forge(header, npy_payload(arrays), version=1))
    with pytest.raises(ModelFileError, match=rf"model\.driver\.wr.*\[0, {n}\)"):
        orc.load(path)


def test_huge_shape_is_refused_before_allocating(saved):
    path, _ = saved
    header, payload, _ = split(path.read_bytes())
    i = leaf_number(header, "readout", "wout")
    header["leaves"][i]["shape"] = [1, 3, 100_000_000_000]
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match="declares .* bytes of arrays"):
        orc.load(path)
    header["leaves"][i]["shape"] = [1, 3, 1e11]
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match=r"leaves\[\d+\]: shape must be"):
        orc.load(path)


@pytest.mark.parametrize(
    "field, value, message",
    [
        (("driver", "mode"), "sideways", "mode must be"),
        (("driver", "density"), 0.5, "wr.values must have shape"),
        (("embedding", "locality"), 2, "win must have shape"),
        (("embedding", "chunk_size"), 1, "chunk_size must be 3"),
        (("data_dim",), 4, r"data_dim \(4\) must equal the input size 3"),
        (
            ("readout", "nonlin_list"),
            {"tuple": [{"function": "jax.numpy.sin"}, 3]},
            "callables",
        ),
        (("driver", "dtype"), {"dtype": "float32"}, "dtype float32"),
        (("driver", "res_dim"), {"leaf": 0}, "static field cannot hold an array"),
        (("readout",), {"module": "orc.drivers.ESNDriver", "fields": {}}, "has fields"),
    ],
)
def test_edited_fields_are_refused(saved, field, value, message):
    path, _ = saved
    header, payload, _ = split(path.read_bytes())
    node = header["tree"]
    for f in field[:-1]:
        node = node["fields"][f]
    node["fields"][field[-1]] = value
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match=message):
        orc.load(path)


def test_edited_summary_and_unchecksummed_header(saved):
    path, _ = saved
    data = path.read_bytes()
    header, payload, _ = split(data)
    header["hyperparameters"]["res_dim"] = 51
    path.write_bytes(forge(header, payload))
    with pytest.raises(ModelFileError, match=r"hyperparameters\['res_dim'\] is 51"):
        orc.load(path)
    # an edit without a new checksum: refused whatever it changed
    text = data.replace(b'"locality": 0', b'"locality": 1')
    assert text != data
    path.write_bytes(text)
    with pytest.raises(ModelFileError, match="header checksum mismatch"):
        orc.load(path)


# --------------------------------------------------------------------------- #
# Old files and registered user types
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize(
    "name", ["esn", "parallel", "cesn", "custom_f32", "classifier", "controller"]
)
def test_format_1_files_still_load(name):
    path = DATA / f"model_v1_{name}.orc"
    assert orc.io.read_header(path)["format_version"] == 1
    model, extras = orc.load(path, return_extras=True)
    r = extras["last_state"]
    t = np.arange(400.0) * 0.05
    if name == "cesn":
        y = model.forecast(t[:10], r)
    elif name == "classifier":
        seqs = np.stack([U[i : i + 30] * (1 + (i % 3)) for i in range(0, 300, 20)])
        y = model.classify(seqs[0])
    elif name == "controller":
        y = model.apply_control(np.ones((10, 1)), r)
    else:
        y = model.forecast(10, r)
    # the file loads to the same model; its outputs are those recorded when
    # the file was written, to rounding (forecasting's own arithmetic may be
    # reordered between versions, e.g. the embedding's product; an adaptive
    # ODE solver's step control amplifies that to ~1e-11)
    np.testing.assert_allclose(
        np.asarray(y),
        np.load(DATA / "model_v1_expected.npz")[name],
        rtol=1e-9,
        atol=1e-10,
    )


def test_current_files_are_format_3(saved):
    path, model = saved
    header = orc.io.read_header(path)
    assert header["format_version"] == orc.io.FORMAT_VERSION == 3
    assert header["model_class"] == "orc.forecaster.ESNForecaster"
    assert same(orc.load(path), model)


class CubeDriver(orc.drivers.DriverBase):
    """An ORC-style custom driver defined in user code."""

    scale: jax.Array

    def __init__(self, res_dim):
        super().__init__(res_dim)
        self.scale = jnp.asarray(0.5)

    def advance(self, proj_vars, res_state):
        return jnp.tanh(self.scale * res_state**3 + proj_vars)


def cube(x):
    return x**3


def test_user_types_load_only_when_allowed(tmp_path, quiet_world):
    model = orc.forecaster.RCForecasterBase(
        driver=CubeDriver(10),
        readout=orc.readouts.NonlinearReadout(3, 10, [cube]),
        embedding=orc.embeddings.LinearEmbedding(3, 10, 0.1, seed=2),
    )
    path = orc.save(tmp_path / "u.orc", model)
    with pytest.raises(ModelFileError, match=r"test_io_safety\.CubeDriver.*register"):
        orc.load(path)
    with pytest.raises(ModelFileError, match=r"test_io_safety\.cube"):
        orc.load(path, allow=[CubeDriver])
    loaded = orc.load(path, allow=[CubeDriver, cube])
    assert loaded.readout.nonlin_list == (cube,)
    for a, b in zip(jax.tree.leaves(loaded), jax.tree.leaves(model), strict=True):
        np.testing.assert_array_equal(a, b)
    r = np.full((10,), 0.1)
    np.testing.assert_array_equal(loaded.forecast(5, r), model.forecast(5, r))
    # registration is explicit and checked
    with pytest.raises(TypeError, match="module-level name"):
        orc.io.register(lambda x: x)
    with pytest.raises(ValueError, match="already registered"):
        orc.io.register(cube, name="orc.drivers.ESNDriver")
    assert orc.io.registered()["jax.numpy.tanh"] is jnp.tanh


# --------------------------------------------------------------------------- #
# Saving like a careful tool
# --------------------------------------------------------------------------- #


@pytest.fixture()
def umask():
    old = os.umask(0o022)
    yield lambda mask: os.umask(mask)
    os.umask(old)


def test_file_mode_follows_umask_or_the_replaced_file(tmp_path, esn, umask):
    model, _ = esn
    umask(0o022)
    assert stat.S_IMODE(orc.save(tmp_path / "a.orc", model).stat().st_mode) == 0o644
    umask(0o077)
    assert stat.S_IMODE(orc.save(tmp_path / "b.orc", model).stat().st_mode) == 0o600
    target = tmp_path / "c.orc"
    target.write_bytes(b"old")
    target.chmod(0o640)
    umask(0o022)
    orc.save(target, model)
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert same(orc.load(target), model)


def test_saving_to_a_symlink_writes_its_target(tmp_path, esn):
    model, _ = esn
    real = tmp_path / "models" / "real.orc"
    real.parent.mkdir()
    real.write_bytes(b"old")
    link = tmp_path / "link.orc"
    link.symlink_to(real)
    orc.save(link, model)
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert same(orc.load(real), model)
    assert sorted(p.name for p in real.parent.iterdir()) == ["real.orc"]


def test_failed_save_leaves_the_old_file_and_no_temporary(tmp_path, esn, monkeypatch):
    model, _ = esn
    path = orc.save(tmp_path / "m.orc", model)
    before = path.read_bytes()

    def broken(_fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="No space left"):
        orc.save(path, orc.forecaster.ESNForecaster(3, 20, seed=9))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.orc"]


def test_temporary_of_a_killed_save_is_swept(tmp_path, esn):
    """A save killed with SIGKILL between writing and renaming leaves its
    temporary; the next save into the directory removes it, not a live one's."""
    model, _ = esn
    script = textwrap.dedent(
        f"""
        import os, signal, jax
        jax.config.update("jax_enable_x64", True)
        import orc
        os.replace = lambda *a: os.kill(os.getpid(), signal.SIGKILL)
        orc.save({str(tmp_path / "big.orc")!r}, orc.forecaster.ESNForecaster(3, 200))
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd="/", capture_output=True)
    assert proc.returncode == -signal.SIGKILL
    left = [p for p in tmp_path.iterdir() if p.name.endswith(".orc-partial")]
    assert len(left) == 1 and left[0].name.startswith(".big.orc.")
    live = tmp_path / f".x.orc.{orc.io._HOST}-{os.getpid()}.0123abcd.orc-partial"
    live.write_bytes(b"in progress")
    old_v1 = tmp_path / ".y.orc.k3j4h5g6.tmp"
    old_v1.write_bytes(b"left by format 1")
    os.utime(old_v1, (0, 0))
    orc.save(tmp_path / "other.orc", model)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == sorted([live.name, "other.orc"])


# --------------------------------------------------------------------------- #
# Fuzzing
# --------------------------------------------------------------------------- #

FUZZ_CASES = int(os.environ.get("ORC_FUZZ_CASES", "300"))
_BAD_NAMES = [
    "os:system",
    "os.system",
    "subprocess.Popen",
    "builtins.eval",
    "builtins:exec",
    "this:x",
    "venv.__main__:X",
    "cProfile:run",
    "equinox:Partial",
    "equinox.Partial",
    "jax.tree_util.Partial",
    "orc.io.save",
    "orc.drivers.DriverBase",
    "orc.forecaster.ESNForecaster",
    "orc.drivers.GRUDriver",
    "jax.numpy.sin",
    "",
]


def _nodes(node, path=()):
    yield path, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _nodes(v, (*path, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _nodes(v, (*path, i))


def _set(root, path, value):
    node = root
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


def _mutation(rng: random.Random, value):
    if isinstance(value, bool):
        return rng.choice([not value, 0, None, "true"])
    if isinstance(value, int):
        return rng.choice([value + 1, value - 1, 0, -1, 2**31, 2**63, 10**12, 1.5, "1"])
    if isinstance(value, float):
        return rng.choice([value * 2, -value, 0.0, 1e308, "nan", None])
    if isinstance(value, str):
        return rng.choice([*_BAD_NAMES, value + "x", value.upper(), 1])
    if isinstance(value, list):
        return rng.choice([value[:-1], value + value[-1:], [], None])
    if isinstance(value, dict):
        keys = list(value)
        if keys and rng.random() < 0.5:
            return {k: v for k, v in value.items() if k != rng.choice(keys)}
        return dict(value, extra=rng.choice([1, "x", {"leaf": 0}]))
    return rng.choice([0, "x", [], {}])


def _outcome(data: bytes, tmp: Path, reference=None):
    path = tmp / "fuzz.orc"
    path.write_bytes(data)
    try:
        model = orc.load(path)
    except ModelFileError:
        return "refused", None
    if reference is not None and same(model, reference):
        return "identical", model
    return "loaded", model


def test_fuzz_model_files(tmp_path, quiet_world):
    """Bit flips (header and payload), truncations, edited header fields,
    crafted names, out-of-range indices and huge shapes: every case ends in
    ModelFileError or an identical model (corruptions), or ModelFileError or a
    model that passes every check and forecasts (edits with valid checksums).
    ``ORC_FUZZ_CASES`` sets the number of cases (default 300)."""
    rng = random.Random(20261123)
    model = orc.forecaster.ESNForecaster(6, 16, chunks=2, locality=1, seed=3)
    model, R = orc.forecaster.train_RCForecaster(model, np.concatenate([U, -U], 1))
    r_last = np.asarray(R)[-1]
    data = orc.save(tmp_path / "ref.orc", model).read_bytes()
    header, payload, _ = split(data)
    head_end = len(data) - len(payload)
    counts: dict[str, int] = {}

    def record(kind, result):
        counts[f"{kind}:{result}"] = counts.get(f"{kind}:{result}", 0) + 1

    for case in range(FUZZ_CASES):
        kind = ("flip_header", "flip_payload", "truncate", "edit", "payload_edit")[
            case % 5
        ]
        if kind.startswith("flip"):
            lo, hi = (0, head_end) if kind == "flip_header" else (head_end, len(data))
            pos = rng.randrange(lo, hi)
            mutated = bytearray(data)
            mutated[pos] ^= 1 << rng.randrange(8)
            result, loaded = _outcome(bytes(mutated), tmp_path, model)
            assert result in ("refused", "identical"), (kind, pos)
        elif kind == "truncate":
            result, _ = _outcome(data[: rng.randrange(len(data))], tmp_path, model)
            assert result == "refused"
        elif kind == "edit":
            h = json.loads(json.dumps(header))
            for _ in range(rng.choice([1, 1, 2, 3])):
                nodes = list(_nodes(h))
                path, value = rng.choice(nodes[1:])
                _set(h, path, _mutation(rng, value))
            result, loaded = _outcome(forge(h, payload), tmp_path, model)
            if result == "loaded":  # a different but valid model: it must run
                out = loaded.forecast(5, np.zeros(loaded.driver.default_state().shape))
                assert out.shape == (5, loaded.out_dim)
        else:
            arrays = npy_records(payload, len(header["leaves"]))
            i = rng.randrange(len(arrays))
            a = arrays[i].copy()
            if a.size:
                flat = a.reshape(-1)
                j = rng.randrange(flat.size)
                if np.issubdtype(a.dtype, np.integer):
                    flat[j] = rng.choice([-1, 16, 17, 2**30, -(2**31)])
                else:
                    flat[j] = rng.choice([np.nan, np.inf, 1e300, -flat[j]])
            arrays[i] = a
            result, loaded = _outcome(
                forge(header, npy_payload(arrays)), tmp_path, model
            )
            # out-of-range indices and non-finite weights never load
            if a.size and (
                np.issubdtype(a.dtype, np.integer) or not np.isfinite(flat[j])
            ):
                assert result == "refused", (i, flat[j])
            if result == "loaded":
                out = loaded.forecast(5, r_last)
                assert out.shape == (5, 6)
        record(kind, result)
    print(f"fuzz: {FUZZ_CASES} cases: {dict(sorted(counts.items()))}")
    assert sum(counts.values()) == FUZZ_CASES


@pytest.mark.skipif(
    not orc._native.native_available() or jax.default_backend() != "cpu",
    reason="the native kernels run on CPU (built without them, or another device)",
)
def test_native_forecasts_leave_the_index_check_to_their_kernels():
    """The native kernels refuse an out-of-range column themselves (below), so
    a CPU forecast that runs them holds no XLA pass over the indices (~60 us
    of a short forecast at res_dim 2000); the XLA path's program does."""
    m = orc.forecaster.ESNForecaster(3, 50, seed=1)
    r = np.zeros((1, 50), m.dtype)  # numpy: no eager program

    def columns_used_outside_kernels(backend):
        fn = jax.jit(lambda m, s: m._forecast(5, s, backend=backend))
        text = fn.lower(m, r).compile().as_text()
        entry_text = text[text.index("ENTRY") :]
        name = re.search(r"%(\S*columns\S*) = s32\[[^\n]*parameter", entry_text)[1]
        uses = [
            line
            for line in entry_text.splitlines()
            if f"%{name}" in line and "parameter(" not in line
        ]
        assert uses, entry_text
        return [line for line in uses if "custom-call" not in line]

    assert columns_used_outside_kernels("native") == []
    assert columns_used_outside_kernels("xla")


def test_native_and_xla_paths_refuse_out_of_range_indices():
    """Defence in depth: a matrix edited in memory (bypassing the checks) is
    refused by the native kernels and by the XLA reference alike (in a
    process of its own: a kernel that read out of bounds could crash it)."""
    script = textwrap.dedent(
        """
        import equinox as eqx, jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        import orc
        # any data (no ODE solve to compile): the indices are what is refused
        U = np.sin(np.linspace(0, 60, 1000)[:, None] * np.array([1.0, 0.5, -0.7]))
        for orc_backend in ("native", "xla"):
            for n, bad in ((50, 51), (700, 2**30), (700, -3)):
                m = orc.forecaster.ESNForecaster(3, n, seed=1)
                idx = m.driver.wr.columns.at[0, 0, 0].set(bad)
                m = eqx.tree_at(lambda m: m.driver.wr.columns, m, idx)
                for fn in (lambda: orc.forecaster.train_RCForecaster(m, U)[0].readout.wout,
                           lambda: m.forecast(20, jnp.zeros((1, n)))):
                    try:
                        with orc.use_backend(orc_backend):
                            jax.block_until_ready(fn())
                        print(orc_backend, "COMPUTED")
                    except Exception as e:
                        refused = "outside [0, res_dim)" in str(e)
                        print(orc_backend, "REFUSED" if refused else repr(e))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    expected = [f"{b} REFUSED" for b in ("native",) * 6 + ("xla",) * 6]
    assert lines == expected, (proc.stdout, proc.stderr[-1500:])


@pytest.mark.skipif(
    not orc._native.native_available() or jax.default_backend() != "cpu",
    reason="the native kernels run on CPU (built without them, or another device)",
)
@pytest.mark.parametrize("bad", [6, 2**30, -1])
def test_native_forecasts_refuse_a_window_outside_the_output(bad):
    """A closed loop feeds the entries ``window`` names of each output row
    back as the next input; an entry outside the row (``chunks * out_dim``
    values) is refused by the one-loop and the batched kernel alike, before
    either reads it (the ESN models always build windows inside the row)."""
    from orc._kernels import _native_forecast, _native_forecasts

    rng = np.random.default_rng(0)
    c, n, k, w, o = 2, 8, 3, 2, 3  # output row: c * o = 6 values
    values = jnp.asarray(rng.uniform(-0.3, 0.3, (c, n, k)), jnp.float32)
    indices = jnp.asarray(rng.integers(0, n, (c, n, k)), jnp.int32)
    win = jnp.asarray(rng.uniform(-1, 1, (c, n, w)), jnp.float32)
    wout = jnp.asarray(rng.uniform(-1, 1, (c, o, n)), jnp.float32)
    bias, leak = jnp.float32(0.1), jnp.float32(0.6)
    good = jnp.asarray([[0, 1], [3, 5]], jnp.int32)
    r0 = jnp.zeros((c, n), jnp.float32)
    ok = _native_forecast(values, indices, win, good, bias, wout, r0, leak, 4)
    assert ok.shape == (4, c * o) and bool(jnp.all(jnp.isfinite(ok)))
    window = good.at[1, 0].set(bad)
    with pytest.raises(Exception, match="esn_forecast: window index outside"):
        jax.block_until_ready(
            _native_forecast(values, indices, win, window, bias, wout, r0, leak, 4)
        )
    with pytest.raises(Exception, match="esn_forecast_batch: window index outside"):
        jax.block_until_ready(
            _native_forecasts(
                values, indices, win, window, bias, wout[None], r0[None], leak, 4
            )
        )
