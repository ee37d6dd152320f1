"""Native CPU kernels, compiled on first use and cached.

The reservoir step is a sparse matrix-vector product inside ``lax.scan``. On
CPU, XLA lowers the gather it needs to a generic loop at ~2 ns per non-zero,
which makes that product the bottleneck of training and forecasting (about
155 µs per step at ``res_dim=2000``). ``kernels.cc`` holds a small XLA FFI
kernel for the same product. It is compiled with the system C++ compiler
against the headers shipped in the installed ``jaxlib`` the first time it is
needed, and the shared library is cached (``$ORC_CACHE_DIR`` or
``~/.cache/orc``), keyed by the source, the jaxlib version and the compiler.

The same library holds the in-place update of the ridge statistics used by
training, ``g += X^T X`` and ``c += X^T Y`` over rows ``start:stop``: one FFI
call that runs SciPy's own BLAS ``syrk`` and ``gemm`` (their addresses come
from ``scipy.linalg.cython_blas``) on XLA's buffers, with no hand-over to
Python and no copies. The rows are read with their stride, so the chunks of a
parallel reservoir and the fitted rows of a stored state history are used
where they are (at res_dim 2000 and 20000 steps the fit is one call of
0.58 s; fed block by block from the history it cost 0.15 s more in slices,
Gram copies and XLA's cross product).

For teacher forcing, a whole block of steps of the discrete ESN update runs
in one call (``esn_run``): the drive of every step is computed beforehand in
one product, and each step's rows are split in two halves, one for this thread
and one for a helper thread started for the call, which hand over once per
step, so both cores work on the sequential part of training. The sparse row
sums are an unrolled loop, AVX-512 vector gathers when the CPU has them, or
on CPUs with AVX2 and FMA a loop that packs the gathered values into vectors
by hand (picked once per process; ``ORC_NATIVE_SIMD=0`` forces the plain
loop). On those AVX2 CPUs, float64 Gram updates run orc's own blocked kernel
instead of BLAS's ``syrk`` (OpenBLAS runs its Haswell kernel on AMD Zen:
36-38 against 42-43 GFLOP/s on one Zen 3 core).

Training a forecaster that keeps its states runs ``esn_fit``: the reservoir
run (its drive computed step by step from the linear embedding) on one
thread while a second thread folds the finished rows into the ridge
statistics with single-threaded BLAS (or the Gram kernel above), the rows
left at the end split by Gram columns between both so that they end
together (res_dim 2000, 20000 steps, AMD Zen 3: 2.7 -> 1.9 s; 1.6-1.8 s
with the AVX2 loops, the Gram kernel and the output's pages mapped ahead of
the run; 1.5-1.65 s without waiting for the helper at the end).

A closed-loop forecast with a linear readout and a linear embedding of the
readout's output is one call too (``esn_forecast``): both threads share the
rows of every step and each computes the small readout of the whole state,
so there is one hand-over per step and no per-step loop of XLA's.

It also holds the ridge solve ``(G + beta I) w = B``: LAPACK's Cholesky
(SciPy's ``potrf``/``potrs``, again by address) run inside the Gram's own
buffer, using the triangle the Gram update leaves free, so solving needs no
copy of the Gram and no factor buffer (at 4000 features those are 256 MB;
0.04 s against 0.13 s for XLA's solve at 2000 features). When the matrix is
not numerically positive definite (long runs with a tiny ridge), the
minimum-norm solution comes from ``syevd`` in the same buffer, with its
workspace allocated only then.

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

__all__ = [
    "native_available",
    "ffi_target",
    "stats_update_target",
    "ridge_solve_target",
    "esn_run_target",
    "esn_fit_target",
    "esn_forecast_target",
]

_SOURCE = Path(__file__).with_name("kernels.cc")
_TARGETS = {
    "float32": ("orc_ell_matvec_f32", "OrcEllMatvecF32"),
    "float64": ("orc_ell_matvec_f64", "OrcEllMatvecF64"),
}
_STATS_TARGETS = {
    "float32": ("orc_stats_update_f32", "OrcStatsUpdateF32", "ssyrk", "sgemm"),
    "float64": ("orc_stats_update_f64", "OrcStatsUpdateF64", "dsyrk", "dgemm"),
}
_ESN_TARGETS = {
    "float32": ("orc_esn_run_f32", "OrcEsnRunF32"),
    "float64": ("orc_esn_run_f64", "OrcEsnRunF64"),
}
_FORECAST_TARGETS = {
    "float32": ("orc_esn_forecast_f32", "OrcEsnForecastF32"),
    "float64": ("orc_esn_forecast_f64", "OrcEsnForecastF64"),
}
_FIT_TARGETS = {
    "float32": ("orc_esn_fit_f32", "OrcEsnFitF32", "ssyrk", "sgemm"),
    "float64": ("orc_esn_fit_f64", "OrcEsnFitF64", "dsyrk", "dgemm"),
}
_SOLVE_TARGETS = {
    "float32": (
        "orc_ridge_solve_f32",
        "OrcRidgeSolveF32",
        "spotrf",
        "spotrs",
        "ssyevd",
    ),
    "float64": (
        "orc_ridge_solve_f64",
        "OrcRidgeSolveF64",
        "dpotrf",
        "dpotrs",
        "dsyevd",
    ),
}
_FLAGS = ("-O3", "-std=c++17", "-shared", "-fPIC", "-fno-trapping-math")
# ORC_NATIVE_DEBUG=1 builds (and caches separately) a library whose kernels
# also assert their index bounds on every block of rows (-DORC_DEBUG).
_DEBUG_FLAGS = ("-DORC_DEBUG", "-g")
# after the source: dladdr/dlopen (in libc itself from glibc 2.34 on)
_LIBS = ("-ldl",) if sys.platform.startswith("linux") else ()
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
    flags = _FLAGS + (_DEBUG_FLAGS if os.environ.get("ORC_NATIVE_DEBUG") == "1" else ())
    key = hashlib.sha256(
        _SOURCE.read_bytes()
        + " ".join(flags + _LIBS).encode()
        + jaxlib.__version__.encode()
        + cxx.encode()
        + sys.platform.encode()
    ).hexdigest()[:16]
    target = _cache_dir() / "native" / key / "liborc_kernels.so"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        out = Path(tmp) / target.name
        cmd = [cxx, *flags, f"-I{include}", str(_SOURCE), "-o", str(out), *_LIBS]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:  # e.g. a toolchain without target_clones
            proc = subprocess.run(
                cmd[: -len(_LIBS) or None] + ["-DORC_NO_CLONES", *_LIBS],
                capture_output=True,
                text=True,
            )
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
        every = (
            *_TARGETS.values(),
            *_STATS_TARGETS.values(),
            *_SOLVE_TARGETS.values(),
            *_ESN_TARGETS.values(),
            *_FIT_TARGETS.values(),
            *_FORECAST_TARGETS.values(),
        )
        for name, symbol, *_ in every:
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


def _target(table: dict, dtype) -> str | None:
    name = table.get(str(jax.numpy.dtype(dtype)))
    if name is None or not native_available():
        return None
    return name[0]


def ffi_target(dtype) -> str | None:
    """FFI target name of the ELL product for ``dtype``, or None if unavailable."""
    return _target(_TARGETS, dtype)


def esn_run_target(dtype) -> str | None:
    """FFI target of the fused ESN run over a block of steps, or None."""
    return _target(_ESN_TARGETS, dtype)


def esn_forecast_target(dtype) -> str | None:
    """FFI target of the closed-loop ESN forecast in one call, or None."""
    return _target(_FORECAST_TARGETS, dtype)


def _scipy_address(name: str, module: str = "cython_blas") -> int:
    """Address of SciPy's Fortran-ABI BLAS/LAPACK routine ``name`` from
    ``scipy.linalg.<module>`` (0 if unavailable)."""
    try:
        import importlib

        capsule = importlib.import_module(f"scipy.linalg.{module}").__pyx_capi__[name]
        api = ctypes.pythonapi
        api.PyCapsule_GetName.restype = ctypes.c_char_p
        api.PyCapsule_GetName.argtypes = [ctypes.py_object]
        api.PyCapsule_GetPointer.restype = ctypes.c_void_p
        api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        return int(
            api.PyCapsule_GetPointer(capsule, api.PyCapsule_GetName(capsule)) or 0
        )
    except Exception:  # noqa: BLE001 - no SciPy BLAS/LAPACK: the caller falls back
        return 0


def _address(name: str, module: str) -> int:
    key = f"{module}.{name}"
    if key not in _state:
        _state[key] = _scipy_address(name, module)
    return int(_state[key])


def _target_with_routines(table: dict, dtype, module: str):
    """``(FFI target, {routine: address})`` of a kernel that calls SciPy's
    BLAS/LAPACK routines (named after the target in ``table``), or None."""
    entry = table.get(str(jax.numpy.dtype(dtype)))
    if entry is None or not native_available():
        return None
    routines = {n[1:]: _address(n, module) for n in entry[2:]}
    return (entry[0], routines) if all(routines.values()) else None


def stats_update_target(dtype) -> tuple[str, dict[str, int]] | None:
    """``(FFI target, {"syrk": address, "gemm": address})`` of the in-place
    update of the ridge statistics, or None."""
    return _target_with_routines(_STATS_TARGETS, dtype, "cython_blas")


def esn_fit_target(dtype) -> tuple[str, dict[str, int]] | None:
    """``(FFI target, {"syrk": address, "gemm": address})`` of the teacher-forced
    ESN run overlapped with the ridge statistics of its states, or None."""
    return _target_with_routines(_FIT_TARGETS, dtype, "cython_blas")


def ridge_solve_target(dtype) -> tuple[str, dict[str, int]] | None:
    """``(FFI target, {"potrf": address, "potrs": ..., "syevd": ...})`` of the
    in-place ridge solve, or None."""
    return _target_with_routines(_SOLVE_TARGETS, dtype, "cython_lapack")
