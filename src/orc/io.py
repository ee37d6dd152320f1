"""Saving and loading models: ``orc.save(path, model)`` and ``orc.load(path)``.

A model file is data, never code. Loading rebuilds only classes and functions
from an allowlist (:func:`registered`): orc's own model and component classes,
the diffrax/optimistix/lineax/``equinox.nn`` classes a model may hold (ODE
solvers, step-size controllers, root finders), and element-wise functions of
``jax.numpy`` and ``jax.nn`` (readout feature functions). Nothing named in a
file is imported, called or executed; a name outside the allowlist is a
:class:`ModelFileError` that names the field. Your own classes and functions
(an ORC-style custom driver, a feature function of your module) are allowed
by registering them in the calling code, ``orc.io.register(MyDriver)``, or
for one call, ``orc.load(path, allow=[MyDriver])``.

Layout (format version 3; version 2 had the same layout):

1. the magic line ``ORC-MODEL\\n``;
2. an 8-byte little-endian length and a UTF-8 JSON header: format version,
   library version, the model's class, a readable summary of its
   hyperparameters, the structure of the model (every Equinox module by its
   registered class name with its fields: plain values inline, arrays as
   numbered leaves, nested modules recursively, functions by registered
   name), the shape and dtype of every leaf, the SHA-256 and size of the
   payload, and (only when given to :func:`save`) ``metadata``, a dict of
   plain values (:func:`read_metadata`);
3. the SHA-256 of everything before it (magic, length and header);
4. the payload: each leaf in NumPy's ``.npy`` format, in order.

Loading opens only a regular file (a directory, FIFO, device or symbolic
link loop is refused as such, and nothing blocks) and reads only what the
header declares, each size checked against the file's own size before it is
read: the header (at most 16 MiB), then the payload, whose declared size must
be exactly what follows (trailing bytes are refused). It checks, before using
anything: both checksums, the header's schema (every entry of a known kind
and type), every leaf's declared size against the payload's byte count (no
allocation beyond what the file holds; an empty leaf's other axes bounded
alike), each ``.npy`` record against the declared shape and dtype, and then every rebuilt
module against its own invariants (the checks its constructor runs: shapes
against ``res_dim``/``chunks``/``data_dim``, dtypes, reservoir column indices
within bounds, ...), and the header's summary against the model. Every
failure is a :class:`ModelFileError` (a ``ValueError``) saying which field
and why. Files of format version 1 (orc 0.5 development versions) still load,
through the same checks (they carry no header checksum); a file is read by
the layout of the version it claims and refused where it does not match it
(a later file relabelled as version 1 or 2, which would skip its header
checksum or its migration: a checksum after a format-1 header, names not in
format 1's ``module:qualname`` form, fields only format 3 writes). Files of formats 1
and 2 predate the bank axis (see ``orc._bank``): their single-reservoir
components are read as banks of one (a leading axis of length 1 on ``wr``,
``win`` and ``wout``, ``chunks`` 1, ``single`` set) and a reservoir
matrix's column array, then called ``indices``, is read as ``columns``.

A round trip is bit-exact, for every model family and for registered custom
subclasses whose fields are arrays, plain data, Equinox modules or registered
functions (a lambda cannot be saved). Saving writes a temporary file next to
the target and renames it over the target, so an existing file is only ever
replaced by a complete one; temporaries left by a killed process are swept on
the next save into the same directory; the new file's permissions follow the
umask (or stay those of the file it replaces); saving to a symbolic link
writes the file it points to, unless the link lies in a world-writable sticky
directory and is owned by neither the user nor the directory's owner (the rule
of Linux's ``fs.protected_symlinks``); no directory is created for a link's
target.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import inspect
import io
import json
import math
import os
import re
import secrets
import socket
import stat
import struct
import time
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = [
    "save",
    "load",
    "read_header",
    "read_metadata",
    "register",
    "registered",
    "ModelFileError",
    "FORMAT_VERSION",
]

MAGIC = b"ORC-MODEL\n"
FORMAT_VERSION = 3
"""Version of the model-file layout written by :func:`save`; :func:`load` reads 1 and 2."""
_READABLE = (1, 2, 3)
_DIGEST = 32  # bytes of the header's SHA-256 (format 2)
_MAX_DEPTH = 64  # nesting of the model structure in a header
_MAX_NDIM = 32
# bytes of JSON header a file may declare (orc's are kilobytes; save refuses more)
_MAX_HEADER = 16 * 2**20
# an empty leaf may span this many elements along its other axes even when the
# payload could not hold them (beyond it, only as many as the payload could)
_MIN_EMPTY_EXTENT = 2**16
# bytes a leaf's .npy record may take besides its data (numpy writes 64 to a
# few hundred: the magic, the version and the padded header of its shape)
_NPY_RECORD_MAX = 4096
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
# dtypes a leaf may have (no object, string, void or datetime arrays)
_LEAF_DTYPES = {
    name: np.dtype(name)
    for name in (
        "bool",
        "int8",
        "int16",
        "int32",
        "int64",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "float16",
        "float32",
        "float64",
        "complex64",
        "complex128",
    )
}
# dtypes a static field may name (a component's ``dtype``)
_FIELD_DTYPES = ("float16", "bfloat16", "float32", "float64", "int32", "int64")


class ModelFileError(ValueError):
    """A model file that cannot be loaded: truncated, corrupted, of an unknown
    version, naming something outside the allowlist, or describing an
    inconsistent model. The message names the field and the reason."""


# --------------------------------------------------------------------------- #
# The allowlist
# --------------------------------------------------------------------------- #

# Element-wise functions a file may name (readout feature functions and the
# like), by module.
_JNP_FUNCTIONS = (
    "abs absolute arccos arccosh arcsin arcsinh arctan arctanh cbrt ceil cos "
    "cosh exp exp2 expm1 fabs floor log log10 log1p log2 negative positive "
    "reciprocal rint sign sin sinc sinh sqrt square tan tanh"
).split()
_JAX_NN_FUNCTIONS = (
    "celu elu gelu glu hard_sigmoid hard_silu hard_swish hard_tanh leaky_relu "
    "log_sigmoid mish relu relu6 selu sigmoid silu soft_sign softplus sparse_plus "
    "sparse_sigmoid squareplus swish tanh"
).split()
_OPTX_FUNCTIONS = ("rms_norm", "max_norm", "two_norm")
# The orc modules whose classes a model may hold, in the order their public
# names are taken (a class re-exported by several gets the first).
_ORC_MODULES = (
    "orc.forecaster",
    "orc.classifier",
    "orc.control",
    "orc.regression",
    "orc.drivers",
    "orc.embeddings",
    "orc.readouts",
    "orc.online",
    "orc.conceptors",
    "orc._matrix",
    "orc._ridge",
    "orc._training",
    "orc.forecaster.base",
    "orc.forecaster.models",
    "orc.forecaster.nvar",
    "orc.forecaster.hybrid",
    "orc.classifier.base",
    "orc.classifier.models",
    "orc.control.base",
    "orc.control.models",
)
# Where format-1 files named orc's classes (``module:qualname`` at the time):
# kept as data so that moving a class never breaks an old file.
_V1_ORC_NAMES = {
    "orc._matrix:ReservoirMatrix": "orc.drivers.ReservoirMatrix",
    "orc.classifier.models:ESNClassifier": "orc.classifier.ESNClassifier",
    "orc.classifier.base:RCClassifierBase": "orc.classifier.RCClassifierBase",
    "orc.control.models:ESNController": "orc.control.ESNController",
    "orc.control.base:RCControllerBase": "orc.control.RCControllerBase",
    "orc.drivers:ESNDriver": "orc.drivers.ESNDriver",
    "orc.drivers:ParallelESNDriver": "orc.drivers.ParallelESNDriver",
    "orc.drivers:TaylorDriver": "orc.drivers.TaylorDriver",
    "orc.drivers:ParallelTaylorDriver": "orc.drivers.ParallelTaylorDriver",
    "orc.drivers:GRUDriver": "orc.drivers.GRUDriver",
    "orc.drivers:StackedDriver": "orc.drivers.StackedDriver",
    "orc.drivers:DeepESNDriver": "orc.drivers.DeepESNDriver",
    "orc.embeddings:LinearEmbedding": "orc.embeddings.LinearEmbedding",
    "orc.embeddings:ParallelLinearEmbedding": "orc.embeddings.ParallelLinearEmbedding",
    "orc.embeddings:EnsembleLinearEmbedding": "orc.embeddings.EnsembleLinearEmbedding",
    "orc.forecaster.base:RCForecasterBase": "orc.forecaster.RCForecasterBase",
    "orc.forecaster.base:CRCForecasterBase": "orc.forecaster.CRCForecasterBase",
    "orc.forecaster.models:ESNForecaster": "orc.forecaster.ESNForecaster",
    "orc.forecaster.models:CESNForecaster": "orc.forecaster.CESNForecaster",
    "orc.forecaster.models:EnsembleESNForecaster": "orc.forecaster.EnsembleESNForecaster",
    "orc.forecaster.models:DeepESNForecaster": "orc.forecaster.DeepESNForecaster",
    "orc.forecaster.nvar:NVARForecaster": "orc.forecaster.NVARForecaster",
    "orc.readouts:LinearReadout": "orc.readouts.LinearReadout",
    "orc.readouts:ParallelLinearReadout": "orc.readouts.ParallelLinearReadout",
    "orc.readouts:NonlinearReadout": "orc.readouts.NonlinearReadout",
    "orc.readouts:ParallelNonlinearReadout": "orc.readouts.ParallelNonlinearReadout",
    "orc.readouts:QuadraticReadout": "orc.readouts.QuadraticReadout",
    "orc.readouts:ParallelQuadraticReadout": "orc.readouts.ParallelQuadraticReadout",
    "orc.readouts:EnsembleLinearReadout": "orc.readouts.EnsembleLinearReadout",
    "orc.regression:ESNRegressor": "orc.regression.ESNRegressor",
    "orc.regression:RCRegressorBase": "orc.regression.RCRegressorBase",
}


class _Registry:
    """Names <-> classes and functions, both ways (by identity)."""

    def __init__(self) -> None:
        self.by_name: dict[str, object] = {}
        self.name_of: dict[int, str] = {}
        self.keep: list = []  # keeps registered objects alive (ids stay valid)

    def add(self, obj, name: str, *aliases: str) -> None:
        for key in (name, *aliases):
            other = self.by_name.get(key)
            if other is not None and other is not obj:
                raise ValueError(
                    f"orc.io.register: the name {key!r} is already registered for "
                    f"{other!r}; pass another name="
                )
        for key in (name, *aliases):
            self.by_name[key] = obj
        self.name_of.setdefault(id(obj), name)
        self.keep.append(obj)

    def lookup(self, name: str):
        return self.by_name.get(name)


_REGISTRY: _Registry | None = None


def _default_name(obj) -> str | None:
    module, qualname = (
        getattr(obj, "__module__", None),
        getattr(obj, "__qualname__", None),
    )
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    if "<lambda>" in qualname or "<locals>" in qualname:
        return None
    return f"{module}.{qualname}"


def _v1_name(obj) -> str | None:
    """How format 1 wrote ``obj``: ``module:qualname``."""
    module, qualname = (
        getattr(obj, "__module__", None),
        getattr(obj, "__qualname__", None),
    )
    if isinstance(module, str) and isinstance(qualname, str):
        return f"{module}:{qualname}"
    return None


def _concrete_module_class(obj) -> bool:
    return (
        isinstance(obj, type)
        and issubclass(obj, eqx.Module)
        and not inspect.isabstract(obj)
        and not getattr(obj, "__abstractvars__", None)
    )


def _library_classes(module, bases=None):
    """Concrete public Equinox classes of a library namespace (optionally only
    subclasses of ``bases``)."""
    for attr in sorted(getattr(module, "__all__", None) or dir(module)):
        if attr.startswith("_"):
            continue
        obj = getattr(module, attr, None)
        if _concrete_module_class(obj) and (bases is None or issubclass(obj, bases)):
            yield f"{module.__name__}.{attr}", obj


def _builtin() -> _Registry:
    """The allowlist of orc and the libraries its models hold (built once,
    from modules orc has already imported: nothing is imported because a
    file names it)."""
    import importlib

    import diffrax
    import lineax
    import optimistix

    reg = _Registry()

    def add(name, obj):
        if reg.name_of.get(id(obj)) is not None:
            return
        aliases = [a for a in (_v1_name(obj),) if a and a != name]
        reg.add(obj, name, *aliases)

    for modname in _ORC_MODULES:
        module = importlib.import_module(modname)
        public = set(getattr(module, "__all__", ()))
        for attr, obj in sorted(vars(module).items()):
            if not _concrete_module_class(obj) or not obj.__module__.startswith("orc"):
                continue
            if attr in public:
                add(f"{modname}.{attr}", obj)
    for modname in _ORC_MODULES:  # classes no public module exports
        module = importlib.import_module(modname)
        for _, obj in sorted(vars(module).items()):
            if _concrete_module_class(obj) and obj.__module__.startswith("orc"):
                add(f"{obj.__module__}.{obj.__qualname__}", obj)
    for old, new in _V1_ORC_NAMES.items():
        obj = reg.lookup(new)
        if obj is not None and reg.lookup(old) is None:
            reg.by_name[old] = obj
    ode_parts = (
        diffrax.AbstractSolver,
        diffrax.AbstractStepSizeController,
        diffrax.AbstractAdjoint,
    )
    for name, obj in _library_classes(diffrax, ode_parts):
        add(name, obj)
    for lib in (optimistix, lineax, eqx.nn):
        for name, obj in _library_classes(lib):
            add(name, obj)
    for prefix, module, names in (
        ("jax.numpy", jnp, _JNP_FUNCTIONS),
        ("jax.nn", jax.nn, _JAX_NN_FUNCTIONS),
        ("optimistix", optimistix, _OPTX_FUNCTIONS),
    ):
        for attr in names:
            fn = getattr(module, attr, None)
            if fn is not None and callable(fn) and not isinstance(fn, type):
                add(f"{prefix}.{attr}", fn)
    return reg


def _registry() -> _Registry:
    global _REGISTRY
    if _REGISTRY is None:
        _REGISTRY = _builtin()
    return _REGISTRY


def register(obj=None, *, name: str | None = None):
    """Allow :func:`load` to rebuild ``obj`` from files that name it.

    ``obj`` is a class of yours (an Equinox module, e.g. a custom driver
    subclassing :class:`orc.drivers.DriverBase`) or a module-level function
    (e.g. a readout feature function). Files name it ``name`` (default
    ``"module.qualname"``, the name :func:`save` writes for it). Usable as a
    decorator, with or without ``name``. Registration lasts for the process;
    for one call use ``orc.load(path, allow=[...])`` instead.

    Example
    -------
    >>> @orc.io.register
    ... class MyDriver(orc.drivers.DriverBase): ...
    """

    def add(target):
        _registry().add(target, _name_for(target, name))
        return target

    return add if obj is None else add(obj)


def registered() -> dict[str, object]:
    """A copy of the allowlist: every name a model file may use, and what it rebuilds."""
    return dict(_registry().by_name)


def _name_for(obj, name: str | None) -> str:
    if not (callable(obj) or isinstance(obj, type)):
        raise TypeError(f"orc.io.register: {obj!r} is neither a class nor a function")
    if isinstance(obj, type) and not issubclass(obj, eqx.Module):
        raise TypeError(
            f"orc.io.register: {obj.__name__} is not an Equinox module; only modules "
            "and functions can be rebuilt from a file"
        )
    if name is None:
        name = _default_name(obj)
        if name is None:
            raise TypeError(
                f"orc.io.register: {obj!r} has no module-level name (a lambda or a "
                "local definition); define it at module level or pass name="
            )
    if not isinstance(name, str) or not name:
        raise TypeError(f"orc.io.register: name must be a non-empty str, got {name!r}")
    return name


def _lookup(name, allow: dict, where: str, kind: str):
    obj = allow.get(name)
    if obj is None:
        obj = _registry().lookup(name)
    if obj is None:
        raise ModelFileError(
            f"{where}: the file names the {kind} {name!r}, which is not in orc's "
            "allowlist; nothing named in a file is imported. If it is a class or "
            "function of yours, register it first: orc.io.register(obj) or "
            "orc.load(path, allow=[obj])"
        )
    return obj


# --------------------------------------------------------------------------- #
# Encoding
# --------------------------------------------------------------------------- #


def _save_name(obj, where: str) -> str:
    name = _registry().name_of.get(id(obj))
    if name is not None:
        return name
    name = _default_name(obj)
    if name is None:
        raise TypeError(
            f"orc.save: {where} is {obj!r}, which cannot be saved by name; use a "
            "function or class defined at module level (e.g. jnp.square, not "
            "lambda x: x**2)"
        )
    return name


def _encode(value, leaves: list, where: str):
    if isinstance(value, jax.core.Tracer):
        raise TypeError(f"orc.save: {where} is traced; save models outside jax.jit")
    if isinstance(value, (jax.Array, np.ndarray)):
        leaves.append(value)
        return {"leaf": len(leaves) - 1}
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": repr(value)}
    if isinstance(value, (np.dtype, type)) and _is_dtype(value):
        return {"dtype": str(jnp.dtype(value))}
    if isinstance(value, eqx.Module):
        fields = {
            f.name: _encode(getattr(value, f.name), leaves, f"{where}.{f.name}")
            for f in dataclasses.fields(value)
        }
        return {"module": _save_name(type(value), where), "fields": fields}
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
    if callable(value) and not isinstance(value, type):
        return {"function": _save_name(value, where)}
    raise TypeError(
        f"orc.save: {where} has type {type(value).__name__}, which cannot be saved"
    )


def _is_dtype(value) -> bool:
    try:
        jnp.dtype(value)
        return True
    except TypeError:
        return False


def _summary(model) -> dict:
    out = {"class": type(model).__name__}
    for name in _SUMMARY_FIELDS:
        if hasattr(model, name):
            value = getattr(model, name)
            if (
                isinstance(value, (jax.Array, np.ndarray))
                and value.ndim == 0
                and jnp.issubdtype(value.dtype, jnp.integer)
            ):
                value = int(value)  # e.g. an int seed, stored as a 0-d array
            if value is None or isinstance(value, (bool, int, float, str)):
                out[name] = value
    if hasattr(model, "dtype"):
        out["dtype"] = str(jnp.dtype(model.dtype))
    return out


# --------------------------------------------------------------------------- #
# Saving
# --------------------------------------------------------------------------- #

_PARTIAL = ".orc-partial"
_HOST = re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname())[:40] or "host"
_STALE_FOREIGN_S = 24 * 3600  # temporaries of other hosts (shared file systems)
_STALE_V1_S = 3600  # temporaries of format-1 writers (no owner in the name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def _sweep(directory: Path) -> None:
    """Remove temporaries that earlier saves into ``directory`` left behind
    when they were killed: ours (``.<name>.<host>-<pid>.<hex>.orc-partial``)
    whose process no longer runs on this host (or, from another host, older
    than a day), and format-1 writers' (``.<name>.<random>.tmp`` next to an
    ``.orc`` file) older than an hour."""
    now = time.time()
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not name.startswith("."):
            continue
        stale = False
        try:
            if name.endswith(_PARTIAL):
                owner = name[: -len(_PARTIAL)].rsplit(".", 2)
                host, _, pid = (
                    owner[1].rpartition("-") if len(owner) == 3 else ("", "", "")
                )
                if host == _HOST and pid.isdigit():
                    stale = not _pid_alive(int(pid))
                else:
                    stale = (
                        now - entry.stat(follow_symlinks=False).st_mtime
                        > _STALE_FOREIGN_S
                    )
            elif re.fullmatch(r"\..+\.orc\.[A-Za-z0-9_]{8}\.tmp", name):
                stale = now - entry.stat(follow_symlinks=False).st_mtime > _STALE_V1_S
            if stale and entry.is_file(follow_symlinks=False):
                os.unlink(entry.path)
        except OSError:
            continue


def _check_metadata(metadata, fail, where: str) -> None:
    """``metadata`` is a dict of str keys whose values are str, finite
    float/int, bool, None or lists of str; else ``fail(message)`` is raised."""
    if not isinstance(metadata, dict):
        raise fail(f"{where} must be a dict, got {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise fail(f"{where} keys must be strings, got {key!r}")
        if value is None or isinstance(value, (str, bool)):
            continue
        if isinstance(value, int):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                raise fail(f"{where}[{key!r}] must be finite, got {value!r}")
            continue
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            continue
        raise fail(
            f"{where}[{key!r}] must be a str, a finite int or float, a bool, None "
            f"or a list of str, got {type(value).__name__}"
            + (" (a list holding other than str)" if isinstance(value, list) else "")
        )


_MAX_LINKS = 40  # symbolic links followed in one path (Linux's limit)


def _may_follow(link: Path, directory: Path, st_link: os.stat_result) -> None:
    """Refuse to follow ``link`` (in ``directory``) where Linux's
    ``fs.protected_symlinks`` rule would: the directory is world-writable
    and sticky (like ``/tmp``) and the link is owned neither by the user
    saving nor by the directory's owner. Raises ``PermissionError``."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:  # no POSIX ownership (Windows)
        return
    st_dir = os.stat(directory)
    shared = st_dir.st_mode & stat.S_ISVTX and st_dir.st_mode & stat.S_IWOTH
    me = geteuid()
    if not shared or st_link.st_uid in (me, st_dir.st_uid):
        return
    raise _oserror(
        PermissionError,
        errno.EACCES,
        f"orc.save: refusing to follow the symbolic link {link} -> "
        f"{os.readlink(link)!r}: it lies in {directory}, a world-writable sticky "
        f"directory, and is owned by uid {st_link.st_uid}, neither you (uid {me}) "
        f"nor the directory's owner (uid {st_dir.st_uid}); another user may have "
        "planted it (the rule of Linux's fs.protected_symlinks). Remove the link "
        "or save under another name",
    )


def _save_target(path: Path) -> Path:
    """The file :func:`save` writes for ``path``: the path with every
    symbolic link on it followed (as the kernel resolves it, ``..`` after a
    link taken from the link's target), each one only if :func:`_may_follow`
    allows it. Missing directories of the path as given are created (also
    past a link on it, like ``mkdir -p``); none named by a link's target
    (one whose directory is missing is a ``FileNotFoundError``). The
    result's directory exists and its last component is a regular file or
    absent."""
    given = Path(path)
    parts = list(Path(os.getcwd(), given).parts)  # joining keeps an absolute path
    resolved = Path(parts[0])
    # components left, the next last, each with the link whose text it comes
    # from (None: the path as given)
    todo: list[tuple[str, Path | None]] = [(p, None) for p in parts[:0:-1]]
    links = 0
    while todo:
        name, origin = todo.pop()
        if name in ("", "."):
            continue
        if name == "..":
            resolved = resolved.parent
            continue
        candidate = resolved / name
        try:
            st = os.lstat(candidate)
        except FileNotFoundError:
            if not todo:
                return candidate  # a new file
            if origin is not None:
                raise _oserror(
                    FileNotFoundError,
                    errno.ENOENT,
                    f"orc.save: cannot save to {given}: the symbolic link {origin} "
                    f"leads to {candidate}, which does not exist; orc.save creates "
                    "no directories for a link's target",
                ) from None
            try:
                os.mkdir(candidate)
            except FileExistsError:  # made meanwhile: look again
                pass
            todo.append((name, origin))
            continue
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > _MAX_LINKS:
                raise _oserror(
                    OSError,
                    errno.ELOOP,
                    f"orc.save: cannot save to {given}: symbolic link loop (more "
                    f"than {_MAX_LINKS} links)",
                )
            _may_follow(candidate, resolved, st)
            text = os.readlink(candidate)
            if os.path.isabs(text):
                resolved = Path(Path(text).anchor)
            steps = Path(text).parts[1 if os.path.isabs(text) else 0 :]
            todo.extend((step, candidate) for step in reversed(steps))
            continue
        if todo and not stat.S_ISDIR(st.st_mode):
            raise _oserror(
                NotADirectoryError,
                errno.ENOTDIR,
                f"orc.save: cannot save to {given}: {candidate} is not a directory",
            )
        if not todo and stat.S_ISDIR(st.st_mode):
            raise _oserror(
                IsADirectoryError,
                errno.EISDIR,
                f"orc.save: cannot save to {given}: {candidate} is a directory",
            )
        resolved = candidate
    return resolved


def save(path, model, extras: dict | None = None, metadata: dict | None = None) -> Path:
    """Write ``model`` (any Equinox module, e.g. a trained orc model) to ``path``.

    ``extras`` optionally stores named arrays with the model, e.g. the last
    training state to forecast from (``orc.load(path, return_extras=True)``
    gives them back). ``metadata`` optionally stores a small dict of plain
    values in the file's header, e.g. the sampling step and the names of the
    data's columns (the ``orc`` command line stores those): its keys are
    strings and its values only ``str``, finite ``int``/``float``, ``bool``,
    ``None`` or lists of ``str`` (anything else is a ``TypeError`` naming the
    key). :func:`read_metadata` reads it back without loading the model; a
    file saved without it reads as ``{}``. The file is written next to its target under a
    temporary name and renamed over it, so an existing file is replaced only
    by a complete one; a temporary is removed on every failure, and those of
    killed processes are swept on the next save into the directory. A new
    file's permissions follow the umask; an overwritten file keeps its own.
    Missing directories of ``path`` are created.

    When ``path`` is (or passes through) a symbolic link, the file it points
    to is written, but only where Linux's ``fs.protected_symlinks`` rule
    would follow the link, whatever the system's setting: a link in a
    world-writable sticky directory (like ``/tmp``) must be owned by you or
    by the directory's owner, else saving raises ``PermissionError`` and
    nothing is written (another user may have planted ``model.orc ->
    ~/.bashrc``). No directory is ever created for a link's target: a
    dangling link whose target's directory is missing is a
    ``FileNotFoundError``. A dangling link that passes the rule and whose
    target's directory exists is followed and the target created, as
    ``open(path, "w")`` would (the ownership rule is what decides whether a
    link is trusted, as in the kernel).

    Classes and functions the model holds are written by name; loading
    rebuilds only registered ones (orc's own, or yours via
    :func:`register`).

    Returns the path written. Example: ``orc.save("esn.orc", esn)``.
    """
    from ._version import __version__

    if not isinstance(model, eqx.Module):
        raise TypeError(
            f"orc.save: model must be an Equinox module, got {type(model).__name__}"
        )
    if metadata is not None:
        _check_metadata(metadata, TypeError, "orc.save: metadata")
    path = _as_path(path, "orc.save")
    leaves: list = []
    tree = _encode(model, leaves, type(model).__name__)
    extra_index = {}
    for name, value in (extras or {}).items():
        if not isinstance(value, (jax.Array, np.ndarray)):
            raise TypeError(f"orc.save: extras[{name!r}] must be an array")
        extra_index[str(name)] = _encode(value, leaves, f"extras[{name!r}]")["leaf"]
    arrays = [np.asarray(x) for x in leaves]
    for i, a in enumerate(arrays):
        if str(a.dtype) not in _LEAF_DTYPES:
            raise TypeError(
                f"orc.save: leaf {i} has dtype {a.dtype}, which is not saved"
            )
    buf = io.BytesIO()
    for a in arrays:
        np.lib.format.write_array(buf, a, allow_pickle=False)
    payload = buf.getvalue()
    header = {
        "format": "orc-model",
        "format_version": FORMAT_VERSION,
        "orc_version": __version__,
        "jax_version": jax.__version__,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model_class": tree["module"],
        "hyperparameters": _summary(model),
        "tree": tree,
        "extras": extra_index,
        "leaves": [{"shape": list(a.shape), "dtype": str(a.dtype)} for a in arrays],
        "payload_nbytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    if metadata is not None:  # only then: files without it stay as before
        header["metadata"] = dict(metadata)
    blob = json.dumps(header, indent=1, allow_nan=False).encode()
    if len(blob) > _MAX_HEADER:
        raise ValueError(
            f"orc.save: the file's header would take {len(blob)} bytes, more than "
            f"the {_MAX_HEADER} orc.load reads; store less metadata"
        )
    head = MAGIC + struct.pack("<Q", len(blob)) + blob
    target = _save_target(path)
    _sweep(target.parent)
    try:
        st = os.stat(target, follow_symlinks=False)
        mode = stat.S_IMODE(st.st_mode) if stat.S_ISREG(st.st_mode) else None
    except FileNotFoundError:
        mode = None
    tmp = target.parent / (
        f".{target.name}.{_HOST}-{os.getpid()}.{secrets.token_hex(4)}{_PARTIAL}"
    )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o666)  # the umask applies
    try:
        if mode is not None:
            os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            fd = None
            f.write(head)
            f.write(hashlib.sha256(head).digest())
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        if fd is not None:
            os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    try:  # make the rename itself durable
        dfd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


# --------------------------------------------------------------------------- #
# Loading
# --------------------------------------------------------------------------- #


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ModelFileError(f"the header repeats the key {k!r}")
        out[k] = v
    return out


def _refuse_constant(name):
    raise ModelFileError(f"the header holds the non-JSON constant {name}")


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


_V1_KEYS = {
    "format",
    "format_version",
    "orc_version",
    "jax_version",
    "created",
    "model_class",
    "hyperparameters",
    "tree",
    "extras",
    "leaves",
    "payload_nbytes",
    "payload_sha256",
}
# Entries a header may hold besides those (written by :func:`save` when given).
_OPTIONAL_KEYS = {"metadata"}


def _check_header(header) -> None:
    """The header's schema: every top-level entry present and of its type."""
    if not isinstance(header, dict):
        raise ModelFileError("the header is not a JSON object")
    missing = sorted(_V1_KEYS - set(header))
    extra = sorted(set(header) - _V1_KEYS - _OPTIONAL_KEYS)
    if missing or extra:
        raise ModelFileError(
            "the header "
            + (f"lacks {missing}" if missing else "")
            + (" and " if missing and extra else "")
            + (f"has unknown entries {extra}" if extra else "")
        )
    for key in ("orc_version", "jax_version", "created", "model_class"):
        if not isinstance(header[key], str):
            raise ModelFileError(f"header field {key!r} must be a string")
    for key in ("tree", "hyperparameters", "extras"):
        if not isinstance(header[key], dict):
            raise ModelFileError(f"header field {key!r} must be an object")
    nbytes = header["payload_nbytes"]
    if not _is_int(nbytes) or nbytes < 0:
        raise ModelFileError("header field 'payload_nbytes' must be an integer >= 0")
    digest = header["payload_sha256"]
    if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
        raise ModelFileError("header field 'payload_sha256' must be 64 hex digits")
    leaves = header["leaves"]
    if not isinstance(leaves, list):
        raise ModelFileError("header field 'leaves' must be a list")
    total = 0
    for i, leaf in enumerate(leaves):
        where = f"header field leaves[{i}]"
        if not (isinstance(leaf, dict) and set(leaf) == {"shape", "dtype"}):
            raise ModelFileError(f"{where} must be {{'shape': [...], 'dtype': ...}}")
        shape, dtype = leaf["shape"], leaf["dtype"]
        if (
            not isinstance(shape, list)
            or len(shape) > _MAX_NDIM
            or not all(_is_int(d) and d >= 0 for d in shape)
        ):
            raise ModelFileError(
                f"{where}: shape must be a list of at most {_MAX_NDIM} integers >= 0, "
                f"got {shape!r}"
            )
        if dtype not in _LEAF_DTYPES:
            raise ModelFileError(
                f"{where}: dtype {dtype!r} is not one of {sorted(_LEAF_DTYPES)}"
            )
        itemsize = _LEAF_DTYPES[dtype].itemsize
        total += math.prod(shape) * itemsize
        # an empty leaf holds no bytes, but numpy and XLA still walk its other
        # axes (and refuse more than 2**63 bytes' worth): bounded like a full one
        extent = math.prod(d for d in shape if d)
        if 0 in shape and extent > max(nbytes // itemsize, _MIN_EMPTY_EXTENT):
            raise ModelFileError(
                f"{where}: shape {shape!r} is empty, but its other axes span "
                f"{extent} elements, more than the {nbytes}-byte payload could "
                "hold; no saved model has such a leaf"
            )
    # Sizes before any allocation: the leaves must fit in the payload, and the
    # payload hold nothing but their records.
    if total > nbytes:
        raise ModelFileError(
            f"the header declares {total} bytes of arrays but a payload of only "
            f"{nbytes} bytes"
        )
    most = total + _NPY_RECORD_MAX * len(leaves)
    if nbytes > most:
        raise ModelFileError(
            f"header field 'payload_nbytes' is {nbytes}, but the {len(leaves)} "
            f"leaves it declares take at most {most} bytes as .npy records"
        )
    if "metadata" in header:  # a file is data: only the plain values save writes
        _check_metadata(header["metadata"], ModelFileError, "header field 'metadata'")
    for name, index in header["extras"].items():
        if not (_is_int(index) and 0 <= index < len(leaves)):
            raise ModelFileError(
                f"header field extras[{name!r}] must be a leaf number in "
                f"[0, {len(leaves)}), got {index!r}"
            )


def _oserror(cls, code: int, message: str) -> OSError:
    """An ``OSError`` subclass with orc's own message and the errno it stands for."""
    err = cls(message)
    err.errno = code
    return err


_FILE_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _not_regular(path, mode: int) -> OSError | ModelFileError:
    """The error for a path whose ``stat`` mode is not a regular file's."""
    if stat.S_ISDIR(mode):
        return _oserror(
            IsADirectoryError,
            errno.EISDIR,
            f"orc.load: {path} is a directory, not a model file",
        )
    kind = next(
        (name for test, name in _FILE_KINDS if test(mode)), "of an unknown kind"
    )
    return ModelFileError(
        f"orc.load: {path} is not a regular file ({kind}); a model file is a "
        "regular file written by orc.save"
    )


def _open_regular(path: Path) -> tuple[int, int]:
    """``(descriptor, size)`` of ``path`` opened for reading, after checking
    that it is a regular file: a missing file or dangling link is a
    ``FileNotFoundError``, a directory an ``IsADirectoryError``, a symbolic
    link loop an ``OSError`` (``ELOOP``), and a FIFO, device or socket a
    :class:`ModelFileError`, each saying so. The file is opened with
    ``O_NONBLOCK`` and checked again on the descriptor, so a FIFO swapped in
    meanwhile cannot block the call."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        detail = ""
        if os.path.islink(path):
            detail = (
                f" (a symbolic link to {os.readlink(path)!r}, which does not exist)"
            )
        raise _oserror(
            FileNotFoundError, errno.ENOENT, f"orc.load: no such file: {path}{detail}"
        ) from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _oserror(
                OSError,
                errno.ELOOP,
                f"orc.load: {path}: symbolic link loop (too many levels of "
                "symbolic links)",
            ) from None
        raise _oserror(
            type(err), err.errno, f"orc.load: cannot read {path}: {err.strerror}"
        ) from None
    if not stat.S_ISREG(st.st_mode):
        raise _not_regular(path, st.st_mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as err:
        raise _oserror(
            type(err), err.errno, f"orc.load: cannot read {path}: {err.strerror}"
        ) from None
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):  # replaced since the check above
        os.close(fd)
        raise _not_regular(path, st.st_mode)
    return fd, st.st_size


def _as_path(path, owner: str) -> Path:
    """``path`` (a ``str``, ``bytes`` or ``os.PathLike`` file name) as a
    :class:`~pathlib.Path`; anything else is a ``TypeError`` naming the
    argument (pathlib's own does not)."""
    try:
        name = os.fspath(path)
    except TypeError:
        raise TypeError(
            f"{owner}: path must be a file name (str or os.PathLike), got "
            f"{type(path).__name__}"
        ) from None
    name = os.fsdecode(name)
    if not name:
        raise ValueError(f"{owner}: path must be a file name, got an empty string")
    return Path(name)


def _read(path, payload: bool = True, owner: str = "orc.load"):
    """``(path, header, payload)`` of a model file: its framing, sizes,
    checksums and header schema checked. Only what the header declares is
    read, and only after its sizes are checked against the file's own size
    (a declared header or payload larger than the file, or bytes after the
    payload, are refused before anything is allocated for them). With
    ``payload=False`` the payload is not read (None): its size is still
    checked, its checksum is not."""
    path = _as_path(path, owner)
    fd, size = _open_regular(path)
    with os.fdopen(fd, "rb") as f:
        magic = f.read(len(MAGIC))
        if magic != MAGIC:
            raise ModelFileError(
                f"orc.load: {path} is not an orc model file (bad magic bytes)"
            )
        length = f.read(8)
        if len(length) < 8:
            raise ModelFileError(f"orc.load: {path} is truncated (no header)")
        (n,) = struct.unpack("<Q", length)
        end = len(MAGIC) + 8 + n
        if end > size:
            raise ModelFileError(f"orc.load: {path} is truncated (header incomplete)")
        if n > _MAX_HEADER:
            raise ModelFileError(
                f"orc.load: {path} declares a header of {n} bytes; orc writes "
                f"headers of at most {_MAX_HEADER} bytes"
            )
        blob = f.read(n)
        if len(blob) < n:
            raise ModelFileError(f"orc.load: {path} is truncated (header incomplete)")
        header = _parse_header(blob, path)
        version = header["format_version"]
        head = magic + length + blob
        digest_size = _DIGEST if version >= 2 else 0
        if version >= 2:
            digest = f.read(_DIGEST)
            if len(digest) < _DIGEST:
                raise ModelFileError(
                    f"orc.load: {path} is truncated (no header checksum)"
                )
            if hashlib.sha256(head).digest() != digest:
                raise ModelFileError(
                    f"orc.load: {path} is corrupted (header checksum mismatch)"
                )
        try:
            _check_header(header)
        except ModelFileError as err:
            raise ModelFileError(f"orc.load: {path}: {err}") from err
        nbytes = header["payload_nbytes"]
        present = size - end - digest_size
        if present < nbytes:
            raise ModelFileError(
                f"orc.load: {path} is truncated: {max(present, 0)} of {nbytes} "
                "payload bytes"
            )
        if present > nbytes:
            if version == 1 and present == nbytes + _DIGEST:
                raise ModelFileError(
                    f"orc.load: {path} claims format version 1 but holds {_DIGEST} "
                    "bytes more than that layout, the size of the header checksum "
                    "formats 2 and later write after the header: its layout does "
                    "not match its version (was the version edited?)"
                )
            raise ModelFileError(
                f"orc.load: {path} has {present - nbytes} bytes after the "
                f"{nbytes}-byte payload its header declares"
            )
        try:
            _check_v1_names(header)
        except ModelFileError as err:
            raise ModelFileError(f"orc.load: {path}: {err}") from err
        if not payload:
            return path, header, None
        data = f.read(nbytes)
        if len(data) != nbytes or f.read(1):  # changed while it was read
            raise ModelFileError(f"orc.load: {path} changed size while it was read")
    if hashlib.sha256(data).hexdigest() != header["payload_sha256"]:
        raise ModelFileError(
            f"orc.load: {path} is corrupted (payload checksum mismatch)"
        )
    return path, header, data


def _parse_header(blob: bytes, path) -> dict:
    """The JSON header of a file, its format and version checked."""
    try:
        header = json.loads(
            blob,
            object_pairs_hook=_no_duplicates,
            parse_constant=_refuse_constant,
        )
    except ModelFileError as err:
        raise ModelFileError(f"orc.load: {path} has a corrupted header: {err}") from err
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise ModelFileError(f"orc.load: {path} has a corrupted header: {err}") from err
    version = header.get("format_version") if isinstance(header, dict) else None
    if not isinstance(header, dict) or header.get("format") != "orc-model":
        raise ModelFileError(f"orc.load: {path} has a corrupted header (no format)")
    if not _is_int(version) or version not in _READABLE:
        raise ModelFileError(
            f"orc.load: {path} has format version {version!r}; this orc reads versions "
            f"{list(_READABLE)} (upgrade orc to read newer files)"
        )
    return header


def _check_v1_names(header) -> None:
    """A file claiming format version 1 names every class and function as
    format 1 wrote them, ``module:qualname``: a later file relabelled as
    version 1 (which has no header checksum) is refused."""
    if header["format_version"] != 1:
        return
    names = [("model_class", header["model_class"])]
    stack = [("tree", header["tree"])]
    while stack:  # iterative: the nesting is limited only by the JSON parser
        where, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                stack.append((f"{where}.{key}", value))
            kind = next(iter(sorted(set(node) - {"fields"})), None)
            if set(node) in ({"module", "fields"}, {"function"}):
                if isinstance(node[kind], str):
                    names.append((where, node[kind]))
        elif isinstance(node, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(node))
    for where, name in names:
        if ":" not in name:
            raise ModelFileError(
                f"header field {where}: the file claims format version 1, which names classes "
                f"and functions 'module:qualname', but names {name!r} as later "
                "formats do: its layout does not match its version"
            )


def read_header(path) -> dict:
    """The JSON header of a model file (class, versions, hyperparameters), without
    reading the payload or rebuilding the model (the header's checksum and
    schema and the file's size checked)."""
    return _read(path, payload=False, owner="orc.read_header")[1]


def read_metadata(path) -> dict:
    """The ``metadata`` dict stored by :func:`save` (``{}`` when the file has
    none), without reading the payload or rebuilding the model. The header's
    checksum and schema and the file's size are checked, and the metadata's
    values again: only ``str``, finite numbers,
    ``bool``, ``None`` and lists of ``str`` are accepted (anything else is a
    :class:`ModelFileError`)."""
    return dict(
        _read(path, payload=False, owner="orc.read_metadata")[1].get("metadata", {})
    )


def _read_leaves(payload: bytes, declared: list) -> list[np.ndarray]:
    """The ``.npy`` records of the payload, each checked against its declared
    shape and dtype before its data is read."""
    f = io.BytesIO(payload)  # shares the bytes: records are read as views of them
    view = memoryview(payload)
    out = []
    for i, leaf in enumerate(declared):
        where = f"payload leaf {i}"
        try:
            major, _ = np.lib.format.read_magic(f)
            if major == 1:
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif major in (2, 3):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"unknown .npy version {major}")
        except (ValueError, SyntaxError, TypeError, KeyError) as err:
            raise ModelFileError(f"{where}: bad array record ({err})") from err
        expected = _LEAF_DTYPES[leaf["dtype"]]
        if (
            tuple(shape) != tuple(leaf["shape"])
            or dtype.hasobject
            or (dtype.kind, dtype.itemsize) != (expected.kind, expected.itemsize)
        ):
            raise ModelFileError(
                f"{where}: the record holds {dtype} {tuple(shape)}, the header "
                f"declares {leaf['dtype']} {tuple(leaf['shape'])}"
            )
        nbytes = math.prod(shape) * dtype.itemsize
        start = f.tell()
        if start + nbytes > len(payload):
            raise ModelFileError(f"{where}: the payload ends inside the record")
        raw = view[start : start + nbytes]
        f.seek(start + nbytes)
        a = np.frombuffer(raw, dtype=dtype).astype(expected, copy=True)
        out.append(a.reshape(shape, order="F" if fortran else "C"))
    if f.tell() != len(payload):
        raise ModelFileError("the payload has bytes after its last declared leaf")
    return out


def _check_module(obj, where: str) -> None:
    """Run the invariants a module's constructor checks (its classes'
    ``__check_init__``, in Equinox's order: :func:`run_check_inits`) on a
    rebuilt module; a failed one is a :class:`ModelFileError`."""
    from ._validation import run_check_inits

    try:
        run_check_inits(obj)
    except ModelFileError:
        raise
    except Exception as err:  # noqa: BLE001 - any failed invariant
        raise ModelFileError(f"{where} ({type(obj).__name__}): {err}") from err


class _Decoder:
    """Rebuilds the stored tree from ``leaves``; ``nonfinite``: the numbers
    of the leaves holding NaN or inf, refused naming the field that holds
    them."""

    def __init__(self, leaves, allow: dict, version: int, nonfinite=frozenset()):
        self.leaves = leaves
        self.allow = allow
        self.version = version
        self.nonfinite = nonfinite

    def __call__(self, node, where: str, depth: int = 0):
        if depth > _MAX_DEPTH:
            raise ModelFileError(f"{where}: nested more than {_MAX_DEPTH} levels")
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if not isinstance(node, dict) or not node:
            raise ModelFileError(f"{where}: unrecognised entry {node!r:.80}")
        keys = set(node)
        kind = next(iter(sorted(keys - {"fields"})), None)
        expected = {"module", "fields"} if kind == "module" else {kind}
        if keys != expected:
            raise ModelFileError(
                f"{where}: unrecognised entry with keys {sorted(keys)}"
            )
        value = node[kind]
        if kind == "leaf":
            if not (_is_int(value) and 0 <= value < len(self.leaves)):
                raise ModelFileError(f"{where}: leaf number {value!r} out of range")
            if value in self.nonfinite:
                raise ModelFileError(
                    f"{where} (leaf {value}) holds NaN or inf; no model orc trains "
                    "has non-finite weights"
                )
            return self.leaves[value]
        if kind == "float":
            if value not in ("nan", "inf", "-inf"):
                raise ModelFileError(f"{where}: {value!r} is not nan, inf or -inf")
            return float(value)
        if kind == "dtype":
            if value not in _FIELD_DTYPES:
                raise ModelFileError(
                    f"{where}: dtype {value!r} is not one of {list(_FIELD_DTYPES)}"
                )
            return jnp.dtype(value)
        if kind in ("tuple", "list"):
            if not isinstance(value, list):
                raise ModelFileError(f"{where}: a {kind} must be a JSON list")
            items = [self(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict":
            if not isinstance(value, dict):
                raise ModelFileError(f"{where}: a dict must be a JSON object")
            return {k: self(v, f"{where}[{k!r}]", depth + 1) for k, v in value.items()}
        if kind == "function":
            if not isinstance(value, str):
                raise ModelFileError(f"{where}: a function name must be a string")
            fn = _lookup(value, self.allow, where, "function")
            if isinstance(fn, type) or not callable(fn):
                raise ModelFileError(f"{where}: {value!r} is not a function")
            return fn
        if kind == "module":
            return self.module(node, where, depth)
        raise ModelFileError(f"{where}: unrecognised entry kind {kind!r}")

    def module(self, node, where, depth):
        name, fields = node["module"], node["fields"]
        if not isinstance(name, str) or not isinstance(fields, dict):
            raise ModelFileError(f"{where}: a module needs a class name and fields")
        cls = _lookup(name, self.allow, where, "class")
        if not _concrete_module_class(cls):
            raise ModelFileError(f"{where}: {name!r} is not a concrete Equinox module")
        declared = {f.name: f for f in dataclasses.fields(cls)}
        stored = set(fields)
        if self.version < 3:
            newer = sorted(stored & _format3_fields(cls))
            if newer:
                raise ModelFileError(
                    f"{where}: the file claims format version {self.version} but "
                    f"{name} stores {newer}, which only format 3 writes: its "
                    "layout does not match its version"
                )
            stored = _v3_field_names(cls, stored)
        # a field the class gained after the file was written, declared with
        # metadata "added_field" and the default None (e.g. a classifier's
        # fitted ppv_thresholds), reads as None: the file's model had none.
        # Any other missing field is an error (the header's checksum rules out
        # a field lost in transit).
        added = {
            f
            for f in set(declared) - stored
            if declared[f].metadata.get("added_field") and declared[f].default is None
        }
        stored |= added
        if set(declared) != stored:
            raise ModelFileError(
                f"{where}: {name} has fields {sorted(declared)} but the file stores "
                f"{sorted(fields)}; it was written by an incompatible version"
            )
        values = {}
        for fname, value in fields.items():
            decoded = self(value, f"{where}.{fname}", depth + 1)
            if self.version == 1 and fname == "seed" and _is_int(decoded):
                # format 1 stored a model's seed as static metadata (an int);
                # it is data now (orc._random.seed_field)
                from ._random import seed_field

                decoded = seed_field(decoded, where)
            values[fname] = decoded
        if self.version < 3:
            values = _v3_fields(cls, values, where)
        values.update(dict.fromkeys(added))
        obj = object.__new__(cls)
        for fname, decoded in values.items():
            if declared[fname].metadata.get("static", False) and any(
                isinstance(x, (jax.Array, np.ndarray)) for x in jax.tree.leaves(decoded)
            ):
                raise ModelFileError(
                    f"{where}.{fname}: a static field cannot hold an array"
                )
            object.__setattr__(obj, fname, decoded)
        _check_module(obj, where)
        return obj


# Formats 1 and 2 predate the bank axis (orc._bank): what changed, by field.
_BANK_LEAVES = ("wr", "win", "wout")


def _format3_fields(cls) -> set:
    """The fields of ``cls`` that no file of format 1 or 2 stores: those the
    bank axis and the construction choice brought (``single``,
    ``construction``, a reservoir matrix's ``columns``) and those declared
    ``added_field`` (all added since)."""
    from ._matrix import ReservoirMatrix

    fields = {f.name: f for f in dataclasses.fields(cls)}
    out = {name for name in ("single", "construction") if name in fields}
    out |= {name for name, f in fields.items() if f.metadata.get("added_field")}
    if cls is ReservoirMatrix:
        out.add("columns")
    return out


def _v3_field_names(cls, stored: set) -> set:
    """The field names a format-1/2 module has once read as format 3."""
    names = set(stored)
    if (
        "indices" in names
        and "columns" not in names
        and cls.__name__ == ("ReservoirMatrix")
    ):
        names = (names - {"indices"}) | {"columns"}
    fields = {f.name for f in dataclasses.fields(cls)}
    if "single" in fields and "single" not in names and "chunks" in names:
        names.add("single")
    if "construction" in fields and "wr" in names:
        names.add("construction")  # only this library's draw existed then
    return names


def _v3_fields(cls, values: dict, where: str) -> dict:
    """A format-1/2 module's decoded fields as format 3 stores them: a
    reservoir matrix's ``indices`` renamed ``columns``, and a component that
    had no chunk axis (``chunks`` 0) as a bank of one shown without it."""
    from ._matrix import ReservoirMatrix

    values = dict(values)
    if cls is ReservoirMatrix and "indices" in values:
        values["columns"] = values.pop("indices")
    fields = {f.name for f in dataclasses.fields(cls)}
    if "construction" in fields and "wr" in values:
        values.setdefault("construction", "orc")
    if "single" in fields and "single" not in values and "chunks" in values:
        chunks = values["chunks"]
        if not _is_int(chunks):
            raise ModelFileError(f"{where}.chunks: {chunks!r} is not an int")
        values["single"] = not chunks
        if values["single"]:
            values["chunks"] = 1
            for leaf in _BANK_LEAVES:
                if leaf not in values:
                    continue
                if isinstance(values[leaf], ReservoirMatrix):
                    m = values[leaf]
                    values[leaf] = ReservoirMatrix(m.values[None], m.columns[None])
                elif hasattr(values[leaf], "ndim"):
                    values[leaf] = values[leaf][None]
    return values


def _allowed(allow) -> dict:
    out = {}
    for obj in allow or ():
        out[_name_for(obj, None)] = obj
    return out


def load(path, cls: type | None = None, return_extras: bool = False, allow=()):
    """Read a model written by :func:`save`.

    Parameters
    ----------
    path : str or Path
    cls : class or tuple of classes, optional
        Refuse the file unless it holds an instance of ``cls`` (or a subclass).
    return_extras : bool, default False
        Return ``(model, extras)`` with the named arrays saved alongside.
    allow : sequence of classes and functions, optional
        Your own classes and functions the file may name (custom components,
        feature functions), for this call; see :func:`register`.

    Raises
    ------
    FileNotFoundError (no such file, or a dangling link), IsADirectoryError,
    OSError (``ELOOP``: a symbolic link loop; ``PermissionError``: unreadable),
    or ModelFileError (a ``ValueError``) for a file that is not a regular file
    (a FIFO, a device), not a model file, truncated or followed by other
    bytes, corrupted (checksums), of an unknown format version or laid out
    otherwise than the version it claims, naming a class or function outside
    the allowlist, declaring sizes the file cannot hold, inconsistent (a
    value that does not fit the leaves it describes), or of the wrong class.
    """
    path, header, payload = _read(path)
    if not jax.config.jax_enable_x64 and any(
        x["dtype"] in ("float64", "int64", "uint64", "complex128")
        for x in header["leaves"]
    ):
        raise ModelFileError(
            f"orc.load: {path} holds 64-bit arrays but jax_enable_x64 is off; enable it "
            "first (jax.config.update('jax_enable_x64', True)) to load it exactly"
        )
    allowed = _allowed(allow)
    try:
        model_cls = _lookup(header["model_class"], allowed, "model_class", "class")
    except ModelFileError as err:
        raise ModelFileError(f"orc.load: {path}: {err}") from err
    if cls is not None and not (
        isinstance(model_cls, type) and issubclass(model_cls, cls)
    ):
        raise ModelFileError(
            f"orc.load: {path} holds a {header['model_class']}, not a "
            + " or ".join(
                f"{c.__module__}.{c.__qualname__}"
                for c in (cls if isinstance(cls, tuple) else (cls,))
            )
        )
    try:
        leaves = _read_leaves(payload, header["leaves"])
        extra_leaves = set(header["extras"].values())
        # checked in numpy on the host (a jnp check would compile two small
        # programs per leaf shape at every load); refused where the tree
        # names the field (_Decoder), or here for a leaf it does not use
        nonfinite = frozenset(
            i
            for i, a in enumerate(leaves)
            if i not in extra_leaves
            and jnp.issubdtype(a.dtype, jnp.inexact)
            and not np.all(np.isfinite(a))
        )
        # device_put: jnp.asarray would compile a small program per leaf shape
        arrays = [jax.device_put(a) for a in leaves]
        model = _Decoder(arrays, allowed, header["format_version"], nonfinite)(
            header["tree"], "model"
        )
        if nonfinite:
            i = min(nonfinite)
            raise ModelFileError(
                f"leaf {i} {tuple(leaves[i].shape)} holds NaN or inf; no model orc "
                "trains has non-finite weights"
            )
        if type(model) is not model_cls:
            raise ModelFileError(
                "header field 'model_class' and the stored structure disagree on the "
                "class"
            )
        summary = _summary(model)
        for key, value in header["hyperparameters"].items():
            if key not in summary or summary[key] != value:
                raise ModelFileError(
                    f"header field hyperparameters[{key!r}] is {value!r} but the model "
                    f"has {summary.get(key, '(no such attribute)')!r}"
                )
    except ModelFileError as err:
        raise ModelFileError(f"orc.load: {path}: {err}") from err
    if return_extras:
        return model, {k: arrays[i] for k, i in header["extras"].items()}
    return model
