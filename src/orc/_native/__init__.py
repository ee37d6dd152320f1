"""Native CPU kernels, built at install time.

The reservoir step is a sparse matrix-vector product inside ``lax.scan``. On
CPU, XLA lowers the gather it needs to a generic loop at ~2 ns per non-zero,
which makes that product the bottleneck of training and forecasting (about
155 µs per step at ``res_dim=2000``). ``ell_matvec.cc`` holds a small XLA FFI
kernel for the same product (the other kernels have a source each beside
it). ``pip install`` compiles them (scikit-build-core and ``CMakeLists.txt``
at the repository root, against the FFI headers of the jaxlib in the build
environment) into the extension module
:mod:`orc._native._kernels`, whose handlers are registered with XLA when this
module is imported. Nothing is compiled, and no shared library is looked up
in a cache, at run time: a file planted in a user-writable directory can
never be loaded, and a failed build shows at install time.

BLAS/LAPACK routines are handed to the kernels once, at import, as SciPy's
own capsules (``scipy.linalg.cython_blas``/``cython_lapack``): the compiled
programs hold no process-specific address, so JAX's persistent compilation
cache hits across processes and ``jax.export`` works.

The same library holds the in-place update of the ridge statistics used by
training, ``g += X^T X`` and ``c += X^T Y`` over rows ``start:stop``: one FFI
call on XLA's buffers, with no hand-over to Python and no copies, that runs
orc's own blocked Gram kernel from 64 features on (SciPy's BLAS ``syrk`` and
``gemm`` below). The rows are read with their stride, so the chunks of a
parallel reservoir and the fitted rows of a stored state history are used
where they are (at res_dim 2000 and 20000 steps the fit is one call of
0.58 s; fed block by block from the history it cost 0.15 s more in slices,
Gram copies and XLA's cross product).

For teacher forcing, a whole block of steps of the discrete ESN update runs
in one call (``esn_run``): the drive of every step is computed beforehand in
one product, and each step's rows are split in two halves, one for this thread
and one for a task on XLA's CPU thread pool, which hand over once per step,
so both cores work on the sequential part of training. Every kernel's
threads are XLA's pool's (``ORC_NATIVE_THREADS`` caps them); no call waits
for a pool task to start, and results do not depend on which thread
computes what. The sparse row
sums are an unrolled loop, AVX-512 vector gathers when the CPU has them, or
on CPUs with AVX2 and FMA a loop that packs the gathered values into vectors
by hand: which one, like every kernel's variant, is measured when the
package is built (``calibration.txt`` next to the extension, loaded at
import; ``ORC_NATIVE_VARIANTS`` overrides it, ``ORC_NATIVE_SIMD=0`` forces
the plain loops).

Training a forecaster runs ``esn_fit``: the reservoir
run (its drive computed step by step from the linear embedding) on one
thread while a pool task folds the finished rows into the ridge
statistics with the Gram kernel, the rows
left at the end split by Gram columns between both so that they end
together (res_dim 2000, 20000 steps, AMD Zen 3: 2.7 -> 1.9 s; 1.6-1.8 s
with the AVX2 loops, the Gram kernel and the output's pages mapped ahead of
the run; 1.5-1.65 s without waiting for the helper at the end). A training
that does not return its states asks it for the last state only: the rows
then pass through a ring of up to 8 blocks of statistics rows (64 MiB at
most) that both threads empty, the run pausing to add the oldest block
when the ring is full, and no (T, n) history is stored (AMD EPYC, 2 cores, 20000 steps: res_dim 500
0.114 -> 0.093 s, res_dim 2000 1.23 -> 1.18 s against the blocked
streaming fit it replaces; the statistics are the same bits).

A closed-loop forecast with a linear readout and a linear embedding of the
readout's output is one call too (``esn_forecast``): both threads share the
rows of every step and each computes the small readout of the whole state,
so there is one hand-over per step and no per-step loop of XLA's. The
closed loops of many readouts from many starts of one reservoir (a tuning
candidate's validation windows for every ridge strength) are one call as
well (``esn_forecast_batch``): their states are kept side by side, so each
non-zero of the reservoir, each input and readout weight is read once per
step for all of them and the loops over the columns vectorise (N = 500, 8
readouts x 10 starts, 1000 steps, AMD EPYC: 0.20 s against 0.32 s for XLA's
vmapped scan over the native product).

It also holds the ridge solve ``(G + beta I) w = B``: orc's own Cholesky
factorisation (panels of 96 rows, the update below each panel by the Gram
kernel, on the pool's threads; each element computed by one thread in a
fixed order, so the weights are the same bits on any number of threads) run
inside the Gram's own buffer, using the triangle the Gram update leaves free
for a copy, so solving needs no factor buffer (at 4000 features that is 128
MB). When the matrix is not numerically positive definite (long runs with a
tiny ridge), the minimum-norm solution comes from LAPACK's ``syevd``
(SciPy's, by address) on that copy, with its workspace allocated only then.

On an NVIDIA GPU of compute capability 9.0 or later (Hopper, Blackwell) the
same closed-loop forecast runs as one thread-block cluster
(``esn_cluster.cu``, driven by ``cuda_cluster.cc``): each of 16 blocks keeps
its rows of the reservoir and a copy of the state in shared memory for the
whole forecast, the blocks exchange the new state through distributed shared
memory and wait at the cluster's hardware barrier, so a step costs no kernel
launch and no trip to global memory (N = 2000 on an H200: 3.5-3.7 µs per step
in float64 against the unrolled scan's 5.2, 2.6-2.7 against 4.6-4.8 in
float32). Its handler is built with the CPU kernels by the same C++ compiler
and needs nothing of CUDA at build time: at its first call it looks up the
driver (``libcuda.so.1``) and NVRTC (the library of the ``nvidia-cuda-nvrtc``
wheel that JAX's CUDA plugin installs, found by :func:`nvrtc_library`) and
compiles the embedded kernel for the device. Which forecasts take it is
decided when they are traced (:func:`orc._kernels.cluster_config`).

Nothing depends on it: installed without a compiler, on other platforms
(GPU/TPU use XLA's own gather), or with ``ORC_NATIVE=0`` in the environment,
the JAX implementation runs instead and gives the same results;
:func:`orc.show_config` says which path runs.
"""

from __future__ import annotations

import importlib
import os
import threading

import jax

from .._errors import warn_at_caller
from .._strategy import default_backend

__all__ = [
    "native_available",
    "native_config",
    "ffi_target",
    "stats_update_target",
    "ridge_solve_target",
    "esn_run_target",
    "esn_fit_target",
    "esn_run_linear_target",
    "esn_forecast_target",
    "esn_forecast_batch_target",
    "cluster_forecast_target",
    "nvrtc_library",
    "target_names",
]


def _pair(stem: str) -> dict[str, str]:
    return {"float32": f"orc_{stem}_f32", "float64": f"orc_{stem}_f64"}


_TARGETS = _pair("ell_matvec")
_STATS_TARGETS = _pair("stats_update")
_ESN_TARGETS = _pair("esn_run")
_FORECAST_TARGETS = _pair("esn_forecast")
_FORECAST_BATCH_TARGETS = _pair("esn_forecast_batch")
_FIT_TARGETS = _pair("esn_fit")
_LINEAR_RUN_TARGETS = _pair("esn_run_linear")
_SOLVE_TARGETS = _pair("ridge_solve")
_QUANTILE_TARGETS = _pair("column_quantiles")
_CLUSTER_TARGETS = _pair("esn_forecast_cluster")  # CUDA platform
# what each family calls (single-precision names; the kernel takes the twin)
_NEEDS = {
    "stats_update": ("syrk", "gemm"),
    "esn_fit": ("syrk", "gemm"),
    "ridge_solve": ("syevd",),
}
_BLAS = ("ssyrk", "dsyrk", "sgemm", "dgemm")
_LAPACK = ("ssyevd", "dsyevd")
_OFF_BY_ENV = "ORC_NATIVE=0 in the environment"
_lock = threading.Lock()
_state: dict[str, object] = {}


def _scipy_capsules() -> dict[str, object]:
    """SciPy's exported Fortran-ABI BLAS/LAPACK routines (capsules whose
    pointer is the routine), the ones the kernels call; those SciPy lacks are
    left out (their kernels then fall back to XLA)."""
    found: dict[str, object] = {}
    for module, names in (("cython_blas", _BLAS), ("cython_lapack", _LAPACK)):
        try:
            capi = importlib.import_module(f"scipy.linalg.{module}").__pyx_capi__
        except Exception:  # noqa: BLE001 - no SciPy: those kernels fall back
            continue
        found.update({name: capi[name] for name in names if name in capi})
    return found


def _load() -> str | None:
    """Registers the kernels; returns why they are off, or None."""
    if default_backend() == "xla":
        return _OFF_BY_ENV
    try:
        from . import _kernels
    except ImportError as err:
        return (
            "orc was installed without its native kernels (no C++ compiler at "
            f"install time?): {err}"
        )
    try:
        handlers = _kernels.handlers()
        for name, capsule in handlers.items():
            jax.ffi.register_ffi_target(name, capsule, platform="cpu")
        # what this build has: a stale build (an editable install not rebuilt
        # since a kernel was added) lacks the newer targets, whose callers
        # then take XLA's path instead of naming a target XLA cannot find
        _state["targets"] = frozenset(handlers)
        _kernels.set_routines(_scipy_capsules())
        _state["routines"] = _kernels.routines()
    except Exception as err:  # noqa: BLE001 - any failure means: use the JAX path
        return f"registering them with XLA failed: {err}"
    _register_cuda(_kernels)
    _state["module"] = _kernels
    _state["variants_from"] = _set_variants(_kernels)
    return None


# where the nvidia-cuda-nvrtc wheel puts the library, inside the ``nvidia``
# namespace package, newest CUDA first
_NVRTC_WHEEL_DIRS = ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib")
# the system's library directories searched for ctypes.util.find_library's name
_SYSTEM_LIB_DIRS = (
    "/usr/local/cuda/lib64",
    "/usr/local/cuda/lib",
    "/usr/lib/{multiarch}",
    "/lib/{multiarch}",
    "/usr/lib64",
    "/lib64",
    "/usr/local/lib",
    "/usr/lib",
    "/lib",
)


def _trusted_dirs(entries) -> list[str]:
    """The directories of ``entries`` (``sys.path`` or ``LD_LIBRARY_PATH``
    entries) a library may be taken from: absolute, existing, and not the
    current directory, resolved, each once. A relative entry (``""``,
    ``"."``, ``"lib"``) names the current directory or a place under it,
    where anyone who can write there could plant a library."""
    try:
        cwd = os.path.realpath(os.getcwd())
    except OSError:  # the current directory was removed
        cwd = None
    out: list[str] = []
    for entry in entries:
        if not isinstance(entry, str) or not os.path.isabs(entry):
            continue
        real = os.path.realpath(entry)
        if real != cwd and real not in out and os.path.isdir(real):
            out.append(real)
    return out


def _nvrtc_files(folder: str) -> list[str]:
    """NVRTC's libraries in ``folder`` (not its builtins or alternates)."""
    import glob  # noqa: PLC0415

    found = sorted(glob.glob(os.path.join(glob.escape(folder), "libnvrtc.so*")))
    return [
        f
        for f in found
        if "builtins" not in os.path.basename(f)
        and ".alt." not in os.path.basename(f)
        and os.path.isfile(f)
    ]


def _system_nvrtc() -> str | None:
    """NVRTC's library in the system's library directories: the name
    ``ctypes.util.find_library("nvrtc")`` gives, found in the absolute
    entries of ``LD_LIBRARY_PATH`` or the standard directories."""
    import ctypes.util  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415

    name = ctypes.util.find_library("nvrtc")
    if not name:
        return None
    if os.path.isabs(name):  # macOS gives a path
        return name if os.path.isfile(name) else None
    name = os.path.basename(name)
    multiarch = sysconfig.get_config_var("MULTIARCH") or ""
    standard = [
        d.format(multiarch=multiarch)
        for d in _SYSTEM_LIB_DIRS
        if multiarch or "{multiarch}" not in d
    ]
    ld_path = os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep)
    for folder in _trusted_dirs([*ld_path, *standard]):
        candidate = os.path.join(folder, name)
        if os.path.isfile(candidate):
            return candidate
    return None


def nvrtc_library() -> str | None:
    """The absolute path of NVRTC's library, which the GPU forecast's
    handler loads (``dlopen``) to compile its kernel, or None if none is
    found (the handler then asks the dynamic loader for ``libnvrtc.so.13``/
    ``.12`` by name, which searches the system's directories only).

    Looked up, in order: the ``nvidia-cuda-nvrtc`` wheel that JAX's CUDA
    plugin installs (``nvidia/cu13/lib`` for CUDA 13, ``nvidia/cuda_nvrtc/lib``
    or ``nvidia/cu12/lib`` for CUDA 12, newest first) under the absolute
    entries of ``sys.path`` other than the current directory, then the
    system's library (``ctypes.util.find_library("nvrtc")`` found in an
    absolute directory). Relative ``sys.path`` entries (``""``, ``"."``)
    and the current directory are never searched: a library planted in the
    working directory is never loaded."""
    import sys  # noqa: PLC0415

    roots = _trusted_dirs(sys.path)
    for folder in _NVRTC_WHEEL_DIRS:
        for root in roots:
            found = _nvrtc_files(os.path.join(root, "nvidia", folder))
            if found:
                return found[0]
    return _system_nvrtc()


def _register_cuda(kernels) -> None:
    """Registers the GPU forecast's handlers for the CUDA platform (XLA keeps
    them until a CUDA backend loads; nothing of CUDA is touched here)."""
    try:
        handlers = kernels.cuda_handlers()
        for name, capsule in handlers.items():
            jax.ffi.register_ffi_target(name, capsule, platform="CUDA")
        _state["nvrtc"] = nvrtc_library()
        kernels.set_nvrtc_path(_state["nvrtc"] or "")
    except Exception:  # noqa: BLE001 - a stale build: the GPU forecast runs the scan
        return
    _state["cuda_targets"] = frozenset(handlers)


def _set_variants(kernels) -> str:
    """Which variant each kernel runs: the build's measurement
    (``calibration.txt`` next to the module), then ``ORC_NATIVE_VARIANTS``
    over it; the CPU flags decide what neither sets. The file is read as
    text and parsed by the kernels' own strict parser (``key=value`` words
    naming known variants this CPU runs); one that fails is ignored with a
    warning. Returns where the variants came from, for show_config()."""
    sources = []
    calibration = os.path.join(os.path.dirname(kernels.__file__), "calibration.txt")
    if os.path.isfile(calibration):
        try:
            with open(calibration, encoding="ascii") as f:
                kernels.set_variants(f.read(4096))
            sources.append("the build's calibration")
        except (OSError, UnicodeDecodeError, ValueError) as err:
            warn_at_caller(
                f"orc: ignoring {calibration} ({err}); kernel variants from the CPU flags",
                RuntimeWarning,
            )
    spec = os.environ.get("ORC_NATIVE_VARIANTS")
    if spec:
        try:
            kernels.set_variants(spec)
            sources.append("ORC_NATIVE_VARIANTS")
        except ValueError as err:
            warn_at_caller(f"orc: ignoring ORC_NATIVE_VARIANTS ({err})", RuntimeWarning)
    return " + ".join(sources) if sources else "the CPU flags"


def calibrate() -> str:
    """Measure the kernel variants on this machine now (a few seconds) and
    return the result as ``calibration.txt`` holds it: the fastest variant
    per kernel as ``key=value`` (what ``ORC_NATIVE_VARIANTS`` takes), the
    times as comments. Changes nothing in this process."""
    if _status() is not None:
        raise RuntimeError(f"orc's native kernels are off: {_state['reason']}")
    return _state["module"].calibrate()  # type: ignore[attr-defined]


def _status() -> str | None:
    with _lock:
        if "reason" not in _state:
            _state["reason"] = _load()
            if _state["reason"] not in (None, _OFF_BY_ENV):
                warn_at_caller(
                    f"orc: native CPU kernels unavailable ({_state['reason']}); "
                    "using the JAX implementation, which is 3-6x slower for large "
                    "reservoirs on CPU. orc.show_config() shows what runs.",
                    RuntimeWarning,
                )
        return _state["reason"]  # type: ignore[return-value]


def native_available() -> bool:
    """Whether the native CPU kernels are installed and registered."""
    return _status() is None


def native_config() -> dict[str, object]:
    """What the native kernels run on this CPU, or why they are off:
    ``{"available", "reason", "file", "ell", "tanh", "gram", "pool_threads",
    "thread_limit", "threads", "variants", "variants_from", "routines"}``:
    ``variants`` is the variant each kernel runs (as ``ORC_NATIVE_VARIANTS``
    takes them) and ``variants_from`` what chose them; ``pool_threads`` is the size of
    XLA's CPU thread pool the kernels run on, ``thread_limit`` the cap
    ``ORC_NATIVE_THREADS`` sets (0: none) and ``threads`` the most threads a
    call uses (the calling one included)."""
    reason = _status()
    if reason is not None:
        return {"available": False, "reason": reason}
    module = _state["module"]
    if module.config()["pool_threads"] == 0:  # type: ignore[attr-defined]
        _ask_pool()
    config = module.config()  # type: ignore[attr-defined]
    limit = config["thread_limit"]
    return {
        "available": True,
        "reason": None,
        "file": module.__file__,  # type: ignore[attr-defined]
        **config,
        "threads": min(config["pool_threads"], limit)
        if limit
        else config["pool_threads"],
        "variants_from": _state["variants_from"],
        "routines": module.routines(),  # type: ignore[attr-defined]
    }


def _ask_pool() -> None:
    """Run a 1 x 1 sparse product once, so the kernels learn the size of
    XLA's CPU thread pool (they are told it only when a call runs)."""
    f32 = jax.numpy.float32
    call = jax.ffi.ffi_call(_TARGETS["float32"], jax.ShapeDtypeStruct((1,), f32))
    with jax.default_device(jax.devices("cpu")[0]):
        ones = jax.numpy.ones((1, 1), f32)
        jax.block_until_ready(
            call(ones, jax.numpy.zeros((1, 1), jax.numpy.int32), ones[0])
        )


def _target(table: dict, dtype, family: str | None = None) -> str | None:
    name = table.get(str(jax.numpy.dtype(dtype)))
    if name is None or not native_available() or name not in _state["targets"]:
        return None
    if family is not None:
        prefix = "d" if name.endswith("f64") else "s"
        routines = _state["routines"]
        if not all(routines.get(prefix + r) for r in _NEEDS[family]):  # type: ignore[attr-defined]
            return None
    return name


def target_names() -> tuple[str, ...]:
    """The names of every FFI target the kernels register (both dtypes; the
    CPU's and the GPU forecast's)."""
    tables = (
        _TARGETS,
        _STATS_TARGETS,
        _ESN_TARGETS,
        _FORECAST_TARGETS,
        _FORECAST_BATCH_TARGETS,
        _FIT_TARGETS,
        _LINEAR_RUN_TARGETS,
        _SOLVE_TARGETS,
        _QUANTILE_TARGETS,
        _CLUSTER_TARGETS,
    )
    return tuple(name for table in tables for name in table.values())


def ffi_target(dtype) -> str | None:
    """FFI target name of the ELL product for ``dtype``, or None if unavailable."""
    return _target(_TARGETS, dtype)


def esn_run_target(dtype) -> str | None:
    """FFI target of the fused ESN run over a block of steps, or None."""
    return _target(_ESN_TARGETS, dtype)


def esn_run_linear_target(dtype) -> str | None:
    """FFI target of the ESN run driven by a linear embedding, the drive
    computed inside the run as the fused fit computes it, or None."""
    return _target(_LINEAR_RUN_TARGETS, dtype)


def esn_forecast_target(dtype) -> str | None:
    """FFI target of the closed-loop ESN forecast in one call, or None."""
    return _target(_FORECAST_TARGETS, dtype)


def esn_forecast_batch_target(dtype) -> str | None:
    """FFI target of many closed-loop forecasts of one reservoir in one call
    (start states x readouts), or None."""
    return _target(_FORECAST_BATCH_TARGETS, dtype)


def cluster_forecast_target(dtype) -> str | None:
    """FFI target (CUDA platform) of the closed-loop ESN forecast as one
    thread-block cluster, or None where the build lacks it or no NVRTC
    library is found to compile its kernel with."""
    name = _CLUSTER_TARGETS.get(str(jax.numpy.dtype(dtype)))
    if name is None or not native_available() or not _nvrtc_found():
        return None
    return name if name in _state.get("cuda_targets", ()) else None  # type: ignore[operator]


def _nvrtc_found() -> bool:
    if "nvrtc_found" not in _state:
        import ctypes.util  # noqa: PLC0415

        path = _state.get("nvrtc") or ctypes.util.find_library("nvrtc")
        _state["nvrtc_found"] = path is not None
    return bool(_state["nvrtc_found"])


def stats_update_target(dtype) -> str | None:
    """FFI target of the in-place update of the ridge statistics (SciPy's
    BLAS ``syrk``/``gemm``), or None."""
    return _target(_STATS_TARGETS, dtype, "stats_update")


def esn_fit_target(dtype) -> str | None:
    """FFI target of the teacher-forced ESN run overlapped with the ridge
    statistics of its states, or None."""
    return _target(_FIT_TARGETS, dtype, "esn_fit")


def ridge_solve_target(dtype) -> str | None:
    """FFI target of the in-place ridge solve (orc's Cholesky factorisation;
    LAPACK ``syevd`` for the minimum-norm fallback), or None."""
    return _target(_SOLVE_TARGETS, dtype, "ridge_solve")


def column_quantiles_target(dtype) -> str | None:
    """FFI target of the per-column quantiles (``jnp.quantile(x, q,
    axis=0)`` by ``std::nth_element``), or None."""
    return _target(_QUANTILE_TARGETS, dtype)


# Registered when orc is imported (not at first use): a process that only runs
# an exported program (orc.export) or a persistent-cache hit needs the handlers
# before anything of orc has been traced.
_status()
