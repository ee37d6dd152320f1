"""Native CPU kernels, compiled on first use and cached.

The reservoir step is a sparse matrix-vector product inside ``lax.scan``. On
CPU, XLA lowers the gather it needs to a generic loop at ~2 ns per non-zero,
which makes that product the bottleneck of training and forecasting (about
155 µs per step at ``res_dim=2000``). ``ell_matvec.cc`` is a small XLA FFI
kernel for the same product. It is compiled with the system C++ compiler
against the headers shipped in the installed ``jaxlib`` the first time it is
needed, and the shared library is cached (``$ORC_CACHE_DIR`` or
``~/.cache/orc``), keyed by the source, the jaxlib version and the compiler.

Nothing depends on it: without a compiler, on other platforms (GPU/TPU use
XLA's own gather), or with ``ORC_NATIVE=0`` in the environment, the JAX
implementation runs instead and gives the same results.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import jax

__all__ = ["native_available", "ffi_target"]

_SOURCE = Path(__file__).with_name("ell_matvec.cc")
_TARGETS = {
    "float32": ("orc_ell_matvec_f32", "OrcEllMatvecF32"),
    "float64": ("orc_ell_matvec_f64", "OrcEllMatvecF64"),
}
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC")
_lock = threading.Lock()
_state: dict[str, object] = {}


def _cache_dir() -> Path:
    root = os.environ.get("ORC_CACHE_DIR")
    return Path(root) if root else Path.home() / ".cache" / "orc"


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _build() -> Path:
    import jaxlib

    cxx = _compiler()
    if cxx is None:
        raise RuntimeError("no C++ compiler found (set CXX)")
    include = jax.ffi.include_dir()
    key = hashlib.sha256(
        _SOURCE.read_bytes()
        + " ".join(_FLAGS).encode()
        + jaxlib.__version__.encode()
        + cxx.encode()
        + sys.platform.encode()
    ).hexdigest()[:16]
    target = _cache_dir() / "native" / key / "libell_matvec.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        cmd = [cxx, *_FLAGS, f"-I{include}", str(_SOURCE), "-o", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(
                f"compiling {_SOURCE.name} failed: {proc.stderr.strip()[-500:]}"
            )
        os.replace(out, target)  # atomic: concurrent builders never see a partial file
    return target


def _load() -> bool:
    if os.environ.get("ORC_NATIVE", "1") == "0":
        return False
    try:
        lib = ctypes.cdll.LoadLibrary(str(_build()))
        for name, symbol in _TARGETS.values():
            jax.ffi.register_ffi_target(
                name, jax.ffi.pycapsule(getattr(lib, symbol)), platform="cpu"
            )
    except Exception as err:  # noqa: BLE001 - any failure means: use the JAX path
        warnings.warn(
            f"orc: native CPU kernels unavailable ({err}); using the JAX implementation, "
            "which is slower for large reservoirs.",
            RuntimeWarning,
            stacklevel=3,
        )
        return False
    _state["lib"] = lib  # keep the library loaded
    return True


def native_available() -> bool:
    """Whether the native CPU kernels are compiled and registered (builds them once)."""
    with _lock:
        if "ok" not in _state:
            _state["ok"] = _load()
        return bool(_state["ok"])


def ffi_target(dtype) -> str | None:
    """FFI target name of the ELL product for ``dtype``, or None if unavailable."""
    name = _TARGETS.get(str(jax.numpy.dtype(dtype)))
    if name is None or not native_available():
        return None
    return name[0]
