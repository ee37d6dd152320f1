"""A property-based fuzz of orc's public entry points (issue 47, item 12).

Hypothesis draws calls of the trainers (``train_RCForecaster``,
``train_ESNForecaster``, ``train_EnsembleESNForecaster``,
``train_CESNForecaster``, ``train_NVARForecaster``, ``train_RCController``,
``train_RCClassifier``, ``train_RCRegressor``), of the forecasters' methods
(``force``, ``forecast``, ``forecast_from_IC``, ``predict``), of
``classify`` and the regressor's ``predict``, of :func:`orc.load` on
mutated model files and odd paths, and of the command line
(``orc.cli.main`` in this process) on small generated CSV/NPY files, with
odd shapes, dtypes, values and arguments, eagerly and under ``jax.jit`` /
``eqx.filter_jit`` where the entry point allows it.

The oracle (:func:`judge`): every case ends in

- a **result**: finite where the inputs were valid (a non-finite result is
  allowed only with one of orc's warnings), and for bad input (NaN data, an
  ill-typed option) never without a word;
- a **clear error**: ``TypeError``, ``ValueError`` (``orc.io.ModelFileError``
  is one) or ``equinox.EquinoxRuntimeError`` (orc's run-time checks; under
  plain ``jax.jit`` JAX's runtime error carrying orc's message), whose
  message names the offending argument, and which is none of JAX's or
  NumPy's internal errors (:data:`INTERNAL_TYPES`, :data:`INTERNAL_MARKERS`);
  for :func:`orc.load` also an ``OSError`` naming the path; for the command
  line exit code 2 from a ``click`` usage error naming an option or a file;
- a **warning**: one of orc's warning classes (:data:`ORC_WARNINGS`; for
  the command line an ``orc: warning:`` line or exit code 1 from its
  reported-failure class ``orc.cli.Failure``).

Anything else is a failure: an internal error, an error that does not name
the argument, a silent acceptance of bad input, a non-finite result without
a warning, a hang (each case runs under a ``SIGALRM`` time limit, and
``faulthandler`` ends the process with a traceback if compiled code never
returns), or, for the command line, an input file whose bytes changed.

Failures known today are listed in :data:`KNOWN_FAILURES`, each with its
issue-47 item and a minimal input that Hypothesis always runs
(``@example``). A test fails on any failure class not in the list (after
all its cases ran: each new class is shown with its first case, the
simplest drawn) and on any listed failure that no longer occurs (fixed:
remove it from the list).

The counts of cases per entry point and outcome (and the programs each
entry point compiled, the fuzz's cost) are written to ``fuzz_counts.json``
under pytest's base temporary directory and printed (``pytest -s`` or
``-rP`` shows them).

Bounded: ``derandomize=True``, fixed ``max_examples`` (``ORC_FUZZ_SCALE=k``
runs k times as many, a deeper fuzz for a local run), small models
(``res_dim <= 12``, series of 64 steps) and shapes drawn from small sets,
since every new shape, dtype or static option compiles a program.
"""

from __future__ import annotations

import contextlib
import dataclasses
import faulthandler
import hashlib
import json
import os
import re
import signal
import warnings
from collections import Counter, defaultdict
from datetime import timedelta
from pathlib import Path
from unittest import mock

import click
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, example, given, seed, settings
from hypothesis import strategies as st

import orc
from _helpers import count_compiles, run_cli
from orc import cli
from orc._divergence import DivergenceWarning
from orc.classifier import ESNClassifier, train_RCClassifier
from orc.control import ESNController, train_RCController
from orc.forecaster import (
    CESNForecaster,
    EnsembleESNForecaster,
    ESNForecaster,
    NVARForecaster,
    train_CESNForecaster,
    train_EnsembleESNForecaster,
    train_ESNForecaster,
    train_NVARForecaster,
    train_RCForecaster,
)
from orc.regression import ESNRegressor, train_RCRegressor

# --------------------------------------------------------------------------- #
# The oracle
# --------------------------------------------------------------------------- #

#: Seconds a case may run before it counts as a hang (``SIGALRM``: Python
#: code and calls that return to Python), and before ``faulthandler`` ends
#: the process (compiled code that never returns).
SOFT_LIMIT_S = 60
HARD_LIMIT_S = 150

#: Exceptions that are clear answers when they name the argument.
CLEAR_TYPES = (TypeError, ValueError, eqx.EquinoxRuntimeError)
#: Under plain ``jax.jit`` a failed ``eqx.error_if`` raises JAX's runtime error.
JIT_RUNTIME = getattr(jax.errors, "JaxRuntimeError", RuntimeError)
#: TypeErrors/ValueErrors of JAX that are never a clear answer.
INTERNAL_TYPES = (
    jax.errors.ConcretizationTypeError,  # TracerBoolConversionError among them
    jax.errors.UnexpectedTracerError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerIntegerConversionError,
)
#: Messages of JAX's and NumPy's internals, never a clear answer.
INTERNAL_MARKERS = (
    "Incompatible shapes for broadcasting",
    "Size of label",
    "Maximum allowed dimension exceeded",
    "TracerBoolConversionError",
    "object has no attribute",
    "index out of range",
    "out of bounds for axis",
    "referenced before assignment",
    "division by zero",
    "could not broadcast",
    "operands could not be broadcast",
    "dot_general requires",
    "cannot reshape array",
    "got incompatible shapes",
)
#: orc's warning classes: a case that warns with one of them has answered.
ORC_WARNINGS = (
    orc.PrecisionLossWarning,
    orc.UnregularizedRidgeWarning,
    orc.UntrainedModelWarning,
    orc.PoorFitWarning,
    orc.IllConditionedRidgeWarning,
    orc.forecaster.models.TimeConstantWarning,
    DivergenceWarning,
)


class CaseTimeout(BaseException):
    """A case ran past :data:`SOFT_LIMIT_S` (a ``BaseException``, so that no
    ``except Exception`` in the code under test swallows it)."""


@contextlib.contextmanager
def time_limit(seconds: float = SOFT_LIMIT_S):
    """Raise :class:`CaseTimeout` in the block after ``seconds``; end the
    process with every thread's traceback after :data:`HARD_LIMIT_S` (for
    compiled code that never returns to Python)."""

    def expire(signum, frame):
        raise CaseTimeout(f"the case ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    faulthandler.dump_traceback_later(HARD_LIMIT_S, exit=True)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        faulthandler.cancel_dump_traceback_later()


VALID, EXTREME, BAD = "valid", "extreme", "bad"
_RANK = {VALID: 0, EXTREME: 1, BAD: 2}


def worst(*expectations: str) -> str:
    """The strictest of the expectations of a call's arguments."""
    return max(expectations, key=_RANK.__getitem__)


@dataclasses.dataclass(frozen=True)
class Outcome:
    """How a case ended: ``kind`` is ``"result"``, ``"error"`` (clear),
    ``"warning"`` or ``"failure"``; a failure has a ``failure`` kind (e.g.
    ``"internal error"``) and ``text``, the exception's type and first line."""

    kind: str
    text: str = ""
    failure: str | None = None
    message: str = ""  # an exception's whole message (JAX's wraps orc's)


def first_line(err: BaseException) -> str:
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0] if lines else ''}"


def _finite(out) -> bool:
    leaves = jax.tree.leaves(eqx.filter(out, eqx.is_inexact_array))
    return all(bool(np.all(np.isfinite(np.asarray(x)))) for x in leaves)


def judge(call, names, expect, *, jit=False, extra=()) -> Outcome:
    """Run ``call()`` under the time limit and judge how it ended.

    names: the argument names a refusal must name (any one); expect: VALID
    (a finite result, or an orc warning), EXTREME (valid but at the edge of
    the float range: a result, finite unless orc warned, or a clear error),
    BAD (a clear error or an orc warning; never a silent result); jit: the
    call runs under plain ``jax.jit`` (JAX's runtime error carries orc's
    run-time checks); extra: more exception types that are clear answers
    here (e.g. ``OSError`` for a path)."""
    err = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with time_limit():
                out = call()
                jax.block_until_ready(eqx.filter(out, eqx.is_array))
        except CaseTimeout as timeout:
            return Outcome("failure", f"hang: {timeout}", "hang")
        except Exception as e:  # noqa: BLE001 - judged below
            err = e
    warned = [w for w in caught if issubclass(w.category, ORC_WARNINGS)]
    if err is not None:
        return judge_error(err, names, expect, jit=jit, extra=extra)
    if warned:
        return Outcome("warning", f"{warned[0].category.__name__}: {warned[0].message}")
    if expect == BAD:
        return Outcome("failure", "no error, no warning", "accepted bad input silently")
    if not _finite(out):
        return Outcome("failure", "non-finite result", "non-finite result, no warning")
    return Outcome("result")


def judge_error(err, names, expect, *, jit=False, extra=()) -> Outcome:
    """Judge an exception (see :func:`judge`); ``extra``: more exception
    types that are clear answers here."""
    text = first_line(err)
    message = str(err)
    internal = isinstance(err, INTERNAL_TYPES) or any(
        m in message for m in INTERNAL_MARKERS
    )
    clear_types = CLEAR_TYPES + tuple(extra) + ((JIT_RUNTIME,) if jit else ())
    if internal or not isinstance(err, clear_types):
        return Outcome("failure", text, "internal error", message)
    if expect == VALID:
        return Outcome("failure", text, "valid input refused", message)
    if not any(n and n in message for n in names):
        failure = f"error not naming {'/'.join(names)}"
        return Outcome("failure", text, failure, message)
    return Outcome("error", text)


# --------------------------------------------------------------------------- #
# Known failures (today's; each must still fail, or be removed from here)
# --------------------------------------------------------------------------- #


@dataclasses.dataclass(frozen=True)
class Known:
    """A known failure class: its entry points (regex on the entry name),
    the failure kind (regex), a regex searched in the outcome's text (the
    exception's type and first line) and the exception's whole message, the
    issue-47 item it belongs to, what happens, and the fuzz test (group)
    that checks it."""

    entry: str
    failure: str
    text: str
    item: str
    what: str
    group: str

    def matches(self, entry: str, outcome: Outcome) -> bool:
        return (
            re.fullmatch(self.entry, entry) is not None
            and re.fullmatch(self.failure, outcome.failure or "") is not None
            and re.search(self.text, f"{outcome.text}\n{outcome.message}") is not None
        )


#: Today's failures, by name (issue 47's item in ``item``). Each has an
#: ``@example`` below that reproduces it; a fix makes its test fail until
#: the entry is removed. Empty since the CESN times, predict's overflow and
#: NVAR's warm-up rows were fixed (2026-11-27): a new class fails the test.
KNOWN_FAILURES: dict[str, Known] = {}


class Ledger:
    """Counts of outcomes per entry point and the failures seen, checked
    against :data:`KNOWN_FAILURES`."""

    def __init__(self):
        self.counts: dict[str, Counter] = defaultdict(Counter)
        self.modes: dict[str, Counter] = defaultdict(Counter)
        self.seen: dict[str, list] = defaultdict(list)
        self.new: dict[tuple, list] = {}
        self.answers: dict[str, Counter] = defaultdict(Counter)
        self.compiles: Counter = Counter()
        self.compiled_by: dict[str, list] = defaultdict(list)

    def run(self, entry: str, mode: str, spec, judged) -> None:
        """Judge a case (``judged()`` returns its :class:`Outcome`), count
        the programs it compiled (the fuzz's cost: each new shape, dtype or
        static option compiles) and record its outcome."""
        with count_compiles() as n:
            outcome = judged()
        if n["compiles"]:
            self.compiles[entry] += n["compiles"]
            self.compiled_by[entry].append(f"{n['compiles']}: {spec!r}")
        self.record(entry, mode, spec, outcome)

    def record(self, entry: str, mode: str, spec, outcome: Outcome) -> None:
        """Count ``outcome``; a failure is filed under the known failure it
        matches, else as a new failure class (entry point, failure kind,
        message with its numbers masked)."""
        self.counts[entry][outcome.kind] += 1
        self.modes[entry][mode] += 1
        if outcome.text:
            masked = re.sub(r"\d+", "N", outcome.text)[:120]
            self.answers[entry][f"{outcome.kind}: {masked}"] += 1
        if outcome.kind != "failure":
            return
        case = (entry, mode, repr(spec), outcome.text)
        known = [k for k, v in KNOWN_FAILURES.items() if v.matches(entry, outcome)]
        if known:
            self.seen[known[0]].append(case)
            return
        key = (entry, outcome.failure, re.sub(r"\d+", "N", outcome.text)[:160])
        self.new.setdefault(key, []).append(case)

    def check(self, group: str, pattern: str) -> None:
        """No new failure class among the entry points matching the regex
        ``pattern``, and every known failure of ``group`` seen again (else it
        is fixed: remove it from :data:`KNOWN_FAILURES`)."""
        new = {k: v for k, v in self.new.items() if re.fullmatch(pattern, k[0])}
        lines = [
            f"{entry}: {failure}: {text}\n    {len(cases)} case(s), first: "
            f"{cases[0][2]} ({cases[0][1]})"
            for (entry, failure, text), cases in sorted(new.items())
        ]
        assert not new, "new failure classes:\n  " + "\n  ".join(lines)
        fixed = [
            k
            for k, v in KNOWN_FAILURES.items()
            if v.group == group and not self.seen.get(k)
        ]
        assert not fixed, (
            "known failures no longer seen (fixed? remove them from "
            f"KNOWN_FAILURES): {fixed}"
        )


@pytest.fixture(scope="module")
def ledger(tmp_path_factory):
    """The module's :class:`Ledger`; at the end its counts are written to
    ``fuzz_counts.json`` under the base temporary directory and printed."""
    book = Ledger()
    yield book
    report = {
        "cases": {e: dict(c) for e, c in sorted(book.counts.items())},
        "modes": {e: dict(c) for e, c in sorted(book.modes.items())},
        "answers": {e: dict(c.most_common()) for e, c in sorted(book.answers.items())},
        "compiles": dict(book.compiles),
        "compiled_by": dict(book.compiled_by),
        "known_failures_seen": {
            k: {"item": KNOWN_FAILURES[k].item, "cases": len(v), "first": v[0]}
            for k, v in sorted(book.seen.items())
        },
    }
    path = tmp_path_factory.getbasetemp() / "fuzz_counts.json"
    path.write_text(json.dumps(report, indent=1))
    lines = [f"\nfuzz counts ({path}):"]
    total = Counter()
    for entry, c in sorted(book.counts.items()):
        total.update(c)
        lines.append(
            f"  {entry:38s} {sum(c.values()):4d} cases: "
            + ", ".join(
                f"{k} {c[k]}" for k in ("result", "error", "warning", "failure")
            )
        )
    lines.append(
        f"  {'all':38s} {sum(total.values()):4d} cases: "
        + ", ".join(
            f"{k} {total[k]}" for k in ("result", "error", "warning", "failure")
        )
    )
    lines.append("known failures seen (issue 47 item: cases):")
    for name, cases in sorted(book.seen.items()):
        lines.append(f"  {name:44s} item {KNOWN_FAILURES[name].item}: {len(cases)}")
    print("\n".join(lines))


#: ``ORC_FUZZ_SCALE=k`` runs k times the examples (a deeper local fuzz).
SCALE = float(os.environ.get("ORC_FUZZ_SCALE", "1"))


def fuzz_settings(max_examples: int):
    """Seeded, bounded Hypothesis settings (no example database)."""
    return settings(
        derandomize=True,
        max_examples=max(1, int(max_examples * SCALE)),
        deadline=timedelta(seconds=SOFT_LIMIT_S + 10),
        database=None,
        phases=(Phase.explicit, Phase.generate),  # no case raises: nothing to shrink
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        print_blob=False,
    )


# --------------------------------------------------------------------------- #
# Drawn arguments
# --------------------------------------------------------------------------- #


@dataclasses.dataclass(frozen=True)
class Arg:
    """A drawn array argument, made from the argument's valid value ``good``
    by :func:`make`: ``kind`` (see :data:`ARRAY_KINDS`) and, for
    ``"inject"``, the ``value`` written at position ``pos`` (first, middle
    or last element along the leading axis)."""

    kind: str
    value: float = 0.0
    pos: str = "last"

    def __repr__(self) -> str:  # as an @example would spell it
        if self.kind == "inject":
            v = (
                repr(self.value)
                if np.isfinite(self.value)
                else f'float("{self.value}")'
            )
            return f'Arg("inject", {v}, "{self.pos}")'
        return f'Arg("{self.kind}")'


#: What each kind of array argument is expected to be (VALID, EXTREME, BAD);
#: ``inject`` depends on its value (:func:`make`).
ARRAY_KINDS = {
    "ok": VALID,
    "inject": None,
    "float32": VALID,
    "int": VALID,
    "list": VALID,
    "zeros": VALID,
    "empty": BAD,  # no rows
    "drop_axis": BAD,  # one axis fewer
    "add_axis": BAD,  # a leading axis of 1 more
    "wider": BAD,  # one more entry in the last axis
    "flatten": BAD,  # all entries in one axis
    "bool": BAD,
    "complex": BAD,
    "strings": BAD,  # a NumPy array of str
    "str": BAD,  # a Python str
    "none": BAD,
}


def make(arg: Arg, good: np.ndarray, overrides: dict | None = None, mode="eager"):
    """``(value, expectation)`` of the drawn argument ``arg`` for an argument
    whose valid value is ``good``; ``overrides`` maps kinds to another
    expectation (e.g. ``drop_axis`` is fine for a one-column target). Under
    a jit (``mode``) a Python list is a pytree of traced scalars, which orc
    may refuse (EXTREME)."""
    kind = arg.kind
    expect = (overrides or {}).get(kind, ARRAY_KINDS[kind])
    if mode != "eager" and kind == "list":
        expect = EXTREME
    if kind == "ok":
        return good, expect
    if kind == "inject":
        x = np.array(good, dtype=np.float64, copy=True)
        flat = x.reshape(x.shape[0], -1)
        row = {"first": 0, "mid": x.shape[0] // 2, "last": x.shape[0] - 1}[arg.pos]
        flat[row, -1] = arg.value
        v = arg.value
        expect = BAD if not np.isfinite(v) else (VALID if abs(v) <= 1e6 else EXTREME)
        return x, expect
    if kind == "float32":
        return good.astype(np.float32), expect
    if kind == "int":
        return np.round(3 * good).astype(np.int64), expect
    if kind == "list":
        return good.tolist(), expect
    if kind == "zeros":
        return np.zeros_like(good), expect
    if kind == "empty":
        return good[:0], expect
    if kind == "drop_axis":
        return good[..., 0], expect
    if kind == "add_axis":
        return good[None], expect
    if kind == "wider":
        return np.concatenate([good, good[..., :1]], axis=-1), expect
    if kind == "flatten":
        return good.reshape(-1), expect
    if kind == "bool":
        return good > 0, expect
    if kind == "complex":
        return good * (1 + 1j), expect
    if kind == "strings":
        return np.full(good.shape, "1.0"), expect
    if kind == "str":
        return "1.0", expect
    if kind == "none":
        return None, expect
    raise AssertionError(kind)


#: Values written into an array: anything a float64 holds (NaN, inf, huge,
#: subnormal), shrinking towards 0.
VALUES = st.floats(width=64)


#: Kinds not drawn under a jit: JAX refuses a str array before orc sees it
#: (not orc's answer to give), and float32/int data, converted on the host
#: eagerly, would each compile another program there.
NOT_UNDER_JIT = ("strings", "str", "float32", "int")


def arrays(kinds=tuple(ARRAY_KINDS), mode: str = "eager"):
    """Strategy of :class:`Arg`: the valid value, an injected value (a third
    each, so that most cases reach the compiled program), or another kind
    of ``kinds`` (not :data:`NOT_UNDER_JIT` when ``mode`` is a jit)."""
    if mode != "eager":
        kinds = tuple(k for k in kinds if k not in NOT_UNDER_JIT)
    return st.one_of(
        st.just(Arg("ok")),
        st.builds(
            Arg, st.just("inject"), VALUES, st.sampled_from(["last", "first", "mid"])
        ),
        st.sampled_from([Arg(k) for k in kinds if k not in ("ok", "inject")]),
    )


def option(table: dict, mode: str = "eager"):
    """Strategy of the keys of ``table`` (``key -> (value, expectation)``),
    shrinking towards its first key; under ``jax.jit`` (where the option is
    a traced argument) not the strings, which JAX refuses itself."""
    keys = [
        k for k, (v, _) in table.items() if mode != "jax.jit" or not isinstance(v, str)
    ]
    return st.sampled_from(keys)


SPINUPS = {
    "10": (10, VALID),
    "np.int64(10)": (np.int64(10), VALID),
    "-1": (-1, BAD),
    "1.5": (1.5, BAD),
    "'10'": ("10", BAD),
    "None": (None, BAD),
    "True": (True, BAD),
    "63": (63, BAD),  # no pair left to fit in 64 samples
    "10**9": (10**9, BAD),
    "0": (0, VALID),  # last: another program (spinup is static)
}
BETAS = {
    "8e-8": (8e-8, VALID),
    "0.0": (0.0, VALID),  # UnregularizedRidgeWarning
    "np.float32(1e-6)": (np.float32(1e-6), VALID),
    "jnp.asarray(1e-6)": (jnp.asarray(1e-6), VALID),
    "-1e-8": (-1e-8, BAD),
    "nan": (float("nan"), BAD),
    "inf": (float("inf"), BAD),
    "'1e-8'": ("1e-8", BAD),
    "[1e-8, 1e-6]": ([1e-8, 1e-6], BAD),
    "np.array([1e-8, 1e-6])": (np.array([1e-8, 1e-6]), BAD),
    "np.array([1e-6])": (np.array([1e-6]), EXTREME),
    "np.full((2, 2), 1e-6)": (np.full((2, 2), 1e-6), BAD),
    "None": (None, BAD),
    "True": (True, BAD),
    "1e-8+0j": (1e-8 + 0j, BAD),
    "1e300": (1e300, EXTREME),
}
RETURN_STATES = {
    "True": (True, VALID),
    "False": (False, VALID),
    "'no'": ("no", BAD),
    "None": (None, BAD),
    "[True]": ([True], BAD),
    "0": (0, EXTREME),
    "np.False_": (np.False_, EXTREME),
}
NOISES = {
    "default": (None, VALID),  # not passed
    "0.0": (0.0, VALID),
    "1e-3": (1e-3, VALID),
    "-1.0": (-1.0, BAD),
    "nan": (float("nan"), BAD),
    "'loud'": ("loud", BAD),
    "'auto'": ("auto", VALID),  # NVAR's default; refused by the others
    "None": (None, BAD),
}
MODES = ("eager", "jax.jit", "eqx.filter_jit")


# --------------------------------------------------------------------------- #
# Small models and data (every shape below compiles once)
# --------------------------------------------------------------------------- #

T, D = 64, 3
_t = np.arange(T + 1)
_WAVES = np.sin(0.3 * _t[:, None] * np.array([1.0, 1.3, 1.7]) + np.arange(D))
SERIES = _WAVES[:-1]  # (64, 3) training data
TARGETS = _WAVES[1:]  # (64, 3) its next samples
TIMES = 0.1 * np.arange(T)  # (64,) sample times of a continuous model


def _blank(name: str):
    """An untrained small model by name."""
    if name == "esn":
        return ESNForecaster(D, 12, seed=0)
    if name == "ensemble":
        return EnsembleESNForecaster(D, 8, chunks=2, seed=0)
    if name == "nvar":
        return NVARForecaster(D, k=2, s=1, order=2)
    if name == "cesn":
        return CESNForecaster(D, 8, seed=0)
    if name == "classifier":
        return ESNClassifier(D, 2, 12, seed=0)
    if name == "controller":
        return ESNController(2, 1, 12, seed=0)
    if name == "regressor":
        return ESNRegressor(2, 1, 12, seed=0)
    raise AssertionError(name)


_BLANKS: dict = {}


def blank(name: str):
    """:func:`_blank`, built once."""
    if name not in _BLANKS:
        _BLANKS[name] = _blank(name)
    return _BLANKS[name]


_JITTED: dict = {}


def jitted(fn, mode: str, static=()):
    """``fn`` under ``jax.jit`` (``static`` argument names) or
    ``eqx.filter_jit``, wrapped once (so that its programs are reused)."""
    key = (fn, mode, static)
    if key not in _JITTED:
        if mode == "jax.jit":
            _JITTED[key] = jax.jit(fn, static_argnames=static)
        else:
            _JITTED[key] = eqx.filter_jit(fn)
    return _JITTED[key]


class Call:
    """Collects a call's arguments with what each is expected to be: the
    call's expectation is the worst of them, and a refusal must name one of
    the arguments that is not VALID."""

    def __init__(self):
        self.kwargs: dict = {}
        self.expects: list[str] = [VALID]
        self.names: list[str] = []

    def add(self, name: str, value, expect: str, *, alias=()) -> None:
        self.kwargs[name] = value
        self.note(name, expect, alias=alias)

    def note(self, name: str, expect: str, *, alias=()) -> None:
        self.expects.append(expect)
        if expect != VALID:
            self.names += [name, *alias]

    @property
    def expect(self) -> str:
        return worst(*self.expects)


# --------------------------------------------------------------------------- #
# Forecaster trainers: ESN, ensemble, NVAR (eager, jax.jit, eqx.filter_jit)
# --------------------------------------------------------------------------- #

FORECAST_TRAINERS = {
    "train_RCForecaster": (train_RCForecaster, ("esn", "ensemble")),
    "train_ESNForecaster": (train_ESNForecaster, ("esn",)),
    "train_EnsembleESNForecaster": (train_EnsembleESNForecaster, ("ensemble",)),
    "train_NVARForecaster": (train_NVARForecaster, ("nvar",)),
}


@dataclasses.dataclass(frozen=True)
class TrainSpec:
    """A drawn call of a forecaster trainer (keys of the option tables)."""

    entry: str
    mode: str = "eager"
    model: str = "esn"
    train_seq: Arg = Arg("ok")
    target_seq: Arg | None = None
    spinup: str = "10"
    beta: str = "8e-8"
    return_states: str = "True"
    noise: str = "default"


def perturbed(draw, names, most: int = 2) -> set:
    """Which of the arguments ``names`` a case changes from their valid
    defaults: none, one or ``most`` (one or two bad arguments at a time, so
    that each check is reached on its own)."""
    k = draw(st.integers(0, min(most, len(names))))
    return set(
        draw(st.lists(st.sampled_from(names), min_size=k, max_size=k, unique=True))
    )


@st.composite
def train_specs(draw):
    entry = draw(st.sampled_from(list(FORECAST_TRAINERS)))
    own = FORECAST_TRAINERS[entry][1]
    # every jitted variant compiles programs of its own: the jits run on
    # train_RCForecaster (which the typed ESN trainers call) and NVAR's
    jits = entry in ("train_RCForecaster", "train_NVARForecaster")
    mode = draw(st.sampled_from(MODES if jits else ("eager",)))
    names = ["model", "train_seq", "target_seq", "beta", "noise"]
    if mode == "eager":  # static under a jit: one program per value
        names += ["spinup", "return_states"]
    change = perturbed(draw, names)
    spec = TrainSpec(entry, mode, own[0])
    if "model" in change:
        other = "nvar" if "nvar" not in own else "esn"
        spec = dataclasses.replace(spec, model=draw(st.sampled_from(own + (other,))))
    if "train_seq" in change:
        spec = dataclasses.replace(spec, train_seq=draw(arrays(mode=mode)))
    if "target_seq" in change:
        spec = dataclasses.replace(spec, target_seq=draw(arrays(mode=mode)))
    for name, table in (
        ("spinup", SPINUPS),
        ("return_states", RETURN_STATES),
        ("beta", BETAS),
        ("noise", NOISES),
    ):
        if name in change:
            spec = dataclasses.replace(spec, **{name: draw(option(table, mode))})
    return spec


def trainer_case(spec: TrainSpec):
    """``(call, Call)`` of a :class:`TrainSpec`."""
    fn, own = FORECAST_TRAINERS[spec.entry]
    c = Call()
    c.note("model", VALID if spec.model in own else BAD)
    seq, e = make(spec.train_seq, SERIES, mode=spec.mode)
    c.note("train_seq", e)
    if spec.target_seq is not None:  # None is the default
        value, e = make(spec.target_seq, TARGETS, {"none": VALID}, spec.mode)
        c.add("target_seq", value, e)
    spinup, e = SPINUPS[spec.spinup]
    if spec.spinup == "63" and spec.target_seq is not None:
        e = EXTREME  # targets given: one pair is left
    c.add("spinup", spinup, e)
    c.add("beta", *BETAS[spec.beta])
    c.add("return_states", *RETURN_STATES[spec.return_states])
    if spec.noise != "default":
        value, e = NOISES[spec.noise]
        if spec.noise == "'auto'" and spec.entry != "train_NVARForecaster":
            e = BAD
        c.add("input_noise", value, e)
    model = blank(spec.model)
    if spec.mode == "eager":
        f = fn
    else:
        f = jitted(fn, spec.mode, ("spinup", "return_states"))
    return (lambda: f(model, seq, **c.kwargs)), c


@fuzz_settings(max_examples=70)
@seed(4712)
@given(spec=train_specs())
@example(spec=TrainSpec("train_RCForecaster", "jax.jit", noise="0.0"))
@example(spec=TrainSpec("train_NVARForecaster", "jax.jit", "nvar", noise="1e-3"))
@example(spec=TrainSpec("train_NVARForecaster", model="nvar", return_states="None"))
@example(spec=TrainSpec("train_RCForecaster", train_seq=Arg("inject", 1.7e308, "last")))
def _fuzz_trainers(ledger, spec):
    call, c = trainer_case(spec)
    jit = spec.mode == "jax.jit"
    ledger.run(
        spec.entry, spec.mode, spec, lambda: judge(call, c.names, c.expect, jit=jit)
    )


TRAINERS_GROUP = "train_(RC|ESN|EnsembleESN|NVAR)Forecaster"


def test_fuzz_forecaster_trainers(ledger):
    """train_RCForecaster / train_ESNForecaster / train_EnsembleESNForecaster /
    train_NVARForecaster on drawn data and options answer clearly."""
    _fuzz_trainers(ledger)
    ledger.check("trainers", TRAINERS_GROUP)


# --------------------------------------------------------------------------- #
# Forecasters' methods: force, forecast, forecast_from_IC, predict
# --------------------------------------------------------------------------- #

_TRAINED: dict = {}


def trained(name: str):
    """``(model, last_state)`` of a small model trained once on SERIES (by
    the trainers' default call of :class:`TrainSpec`, so the programs are
    shared); ``"esn untrained"`` is the blank ESN and a zero state."""
    if name not in _TRAINED:
        if name == "esn untrained":
            model = blank("esn")
            _TRAINED[name] = (model, np.asarray(model.driver.default_state()))
        elif name == "cesn":
            model, states = train_CESNForecaster(blank(name), SERIES, TIMES, spinup=10)
            _TRAINED[name] = (model, np.asarray(states)[-1])
        else:
            fn = {
                "esn": train_ESNForecaster,
                "ensemble": train_EnsembleESNForecaster,
                "nvar": train_NVARForecaster,
            }[name]
            model, states = fn(blank(name), SERIES, spinup=10, beta=8e-8)
            _TRAINED[name] = (model, np.asarray(states)[-1])
    return _TRAINED[name]


FCAST_LENS = {
    "5": (5, VALID),
    "np.int64(5)": (np.int64(5), VALID),
    "jnp.asarray(5)": (jnp.asarray(5), VALID),  # concrete: an int (eager only)
    "0": (0, BAD),
    "-1": (-1, BAD),
    "2.5": (2.5, BAD),
    "5.0": (5.0, BAD),
    "'5'": ("5", BAD),
    "None": (None, BAD),
    "True": (True, BAD),
    "traced": (5, BAD),  # jax.jit: passed as a traced argument
}
SEQ_LEN = 16  # of the sequences the methods are given


def _call_method(model, method, fcast_len, seq, state):
    """``model.<method>`` with the arguments that method takes."""
    if method == "force":
        return model.force(seq, state)
    if method == "forecast":
        return model.forecast(fcast_len, state)
    if method == "forecast_from_IC":
        return model.forecast_from_IC(fcast_len, seq)
    if isinstance(model, NVARForecaster):
        return model.predict(seq)
    return model.predict(seq, state)


def _method_entry(model: str, method: str) -> str:
    cls = {"esn untrained": "ESNForecaster"}.get(model) or type(blank(model)).__name__
    return f"{cls}.{method}"


@dataclasses.dataclass(frozen=True)
class MethodSpec:
    """A drawn call of a forecaster's method."""

    model: str
    method: str
    mode: str = "eager"
    seq: Arg = Arg("ok")
    state: Arg = Arg("ok")
    fcast_len: str = "5"


@st.composite
def method_specs(draw):
    model = draw(st.sampled_from(["esn", "ensemble", "nvar", "esn untrained"]))
    method = draw(st.sampled_from(["forecast", "forecast_from_IC", "force", "predict"]))
    if method == "force" and model == "nvar":
        method = "predict"  # NVAR has no reservoir to force
    # each jitted variant compiles programs of its own: jits on the ESN only
    mode = draw(st.sampled_from(MODES if model == "esn" else ("eager",)))
    spec = MethodSpec(model, method, mode)
    uses = {
        "force": ["seq", "state"],
        "forecast": ["fcast_len", "state"],
        "forecast_from_IC": ["fcast_len", "seq"],
        "predict": ["seq"] if model == "nvar" else ["seq", "state"],
    }[method]
    change = perturbed(draw, uses)
    if "seq" in change:
        spec = dataclasses.replace(spec, seq=draw(arrays(mode=mode)))
    if "state" in change:
        spec = dataclasses.replace(spec, state=draw(arrays(mode=mode)))
    if "fcast_len" in change:
        keys = [k for k in FCAST_LENS if k != "traced" or mode == "jax.jit"]
        if mode == "jax.jit":  # a static argument must be hashable
            keys.remove("jnp.asarray(5)")
        spec = dataclasses.replace(spec, fcast_len=draw(st.sampled_from(keys)))
    return spec


def method_case(spec: MethodSpec):
    """``(entry, call, Call)`` of a :class:`MethodSpec`."""
    model, last = trained(spec.model)
    c = Call()
    seq_name = {"forecast_from_IC": "spinup_data"}.get(spec.method, "in_seq")
    # force/predict of an empty sequence may return an empty result
    empty = {"empty": EXTREME} if spec.method in ("force", "predict") else {}
    seq, e = make(spec.seq, SERIES[:SEQ_LEN], empty, spec.mode)
    c.note(seq_name, e)
    # predict's res_state=None is its default (the zero state)
    default = {"none": VALID} if spec.method == "predict" else {}
    state, e = make(spec.state, last, default, spec.mode)
    c.note("res_state", e)
    fcast_len, e = FCAST_LENS[spec.fcast_len]
    if spec.mode == "eqx.filter_jit" and not isinstance(fcast_len, int | str | None):
        e = BAD  # eqx.filter_jit traces NumPy and JAX scalars
    if spec.mode != "eager" and spec.fcast_len == "5.0":
        # a static 5.0 equals 5: the jit's cache may answer with 5's program
        e = EXTREME
    c.note("fcast_len", e)
    entry = _method_entry(spec.model, spec.method)
    if spec.mode == "eager":
        return (
            entry,
            (lambda: _call_method(model, spec.method, fcast_len, seq, state)),
            c,
        )
    if spec.mode == "jax.jit" and spec.fcast_len == "traced":
        f = jitted(_call_method, "jax.jit", ("method",))
    elif spec.mode == "jax.jit":
        f = jitted(_call_method, "jax.jit", ("method", "fcast_len"))
    else:
        f = jitted(_call_method, "eqx.filter_jit")
    return entry, (lambda: f(model, spec.method, fcast_len, seq, state)), c


@fuzz_settings(max_examples=300)
@seed(4747)
@given(spec=method_specs())
@example(spec=MethodSpec("esn", "force", seq=Arg("inject", float("nan"), "last")))
@example(
    spec=MethodSpec("ensemble", "predict", seq=Arg("inject", float("inf"), "first"))
)
@example(spec=MethodSpec("esn", "force", seq=Arg("strings")))
@example(spec=MethodSpec("nvar", "predict", seq=Arg("inject", 1e200, "first")))
@example(spec=MethodSpec("nvar", "predict", seq=Arg("inject", float("nan"), "mid")))
@example(
    spec=MethodSpec(
        "esn", "forecast_from_IC", seq=Arg("inject", -float("inf"), "first")
    )
)
@example(spec=MethodSpec("ensemble", "predict", state=Arg("inject", 1.7e308, "last")))
@example(
    spec=MethodSpec(
        "nvar", "forecast_from_IC", seq=Arg("inject", float("nan"), "first")
    )
)
def _fuzz_methods(ledger, spec):
    entry, call, c = method_case(spec)
    jit = spec.mode == "jax.jit"
    ledger.run(entry, spec.mode, spec, lambda: judge(call, c.names, c.expect, jit=jit))


METHODS_GROUP = r"(ESN|EnsembleESN|NVAR)Forecaster\..*"


def test_fuzz_forecaster_methods(ledger):
    """force / forecast / forecast_from_IC / predict of trained (and an
    untrained) ESN, ensemble and NVAR forecasters answer clearly."""
    _fuzz_methods(ledger)
    ledger.check("methods", METHODS_GROUP)


# --------------------------------------------------------------------------- #
# The continuous ESN: train_CESNForecaster, forecast, forecast_from_IC (eager)
# --------------------------------------------------------------------------- #
# Its programs are the costliest to compile (an adaptive ODE solve, ~5-9 s
# each), so: eagerly only, one sequence length per entry point, and no
# argument that compiles a second program when it is accepted (another
# dtype of data, times or state, return_states=False, input noise,
# target_seq). force shares its solve with forecast_from_IC's warm-up and
# is left out for the same reason. The model is the default one: every
# solve is bounded (a non-finite vector field once never ended, item 1).

#: Array kinds drawn for the CESN: no dtype that compiles another program.
CESN_KINDS = tuple(
    k for k in ARRAY_KINDS if k not in ("float32", "int", "list", "bool")
)

#: Kinds of a time axis: those of an array plus non-increasing ones.
TIME_KINDS = tuple(k for k in CESN_KINDS if k != "inject") + (
    "reversed",
    "repeated",
)


def make_times(arg: Arg, good: np.ndarray):
    """``(times, expectation)``: sample times are valid when finite and
    strictly increasing (EXTREME beyond 1e6)."""
    if arg.kind == "reversed":
        return good[::-1].copy(), BAD
    if arg.kind == "repeated":
        return np.repeat(good[: len(good) // 2], 2), BAD
    ts, expect = make(arg, good)
    if arg.kind == "inject":
        finite = bool(np.all(np.isfinite(ts)))
        increasing = finite and bool(np.all(np.diff(ts) > 0))
        expect = BAD if not increasing else (VALID if abs(ts).max() <= 1e6 else EXTREME)
    elif arg.kind == "zeros":
        expect = BAD
    return ts, expect


@dataclasses.dataclass(frozen=True)
class CESNSpec:
    """A drawn call of ``train_CESNForecaster`` or a CESN method."""

    entry: str
    data: Arg = Arg("ok")  # train_seq, in_seq or spinup_data
    times: Arg = Arg("ok")  # t_train or ts
    state: Arg = Arg("ok")
    spinup: str = "10"
    beta: str = "8e-8"
    return_states: str = "True"
    noise: str = "default"


#: Option values that compile no second CESN program when valid.
CESN_RETURN_STATES = {k: v for k, v in RETURN_STATES.items() if v[1] == BAD}
CESN_RETURN_STATES = {"True": RETURN_STATES["True"], **CESN_RETURN_STATES}
CESN_NOISES = {k: v for k, v in NOISES.items() if k not in ("0.0", "1e-3")}

#: A solve that cannot reach its last time (times spanning more than its
#: step bound, or a state or data so large that its vector field is not
#: finite) is refused by naming its bound, max_steps, and saying why.
SPAN = ("max_steps",)

CESN_ENTRIES = {
    "train_CESNForecaster": [
        "data",
        "times",
        "spinup",
        "beta",
        "return_states",
        "noise",
    ],
    "CESNForecaster.forecast": ["times", "state"],
    "CESNForecaster.forecast_from_IC": ["times", "data"],
}


@st.composite
def cesn_specs(draw):
    entry = draw(st.sampled_from(list(CESN_ENTRIES)))
    spec = CESNSpec(entry)
    change = perturbed(draw, CESN_ENTRIES[entry])
    for name, strategy in (
        ("data", arrays(CESN_KINDS)),
        ("times", arrays(TIME_KINDS)),
        ("state", arrays(CESN_KINDS)),
        ("spinup", option(SPINUPS)),
        ("beta", option(BETAS)),
        ("return_states", option(CESN_RETURN_STATES)),
        ("noise", option(CESN_NOISES)),
    ):  # fmt: skip
        if name in change:
            spec = dataclasses.replace(spec, **{name: draw(strategy)})
    return spec


def cesn_case(spec: CESNSpec):
    """``(call, Call)`` of a :class:`CESNSpec`."""
    c = Call()
    if spec.entry == "train_CESNForecaster":
        model = blank("cesn")
        seq, e = make(spec.data, SERIES)
        c.note("train_seq", e, alias=SPAN)
        ts, e = make_times(spec.times, TIMES)
        c.note("t_train", e, alias=SPAN)
        for name, table, key in (
            ("spinup", SPINUPS, spec.spinup),
            ("beta", BETAS, spec.beta),
            ("return_states", CESN_RETURN_STATES, spec.return_states),
        ):
            c.add(name, *table[key])
        if spec.noise != "default":
            value, e = CESN_NOISES[spec.noise]
            c.add("input_noise", value, BAD if spec.noise == "'auto'" else e)
        return (lambda: train_CESNForecaster(model, seq, ts, **c.kwargs)), c
    model, last = trained("cesn")
    state, e = make(spec.state, last)
    if spec.entry == "CESNForecaster.forecast":
        ts, e_ts = make_times(spec.times, TIMES[:8])
        c.note("ts", e_ts, alias=SPAN)
        c.note("res_state", e, alias=SPAN)
        return (lambda: model.forecast(ts, state)), c
    ts, e_ts = make_times(spec.times, TIMES[:8])
    c.note("ts", e_ts, alias=SPAN)
    data, e = make(spec.data, SERIES[:SEQ_LEN])
    c.note("spinup_data", e, alias=SPAN)
    return (lambda: model.forecast_from_IC(ts, data)), c


@fuzz_settings(max_examples=80)
@seed(4701)
@given(spec=cesn_specs())
@example(spec=CESNSpec("train_CESNForecaster", times=Arg("reversed")))
@example(spec=CESNSpec("train_CESNForecaster", times=Arg("str")))
@example(spec=CESNSpec("train_CESNForecaster", data=Arg("empty")))
@example(spec=CESNSpec("CESNForecaster.forecast_from_IC", times=Arg("none")))
@example(spec=CESNSpec("CESNForecaster.forecast", times=Arg("complex")))
def _fuzz_cesn(ledger, spec):
    call, c = cesn_case(spec)
    ledger.run(spec.entry, "eager", spec, lambda: judge(call, c.names, c.expect))


def test_fuzz_cesn(ledger):
    """train_CESNForecaster and CESNForecaster's forecast / forecast_from_IC
    answer clearly."""
    _fuzz_cesn(ledger)
    ledger.check("cesn", r"(train_)?CESNForecaster.*")


# --------------------------------------------------------------------------- #
# Classifier, controller, regressor: trainers, classify, predict
# --------------------------------------------------------------------------- #

SEQS = np.stack([SERIES[8 * i : 8 * i + SEQ_LEN] for i in range(6)])  # (6, 16, 3)
LABELS = np.array([0, 1, 0, 1, 0, 1])
#: Labels: their kinds and what each is expected to be.
LABEL_KINDS = {
    "ok": (LABELS, VALID),
    "int32": (LABELS.astype(np.int32), VALID),
    "list": (LABELS.tolist(), VALID),
    "one class": (np.zeros(6, np.int64), EXTREME),
    "float": (LABELS.astype(np.float64), BAD),
    "bool": (LABELS.astype(bool), BAD),
    "out of range": (np.array([0, 1, 2, 0, 1, 2]), BAD),
    "negative": (np.array([0, 1, -1, 0, 1, 0]), BAD),
    "short": (LABELS[:5], BAD),
    "2-D": (LABELS[:, None], BAD),
    "None": (None, BAD),
    "str": ("010101", BAD),
}
#: Ridge strengths of the classifier: candidates (1-D) are allowed.
CLASSIFIER_BETAS = {
    **BETAS,
    "[1e-8, 1e-6]": ([1e-8, 1e-6], VALID),
    "np.array([1e-8, 1e-6])": (np.array([1e-8, 1e-6]), VALID),
    "np.array([1e-6])": (np.array([1e-6]), VALID),
    "np.array([1e-6, 0.0])": (np.array([1e-6, 0.0]), BAD),
    "np.array([])": (np.array([]), BAD),
}

OTHER_ENTRIES = {
    "train_RCClassifier": ["model", "data", "labels", "spinup", "beta"],
    "ESNClassifier.classify": ["data", "state", "spinup"],
    "train_RCController": ["model", "data", "control", "target", "spinup", "beta",
                           "return_states"],
    "train_RCRegressor": ["model", "data", "target", "spinup", "beta", "return_states"],
    "ESNRegressor.predict": ["data", "state"],
}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class OtherSpec:
    """A drawn call of a classifier's, controller's or regressor's entry point."""

    entry: str
    mode: str = "eager"
    model: str = "own"
    data: Arg = Arg("ok")  # train_seqs, in_seq or train_seq
    labels: str = "ok"
    control: Arg = Arg("ok")
    target: Arg = Arg("ok")
    state: Arg | None = None  # classify / predict: None is the default
    spinup: str = "10"
    beta: str = "8e-8"
    return_states: str = "True"


@st.composite
def other_specs(draw):
    entry = draw(st.sampled_from(list(OTHER_ENTRIES)))
    # the methods also under jax.jit / eqx.filter_jit (their programs are small)
    mode = "eager" if entry.startswith("train") else draw(st.sampled_from(MODES))
    names = list(OTHER_ENTRIES[entry])
    if mode != "eager" and "spinup" in names:
        names.remove("spinup")  # static under a jit
    spec = OtherSpec(entry, mode)
    change = perturbed(draw, names)
    betas = CLASSIFIER_BETAS if entry == "train_RCClassifier" else BETAS
    for name, strategy in (
        ("model", st.sampled_from(["own", "esn"])),
        ("data", arrays(mode=mode)),
        ("labels", st.sampled_from(list(LABEL_KINDS))),
        ("control", arrays()),
        ("target", arrays()),
        ("state", st.one_of(st.none(), arrays(mode=mode))),
        ("spinup", option(SPINUPS)),
        ("beta", option(betas)),
        ("return_states", option(RETURN_STATES)),
    ):
        if name in change:
            spec = dataclasses.replace(spec, **{name: draw(strategy)})
    return spec


_OTHER_TRAINED: dict = {}


def other_trained(name: str):
    """The classifier or regressor trained once on the default data, and
    the regressor's last state."""
    if name not in _OTHER_TRAINED:
        if name == "classifier":
            model = train_RCClassifier(blank(name), SEQS, LABELS, spinup=10)
            _OTHER_TRAINED[name] = (model, np.asarray(model.driver.default_state()))
        else:
            model, last = train_RCRegressor(
                blank(name), SERIES[:, :2], SERIES[:, 2:], spinup=10, beta=8e-8,
                return_states=True,
            )  # fmt: skip
            _OTHER_TRAINED[name] = (model, np.asarray(last)[-1])
    return _OTHER_TRAINED[name]


def _classify(model, seq, state, spinup):
    return model.classify(seq, state, spinup)


def _predict(model, seq, state):
    return model.predict(seq, state)


def other_case(spec: OtherSpec):
    """``(call, Call)`` of an :class:`OtherSpec`."""
    c = Call()
    mode = spec.mode
    spinup, e = SPINUPS[spec.spinup]
    if spec.spinup == "63" and (
        spec.entry == "train_RCRegressor"
        or (spec.entry == "train_RCController" and spec.target != Arg("ok"))
    ):
        e = EXTREME  # targets aligned with the inputs: one pair is left
    c.note("spinup", e)
    # res_state=None: the zero state; (res_dim,) is taken for (1, res_dim)
    default = {"none": VALID, "flatten": EXTREME}
    if spec.entry == "train_RCClassifier":
        model = blank("classifier" if spec.model == "own" else spec.model)
        c.note("model", VALID if spec.model == "own" else BAD)
        seqs, e = make(spec.data, SEQS)
        c.note("train_seqs", e)
        labels, e = LABEL_KINDS[spec.labels]
        c.note("labels", e)
        beta, e = CLASSIFIER_BETAS[spec.beta]
        c.note("beta", e)
        return (lambda: train_RCClassifier(model, seqs, labels, spinup, beta)), c
    if spec.entry == "ESNClassifier.classify":
        model, zero = other_trained("classifier")
        seq, e = make(spec.data, SEQS[0], mode=mode)
        c.note("in_seq", e)
        state, e = (
            (None, VALID)
            if spec.state is None
            else make(spec.state, zero, default, mode)
        )
        c.note("res_state", e)
        f = _classify if mode == "eager" else jitted(_classify, mode, ("spinup",))
        return (lambda: f(model, seq, state, spinup)), c
    if spec.entry == "ESNRegressor.predict":
        model, last = other_trained("regressor")
        seq, e = make(spec.data, SERIES[:SEQ_LEN, :2], mode=mode)
        c.note("in_seq", e)
        state, e = (
            (None, VALID)
            if spec.state is None
            else make(spec.state, last, default, mode)
        )
        c.note("res_state", e)
        f = _predict if mode == "eager" else jitted(_predict, mode)
        return (lambda: f(model, seq, state)), c
    own = "controller" if spec.entry == "train_RCController" else "regressor"
    model = blank(own if spec.model == "own" else spec.model)
    c.note("model", VALID if spec.model == "own" else BAD)
    one_column = {"drop_axis": EXTREME}  # (T,) for a single column
    seq_name = "train_seq" if own == "controller" else "in_seq"
    seq, e = make(spec.data, SERIES[:, :2])
    c.note(seq_name, e)
    beta, e = BETAS[spec.beta]
    c.add("beta", beta, e)
    c.add("spinup", spinup, VALID)
    c.add("return_states", *RETURN_STATES[spec.return_states])
    if own == "controller":
        control, e = make(spec.control, SERIES[:, 2:], one_column)
        c.note("control_seq", e)
        if spec.target != Arg("ok"):  # else the default: train_seq[1:]
            c.add("target_seq", *make(spec.target, TARGETS[:, :2], {"none": VALID}))
        return (lambda: train_RCController(model, seq, control, **c.kwargs)), c
    target, e = make(spec.target, SERIES[:, 2:], one_column)
    c.note("target_seq", e)
    return (lambda: train_RCRegressor(model, seq, target, **c.kwargs)), c


@fuzz_settings(max_examples=150)
@seed(4799)
@given(spec=other_specs())
@example(spec=OtherSpec("ESNClassifier.classify", spinup="np.int64(10)"))
@example(spec=OtherSpec("ESNClassifier.classify", data=Arg("strings")))
@example(spec=OtherSpec("train_RCClassifier", labels="str"))
@example(spec=OtherSpec("ESNClassifier.classify", data=Arg("empty")))
@example(spec=OtherSpec("train_RCClassifier", labels="None"))
@example(spec=OtherSpec("train_RCClassifier", beta="'1e-8'"))
@example(spec=OtherSpec("ESNRegressor.predict", state=Arg("strings")))
@example(
    spec=OtherSpec("ESNRegressor.predict", state=Arg("inject", float("inf"), "first"))
)
def _fuzz_others(ledger, spec):
    call, c = other_case(spec)
    jit = spec.mode == "jax.jit"
    ledger.run(
        spec.entry, spec.mode, spec, lambda: judge(call, c.names, c.expect, jit=jit)
    )


OTHERS_GROUP = (
    r"train_RC(Classifier|Controller|Regressor)|ESN(Classifier|Regressor)\..*"
)


def test_fuzz_classifier_controller_regressor(ledger):
    """train_RCClassifier / classify, train_RCController, train_RCRegressor /
    predict answer clearly."""
    _fuzz_others(ledger)
    ledger.check("others", OTHERS_GROUP)


# --------------------------------------------------------------------------- #
# orc.load: mutated model files and odd paths
# --------------------------------------------------------------------------- #

#: Paths that exist but are no model file: an error must not say "no such file".
EXISTING = ("directory", "fifo", "symlink loop", "/dev/null link", "empty path")
LOAD_KINDS = (
    "intact",
    "flip",
    "truncate",
    "append",
    "random",
    "magic + random",
    "empty file",
    "missing",
    "dangling symlink",
    *EXISTING,
    "int path",
    "None path",
    "bytes path",
)


@dataclasses.dataclass(frozen=True)
class LoadSpec:
    """A drawn call of ``orc.load``: the file's ``kind``; for byte
    mutations an ``offset`` (modulo the size), a nonzero ``byte`` XORed in
    (or the length ``n`` cut or appended) and ``junk`` bytes."""

    kind: str
    offset: int = 0
    byte: int = 1
    junk: bytes = b""


load_specs = st.builds(
    LoadSpec,
    st.sampled_from(LOAD_KINDS),
    st.integers(0, 2**20),
    st.integers(1, 255),
    st.binary(max_size=64),
)


@pytest.fixture(scope="module")
def model_file(tmp_path_factory):
    """The bytes of a small saved ESN (with extras and metadata)."""
    path = tmp_path_factory.mktemp("fuzz_load") / "esn.orc"
    model = blank("esn")
    orc.save(
        path, model, extras={"last_state": np.zeros((1, 12))}, metadata={"dt": 0.1}
    )
    return path.read_bytes()


def load_case(spec: LoadSpec, data: bytes, folder: Path):
    """``(path, expectation)``: the file of a :class:`LoadSpec` in ``folder``."""
    path = folder / "model.orc"
    kind = spec.kind
    if kind in ("int path", "None path", "bytes path"):
        return {"int path": 3, "None path": None, "bytes path": bytes(path)}[kind], BAD
    if kind == "intact":
        path.write_bytes(data)
        return path, VALID
    if kind == "flip":
        i = spec.offset % len(data)
        path.write_bytes(data[:i] + bytes([data[i] ^ spec.byte]) + data[i + 1 :])
    elif kind == "truncate":
        path.write_bytes(data[: spec.offset % len(data)])
    elif kind == "append":
        path.write_bytes(data + (spec.junk or b"\0"))
    elif kind == "random":
        path.write_bytes(spec.junk)
    elif kind == "magic + random":
        path.write_bytes(b"ORC-MODEL\n" + spec.junk)
    elif kind == "empty file":
        path.write_bytes(b"")
    elif kind == "dangling symlink":
        path.symlink_to(folder / "absent.orc")
    elif kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "symlink loop":
        path.symlink_to(path)
    elif kind == "/dev/null link":
        path.symlink_to(os.devnull)
    elif kind == "empty path":
        return "", BAD
    return path, BAD


@fuzz_settings(max_examples=120)
@seed(4709)
@given(spec=load_specs)
@example(spec=LoadSpec("None path"))
def _fuzz_load(ledger, data, root, spec):
    folder = Path(root) / f"case{len(os.listdir(root))}"
    folder.mkdir()
    path, expect = load_case(spec, data, folder)
    if spec.kind == "bytes path":
        expect = EXTREME  # os.fspath takes bytes: load it or refuse it clearly
    names = ("path",)
    if isinstance(path, bytes):  # a file name too (os.fspath takes it)
        path_text = os.fsdecode(path)
        names += (path_text, Path(path_text).name)
    if isinstance(path, str | Path):  # the path as given or resolved
        names += (str(path), Path(path).name, str(Path(path)))

    def judged():
        outcome = judge(lambda: orc.load(path), names, expect, extra=(OSError,))
        if (
            spec.kind in EXISTING
            and outcome.kind == "error"
            and re.search("no such file", outcome.text, re.I)
        ):
            return Outcome("failure", outcome.text, "says an existing path is missing")
        return outcome

    ledger.run("orc.load", "eager", spec, judged)


def test_fuzz_load(ledger, model_file, tmp_path):
    """orc.load on mutated bytes of a saved model and on odd paths loads the
    intact file and refuses everything else clearly."""
    _fuzz_load(ledger, model_file, str(tmp_path))
    ledger.check("load", r"orc\.load")


# --------------------------------------------------------------------------- #
# The command line: orc.cli.main in this process, on generated files
# --------------------------------------------------------------------------- #
# Valid data has 40 rows of 2 or 3 features; the model files are ESNs of
# res_dim 8 trained by `orc train` on 2 features (tests/_helpers.run_cli:
# this process's JAX settings stay as they are). No valid --plot is drawn
# (a figure costs seconds); only plots that must be refused.

CLI_ROWS = 40


@dataclasses.dataclass(frozen=True)
class DataFile:
    """A drawn data file: format (``csv``, ``npy``, or CSV text named
    ``.txt``), rows, feature columns, a time column (``t``, ``timestamp``,
    ``irregular t``, none), header (column names, none, or one name short),
    an ``.npy`` dtype, a value written at ``pos`` of the last feature, and
    what the path is (a file, a name with spaces and non-ASCII letters, a
    symbolic link to the file, missing, a directory, an empty file)."""

    fmt: str = "csv"
    rows: int = CLI_ROWS
    features: int = 2
    time: str = "t"
    header: str = "names"
    dtype: str = "float64"
    value: float | None = None
    pos: str = "last"
    path: str = "file"


data_files = st.builds(
    DataFile,
    st.sampled_from(["csv", "npy", "txt"]),
    st.sampled_from([CLI_ROWS, CLI_ROWS, 0, 1, 2]),
    st.sampled_from([2, 2, 3, 1]),
    st.sampled_from(["t", "none", "timestamp", "irregular t"]),
    st.sampled_from(["names", "none", "short"]),
    st.sampled_from(["float64", "float32", "int64", "bool", "complex128", "str"]),
    st.one_of(st.none(), st.none(), VALUES),
    st.sampled_from(["last", "first", "mid"]),
    st.sampled_from(["file", "file", "spaced name", "symlink", "missing", "directory",
                     "empty"]),
)  # fmt: skip


def write_data(spec: DataFile, folder: Path, stem: str):
    """Write ``spec``'s file in ``folder``: ``(path token, expectation,
    features)``; ``features`` is the number of feature columns the command
    line will read (None when it cannot read the file)."""
    name = {"spaced name": f"{stem} dätä"}.get(spec.path, stem) + (
        ".npy" if spec.fmt == "npy" else f".{spec.fmt}"
    )
    path = folder / name
    if spec.path == "missing":
        return name, BAD, None
    if spec.path == "directory":
        path.mkdir()
        return name, BAD, None
    if spec.path == "empty":
        path.write_bytes(b"")
        return name, BAD, None
    rows, k = spec.rows, spec.features
    values = np.sin(
        0.3 * np.arange(rows)[:, None] * (1 + 0.3 * np.arange(k)) + np.arange(k)
    )
    expect = VALID if rows >= 2 else BAD
    if spec.value is not None and rows:
        row = {"first": 0, "mid": rows // 2, "last": rows - 1}[spec.pos]
        values[row, -1] = spec.value
        v = spec.value
        expect = worst(
            expect, BAD if not np.isfinite(v) else (VALID if abs(v) <= 1e6 else EXTREME)
        )
    t = 0.1 * np.arange(rows)
    time = spec.time
    if spec.fmt == "npy" and spec.time != "none":
        time = "first"  # an .npy file has no names: an unnamed uniform first column
    columns = [f"x{i}" for i in range(k)]
    features = k
    if time != "none":
        if time == "irregular t" and rows >= 3:
            t = t + 0.03 * (np.arange(rows) % 3)
            if spec.fmt != "npy" and spec.header == "none":
                features = k + 1  # an unnamed irregular column is a feature
            else:
                expect = BAD  # a column named t must be uniform
        values = np.concatenate([t[:, None], values], axis=1)
        columns = [{"timestamp": "timestamp"}.get(time, "t"), *columns]
    if spec.fmt == "npy":
        kind = spec.dtype
        if kind in ("bool", "complex128", "str"):
            expect = BAD
        with np.errstate(invalid="ignore", over="ignore"):  # NaN or 1e300 cast
            table = values.astype(kind if kind != "str" else "<U8")
            if kind in ("int64", "bool"):  # the time column is no longer uniform
                features = k + (time != "none")
                table = np.round(3 * values).astype(np.int64).astype(kind)
        if kind in ("float32", "int64") and spec.value is not None and rows:
            # the written value is what the cast made of the drawn one
            v = float(np.abs(table.astype(np.float64)).max())
            cast = BAD if not np.isfinite(v) else (VALID if v <= 1e6 else EXTREME)
            expect = worst(VALID if rows >= 2 else BAD, cast)
        if kind == "float32" and time != "none":  # uniform to float32's rounding
            expect, features = worst(expect, EXTREME), None
        np.save(path, table)
    else:
        header = (
            ""
            if spec.header == "none"
            else ",".join(columns[:-1] if spec.header == "short" else columns)
        )
        if spec.header == "short" and rows:
            expect = BAD
        body = "\n".join(",".join(repr(float(x)) for x in row) for row in values)
        path.write_text((header + "\n" if header else "") + body + "\n")
    if spec.path == "symlink":
        link = folder / f"{stem}-link{path.suffix}"
        link.symlink_to(path.name)
        name = link.name
    return name, expect, (features if expect != BAD else None)


#: Option values by option: token -> expectation.
TRAIN_OPTIONS = {
    "--res-dim": {"8": VALID, "0": BAD, "-3": BAD, "x": BAD, "2.5": BAD},
    "--spinup": {"5": VALID, "-1": BAD, "39": BAD, "x": BAD},
    "--beta": {"1e-8": VALID, "0": VALID, "-1": BAD, "nan": BAD, "inf": BAD, "x": BAD},
    "--leak-rate": {"0.5": VALID, "0": BAD, "1.5": BAD, "nan": BAD},
    "--spectral-radius": {"0.9": VALID, "-1": BAD, "0": BAD, "inf": BAD},
    "--chunks": {"1": VALID, "0": BAD, "-1": BAD, "5": BAD},
    "--val-fraction": {"0.25": VALID, "1": BAD, "-0.5": BAD, "nan": BAD},
    "--input-noise": {"0": VALID, "-1": BAD, "nan": BAD},
    "--dt": {"0.1": VALID, "0": BAD, "-0.1": BAD, "nan": BAD, "x": BAD},
    "--time-column": {"none": VALID, "first": VALID, "sometimes": BAD},
    "--model": {"nvar": VALID, "deep-esn": VALID, "gru": BAD},
    "--no-such-option": {"1": BAD},
}
FORECAST_OPTIONS = {
    "--steps": {"5": VALID, "0": BAD, "-2": BAD, "x": BAD, "2.5": BAD},
    "--dt": {"0.1": VALID, "0": BAD, "nan": BAD},
    "--lyapunov": {"0.9": VALID, "-1": BAD, "0": BAD},
    "--time-column": {"none": VALID, "sometimes": BAD},
    "--no-such-option": {"1": BAD},
}
EVALUATE_OPTIONS = {
    "--warmup": {"10": VALID, "0": BAD, "-1": BAD, "1000": BAD, "x": BAD},
    "--horizon": {"5": VALID, "0": BAD, "1000": BAD},
    "--windows": {"2": VALID, "0": BAD, "x": BAD},
    "--threshold": {"0.4": VALID, "-1": BAD, "0": BAD},
    "--dt": {"0.1": VALID, "0": BAD},
    "--no-such-option": {"1": BAD},
}
#: ESN-only options and their values for a --model nvar run (refused there).
ESN_ONLY = ("--res-dim", "--leak-rate", "--spectral-radius", "--chunks")
OUTS = ("new", "nested new", "npy", "same as data", "symlink to data",
        "hardlink to data", "same as model", "directory", "empty", "unwritable",
        "same as config")  # fmt: skip
PLOTS = (None, None, "same as data", "same as model", "directory", "same as out",
         "not an image")  # fmt: skip
CONFIGS = (None, None, "valid", "non-integer", "unknown key", "not TOML",
           "argument key", "missing")  # fmt: skip
MODEL_FILES = ("trained", "trained", "no last state", "flipped byte", "missing",
               "directory", "data as model")  # fmt: skip


@dataclasses.dataclass(frozen=True)
class CLISpec:
    """A drawn ``orc`` command: its data file(s), changed options (option ->
    token), --out, --plot, --config and model file kinds."""

    command: str
    data: DataFile = DataFile()
    options: tuple = ()
    out: str = "new"
    plot: str | None = None
    config: str | None = None
    model_file: str = "trained"
    warmup: DataFile | None = None  # forecast --warmup


@st.composite
def cli_specs(draw):
    command = draw(st.sampled_from(["train", "forecast", "evaluate"]))
    table = {"train": TRAIN_OPTIONS, "forecast": FORECAST_OPTIONS,
             "evaluate": EVALUATE_OPTIONS}[command]  # fmt: skip
    change = perturbed(draw, ["data", "options", "out", "plot", "config", "model",
                              "warmup"], most=2)  # fmt: skip
    spec = CLISpec(command)
    if "data" in change:
        spec = dataclasses.replace(spec, data=draw(data_files))
    if "options" in change:
        flags = draw(st.lists(st.sampled_from(sorted(table)), min_size=1, max_size=2,
                              unique=True))  # fmt: skip
        spec = dataclasses.replace(
            spec,
            options=tuple((f, draw(st.sampled_from(list(table[f])))) for f in flags),
        )
    if "out" in change and command != "evaluate":
        spec = dataclasses.replace(spec, out=draw(st.sampled_from(OUTS)))
    if "plot" in change and command != "train":
        spec = dataclasses.replace(spec, plot=draw(st.sampled_from(PLOTS)))
    if "config" in change:
        spec = dataclasses.replace(spec, config=draw(st.sampled_from(CONFIGS)))
    if "model" in change and command != "train":
        spec = dataclasses.replace(spec, model_file=draw(st.sampled_from(MODEL_FILES)))
    if "warmup" in change and command == "forecast":
        spec = dataclasses.replace(
            spec, warmup=draw(st.one_of(st.just(DataFile()), data_files))
        )
    return spec


@pytest.fixture(scope="module")
def cli_models(tmp_path_factory):
    """``{kind: bytes}`` of the model files the CLI cases start from: an ESN
    trained by ``orc train`` on 2 features (with its last state), and the
    same model saved without it."""
    folder = tmp_path_factory.mktemp("fuzz_cli_models")
    name, _, _ = write_data(DataFile(), folder, "data")
    proc = run_cli("train", name, "--res-dim", "8", "--spinup", "5", "--out", "m.orc",
                   cwd=folder)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    model = orc.load(folder / "m.orc")
    orc.save(folder / "bare.orc", model, metadata={"dt": 0.1})
    return {"trained": (folder / "m.orc").read_bytes(),
            "no last state": (folder / "bare.orc").read_bytes()}  # fmt: skip


def cli_case(spec: CLISpec, folder: Path, models: dict):
    """Lay out ``spec``'s files in ``folder``: ``(argv, Call)``."""
    c = Call()
    argv = [spec.command]
    # the model file
    if spec.command != "train":
        kind = spec.model_file
        model = folder / "model.orc"
        if kind in ("trained", "no last state"):
            model.write_bytes(models[kind])
        elif kind == "flipped byte":
            data = bytearray(models["trained"])
            data[len(data) // 2] ^= 0x40
            model.write_bytes(bytes(data))
        elif kind == "directory":
            model.mkdir()
        elif kind == "data as model":
            model.write_text("t,x0,x1\n0.0,1.0,2.0\n0.1,1.5,2.5\n")
        c.note("MODEL", BAD if kind not in ("trained", "no last state") else VALID,
               alias=("model.orc",))  # fmt: skip
        argv.append("model.orc")
    # the data file (train and evaluate) and the warm-up (forecast)
    features = 2
    if spec.command in ("train", "evaluate"):
        name, e, features = write_data(spec.data, folder, "data")
        c.note(name, e, alias=("data",))
        if spec.command == "evaluate" and features not in (None, 2):
            c.note(name, BAD)  # the model reads 2 features
        # train: rows beyond --spinup 5 + 1; evaluate: --warmup 10 + --horizon 5
        if spec.data.rows < (15 if spec.command == "evaluate" else 7):
            c.note(name, BAD, alias=("rows", "--spinup"))
        argv.append(name)
    warmup = None
    if spec.command == "forecast" and spec.warmup is not None:
        warmup, e, width = write_data(spec.warmup, folder, "warmup")
        c.note("--warmup", e, alias=(warmup,))
        if width not in (None, 2):
            c.note("--warmup", BAD, alias=(warmup,))
        argv += ["--warmup", warmup]
    if (
        spec.command == "forecast"
        and spec.warmup is None
        and spec.model_file == "no last state"
    ):
        c.note("--warmup", BAD, alias=("last state",))
    # options: the defaults of the fuzz, then the drawn ones
    options = {"train": {"--res-dim": "8", "--spinup": "5"}, "forecast": {"--steps": "5"},
               "evaluate": {"--warmup": "10", "--horizon": "5"}}[spec.command]  # fmt: skip
    table = {"train": TRAIN_OPTIONS, "forecast": FORECAST_OPTIONS,
             "evaluate": EVALUATE_OPTIONS}[spec.command]  # fmt: skip
    drawn = dict(spec.options)
    if drawn.get("--model") == "nvar":
        del options["--res-dim"]  # an ESN option: given for nvar only when drawn
    for flag, token in spec.options:
        options[flag] = token
        c.note(flag, table[flag][token], alias=(flag.lstrip("-").replace("-", "_"),))
        if drawn.get("--model") == "nvar" and flag in ESN_ONLY:
            c.note(flag, BAD, alias=("--model",))  # refused: nvar does not use it
    for flag, token in options.items():
        argv += [flag, token]
    # outputs
    out_flag = {"train": "--out", "forecast": "--out"}.get(spec.command)
    if out_flag:
        default = "out.orc" if spec.command == "train" else "out.csv"
        out = {
            "new": default,
            "nested new": f"new/dir/{default}",
            "npy": "out.npy",
            "same as data": "data.csv" if spec.command == "train" else "model.orc",
            "symlink to data": "link.csv",
            "hardlink to data": "hard.csv",
            "same as model": "model.orc" if spec.command != "train" else default,
            "directory": "outdir",
            "empty": "",
            "unwritable": "/proc/orc-fuzz.csv",
            "same as config": "config.toml",
        }[spec.out]
        source = folder / ("model.orc" if spec.command != "train" else argv[1])
        if spec.out == "symlink to data" and os.path.lexists(source):
            (folder / out).symlink_to(source.name)
        if (
            spec.out == "hardlink to data"
            and source.is_file()
            and not source.is_symlink()
        ):
            os.link(source, folder / out)
        if spec.out == "directory":
            (folder / out).mkdir()
        same = spec.out in ("same as data", "symlink to data", "hardlink to data",
                            "same as model") and os.path.lexists(source)  # fmt: skip
        bad = (
            same
            or spec.out in ("directory", "empty", "unwritable")
            or (spec.out == "same as config" and spec.config not in (None, "missing"))
        )
        if spec.command == "train" and spec.out == "same as model":
            bad = False
        if spec.command == "train" and spec.out == "same as data":
            bad = os.path.lexists(folder / "data.csv")
        c.note("--out", BAD if bad else VALID, alias=(out,) if out else ())
        argv += [out_flag, out]
    if spec.plot is not None:
        plot = {"same as data": argv[1], "same as model": "model.orc",
                "directory": "plotdir", "same as out": "out.csv",
                "not an image": "plot.csv"}[spec.plot]  # fmt: skip
        if spec.plot == "directory":
            (folder / plot).mkdir()
        c.note("--plot", BAD, alias=(plot,))
        argv += ["--plot", plot]
    if spec.config is not None:
        text = {
            "valid": f"{'res_dim = 8' if spec.command == 'train' else 'dt = 0.1'}\n",
            "non-integer": "res_dim = 3.7\n" if spec.command == "train" else "steps = 2.5\n",
            "unknown key": "no_such_key = 1\n",
            "not TOML": "res_dim = = 8\n",
            "argument key": "data_file = 'x.csv'\n" if spec.command == "train"
            else "model_file = 'x.orc'\n",
        }.get(spec.config)  # fmt: skip
        if spec.command == "evaluate" and spec.config == "non-integer":
            text = "windows = 1.5\n"
        if spec.command == "forecast" and spec.config == "valid":
            text = "lyapunov = 0.9\n"
        if spec.command == "evaluate" and spec.config == "valid":
            text = "threshold = 0.4\n"
        if text is not None:
            (folder / "config.toml").write_text(text)
        c.note("--config", VALID if spec.config == "valid" else BAD,
               alias=("config.toml", "key", "TOML"))  # fmt: skip
        argv += ["--config", "config.toml"]
    return argv, c


def _snapshot(folder: Path) -> dict:
    """Every entry under ``folder``: a file's SHA-256, a link's target."""
    out = {}
    for p in sorted(folder.rglob("*")):
        if p.is_symlink():
            out[p] = ("link", os.readlink(p))
        elif p.is_file():
            out[p] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
    return out


def run_orc(argv, folder: Path):
    """``orc ARGV`` in this process (``_helpers.run_cli``) under the time
    limit: ``(CompletedProcess, the exception the command raised or None)``."""
    raised = {}
    original = cli.cli.main

    def main(*args, **kwargs):
        try:
            return original(*args, **kwargs)
        except BaseException as err:
            raised["error"] = err
            raise

    with mock.patch.object(cli.cli, "main", main), warnings.catch_warnings():
        warnings.simplefilter("always")
        with time_limit():
            proc = run_cli(*argv, cwd=folder)
    return proc, raised.get("error")


def judge_cli(argv, c: Call, folder: Path) -> Outcome:
    """Run ``orc ARGV`` in ``folder`` and judge how it ended (see the module
    doc); a changed input file is a failure whatever the exit code."""
    before = _snapshot(folder)
    try:
        proc, err = run_orc(argv, folder)
    except CaseTimeout as timeout:
        return Outcome("failure", f"hang: {timeout}", "hang")
    after = _snapshot(folder)
    changed = sorted(str(p.name) for p in before if after.get(p) != before[p])
    if changed:
        return Outcome("failure", f"exit {proc.returncode}; changed {changed}",
                       "changed an input file")  # fmt: skip
    text = f"exit {proc.returncode}: " + (first_line(err) if err is not None else "")
    warned = re.search(r"^orc: warning", proc.stderr, re.M) is not None
    if proc.returncode == 0:
        if warned:
            return Outcome("warning", text)
        if c.expect == BAD:
            return Outcome("failure", text, "accepted bad input silently")
        return Outcome("result", text)
    if proc.returncode == 1 and isinstance(err, cli.Failure):
        return Outcome("warning", text)  # a reported failure (a divergence)
    if proc.returncode == 2 and isinstance(err, click.ClickException):
        if c.expect == VALID:
            return Outcome("failure", text, "valid input refused")
        message = err.format_message()
        if not any(n and n in message for n in c.names):
            return Outcome("failure", text, f"error not naming {'/'.join(c.names)}")
        return Outcome("error", text)
    if err is not None and isinstance(err, CLEAR_TYPES):
        return Outcome("failure", text, "bad input answered with exit 1")
    return Outcome("failure", text, "internal error")


@fuzz_settings(max_examples=150)
@seed(4702)
@given(spec=cli_specs())
@example(spec=CLISpec("evaluate", plot="not an image"))
@example(spec=CLISpec("train", data=DataFile(fmt="npy", path="empty")))
@example(spec=CLISpec("forecast", options=(("--dt", "nan"),)))
@example(spec=CLISpec("train", options=(("--beta", "-1"),)))
def _fuzz_cli(ledger, models, root, spec):
    folder = Path(root) / f"case{len(os.listdir(root))}"
    folder.mkdir()
    argv, c = cli_case(spec, folder, models)
    ledger.run(
        f"orc {spec.command}", "in-process", spec, lambda: judge_cli(argv, c, folder)
    )


def test_fuzz_cli(ledger, cli_models, tmp_path):
    """orc train / forecast / evaluate on generated files and option
    combinations answer clearly and never change an input file."""
    _fuzz_cli(ledger, cli_models, str(tmp_path))
    ledger.check("cli", r"orc (train|forecast|evaluate)")
