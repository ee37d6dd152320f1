"""How a computation runs: the execution strategy, an argument of every
compiled entry point.

Two backends compute the same things: ``"native"`` (orc's CPU kernels,
:mod:`orc._native`, on CPU; XLA elsewhere) and ``"xla"`` (JAX/XLA everywhere,
the reference). Every compiled entry point of orc (training functions,
``force``, ``forecast``, ``classify``, ...) is decorated with :func:`compiled`,
which gives it a keyword ``backend``, resolved when the function is *called*:

1. the ``backend=`` argument, if given;
2. else the backend of an enclosing :func:`use_backend` block (or of the
   entry point this call is nested in);
3. else the environment default: ``"xla"`` with ``ORC_NATIVE=0``, otherwise
   ``"native"``.

The resolved name is passed to the compiled function as a static argument,
so it is part of the compiled program's identity: a function traced for one
backend is never reused for the other, and ``jax.jit``'s cache never hides a
change. The kernels below consult :func:`native` only while such a call is
being traced.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os

import equinox as eqx
import jax

from . import _errors

__all__ = [
    "BACKENDS",
    "use_backend",
    "default_backend",
    "native",
    "compiled",
    "scan",
    "DEVICE_UNROLL",
    "full_precision",
]

BACKENDS = ("native", "xla")
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "orc_backend", default=None
)


def default_backend() -> str:
    """``"xla"`` when ``ORC_NATIVE=0`` is set, else ``"native"`` (read at each call)."""
    return "xla" if os.environ.get("ORC_NATIVE", "1") == "0" else "native"


def resolve(backend: str | None) -> str:
    """The backend a call runs with: ``backend``, the enclosing one, or the default."""
    if backend is None:
        backend = _current.get() or default_backend()
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


@contextlib.contextmanager
def use_backend(backend: str):
    """Run the orc calls inside the block with ``backend`` (``"native"`` or ``"xla"``).

    Example
    -------
    >>> with orc.use_backend("xla"):
    ...     esn, R = orc.forecaster.train_RCForecaster(esn, U)   # XLA only
    """
    token = _current.set(resolve(backend))
    try:
        yield
    finally:
        _current.reset(token)


def native() -> bool:
    """Whether the computation being traced may use the native kernels."""
    return resolve(None) == "native"


def full_precision():
    """Context in which every contraction traced without an explicit
    precision runs at full precision for its dtype (``"highest"``): those
    JAX builds for orc inside its own functions (the derivative rules of
    ``qr``, ``cholesky`` and triangular solves, ``equinox.nn`` layers such
    as the GRU cell) and those of user components run by an orc entry point.
    orc's own contractions pass ``precision="highest"`` themselves. Scoped to
    the trace (thread-local), so the user's setting outside is untouched; on
    CPU it changes nothing, on a GPU it keeps float32 out of TF32."""
    return jax.default_matmul_precision("highest")


def compiled(fn):
    """``eqx.filter_jit`` of ``fn`` with a static keyword ``backend`` (see the
    module doc). Works on functions and methods (``self`` is traced like any
    argument, as with ``eqx.filter_jit``). The program returns the run-time
    checks of ``fn`` as codes, which the wrapper raises or warns on the host
    (:mod:`orc._errors`): no host callback in the program."""

    @eqx.filter_jit
    def run(*args, _backend, **kwargs):
        with use_backend(_backend), full_precision():
            return _errors.collect(fn, *args, **kwargs)

    @functools.wraps(fn)
    def call(*args, backend: str | None = None, **kwargs):
        return _errors.report(*run(*args, _backend=resolve(backend), **kwargs))

    return call


#: Steps of a closed-loop forecast per iteration of the compiled loop on a
#: GPU or other device. XLA runs a loop's control on the host there: every
#: iteration waits for the device, ~5 us per iteration on an H100 (jax 0.11),
#: which was half of an N=2000 forecast step (10.4 us per step with one step
#: per iteration, 5.4 with 16, 5.1 with 64 at 2x the compile time; float32
#: 9.4, 4.9, 4.6; benchmarks/GPU.md). The forced runs of training stay
#: rolled: unrolled, training at N=2000 measured 0.24 s instead of 0.16 s.
#: On CPU every loop stays rolled (unrolling only lengthens compilation).
DEVICE_UNROLL = 16


def scan(step, init, xs, length: int | None = None):
    """``jax.lax.scan(step, init, xs, length)`` unrolled ``DEVICE_UNROLL``
    steps per iteration off CPU, rolled on CPU (the branch is chosen when the
    program is lowered for its platform; the results are the same function,
    rounding aside). In a process whose default device is the CPU the loop is
    simply rolled: both branches of ``platform_dependent`` are traced, which
    cost the CPU-only test suite ~5% more tracing for a branch that is never
    lowered there (a program exported from such a process for a GPU then
    runs its loop rolled: slower, same function)."""
    if jax.default_backend() == "cpu":
        return jax.lax.scan(step, init, xs, length=length)
    return jax.lax.platform_dependent(
        init,
        xs,
        cpu=lambda i, x: jax.lax.scan(step, i, x, length=length),
        default=lambda i, x: jax.lax.scan(
            step, i, x, length=length, unroll=DEVICE_UNROLL
        ),
    )
