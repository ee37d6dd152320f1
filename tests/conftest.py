"""Test configuration: float64 on and strict dtype promotion, as DESIGN §5 asks.

Both are switched on here, in the test process, never by the library itself.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")


def pytest_report_header(config):
    """The test log says which implementation runs (native kernels or XLA)."""
    from orc._native import native_config

    native = native_config()
    if not native["available"]:
        return f"orc native kernels: OFF ({native['reason']})"
    return (
        f"orc native kernels: ON ({native['file']}; sparse rows {native['ell']}, "
        f"tanh {native['tanh']}, {native['threads']} threads)"
    )
