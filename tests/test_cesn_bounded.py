"""Issue 47 item 1: nothing a continuous-time model integrates runs unbounded.

A NaN in the last row of a CESN's training data (or of its warm-up data) made
the adaptive diffrax solve retry a non-finite vector field forever while the
NaN check waited, as data, for the program to return. Now non-finite data is
refused before the solve (eagerly, naming the first bad row; under
``eqx.filter_jit`` the compiled check names the argument and the solve runs on
zeros in its place), and every adaptive solve has a step limit whose
exhaustion is a clear error. The calls that used to hang run in a subprocess
with a timeout, so that a regression fails here instead of hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from _helpers import lorenz_rk4
from orc._validation import (
    ODE_STEPS_MIN,
    ODE_STEPS_PER_INTERVAL,
    check_finite_rows,
    ode_max_steps,
)
from orc.forecaster import CESNForecaster, train_CESNForecaster

#: seconds the one subprocess of these tests may take: it runs every case
#: below (~30-60 s of CPU, mostly compiling; a few times that on a loaded
#: machine); a hang (the bug coming back) fails the tests whose cases had not
#: finished when it runs out
TIMEOUT = 600

# the subprocess's set-up: the suite's JAX settings, data and a small CESN
_PRELUDE = """
import sys
import jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import orc
from orc.forecaster import CESNForecaster, train_CESNForecaster

t = np.arange(200) * 0.01
U = np.stack([np.sin(t), np.cos(2 * t), np.sin(3 * t + 1)], axis=1)
model = CESNForecaster(3, 20, seed=0)
PREFIX = ""

def bad(u, row, col=1, value=np.nan):
    u = np.array(u)
    u[row, col] = value
    return u

def outcome(case, call):
    # one line per case: the error's class and its line that carries orc's
    # message (a callback's error lists a traceback before it)
    case = PREFIX + case
    try:
        jax.block_until_ready(call())
        print(case, "RETURNED", "", sep="\\t", flush=True)
    except Exception as err:
        keys = ("contains NaN", "ODE solve", "maximum number of solver steps")
        lines = [ln for ln in str(err).splitlines() if any(k in ln for k in keys)]
        line = lines[-1] if lines else str(err).splitlines()[0]
        print(case, type(err).__name__, line, sep="\\t", flush=True)
"""

#: each test's cases, run in one fresh Python (the ``outcomes`` fixture): one
#: interpreter start and one compilation of the programs the cases share
#: (the CESN of 20 nodes on 200 samples) instead of one per test
_BODIES = {}


def _cases(name: str, body: str) -> str:
    """Register ``body``'s cases under ``name`` (their keys are ``name/case``)."""
    _BODIES[name] = body
    return name


def _run_all() -> tuple[dict[str, tuple[str, str]], str | None]:
    """Run ``_PRELUDE`` and every registered body in a fresh Python;
    ``({"name/case": (error class, message line)}, None)``, or with the
    cases that finished and why the rest did not (past ``TIMEOUT``: a hang)."""
    code = _PRELUDE + "".join(
        f"\nPREFIX = {name + '/'!r}\n{body}"
        f"print(PREFIX + {_DONE!r}, '', '', sep='\\t', flush=True)\n"
        for name, body in _BODIES.items()
    )
    problem = None
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
        out = proc.stdout
        if proc.returncode != 0:
            problem = f"the subprocess failed: {proc.stderr[-3000:]}"
    except subprocess.TimeoutExpired as err:
        out = err.stdout or ""
        out = out.decode() if isinstance(out, bytes) else out
        problem = f"still running after {TIMEOUT} s (a hang); finished: {out!r}"
    found = {}
    for line in out.splitlines():
        case, kind, msg = line.split("\t")
        found[case] = (kind, msg)
    return found, problem


_DONE = "<every case ran>"


@pytest.fixture(scope="module")
def outcomes():
    """``get(name)``: ``{case: (error class, message line)}`` of the body
    registered under ``name``; a test whose cases did not all finish fails
    (rather than hangs)."""
    found, problem = _run_all()

    def get(name):
        ours = {
            key.removeprefix(name + "/"): value
            for key, value in found.items()
            if key.startswith(name + "/")
        }
        if ours.pop(_DONE, None) is None:  # this body's cases did not all run
            pytest.fail(problem or f"the cases of {name!r} did not finish")
        return ours

    return get


# --------------------------------------------------------------------------- #
# (a) non-finite data: refused before the solve
# --------------------------------------------------------------------------- #
EAGER = _cases(
    "eager",
    """
outcome("last", lambda: train_CESNForecaster(model, bad(U, -1), t, spinup=50))
outcome("first", lambda: train_CESNForecaster(model, bad(U, 0), t, spinup=50))
outcome("middle", lambda: train_CESNForecaster(model, bad(U, 120, 2, np.inf), t))
both = bad(bad(U, 150), 40)  # the first of two bad rows is named
outcome("two", lambda: train_CESNForecaster(model, both, t))
multi = np.stack([U, bad(U, -1)])
outcome("multi", lambda: train_CESNForecaster(
    model, multi, np.stack([t, t]), multi_sequence=True))
outcome("target", lambda: train_CESNForecaster(
    model, U[:-1], t, target_seq=bad(U[1:], -1)))
outcome("warm-up", lambda: model.forecast_from_IC(t[:10], bad(U[:60], -1)))
""",
)


def test_nonfinite_rows_are_refused_eagerly_naming_the_first_bad_row(outcomes):
    found = outcomes(EAGER)
    hint = "Remove or interpolate missing samples before training."
    rows = {"last": 199, "first": 0, "middle": 120, "two": 40}
    for case, row in rows.items():
        assert found[case] == (
            "EquinoxRuntimeError",
            f"train_RCForecaster: train_seq contains NaN or inf values (first at "
            f"row {row}). {hint}",
        ), case
    assert found["multi"][0] == "EquinoxRuntimeError"
    assert (
        "train_seq contains NaN or inf values (first at trajectory 1, row 199)"
        in (found["multi"][1])
    )
    assert (
        "target_seq contains NaN or inf values (first at row 198)"
        in (found["target"][1])
    )
    assert found["warm-up"] == (
        "EquinoxRuntimeError",
        "CESNForecaster: spinup_data contains NaN or inf values (first at row 59).",
    )


FILTER_JIT = _cases(
    "filter_jit",
    """
train = eqx.filter_jit(train_CESNForecaster)
for row in (-1, 0, 120):
    outcome(f"train {row}", lambda: train(model, bad(U, row), t, spinup=50))
""",
)


def test_nonfinite_training_data_under_filter_jit_ends_with_its_error(outcomes):
    # traced data cannot be looked at before the program: the compiled check
    # names the argument and the solve integrates zeros in its place, so the
    # program ends and the error is raised (it hung on the last row)
    found = outcomes(FILTER_JIT)
    for row in (-1, 0, 120):
        assert found[f"train {row}"][0] == "EquinoxRuntimeError"
        # the same words as the eager refusal, the first bad row included
        where = f"(first at row {row % 200})"  # U: 200 rows
        assert (
            f"train_seq contains NaN or inf values {where}."
            in (found[f"train {row}"][1])
        )


WARM_UP_AND_STATES = _cases(
    "warm_up_and_states",
    """
# an untrained model integrates as a trained one does (its readout is zero)
ts, r0 = t[:10], jnp.zeros((1, 20))
fic = eqx.filter_jit(lambda m, u: m.forecast_from_IC(ts, u))
outcome("warm-up", lambda: fic(model, bad(U[:60], -1)))
outcome("state", lambda: model.forecast(ts, r0.at[0, 3].set(jnp.nan)))
outcome("force", lambda: model.force(bad(U[:60], -1), r0, t[:60]))
""",
)


def test_nonfinite_warm_up_data_and_states_end_with_their_error(outcomes):
    found = outcomes(WARM_UP_AND_STATES)
    assert found["warm-up"][0] == "EquinoxRuntimeError"
    assert (
        "spinup_data contains NaN or inf values (first at row 59)."
        in (found["warm-up"][1])
    )
    assert found["state"][0] == "EquinoxRuntimeError"
    assert (
        "CESNForecaster: res_state contains NaN or inf values (first at row 0)."
        in found["state"][1]
    )
    assert found["force"][0] == "EquinoxRuntimeError"
    assert (
        "CESNForecaster: in_seq contains NaN or inf values (first at row 59)."
        in found["force"][1]
    )


# --------------------------------------------------------------------------- #
# (b) a step limit on every adaptive solve
# --------------------------------------------------------------------------- #
STEP_LIMIT = _cases(
    "step_limit",
    """
tiny = CESNForecaster(3, 20, seed=0, max_steps=5)
outcome("train", lambda: train_CESNForecaster(tiny, U, t, spinup=50))
# a model whose weights hold a NaN (no data check can see it): the default
# bound for max_steps=None ends the solve (the forecast of the "state" case
# above: its 10 times and model structure, so its compiled program)
wout = np.array(model.readout.wout)
wout[0, 0, 0] = np.nan
nan_w = eqx.tree_at(lambda m: m.readout.wout, model, jnp.asarray(wout))
outcome("nan weights", lambda: nan_w.forecast(t[:10], jnp.zeros((1, 20))))
""",
)


def test_the_step_limit_ends_in_an_error_that_says_what_to_change(outcomes):
    found = outcomes(STEP_LIMIT)
    kind, msg = found["train"]
    assert kind == "EquinoxRuntimeError"
    assert "CESNForecaster: the reservoir's ODE solve stopped at max_steps=5" in msg
    for advice in ("raise max_steps", "NaN/inf", "stiff"):
        assert advice in msg, advice
    kind, msg = found["nan weights"]
    bound = ODE_STEPS_MIN + ODE_STEPS_PER_INTERVAL * 10  # a forecast of 10 times
    assert kind == "EquinoxRuntimeError"
    assert f"stopped at {bound} steps (the bound for max_steps=None" in msg


def test_the_step_limit_is_one_of_orcs_result_codes():
    # bounded (max_steps=5, so no hang in this process): the solve's outcome
    # is returned with the result as one of orc's error codes
    # (orc.capture_errors under jax.jit), not raised by diffrax's own throw
    model = CESNForecaster(3, 20, seed=0, max_steps=5)
    ts, r0 = np.arange(200.0) * 0.01, jnp.zeros((1, 20))
    step = jax.jit(orc.capture_errors(lambda m, r: m.forecast(ts, r)))
    _, errors = step(model, r0)
    (kind, msg, _), *_ = errors.found()
    assert kind == "error"
    assert "ODE solve stopped at max_steps=5" in msg


DATA_SYSTEMS = _cases(
    "data_systems",
    """
outcome("nan", lambda: orc.data.lorenz63(tN=1.0, dt=0.01, rho=float("nan")))
outcome("blow-up", lambda: orc.data.lorenz63(
    tN=1.0, dt=0.01, sigma=-10.0, beta=-8.0 / 3.0))
""",
)


def test_data_systems_end_a_nan_or_blow_up_solve_with_an_error(outcomes):
    # a NaN parameter or a trajectory that blows up made the data systems'
    # adaptive solve (ORC's max_steps=None) retry forever
    found = outcomes(DATA_SYSTEMS)
    for case in ("nan", "blow-up"):
        kind, msg = found[case]
        assert kind == "EquinoxRuntimeError", case
        assert "maximum number of solver steps" in msg, case


def test_ode_max_steps():
    assert ode_max_steps(None, 100, adaptive=True) == 4096 + 256 * 100
    assert ode_max_steps(None, 0, adaptive=True) == 4096 + 256
    assert ode_max_steps(77, 100, adaptive=True) == 77
    # a fixed-step solve: its grid fixes its step count
    assert ode_max_steps(None, 100, adaptive=False) is None
    assert ode_max_steps(50, 100, adaptive=False) == 50


def test_check_finite_rows():
    check_finite_rows(np.ones((4, 2)), "x", "f")
    check_finite_rows(np.arange(6).reshape(3, 2), "x", "f")  # ints are finite
    check_finite_rows([[1.0, 2.0]], "x", "f")
    a3 = np.ones((2, 3, 2))
    a3[1, 2, 0] = -np.inf
    cases = [
        (np.array([1.0, np.inf, np.nan]), "(first at index 1)"),
        (np.array([[1.0, 2.0], [3.0, np.nan], [np.nan, 0.0]]), "(first at row 1)"),
        (a3, "(first at trajectory 1, row 2)"),
    ]
    for x, where in cases:
        with pytest.raises(eqx.EquinoxRuntimeError) as err:
            check_finite_rows(jnp.asarray(x), "x", "f", "Hint.")
        assert str(err.value) == f"f: x contains NaN or inf values {where}. Hint."
    # traced: left to the compiled check
    jax.jit(lambda x: check_finite_rows(x, "x", "f") or x)(jnp.full((2, 2), jnp.nan))


# --------------------------------------------------------------------------- #
# normal data: the same bits as the unbounded solve of before
# --------------------------------------------------------------------------- #
def _unbounded_force(model, u, r0, ts):
    """``model.force``'s solve as ORC 0.4 (and orc before issue 47) ran it:
    diffrax with ``max_steps=None``, written out here."""
    ts = jnp.asarray(ts)
    interp = diffrax.CubicInterpolation(
        ts, diffrax.backward_hermite_coefficients(ts, jnp.asarray(u))
    )

    def field(t, r, _):
        return model.driver.advance(model.embedding.embed(interp.evaluate(t)), r)

    dt = ts[1] - ts[0]
    return diffrax.diffeqsolve(
        diffrax.ODETerm(field),
        model.solver,
        t0=ts[0],
        t1=ts[-1] + dt,
        dt0=dt,
        y0=r0,
        saveat=diffrax.SaveAt(ts=ts + dt),
        stepsize_controller=model.stepsize_controller,
        adjoint=model.adjoint,
        max_steps=None,
    ).ys


def test_clean_data_gives_the_bits_of_the_unbounded_solve():
    u = lorenz_rk4(300)
    ts = np.arange(300) * 0.01
    model = CESNForecaster(3, 30, seed=0, time_const=50.0)
    r0 = model.driver.default_state()
    expected = eqx.filter_jit(_unbounded_force)(model, u, r0, ts)
    np.testing.assert_array_equal(model.force(u, r0, ts), expected)
    # training forces the same states (time_const is fixed: no "auto" change)
    _, states = train_CESNForecaster(model, u, ts, spinup=50)
    np.testing.assert_array_equal(states, expected)


def test_data_systems_keep_their_bits():
    # lorenz63 as orc.data ran it before issue 47 (ORC 0.4's settings with
    # max_steps=None), written out here
    us, ts = orc.data.lorenz63(tN=2.0, dt=0.01)

    def field(t, u, args):
        rho, sigma, beta = args
        x, y, z = u
        return jnp.stack([sigma * (y - x), x * (rho - z) - y, x * y - beta * z])

    @jax.jit
    def unbounded(y0, args, grid, dt0):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Tsit5(),
            t0=jnp.zeros(()),
            t1=jnp.asarray(2.0),
            dt0=dt0,
            y0=y0,
            args=args,
            saveat=diffrax.SaveAt(ts=grid),
            stepsize_controller=diffrax.PIDController(rtol=1e-7, atol=1e-9),
            max_steps=None,
        ).ys

    args = tuple(jnp.asarray(p) for p in (28.0, 10.0, 8.0 / 3.0))
    grid = jnp.asarray(np.arange(0.0, 2.0, 0.01))
    expected = unbounded(jnp.asarray([-10.0, 1.0, 10.0]), args, grid, jnp.asarray(0.01))
    np.testing.assert_array_equal(us, expected)
