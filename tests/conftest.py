"""Test configuration: float64 on and strict dtype promotion, as DESIGN §5 asks.

Both are switched on here, in the test process, never by the library itself.
"""

import os

os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
