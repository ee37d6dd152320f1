"""Test configuration: float64 on and strict dtype promotion, as DESIGN §5 asks.

Both are switched on here, in the test process, never by the library itself.
"""

import os
import shutil
import tempfile

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")

# One persistent compilation cache per test run, shared by every process of
# the run: the xdist workers and the subprocesses tests start (docs pages,
# command-line runs, reproducibility checks) inherit it from the process that
# started the run, so a program compiled by one is loaded by the others (the
# suite took 10:58 instead of 12:15 on 2 cores). It is created empty for each
# run and removed at its end: no run reads another's programs. jax writes
# cache entries in place, so a size limit is set, which makes it lock the
# cache with filelock for every read and write (no process reads an entry
# another is still writing); without filelock there is no shared cache.
# (_helpers.count_compiles counts a program loaded from it as a compilation.)
try:
    import filelock
except ImportError:  # the test extra installs it
    filelock = None
_CACHE_OWNER = filelock is not None and "ORC_TEST_JAX_CACHE" not in os.environ
if _CACHE_OWNER:
    os.environ["ORC_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="orc-test-jax-cache-")
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.environ["ORC_TEST_JAX_CACHE"])
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(8 * 2**30))

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


def pytest_unconfigure(config):
    if _CACHE_OWNER:
        shutil.rmtree(os.environ["ORC_TEST_JAX_CACHE"], ignore_errors=True)
