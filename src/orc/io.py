"""Saving and loading models: ``orc.save(path, model)`` and ``orc.load(path)``.

A model file is one file:

1. the magic line ``ORC-MODEL\\n``;
2. an 8-byte little-endian length and a UTF-8 JSON header: format version,
   library version, the model's class, a readable summary of its
   hyperparameters, the structure of the model (every Equinox module with its
   class and fields: plain values inline, arrays as numbered leaves, nested
   modules recursively, functions by their import path), the shape and dtype
   of every leaf, and the SHA-256 and size of the payload;
3. the payload: the array leaves in Equinox's leaf serialisation
   (``eqx.tree_serialise_leaves``).

Loading rebuilds the same classes with the same fields without calling their
constructors (so no random draws or eigen-solves), then reads the leaves into
them: a round trip is bit-exact, for every model family and for custom
subclasses whose fields are arrays, plain data, Equinox modules or importable
functions (a lambda is refused at save time). Truncated or corrupted files,
unknown format versions and class mismatches are refused with an error that
says which. Saving writes a temporary file next to the target and renames it,
so an existing file is never left half-written.

Only load files you trust: loading imports the modules named in the header.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import io
import json
import os
import struct
import tempfile
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["save", "load", "read_header", "ModelFileError", "FORMAT_VERSION"]

MAGIC = b"ORC-MODEL\n"
FORMAT_VERSION = 1
"""Version of the model-file layout written by :func:`save`; :func:`load` refuses others."""
_SUMMARY_FIELDS = (
    "in_dim",
    "out_dim",
    "res_dim",
    "data_dim",
    "chunks",
    "n_classes",
    "control_dim",
    "state_repr",
    "seed",
)


class ModelFileError(ValueError):
    """A model file that cannot be loaded (truncated, corrupted, wrong version or class)."""


def _path_of(obj) -> str:
    return f"{obj.__module__}:{obj.__qualname__}"


def _import(path: str):
    module, _, qualname = path.partition(":")
    try:
        obj = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as err:
        raise ModelFileError(
            f"cannot import {path!r} named in the model file: {err}"
        ) from err
    return obj


def _encode(value, leaves: list, where: str):
    if isinstance(value, (jax.Array, np.ndarray)) and not isinstance(
        value, jax.core.Tracer
    ):
        leaves.append(value)
        return {"leaf": len(leaves) - 1}
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"orc.save: {where} is traced; save models outside jax.jit")
    if value is None or isinstance(value, (bool, int, float, str)):
        if isinstance(value, float) and not np.isfinite(value):
            return {"float": repr(value)}
        return value
    if isinstance(value, (np.dtype, type)) and _is_dtype(value):
        return {"dtype": str(jnp.dtype(value))}
    if isinstance(value, eqx.Module):
        cls = type(value)
        fields = {
            f.name: _encode(getattr(value, f.name), leaves, f"{where}.{f.name}")
            for f in dataclasses.fields(value)
        }
        return {"module": _path_of(cls), "fields": fields}
    if isinstance(value, (tuple, list)):
        kind = "tuple" if isinstance(value, tuple) else "list"
        return {
            kind: [_encode(v, leaves, f"{where}[{i}]") for i, v in enumerate(value)]
        }
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"orc.save: {where} is a dict with non-string keys")
        return {
            "dict": {k: _encode(v, leaves, f"{where}[{k!r}]") for k, v in value.items()}
        }
    if callable(value):
        path = _path_of(value) if hasattr(value, "__qualname__") else None
        if path is None or "<lambda>" in path or "<locals>" in path:
            raise TypeError(
                f"orc.save: {where} is {value!r}, which cannot be saved by reference; use a "
                "function defined at module level (e.g. jnp.square, not lambda x: x**2)"
            )
        try:
            same = _import(path) is value
        except ModelFileError:
            same = False
        if not same:
            raise TypeError(
                f"orc.save: {where} ({value!r}) is not importable as {path}"
            )
        return {"function": path}
    raise TypeError(
        f"orc.save: {where} has type {type(value).__name__}, which cannot be saved"
    )


def _is_dtype(value) -> bool:
    try:
        jnp.dtype(value)
        return True
    except TypeError:
        return False


def _decode(node, leaves):
    if not isinstance(node, dict):
        return node
    if "leaf" in node:
        return leaves[node["leaf"]]
    if "float" in node:
        return float(node["float"])
    if "dtype" in node:
        return jnp.dtype(node["dtype"])
    if "tuple" in node:
        return tuple(_decode(v, leaves) for v in node["tuple"])
    if "list" in node:
        return [_decode(v, leaves) for v in node["list"]]
    if "dict" in node:
        return {k: _decode(v, leaves) for k, v in node["dict"].items()}
    if "function" in node:
        return _import(node["function"])
    if "module" in node:
        cls = _import(node["module"])
        if not (isinstance(cls, type) and issubclass(cls, eqx.Module)):
            raise ModelFileError(
                f"{node['module']} in the model file is not an Equinox module"
            )
        expected = {f.name for f in dataclasses.fields(cls)}
        stored = set(node["fields"])
        if expected != stored:
            raise ModelFileError(
                f"{node['module']}: the installed class has fields {sorted(expected)} but the "
                f"file stores {sorted(stored)}; it was written by an incompatible version"
            )
        obj = object.__new__(cls)
        for name, value in node["fields"].items():
            object.__setattr__(obj, name, _decode(value, leaves))
        return obj
    raise ModelFileError(f"unrecognised entry in the model file: {sorted(node)}")


def _summary(model) -> dict:
    out = {"class": type(model).__name__}
    for name in _SUMMARY_FIELDS:
        if hasattr(model, name):
            value = getattr(model, name)
            if value is None or isinstance(value, (bool, int, float, str)):
                out[name] = value
    if hasattr(model, "dtype"):
        out["dtype"] = str(jnp.dtype(model.dtype))
    return out


def save(path, model, extras: dict | None = None) -> Path:
    """Write ``model`` (any Equinox module, e.g. a trained orc model) to ``path``.

    ``extras`` optionally stores named arrays with the model, e.g. the last
    training state to forecast from (``orc.load(path, return_extras=True)``
    gives them back). The file is written next to ``path`` under a temporary
    name and renamed over it, so an existing file is replaced only by a
    complete one.

    Returns the path written. Example: ``orc.save("esn.orc", esn)``.
    """
    from . import __version__

    if not isinstance(model, eqx.Module):
        raise TypeError(
            f"orc.save: model must be an Equinox module, got {type(model).__name__}"
        )
    path = Path(path)
    leaves: list = []
    tree = _encode(model, leaves, type(model).__name__)
    extra_index = {}
    for name, value in (extras or {}).items():
        if not isinstance(value, (jax.Array, np.ndarray)):
            raise TypeError(f"orc.save: extras[{name!r}] must be an array")
        extra_index[str(name)] = _encode(value, leaves, f"extras[{name!r}]")["leaf"]
    arrays = [np.asarray(x) for x in leaves]
    buf = io.BytesIO()
    eqx.tree_serialise_leaves(buf, arrays)
    payload = buf.getvalue()
    header = {
        "format": "orc-model",
        "format_version": FORMAT_VERSION,
        "orc_version": __version__,
        "jax_version": jax.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model_class": _path_of(type(model)),
        "hyperparameters": _summary(model),
        "tree": tree,
        "extras": extra_index,
        "leaves": [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in arrays],
        "payload_nbytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    blob = json.dumps(header, indent=1).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(MAGIC)
            f.write(struct.pack("<Q", len(blob)))
            f.write(blob)
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def _read(path):
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"orc.load: no such file: {path}")
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ModelFileError(
            f"orc.load: {path} is not an orc model file (bad magic bytes)"
        )
    start = len(MAGIC)
    if len(data) < start + 8:
        raise ModelFileError(f"orc.load: {path} is truncated (no header)")
    (n,) = struct.unpack("<Q", data[start : start + 8])
    if len(data) < start + 8 + n:
        raise ModelFileError(f"orc.load: {path} is truncated (header incomplete)")
    try:
        header = json.loads(data[start + 8 : start + 8 + n])
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ModelFileError(f"orc.load: {path} has a corrupted header: {err}") from err
    return path, header, data[start + 8 + n :]


def read_header(path) -> dict:
    """The JSON header of a model file (class, versions, hyperparameters), without loading it."""
    return _read(path)[1]


def load(path, cls: type | None = None, return_extras: bool = False):
    """Read a model written by :func:`save`.

    Parameters
    ----------
    path : str or Path
    cls : class or tuple of classes, optional
        Refuse the file unless it holds an instance of ``cls`` (or a subclass).
    return_extras : bool, default False
        Return ``(model, extras)`` with the named arrays saved alongside.

    Raises
    ------
    FileNotFoundError, or ModelFileError (a ``ValueError``) for a file that is
    not a model file, truncated, corrupted (checksum), of an unknown format
    version, or of the wrong class.
    """
    path, header, payload = _read(path)
    version = header.get("format_version")
    if header.get("format") != "orc-model" or version != FORMAT_VERSION:
        raise ModelFileError(
            f"orc.load: {path} has format version {version!r}; this orc reads version "
            f"{FORMAT_VERSION} (upgrade orc to read newer files)"
        )
    if len(payload) < header["payload_nbytes"]:
        raise ModelFileError(
            f"orc.load: {path} is truncated: {len(payload)} of {header['payload_nbytes']} "
            "payload bytes"
        )
    if len(payload) > header["payload_nbytes"] or (
        hashlib.sha256(payload).hexdigest() != header["payload_sha256"]
    ):
        raise ModelFileError(
            f"orc.load: {path} is corrupted (payload checksum mismatch)"
        )
    if not jax.config.jax_enable_x64 and any(
        x["dtype"] == "float64" for x in header["leaves"]
    ):
        raise ModelFileError(
            f"orc.load: {path} holds a float64 model but jax_enable_x64 is off; enable it "
            "first (jax.config.update('jax_enable_x64', True)) to load it exactly"
        )
    model_cls = _import(header["model_class"])
    if cls is not None and not (
        isinstance(model_cls, type) and issubclass(model_cls, cls)
    ):
        raise ModelFileError(
            f"orc.load: {path} holds a {header['model_class']}, not a "
            + " or ".join(
                _path_of(c) for c in (cls if isinstance(cls, tuple) else (cls,))
            )
        )
    like = [jnp.zeros(tuple(x["shape"]), dtype=x["dtype"]) for x in header["leaves"]]
    arrays = eqx.tree_deserialise_leaves(io.BytesIO(payload), like)
    arrays = [jnp.asarray(a) for a in arrays]
    model = _decode(header["tree"], arrays)
    if type(model) is not model_cls:
        raise ModelFileError(
            f"orc.load: {path}: header and structure disagree on the class"
        )
    if return_extras:
        return model, {k: arrays[i] for k, i in header.get("extras", {}).items()}
    return model
