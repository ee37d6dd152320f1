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

The platforms a program may be lowered for are part of its identity too
(:func:`lowering_targets`): in a process whose default backend is the CPU,
:func:`on_platform` traces only the branch the CPU runs (the others,
``lax.platform_dependent``'s GPU and default branches, were traced there
for nothing: ~60% of the tracing of a small ESN's training and forecasts),
unless :func:`orc.export` lowers for other platforms.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os

import equinox as eqx
import jax
import numpy as np

from . import _errors

__all__ = [
    "BACKENDS",
    "use_backend",
    "default_backend",
    "native",
    "compiled",
    "scan",
    "on_platform",
    "lowering_targets",
    "lowering_for",
    "DEVICE_UNROLL",
    "full_precision",
    "model_hash",
]

BACKENDS = ("native", "xla")
_current: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "orc_backend", default=None
)


_targets: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "orc_lowering_targets", default=None
)


def lowering_targets() -> str:
    """``"cpu"`` when the programs traced now are lowered for the CPU only
    (the process's default backend is the CPU and no :func:`lowering_for`
    block says otherwise), else ``"any"``."""
    targets = _targets.get()
    if targets is None:
        return "cpu" if jax.default_backend() == "cpu" else "any"
    return targets


@contextlib.contextmanager
def lowering_for(targets: str):
    """Trace the orc calls inside the block for ``targets`` (``"cpu"`` or
    ``"any"``): :func:`orc.export` for other platforms than the CPU traces
    with ``"any"``, so every branch of :func:`on_platform` is there to lower."""
    token = _targets.set(targets)
    try:
        yield
    finally:
        _targets.reset(token)


def on_platform(*args, default, cpu=None, cuda=None, targets: str | None = None):
    """``jax.lax.platform_dependent(*args, cpu=cpu, cuda=cuda, default=default)``
    (the branches given), except in a trace lowered for the CPU only
    (``targets``, by default :func:`lowering_targets`), where it is simply
    the branch the CPU runs (``cpu``, else ``default``) and the others are
    not traced; with ``default`` alone, ``default``. The branches compute
    the same function, each the way its platform affords."""
    if targets is None:
        targets = lowering_targets()
    if targets == "cpu" or (cpu is None and cuda is None):
        return (default if cpu is None else cpu)(*args)
    branches = {"cpu": cpu, "cuda": cuda}
    return jax.lax.platform_dependent(
        *args, default=default, **{k: f for k, f in branches.items() if f is not None}
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


class _Dynamic:
    """Marks, among an argument's or a result's leaves, the place of an array."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<array>"


_DYNAMIC = _Dynamic()


class _Static:
    """The non-array leaves of a program's result and its tree structure,
    carried as the auxiliary data of an empty pytree node: ``jax.jit``
    returns them as the trace left them, for each compiled signature."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value


jax.tree_util.register_pytree_node(
    _Static, lambda s: ((), s.value), lambda value, _: _Static(value)
)


def _split(tree):
    """``(structure, leaves with arrays marked _DYNAMIC, arrays)`` of ``tree``;
    arrays are what :func:`equinox.is_array` calls one (JAX and NumPy arrays
    and scalars, tracers), every other leaf is static."""
    leaves, structure = jax.tree_util.tree_flatten(tree)
    arrays, marked = [], []
    for leaf in leaves:
        if eqx.is_array(leaf):
            arrays.append(leaf)
            marked.append(_DYNAMIC)
        else:
            marked.append(leaf)
    return structure, tuple(marked), arrays


def _join(structure, marked, arrays):
    """The inverse of :func:`_split`."""
    it = iter(arrays)
    return jax.tree_util.tree_unflatten(
        structure, [next(it) if leaf is _DYNAMIC else leaf for leaf in marked]
    )


def compiled(fn=None, *, host_results: bool = False):
    """``fn`` compiled with ``jax.jit``, with a static keyword ``backend`` (see
    the module doc). Arguments are split as ``eqx.filter_jit`` splits them:
    arrays are traced, every other leaf (Python numbers, strings, functions,
    the static fields of modules) is static and part of the program's
    identity; results may hold non-array leaves too. Works on functions and
    methods (``self`` is an argument like any other). The program returns the
    run-time checks of ``fn`` as codes, which the wrapper raises or warns on
    the host (:mod:`orc._errors`): no host callback in the program.

    ``host_results`` (``@compiled(host_results=True)``) says that the caller
    reads the array results on the host right away (the forecasts, which
    :func:`orc._divergence.report_divergence` looks at): off CPU their copies
    to the host are started with the codes', so the two transfers overlap
    instead of following each other (each costs ~115 us on an H100 with jax
    0.11, most of a short forecast's call). On CPU the results are host
    memory already and nothing is done.

    Why not ``eqx.filter_jit`` itself: its per-call work in Python (the
    partition of the arguments, a logging filter, a wait for the result) was
    about 140 us of a ~190 us call of a trained ESN's ``forecast(10, r)`` on
    an AMD EPYC, where ``jax.jit`` of the same program took ~50 us; an entry
    point called in a loop (short forecasts, control, streaming) paid it at
    every call."""
    if fn is None:
        return functools.partial(compiled, host_results=host_results)

    def run(static, arrays):
        structure, marked, backend, targets, in_loop = static
        args, kwargs = _join(structure, marked, arrays)
        with use_backend(backend), lowering_for(targets), full_precision():
            out = _errors.collect_in(in_loop, fn, args, kwargs)
        out_structure, out_marked, out_arrays = _split(out)
        return out_arrays, _Static((out_structure, out_marked))

    # the program carries the entry point's name: jax's compile log, its
    # profiler and XLA's dumps say jit(fit) or jit(forecast), not jit(run)
    run.__name__ = fn.__name__.lstrip("_") or fn.__name__
    run.__qualname__ = fn.__qualname__
    jitted = jax.jit(run, static_argnums=0)

    def call(*args, backend: str | None = None, **kwargs):
        structure, marked, arrays = _split((args, kwargs))
        # inside a loop of another orc program: the program differs (its
        # checks of the caller's data are left out, orc._validation.check_input)
        in_loop = _errors.in_program_loop()
        try:
            out_arrays, static = jitted(
                (structure, marked, resolve(backend), lowering_targets(), in_loop),
                arrays,
            )
        except TypeError:
            # JAX refuses a NumPy array of text or objects before fn can
            # check it: say which argument, as fn's own checks would
            _refuse_non_numeric(fn, args, kwargs)
            raise
        if host_results:
            to_host_soon(out_arrays)
        return _errors.report(*_join(*static.value, out_arrays))

    return _Method(fn, call)


def _refuse_non_numeric(fn, args, kwargs) -> None:
    """``TypeError`` naming the first argument of ``fn`` that holds a NumPy
    array of neither numbers nor bools (text, bytes, objects), if any."""
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return
    owner = fn.__name__
    if "." in fn.__qualname__ and args:
        owner = f"{type(args[0]).__name__}.{fn.__name__.lstrip('_')}"
    for name, value in bound.arguments.items():
        for leaf in jax.tree_util.tree_leaves(value):
            if isinstance(leaf, np.ndarray) and leaf.dtype.kind not in "biufc":
                raise TypeError(
                    f"{owner}: {name} must be an array of real numbers, got "
                    f"dtype {leaf.dtype}"
                )


def to_host_soon(arrays) -> None:
    """Start the copies of the JAX arrays among ``arrays`` to the host when
    they live off CPU (a program's results, or an argument that will be read
    on the host after the program, such as the warm-up data a forecast's
    divergence check compares with); nothing for tracers (a call inside the
    user's transformation), other objects, or arrays on CPU devices (host
    memory already: the CPU's programs, and a GPU process's ones run under
    ``jax.default_device`` of a CPU). Decided per array, not by the process's
    default backend (~0.7 us an array)."""
    for a in arrays:
        if isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer):
            if not _on_host(a) and a.is_fully_addressable:
                a.copy_to_host_async()


def _on_host(a: jax.Array) -> bool:
    """Whether every device holding ``a`` is a CPU."""
    return all(d.platform == "cpu" for d in a.sharding.device_set)


def model_hash(model) -> int:
    """``__hash__`` of orc's models: Equinox's hash (of the fields), and where
    that fails because the model holds arrays, a ``TypeError`` that says why
    a model cannot be a static argument of ``jax.jit`` (which hashes its
    static arguments) and what to do instead."""
    try:
        return eqx.Module.__hash__(model)
    except TypeError as err:
        name = type(model).__name__
        raise TypeError(
            f"orc: the model ({name}) is not hashable: it holds arrays, so it "
            "cannot be a static argument of jax.jit (static_argnums/"
            "static_argnames). Pass the model as a regular argument instead (its "
            "arrays are traced) and mark only Python values such as fcast_len or "
            "spinup static, e.g. for a forecaster jax.jit(lambda model, r: "
            "model.forecast(100, r))(model, r0), or use equinox.filter_jit, which "
            "traces the model's arrays and keeps everything else static."
        ) from err


def method(fn):
    """A method of an Equinox module bound as :func:`compiled`'s are (see
    :class:`_Method`): for the public methods that wrap an entry point and
    are called in loops (``forecast``, ``classify``, ...)."""
    return _Method(fn, fn)


class _Method:
    """A function usable as a method of an Equinox module, called through
    ``call`` (``fn`` itself, or its compiled wrapper); as a method, bound to
    its instance as a :class:`_Bound`. Equinox binds the plain functions of a
    module to a new module object at every attribute access (~29 us on an
    AMD EPYC, twice per ``forecast`` call: ``forecast`` and its
    ``_forecast``); this binding costs ~1 us."""

    def __init__(self, fn, call):
        functools.update_wrapper(self, fn)
        self._call = call

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __get__(self, instance, owner=None):
        if instance is None:
            return self
        return _Bound(self, instance)

    @functools.cached_property
    def bound_signature(self) -> inspect.Signature:
        """The signature of the method bound: without its first parameter."""
        sig = inspect.signature(self.__wrapped__)
        return sig.replace(parameters=list(sig.parameters.values())[1:])


class _Bound:
    """A :class:`_Method` bound to its instance. A pytree whose leaves are the
    instance's (as with Equinox's bound methods, so it can be passed to a
    jitted function), with the method's name, docstring and signature (less
    ``self``) for ``help`` and ``inspect``."""

    # __weakref__: jax.jit takes a weak reference to its function before it
    # hashes it, so that a jitted bound method meets __hash__'s message below
    __slots__ = ("__func__", "__self__", "__weakref__")

    def __init__(self, compiled: _Method, instance):
        self.__func__ = compiled
        self.__self__ = instance

    def __call__(self, *args, **kwargs):
        return self.__func__._call(self.__self__, *args, **kwargs)

    def __hash__(self):
        # A bound method is its model (arrays) and a function: not hashable,
        # as Equinox's bound methods are not. jax.jit hashes the function it
        # compiles and its static arguments; say what to do instead.
        name = self.__func__.__name__
        model = type(self.__self__).__name__
        raise TypeError(
            f"orc: the bound method {model}.{name} is not hashable (its model "
            "holds arrays), so it cannot be the function that jax.jit compiles "
            "nor a static argument of jax.jit. Pass the model as an argument of "
            f"the jitted function instead, e.g. f = jax.jit(lambda model, *args: "
            f"model.{name}(*args)), then f(model, ...), with Python values "
            "such as fcast_len marked static (static_argnums counts the model "
            f"as 0), or use equinox.filter_jit(model.{name}), which traces the "
            f"model's arrays. orc's methods compile themselves: model.{name}(...) "
            "needs no jax.jit."
        )

    @property
    def __doc__(self):  # type: ignore[override]
        return self.__func__.__doc__

    def __getattr__(self, name):  # __name__, __qualname__, __module__, __wrapped__
        if name in ("__name__", "__qualname__", "__module__", "__wrapped__"):
            return getattr(self.__func__, name)
        raise AttributeError(name)

    @property
    def __signature__(self):
        return self.__func__.bound_signature

    def __repr__(self) -> str:
        return f"<orc method {self.__func__.__qualname__} of {type(self.__self__).__name__}>"


jax.tree_util.register_pytree_node(
    _Bound,
    lambda b: ((b.__self__,), b.__func__),
    lambda func, children: _Bound(func, children[0]),
)


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
    program is lowered for its platform, :func:`on_platform`; the results are
    the same function, rounding aside)."""
    return on_platform(
        init,
        xs,
        cpu=lambda i, x: jax.lax.scan(step, i, x, length=length),
        default=lambda i, x: jax.lax.scan(
            step, i, x, length=length, unroll=DEVICE_UNROLL
        ),
    )
