"""Run-time errors and warnings of compiled programs, returned as data.

Some faults are only visible while a compiled program runs: NaN in the
training data, a singular ridge solve, a corrupted matrix index. The usual
JAX idiom, :func:`equinox.error_if`, raises them from a host callback inside
the program. A program that holds a host callback cannot be written to JAX's
persistent compilation cache ("uses host callbacks", so every new process
compiles training again) nor serialised with :mod:`jax.export`, and each
callback costs a hand-over to Python while the program runs.

So orc's compiled entry points (:func:`orc._strategy.compiled`) return what
they found instead:

- library code states a check with :func:`check`, :func:`check_index` or
  :func:`warn`. While an entry point is being traced, and the check sits at
  the top level of its program (not inside a ``scan``/``cond`` body, whose
  values cannot leave it), the check becomes an int32 *code*: -1 when
  nothing was found, else the index of its message. The messages are static,
  known when the program is traced;
- the program returns its codes next to its result (:class:`Errors`), and
  the entry point's Python wrapper (:func:`report`) reads them when the call
  returns: it raises :class:`equinox.EquinoxRuntimeError` (what a failed
  ``eqx.error_if`` raises, so ``except`` clauses keep working) for the first
  error found, in the order the checks were written, and emits the
  warnings;
- an entry point called inside another one hands its codes to the outer
  program; one called under the user's own ``jax.jit``/``vmap``/``grad``
  (no orc program around it) threads them onto its result with
  ``eqx.error_if``, exactly as before, since there is no Python to return
  to until the user's program ends; :func:`capture_errors` gives such
  programs the codes as a value instead (e.g. to :func:`orc.export` them);
- a check inside a loop body, or outside any entry point, is an
  ``eqx.error_if`` as before.

The price is one wait for the result when an entry point returns (its
program must finish before its codes can be read); a program without checks
returns without waiting.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import sys
import warnings
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.extend.core import get_opaque_trace_state

__all__ = [
    "Errors",
    "IndexedMessages",
    "check",
    "check_index",
    "warn",
    "collect",
    "report",
    "capture_errors",
]

ERROR, WARNING = "error", "warning"
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# equinox's method binding (a call of model.forecast(...) passes through it)
_EQX_MODULE_DIR = os.path.join(
    os.path.dirname(os.path.abspath(eqx.__file__)), "_module"
)

# Warning classes seen by ``warn`` (and the built-in ones), by qualified name,
# so that Errors read back from a serialised export name the same class.
_CATEGORIES: dict[str, type[Warning]] = {
    f"{c.__module__}.{c.__qualname__}": c for c in (UserWarning, RuntimeWarning)
}


def _category_name(category: type[Warning]) -> str:
    name = f"{category.__module__}.{category.__qualname__}"
    _CATEGORIES.setdefault(name, category)
    return name


def warn_at_caller(msg: str, category: type[Warning]) -> None:
    """``warnings.warn`` attributed to the first frame outside the orc package,
    equinox's method binding and Python's import machinery: the user's line that called into orc (or
    imported it), whatever the depth of orc's own calls in between."""
    frame = sys._getframe(1)
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(_PACKAGE_DIR)
        or frame.f_code.co_filename.startswith(_EQX_MODULE_DIR)
        or frame.f_code.co_filename.startswith("<frozen importlib")
    ):
        frame = frame.f_back
    module_globals = frame.f_globals
    filename = frame.f_code.co_filename
    warnings.warn_explicit(
        msg,
        category,
        filename,
        frame.f_lineno,
        module=module_globals.get("__name__", "<unknown>"),
        registry=module_globals.setdefault("__warningregistry__", {}),
        # the source line comes from the module's loader, which code run by
        # `python -c` or exec has not (its loader raises ImportError)
        module_globals=None if filename.startswith("<") else module_globals,
    )


class IndexedMessages(Sequence[str]):
    """The messages ``fmt.format(*np.unravel_index(i, shape))`` for ``i`` in
    ``range(prod(shape))``, made only when one is read.

    A check whose message names a position found at run time (the first row
    of the data that holds NaN) has one message per position; this sequence
    holds them all at the cost of one, so the position is named under any
    ``jax.jit`` as it is eagerly, whatever the data's length. Hashable and
    comparable by ``(fmt, shape)`` (static metadata of a program)."""

    __slots__ = ("fmt", "shape")

    def __init__(self, fmt: str, shape: Sequence[int]):
        self.fmt = fmt
        self.shape = tuple(int(n) for n in shape)

    def __len__(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        i = int(i)
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self.fmt.format(*(int(j) for j in np.unravel_index(i, self.shape)))

    def __eq__(self, other):
        return isinstance(other, IndexedMessages) and (self.fmt, self.shape) == (
            other.fmt,
            other.shape,
        )

    def __hash__(self):
        return hash((IndexedMessages, self.fmt, self.shape))

    def __repr__(self):
        return f"IndexedMessages({self.fmt!r}, {self.shape})"


class _Chain(Sequence[str]):
    """The messages of several checks end to end, unmade (hashable)."""

    __slots__ = ("parts", "_starts")

    def __init__(self, parts):
        self.parts = tuple(parts)
        self._starts = np.cumsum([0] + [len(p) for p in self.parts])

    def __len__(self) -> int:
        return int(self._starts[-1])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[j] for j in range(*i.indices(len(self))))
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(i)
        k = int(np.searchsorted(self._starts, i, side="right")) - 1
        return self.parts[k][i - int(self._starts[k])]

    def __eq__(self, other):
        return isinstance(other, _Chain) and self.parts == other.parts

    def __hash__(self):
        return hash((_Chain, self.parts))


def _messages(msgs: Sequence[str]):
    """``msgs`` as static, hashable data: an :class:`IndexedMessages` as it is,
    another sequence as a tuple."""
    return msgs if isinstance(msgs, IndexedMessages) else tuple(msgs)


class Errors:
    """What a compiled orc program found while it ran, as data.

    ``codes`` is an int32 array with one entry per check, ``-1`` where the
    check passed, else the index of its message in ``entries``; it has the
    leading axes of any ``vmap`` the program ran under. ``entries`` (static)
    holds, per check, its kind (``"error"`` or ``"warning"``), its messages
    and, for warnings, the qualified name of the warning class.

    A pytree: it passes through ``jax.jit`` and ``vmap``, and through
    :mod:`jax.export` (serialisable once :mod:`orc` is imported). Read it on
    the host with :meth:`found` or :meth:`raise_if_any`.
    """

    __slots__ = ("codes", "entries")

    def __init__(self, codes, entries: tuple = ()):
        self.codes = codes
        self.entries = tuple(entries)

    def found(self) -> list[tuple[str, str, str | None]]:
        """The checks that fired, as ``(kind, message, warning class name)``,
        in the order they were written (any ``vmap``'d element firing counts)."""
        if not self.entries:
            return []
        codes = np.asarray(self.codes).reshape(-1, len(self.entries))
        out = []
        for j, (kind, msgs, category) in enumerate(self.entries):
            hit = codes[:, j][codes[:, j] >= 0]
            if hit.size:
                out.append((kind, msgs[int(hit[0])], category))
        return out

    def raise_if_any(self) -> None:
        """Emit the warnings found, then raise :class:`equinox.EquinoxRuntimeError`
        for the first error found (waits for the program that made ``codes``)."""
        found = self.found()
        for kind, msg, category in found:
            if kind == WARNING:
                cls = _CATEGORIES.get(category, UserWarning)
                warn_at_caller(msg, cls)
        for kind, msg, _ in found:
            if kind == ERROR:
                raise eqx.EquinoxRuntimeError(msg)

    def __repr__(self) -> str:
        return f"Errors(codes={self.codes!r}, entries={len(self.entries)})"


def _flatten(e: Errors):
    return ((e.codes,), e.entries)


def _unflatten(entries, children):
    return Errors(children[0], entries)


jax.tree_util.register_pytree_node(Errors, _flatten, _unflatten)


def _serialize_entries(entries) -> bytes:
    import json

    def messages(m):
        if isinstance(m, IndexedMessages):
            return {"fmt": m.fmt, "shape": list(m.shape)}
        return list(m)

    return json.dumps([[k, messages(m), c] for k, m, c in entries]).encode()


def _deserialize_entries(data: bytes):
    import json

    def messages(m):
        if isinstance(m, dict):
            return IndexedMessages(m["fmt"], m["shape"])
        return tuple(m)

    return tuple((k, messages(m), c) for k, m, c in json.loads(data.decode()))


jax.export.register_pytree_node_serialization(
    Errors,
    serialized_name="orc.Errors",
    serialize_auxdata=_serialize_entries,
    deserialize_auxdata=_deserialize_entries,
)


class _Ledger:
    """The checks of the program being traced at ``state``. ``in_loop``: the
    program is an entry point called inside a loop or branch body of another
    orc program being traced (:func:`in_program_loop`)."""

    def __init__(self, in_loop: bool = False, body: bool = False):
        self.state = get_opaque_trace_state()
        self.in_loop = in_loop
        self.body = body  # a loop body's own ledger (loop_body)
        self.checked = False  # inside inputs_checked()
        self.codes: list = []
        self.entries: list = []

    def is_current(self) -> bool:
        return get_opaque_trace_state() == self.state

    def add(self, codes, entries) -> None:
        self.codes.append(jnp.asarray(codes, jnp.int32).reshape(-1))
        self.entries.extend(entries)

    def errors(self) -> Errors:
        if not self.entries:
            return Errors(None, ())
        return Errors(jnp.concatenate(self.codes), tuple(self.entries))


_ledger: contextvars.ContextVar[_Ledger | None] = contextvars.ContextVar(
    "orc_ledger", default=None
)


def _current_ledger() -> _Ledger | None:
    ledger = _ledger.get()
    return ledger if ledger is not None and ledger.is_current() else None


def in_program_loop() -> bool:
    """Whether the caller is traced inside a loop or branch body of an orc
    program (an orc program is being traced, not at the level where its
    checks become codes): an entry point called there (a model's ``force``
    run block by block by training) gets its arguments from orc's own code,
    which checked what the user gave it at its top level."""
    ledger = _ledger.get()
    return ledger is not None and (
        ledger.body or ledger.checked or not ledger.is_current()
    )


@contextlib.contextmanager
def inputs_checked():
    """Within this block, while an orc program is traced, the entry points
    it calls count as called inside a loop of it (:func:`in_program_loop`):
    they leave out their checks of the data they are given, which the
    program checked at its top level. A fit forces the reservoir with
    ``model.force`` on data the fit checked: without this, the same data is
    checked twice, and each check is compiled (about a quarter of a small
    model's training program)."""
    ledger = _current_ledger()
    if ledger is None:
        yield
        return
    before, ledger.checked = ledger.checked, True
    try:
        yield
    finally:
        ledger.checked = before


def loop_body(fn: Callable) -> Callable:
    """``fn`` as the body of one of orc's own loops (``lax.map``, ``scan``,
    ``fori_loop``): ``body(*args) -> (fn(*args), Errors)``. Inside a loop
    body the program's ledger cannot take codes (they would be values of
    the body's trace), so without this a check there becomes a host
    callback, and a program holding one is never written to JAX's
    persistent compilation cache. The body returns its checks as codes
    instead; :func:`report_loop` hands on what the loop returns. Entry
    points called in the body still count as called inside a loop
    (:func:`in_program_loop`)."""

    @functools.wraps(fn)
    def body(*args):
        ledger = _Ledger(in_loop=True, body=True)
        token = _ledger.set(ledger)
        try:
            out = fn(*args)
        finally:
            _ledger.reset(token)
        return out, ledger.errors()

    return body


def report_loop(out, errors: Errors):
    """``out``, after handing on the checks a loop's iterations returned
    (:func:`loop_body`; codes ``(..., checks)`` with the loop's axes in
    front): per check, the code of the first iteration where it fired."""
    if not errors.entries:
        return out
    n = len(errors.entries)
    codes = jnp.reshape(errors.codes, (-1, n))
    fired = codes >= 0
    first = jnp.take_along_axis(codes, jnp.argmax(fired, axis=0)[None], axis=0)[0]
    return report(
        out, Errors(jnp.where(jnp.any(fired, axis=0), first, -1), errors.entries)
    )


def called_in_program_loop() -> bool:
    """Whether the entry point being traced was called inside a loop or
    branch body of another orc program (see :func:`in_program_loop`; set by
    :func:`orc._strategy.compiled` when the call was traced)."""
    ledger = _current_ledger()
    return ledger is not None and ledger.in_loop


def _scalar(pred):
    pred = jnp.asarray(pred)
    return pred if pred.ndim == 0 else jnp.any(pred)


def check(x, pred, msg: str, *, replace=None):
    """``x``, with an error ``msg`` if ``pred`` (any of it) is true.

    Recorded as a code, a failed check does not stop the program: what comes
    after it runs on ``x`` and the error is raised when the program returns.
    Where a bad ``x`` could make that computation fail another way or never
    end (an out-of-range index a kernel refuses, decreasing times in an ODE
    solve's loop), pass ``replace``, a harmless value of ``x``'s shape that
    the program goes on with instead when the check fails."""
    return check_index(x, pred, 0, (msg,), replace=replace)


def check_index(x, pred, index, msgs: Sequence[str], *, replace=None):
    """``x``, with the error ``msgs[index]`` if ``pred`` is true (``replace``
    as in :func:`check`). ``msgs`` may be an :class:`IndexedMessages` (one
    message per position, made only when it is raised)."""
    msgs = _messages(msgs)
    ledger = _current_ledger()
    if ledger is None:  # eqx.error_if stops the program itself
        return eqx.branched_error_if(x, _scalar(pred), index, msgs)
    fired = _scalar(pred)
    code = jnp.where(fired, jnp.asarray(index, jnp.int32), -1)
    ledger.add(code, [(ERROR, msgs, None)])
    if replace is not None:
        x = jax.tree.map(lambda a, b: jnp.where(fired, b, a), x, replace)
    return x


def warn(pred, msg: str, category: type[Warning] = UserWarning) -> None:
    """Warn ``msg`` (of ``category``) if ``pred`` (any of it) is true."""
    name = _category_name(category)
    ledger = _current_ledger()
    if ledger is None:
        _warn_callback(_scalar(pred), msg=msg, category=name)
    else:
        ledger.add(jnp.where(_scalar(pred), 0, -1), [(WARNING, (msg,), name)])


def _warn_host(fired, *, msg, category) -> None:
    if bool(np.any(fired)):
        warnings.warn(msg, _CATEGORIES.get(category, UserWarning), stacklevel=1)


def _warn_callback(fired, *, msg: str, category: str) -> None:
    """Warn from compiled code when it runs (no orc program to return to)."""

    @jax.custom_batching.custom_vmap
    def emit(f):
        # The callback sits in a branch taken only when the warning fires: a
        # host callback on every call costs more than the branch.
        jax.lax.cond(
            f,
            lambda: jax.debug.callback(
                functools.partial(_warn_host, msg=msg, category=category), f
            ),
            lambda: None,
        )
        return f

    @emit.def_vmap
    def _(axis_size, in_batched, f):
        # jax.debug.callback unrolls over a vmapped axis (one call, one
        # warning, per element): reduce the axis first, so it warns once.
        del axis_size
        (batched,) = in_batched
        return emit(jnp.any(f) if batched else f), False

    emit(fired)


def collect(fn: Callable, *args, **kwargs):
    """``(fn(*args, **kwargs), Errors)``: ``fn`` run with its checks recorded
    as codes (see the module doc)."""
    return collect_in(False, fn, args, kwargs)


def collect_in(in_loop: bool, fn: Callable, args, kwargs):
    """:func:`collect` of ``fn(*args, **kwargs)`` for an entry point called
    inside a loop of another orc program or not (``in_loop``, see
    :func:`called_in_program_loop`)."""
    ledger = _Ledger(in_loop)
    token = _ledger.set(ledger)
    try:
        out = fn(*args, **kwargs)
    finally:
        _ledger.reset(token)
    return out, ledger.errors()


def report(out, errors: Errors):
    """``out``, after acting on ``errors``: handed to the enclosing orc
    program if there is one, raised/warned on the host if the codes are
    values, else threaded onto ``out`` with ``eqx.error_if``."""
    if not errors.entries:
        return out
    ledger = _current_ledger()
    if ledger is not None:
        ledger.add(errors.codes, errors.entries)
        return out
    if not isinstance(errors.codes, jax.core.Tracer):
        errors.raise_if_any()
        return out
    return _thread(out, errors)


def _thread(out, errors: Errors):
    parts = [msgs for kind, msgs, _ in errors.entries if kind != WARNING]
    pred, index = _first_error(errors)  # and the warnings' callbacks
    if not parts:
        return out
    if not any(eqx.is_array(leaf) for leaf in jax.tree_util.tree_leaves(out)):
        raise TypeError("orc: a checked entry point must return at least one array")
    # the errors' messages end to end (unmade: _Chain)
    return eqx.branched_error_if(out, pred, index, _Chain(parts))


@jax.jit
def _first_error(errors: Errors):
    """Whether an error fired and the index of its message in the errors'
    messages end to end; the warnings' callbacks. One program (the entries
    are static): under an eager ``vmap`` or ``grad`` of an entry point each
    operation would be a program of its own."""
    codes = errors.codes
    offset = 0
    pred, index = jnp.zeros((), bool), jnp.zeros((), jnp.int32)
    for j, (kind, entry_msgs, category) in enumerate(errors.entries):
        code = codes[..., j]
        if kind == WARNING:
            _warn_callback(code >= 0, msg=entry_msgs[0], category=category)
            continue
        hit = jnp.any(code >= 0)
        first = jnp.max(jnp.where(code >= 0, code, 0)) + offset
        index = jnp.where(pred | ~hit, index, first)
        pred = pred | hit
        offset += len(entry_msgs)
    return pred, index


def capture_errors(fn: Callable) -> Callable:
    """``fn`` returning ``(result, errors)`` instead of raising or warning.

    Every check of the orc entry points ``fn`` calls (NaN data, a failed
    ridge solve, ...) becomes part of ``errors``, an :class:`Errors` value,
    and the compiled program holds no host callback: under ``jax.jit`` it can
    be cached on disk and exported (:func:`orc.export`). Call
    ``errors.raise_if_any()`` on the host to raise or warn as orc would have.

    Example
    -------
    >>> step = jax.jit(orc.capture_errors(lambda m, r: m.forecast(100, r)))
    >>> y, errors = step(model, r0)
    >>> errors.raise_if_any()
    """

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        return collect(fn, *args, **kwargs)

    return wrapped
