"""``orc.show_config()``: which implementation runs here, and on what."""

from __future__ import annotations

import os
import platform

__all__ = ["config", "show_config"]


def _blas() -> str:
    try:
        import scipy

        blas = scipy.show_config(mode="dicts")["Build Dependencies"]["blas"]
        text = f"{blas.get('name', '?')} {blas.get('version', '')}".strip()
        detail = blas.get("openblas configuration")
        return f"{text} ({detail})" if detail else text
    except Exception:  # noqa: BLE001 - informative only
        return "unknown"


def config() -> dict[str, object]:
    """The facts :func:`show_config` prints, as a dict."""
    import jax
    import jaxlib

    from . import _native, _strategy
    from ._version import __version__

    native = _native.native_config()
    return {
        "orc": __version__,
        "python": platform.python_version(),
        "jax": jax.__version__,
        "jaxlib": jaxlib.__version__,
        "platform": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "x64": bool(jax.config.jax_enable_x64),
        "backend": _strategy.resolve(None),
        "native": native,
        "blas": _blas(),
        "cpu_count": os.cpu_count(),
        "gpu_forecast": _gpu_forecast(),
    }


def _gpu_forecast() -> str:
    """How a single closed-loop ESN forecast runs on this process's GPU."""
    import jax.numpy as jnp

    from . import _kernels, _native

    if not _kernels._gpu_has_clusters():
        return "the unrolled scan (no GPU with thread-block clusters here)"
    if _native.cluster_forecast_target(jnp.float32) is None:
        why = (
            "no NVRTC library found to compile its kernel"
            if _native.native_available()
            else "orc was built without its native kernels"
        )
        return f"the unrolled scan ({why})"
    nvrtc = _native.nvrtc_library() or "the system's libnvrtc.so"
    return (
        "one thread-block cluster up to "
        f"{_kernels.CLUSTER_MAX_NONZEROS} non-zeros and 8 outputs, the scan beyond "
        f"and under vmap (kernel compiled at first use by NVRTC: {nvrtc})"
    )


def show_config() -> None:
    """Print which implementation orc runs in this process, and on what.

    The CPU path is orc's native kernels (built at install time, see
    :mod:`orc._native`) or, where they are missing or switched off
    (``ORC_NATIVE=0``, ``orc.use_backend("xla")``), XLA alone; this prints
    which one, the kernel variants picked for this CPU, their threads and
    the BLAS the ridge statistics use; on a GPU, how a forecast runs there
    (one thread-block cluster on compute capability 9.0 or later, see
    :func:`orc._kernels.cluster_config`).
    """
    c = config()
    native = c["native"]
    lines = [
        f"orc {c['orc']} (python {c['python']}, jax {c['jax']}, jaxlib {c['jaxlib']})",
        f"  JAX platform   {c['platform']}: {', '.join(c['devices'])}",
        f"  float64 (x64)  {'on' if c['x64'] else 'off (models are float32)'}",
        f"  default path   {c['backend']}"
        + (" (ORC_NATIVE=0)" if os.environ.get("ORC_NATIVE") == "0" else ""),
    ]
    if c["platform"] != "cpu":
        from ._strategy import DEVICE_UNROLL

        lines += [
            f"  on {c['platform']:<11} XLA runs orc's computations (the native kernels "
            "below serve the CPU,",
            "                 but for the GPU forecast);"
            f" closed-loop forecasts unrolled {DEVICE_UNROLL} steps per",
            "                 loop iteration; every product at full precision for its "
            "dtype (no TF32);",
            '                 construction="jax" builds reservoirs on the device',
            f"  GPU forecast   {c['gpu_forecast']}",
        ]
    if native["available"]:
        missing = [n for n, ok in native["routines"].items() if not ok]
        cap = (
            f", capped by ORC_NATIVE_THREADS={native['thread_limit']}"
            if native["thread_limit"]
            else ""
        )
        lines += [
            "  native kernels installed and registered",
            f"    module       {native['file']}",
            f"    sparse rows  {native['ell']}",
            f"    tanh         {native['tanh']}",
            f"    variants     {native['variants']} (from {native['variants_from']})",
            f"    Gram kernel  {native['gram']} (ridge statistics from 64 features on, "
            "Cholesky solve; BLAS syrk/gemm below 64)",
            f"    threads      up to {native['threads']} per call: XLA's CPU thread pool "
            f"({native['pool_threads']} threads{cap}; {c['cpu_count']} CPUs)",
            "    BLAS/LAPACK  "
            + ("all routines set" if not missing else f"missing {', '.join(missing)}")
            + " (syrk/gemm below 64 features, syevd for the minimum-norm fallback)",
        ]
    else:
        lines += [
            f"  native kernels OFF: {native['reason']}",
            "    XLA runs everything: training and forecasting are 3-6x slower "
            "for large reservoirs on CPU",
        ]
    lines.append(f"  BLAS           {c['blas']}")
    print("\n".join(lines))
