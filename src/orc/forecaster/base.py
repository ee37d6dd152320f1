"""Base classes of forecasters: teacher forcing and closed-loop forecasting.

A forecaster composes an embedding, a driver and a readout. Teacher forcing
feeds the true sequence ``u_0, u_1, ...`` and records the states
``r_{t+1} = driver(embed(u_t), r_t)``; the readout is trained so that
``readout(r_{t+1}) ≈ u_{t+1}``, i.e. the state reached after input ``u_t``
predicts the next sample. A forecast closes the loop: ``y_0 = readout(r)`` and
``r <- driver(embed(y_k), r)``, ``y_{k+1} = readout(r)``. So
``forecast(n, R[-1])[0]`` is the prediction of the first sample after the
training window.

Subclass :class:`RCForecasterBase` (or :class:`CRCForecasterBase` for
continuous time) with your own components to build custom models; the training
functions use only the component hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .. import _errors, _strategy
from .._compose import check_model
from .._divergence import report_divergence, report_overflow
from .._kernels import current
from .._model import RCModel
from .._shard import forecast_sharded, placement
from .._strategy import compiled, method
from .._validation import (
    ODE_STEPS_MIN,
    ODE_STEPS_PER_INTERVAL,
    check_data,
    check_finite,
    check_finite_rows,
    check_input_finite,
    check_rank,
    check_sequence,
    check_static_int,
    ode_max_steps,
    warn_if_untrained,
)
from ..drivers import (
    DriverBase,
    check_state,
    closed_loop_linear,
)
from ..embeddings import EmbedBase
from ..readouts import ReadoutBase

if TYPE_CHECKING:  # diffrax is imported where a CESN uses it (0.7 s of orc's import)
    import diffrax

__all__ = ["RCForecasterBase", "CRCForecasterBase"]


def _check_state(model, res_state, name="res_state"):
    return check_state(name, res_state, type(model).__name__, model.driver, model.dtype)


def _data_scale(model):
    """The scale of the data the model's readout was trained on (its
    ``data_scale``, see :mod:`orc._divergence`), ``None`` if unknown."""
    return getattr(model.readout, "data_scale", None)


def _check_sequence(model, seq, name):
    owner = type(model).__name__
    return check_sequence(name, seq, owner, model.dtype, model.in_dim, "data_dim")


class RCForecasterBase(RCModel):
    """Discrete-time reservoir forecaster: embedding → driver → readout.

    Parameters
    ----------
    driver : DriverBase
    readout : ReadoutBase
    embedding : EmbedBase
    chunks : int, default 0
        Number of parallel reservoirs (informational; shapes come from the driver).
    dtype : dtype, default float64
    seed : int, default 0

    Methods
    -------
    force(in_seq, res_state) -> states ``(seq_len, *state_shape)``
    forecast(fcast_len, res_state) -> ``(fcast_len, out_dim)``
    forecast_from_IC(fcast_len, spinup_data) -> ``(fcast_len, out_dim)``
    set_readout(readout), set_embedding(embedding) -> new model
    """

    chunks: int = eqx.field(default=0, static=True)

    def __init__(
        self,
        driver: DriverBase,
        readout: ReadoutBase,
        embedding: EmbedBase,
        chunks: int = 0,
        dtype=jnp.float64,
        seed=0,
    ) -> None:
        self._set_components(driver, readout, embedding, dtype, seed)
        self.chunks = chunks

    def __check_init__(self):
        check_model(self, self.in_dim, self.in_dim)

    def _advance_seq(self, in_seq, res_state):
        return self._drive(in_seq, res_state)

    @compiled
    def force(
        self, in_seq: Float[Array, "seq_len data_dim"], res_state: Array
    ) -> Array:
        """Teacher-force the reservoir with ``in_seq`` from ``res_state``.

        Returns the state after each input, ``(seq_len, *state_shape)``
        (``(seq_len, chunks, res_dim)`` for the ESN forecasters). NaN or inf
        in ``in_seq`` or ``res_state`` raises (also under ``jax.jit``), naming
        the argument and the first bad row.
        """
        owner = type(self).__name__
        in_seq = _check_sequence(self, in_seq, "in_seq")
        _check_state(self, res_state)
        in_seq = check_input_finite(in_seq.astype(self.dtype), "in_seq", owner)
        res_state = check_input_finite(
            jnp.asarray(res_state, self.dtype), "res_state", owner
        )
        return self._advance_seq(in_seq, res_state)

    def __call__(self, in_seq: Array, res_state: Array) -> Array:
        """Same as :meth:`force`."""
        return self.force(in_seq, res_state)

    @compiled
    def predict(
        self,
        in_seq: Float[Array, "seq_len data_dim"],
        res_state: Array | None = None,
        ts: Array | None = None,
    ) -> Float[Array, "seq_len out_dim"]:
        """One-step-ahead predictions along a teacher-forced sequence.

        The reservoir is driven by the true samples ``in_seq`` (nothing is fed
        back, unlike :meth:`forecast`) and every state is read out:
        ``out[t] = readout(R[t])`` with ``R = force(in_seq, res_state)``. So
        ``out[t]`` predicts ``in_seq[t + 1]`` and ``out[-1]`` the sample after
        ``in_seq`` (it equals ``forecast(1, R[-1])[0]``). This is what a
        reservoirpy user gets from ``model.run(X_test)`` on a model trained on
        ``(X[:-1], X[1:])``.

        Parameters
        ----------
        in_seq : Array
            ``(seq_len, data_dim)`` inputs.
        res_state : Array, optional
            State before ``in_seq[0]``, shape of ``driver.default_state()``
            (``(chunks, res_dim)`` for the ESN forecasters); default the
            driver's default (zero) state, whose first outputs are a transient.
            Pass the last training state to continue the training window.
        ts : Array, optional
            ``(seq_len,)`` sample times; required by continuous-time models
            (:class:`CRCForecasterBase`, as for their ``force``), refused by
            discrete ones.

        Returns
        -------
        Array
            ``(seq_len, out_dim)``.

        Example
        -------
        >>> esn, R = train_RCForecaster(esn, U[:2000])
        >>> U_hat = esn.predict(U[2000:3000], R[-1])   # U_hat[t] ≈ U[2001 + t]
        """
        owner = type(self).__name__
        in_seq = _check_sequence(self, in_seq, "in_seq")
        if res_state is None:
            res_state = self.driver.default_state()
        res_state = _check_state(self, res_state)
        if isinstance(self, CRCForecasterBase):
            if ts is None:
                raise TypeError(
                    f"{owner}.predict: continuous-time models need ts, the "
                    "(seq_len,) times of the samples of in_seq"
                )
            states = self.force(in_seq, res_state, ts)
        elif ts is not None:
            raise TypeError(
                f"{owner}.predict: ts is only for continuous-time models "
                "(CRCForecasterBase); a discrete-time model steps once per sample"
            )
        else:
            states = self.force(in_seq, res_state)
        out = self.readout.batch_readout(states)
        report_overflow(f"{owner}.predict", out, self.dtype, (in_seq, res_state))
        return out

    def _closed_loop(self, fcast_len: int, res_state: Array) -> Array:
        kernels = current()
        if kernels.fuses(self.driver, self.embedding, self.readout):
            # one native call on CPU (orc._kernels.Kernels.forecast)
            return closed_loop_linear(
                kernels, self.driver, self.embedding, self.readout, fcast_len, res_state
            )
        return self._closed_loop_scan(fcast_len, res_state)

    def _closed_loop_scan(self, fcast_len: int, res_state: Array) -> Array:
        """The closed loop as one ``lax.scan`` step per output, for any components."""

        def step(r, _):
            r = self.driver.advance(self.embedding.embed(self.readout.readout(r)), r)
            return r, self.readout.readout(r)

        first = self.readout.readout(res_state)
        _, rest = _strategy.scan(step, res_state, None, length=fcast_len - 1)
        return jnp.concatenate([first[None], rest], axis=0)

    @method
    def forecast(
        self, fcast_len: int, res_state: Array, *, backend: str | None = None
    ) -> Float[Array, "fcast_len out_dim"]:
        """Closed-loop forecast of ``fcast_len`` samples from ``res_state``.

        ``out[0] = readout(res_state)``; each output is embedded and fed back.
        ``fcast_len`` is a Python int (static under ``jax.jit``). A non-finite
        ``res_state`` raises (also under ``jax.jit``); an untrained model
        (all-zero readout weights) warns outside ``jax.jit``. ``backend``
        (``"native"``/``"xla"``, default the enclosing ``orc.use_backend`` or
        the environment's) chooses how it runs; not part of ORC 0.4's API.
        """
        fcast_len = check_static_int(
            "fcast_len", fcast_len, type(self).__name__, minimum=1
        )
        res_state = _check_state(self, res_state)
        placed = placement(self)  # a bank placed by orc.shard: one shard per device
        if placed is not None:
            return forecast_sharded(self, fcast_len, res_state, placed, backend)
        warn_if_untrained(self, f"{type(self).__name__}.forecast")
        return report_divergence(
            f"{type(self).__name__}.forecast",
            self._forecast(fcast_len, res_state, backend=backend),
            scale=_data_scale(self),
        )

    @compiled(host_results=True)  # read by report_divergence
    def _forecast(self, fcast_len: int, res_state: Array) -> Array:
        res_state = check_finite(
            jnp.asarray(res_state, self.dtype), "res_state", type(self).__name__
        )
        return self._closed_loop(fcast_len, res_state)

    @method
    def forecast_from_IC(
        self,
        fcast_len: int,
        spinup_data: Float[Array, "seq_len data_dim"],
        *,
        backend: str | None = None,
    ) -> Float[Array, "fcast_len out_dim"]:
        """Warm up on ``spinup_data`` from the default state, then forecast.

        ``out[0]`` predicts the sample right after ``spinup_data``.
        ``backend`` as for :meth:`forecast`. NaN or inf in ``spinup_data``
        raises (also under ``jax.jit``), naming its first bad row.
        """
        fcast_len = check_static_int(
            "fcast_len", fcast_len, type(self).__name__, minimum=1
        )
        spinup_data = _check_sequence(self, spinup_data, "spinup_data")
        warn_if_untrained(self, f"{type(self).__name__}.forecast_from_IC")
        _strategy.to_host_soon([spinup_data])  # read by report_divergence
        return report_divergence(
            f"{type(self).__name__}.forecast_from_IC",
            self._forecast_from_IC(fcast_len, spinup_data, backend=backend),
            spinup_data,
            scale=_data_scale(self),
        )

    @compiled(host_results=True)  # read by report_divergence
    def _forecast_from_IC(self, fcast_len: int, spinup_data: Array) -> Array:
        spinup_data = check_input_finite(
            spinup_data.astype(self.dtype), "spinup_data", type(self).__name__
        )
        with _errors.inputs_checked():  # spinup_data, checked just above
            states = self.force(spinup_data, self.driver.default_state())
        return self._closed_loop(fcast_len, states[-1])


class CRCForecasterBase(RCForecasterBase):
    """Continuous-time reservoir forecaster; the driver returns ``dr/dt``.

    Time alignment, with ``dt = ts[1] - ts[0]``:

    - ``force(in_seq, r0, ts)``: ``r0`` is the state at ``ts[0]``; it integrates
      ``dr/dt = driver(embed(u(t)), r)``, ``u(t)`` the backward-Hermite cubic
      interpolation of the samples ``(ts[k], in_seq[k])`` (extrapolated past
      ``ts[-1]``), from ``ts[0]`` to ``ts[-1] + dt`` and returns
      ``R[k] = r(ts[k] + dt)``. On a uniform grid that is the time of sample
      ``k + 1``: ``R[k]`` is the state reached after the input over
      ``[ts[k], ts[k + 1]]`` and training regresses it onto ``in_seq[k + 1]``, as
      in discrete time; ``R[-1]`` is the state at the time of the first sample
      after the window. (An explicit Euler step uses only ``in_seq[k]``; a
      higher-order solver also evaluates the cubic inside the interval, which
      passes through ``in_seq[k + 1]``.)
    - ``forecast(ts, r)``: ``r`` is the state at ``ts[0]``; it integrates
      ``dr/dt = driver(embed(readout(r)), r)`` from ``ts[0]`` to ``ts[-1]`` and
      returns ``out[k] = readout(r(ts[k]))``, so ``out[0] = readout(r)``. The
      system is autonomous, so only ``ts - ts[0]`` matters: ``forecast(ts, R[-1])``
      with ``ts = jnp.arange(L) * dt`` (as in ORC 0.4, which always starts at
      ``t = 0``) or with the absolute times of the samples that follow the
      window predicts those samples, ``out[0]`` the first of them.
    - Steps: an adaptive controller starts from ``dt0 = dt``. Under
      ``diffrax.ConstantStepSize`` the step is ``span / round(span / dt)``
      (``span`` the length of the solve), a whole number of steps of about ``dt``
      that on a uniform grid land on the sample times whatever the rounding of
      ``ts`` (``dt`` itself may come out one ulp short, and diffrax would then
      spread one step more over the span). With ``Euler`` a CESN step is then one
      step of a discrete ESN with leak ``time_const * dt``, in training and
      forecast alike.

    Extra parameters: ``solver`` (default ``diffrax.Tsit5()``),
    ``stepsize_controller`` (default ``PIDController(rtol=1e-3, atol=1e-6, icoeff=1)``),
    ``adjoint`` (default ``RecursiveCheckpointAdjoint()``) and ``max_steps``
    (default ``None``), the most solver steps (accepted and rejected) one
    solve may take. ``None`` bounds an adaptive solve at ``4096 + 256`` steps
    per sample interval it spans (:func:`orc._validation.ode_max_steps`; a
    solve at ``time_const * dt = 50`` takes up to ~60 per interval) and
    leaves a fixed-step one (``ConstantStepSize``, ``StepTo``) unbounded, its
    step count being set by the grid. A solve that reaches its bound raises
    an error saying what to change instead of running on (an adaptive solver
    retries a non-finite vector field forever). With the default adjoint a
    bounded solve is reverse-mode differentiable; ``DirectAdjoint`` costs
    time in proportion to the bound, so give it a ``max_steps`` of its own.

    Non-finite inputs (``in_seq``, ``spinup_data``, the state) are refused
    before the solve: the program integrates zeros in their place and the
    error naming the argument is raised when the call returns;
    :meth:`forecast_from_IC` refuses concrete warm-up data before anything
    runs, naming the first bad row.
    """

    # Static: solver configuration is Python data (floats, functions), so the
    # model stays a valid argument of jax.jit.
    solver: diffrax.AbstractSolver = eqx.field(static=True)
    stepsize_controller: diffrax.AbstractStepSizeController = eqx.field(static=True)
    adjoint: diffrax.AbstractAdjoint = eqx.field(static=True)
    max_steps: int | None = eqx.field(static=True)

    def __init__(
        self,
        driver: DriverBase,
        readout: ReadoutBase,
        embedding: EmbedBase,
        chunks: int = 0,
        dtype=jnp.float64,
        seed=0,
        solver: diffrax.AbstractSolver | None = None,
        stepsize_controller: diffrax.AbstractStepSizeController | None = None,
        adjoint: diffrax.AbstractAdjoint | None = None,
        max_steps: int | None = None,
    ) -> None:
        import diffrax

        super().__init__(driver, readout, embedding, chunks, dtype, seed)
        self.solver = diffrax.Tsit5() if solver is None else solver
        self.stepsize_controller = (
            diffrax.PIDController(rtol=1e-3, atol=1e-6, icoeff=1.0)
            if stepsize_controller is None
            else stepsize_controller
        )
        self.adjoint = (
            diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
        )
        self.max_steps = max_steps

    def _solve(self, vector_field, t0, ts, dt0, y0, args=None):
        """``y`` at the times ``ts`` (``(n,)``) of ``dy/dt = vector_field(t, y,
        args)`` from ``y(t0) = y0``: ``(n, *y0.shape)``.

        At most ``max_steps`` solver steps (:func:`orc._validation.ode_max_steps`
        when it is ``None``, from the ``n`` sample intervals). A solve that
        fails (its bound reached, or another failure diffrax reports) is an
        error of the calling entry point (:func:`orc._errors.check`), returned
        with its result rather than raised from a host callback of diffrax's.
        """
        import diffrax

        adaptive = not isinstance(
            self.stepsize_controller, (diffrax.ConstantStepSize, diffrax.StepTo)
        )
        max_steps = ode_max_steps(self.max_steps, ts.shape[0], adaptive)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(vector_field),
            self.solver,
            t0=t0,
            t1=ts[-1],
            dt0=dt0,
            y0=y0,
            args=args,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=self.stepsize_controller,
            adjoint=self.adjoint,
            max_steps=max_steps,
            throw=False,
        )
        owner = type(self).__name__
        bound = (
            f"max_steps={max_steps}"
            if self.max_steps is not None
            else f"{max_steps} steps (the bound for max_steps=None: {ODE_STEPS_MIN} "
            f"+ {ODE_STEPS_PER_INTERVAL} per sample interval, {ts.shape[0]} here)"
        )
        ys = _errors.check(
            sol.ys,
            sol.result == diffrax.RESULTS.max_steps_reached,
            f"{owner}: the reservoir's ODE solve stopped at {bound} before the "
            "last sample time. Its vector field is not finite (NaN or inf in the "
            "data, the state or the model's weights) or the reservoir is stiff "
            "(time_const * dt large). Check the data and the weights for NaN/inf, "
            f"raise max_steps ({owner}(..., max_steps=...)), lower time_const, or "
            "use a solver for stiff problems (e.g. solver=diffrax.Kvaerno5()).",
        )
        return _errors.check(
            ys,
            ~diffrax.is_okay(sol.result),
            f"{owner}: the reservoir's ODE solve failed (diffrax reports no "
            "success: e.g. the step fell below the stepsize_controller's dtmin, "
            "or an implicit solver's root find failed). Check the data, the state "
            "and the model's weights for NaN/inf, loosen the controller's "
            "tolerances or choose another solver.",
        )

    def _dt0(self, t0, t1, dt):
        """``dt0`` of a solve over ``[t0, t1]`` on samples spaced ``dt``.

        An adaptive controller gets ``dt`` as its first guess. A constant step
        is fitted to the span, ``(t1 - t0) / round((t1 - t0) / dt)``: diffrax
        takes ``ceil((t1 - t0) / dt0)`` equal steps, so a ``dt`` that came out
        one ulp short (``20.5 - 20.48 = 0.019999999999999574``) would add a step
        and shrink every step by ``n / (n + 1)``, off the sample times. With
        the fitted step, the steps of a uniform grid land on its samples.
        """
        import diffrax

        if not isinstance(self.stepsize_controller, diffrax.ConstantStepSize):
            return dt
        span = t1 - t0
        return span / jnp.maximum(jnp.round(span / dt), 1)

    def _check_ts(self, ts, length, name):
        ts = check_data(name, ts, type(self).__name__, self.dtype)
        ts = check_rank(name, ts, 1, type(self).__name__, "(seq_len,)")
        if ts.shape[0] != length:
            raise ValueError(
                f"{type(self).__name__}: {name} must have {length} entries, "
                f"got {ts.shape[0]}"
            )
        if length < 2:
            raise ValueError(f"{type(self).__name__}: {name} needs at least 2 times")
        ts = ts.astype(self.dtype)
        return _errors.check(
            ts,
            ~jnp.all(jnp.isfinite(ts)) | jnp.any(jnp.diff(ts) <= 0),
            f"{type(self).__name__}: {name} must be finite and strictly increasing.",
            replace=jnp.arange(length, dtype=self.dtype),  # so that diffrax ends
        )

    @compiled
    def force(self, in_seq: Array, res_state: Array, ts: Array) -> Array:  # type: ignore[override]
        """Teacher-force along the interpolated input; states at ``ts + dt``."""
        import diffrax

        in_seq = _check_sequence(self, in_seq, "in_seq").astype(self.dtype)
        res_state = jnp.asarray(_check_state(self, res_state), self.dtype)
        ts = self._check_ts(ts, in_seq.shape[0], "ts")
        in_seq = self._finite(in_seq, "in_seq")
        res_state = self._finite(res_state, "res_state")
        coeffs = diffrax.backward_hermite_coefficients(ts, in_seq)
        interp = diffrax.CubicInterpolation(ts, coeffs)

        def field(t, r, _):
            return self.driver.advance(self.embedding.embed(interp.evaluate(t)), r)

        dt = ts[1] - ts[0]
        dt0 = self._dt0(ts[0], ts[-1] + dt, dt)
        return self._solve(field, ts[0], ts + dt, dt0, res_state)

    def _finite(self, x, name):
        """``x`` checked for NaN/inf (:func:`check_finite`, under ``name``); the
        program goes on with zeros in its place when it fails, so that the ODE
        solve it feeds ends (a non-finite vector field makes an adaptive solver
        retry forever) and the error is raised when the call returns."""
        return check_input_finite(
            x, name, type(self).__name__, replace=jnp.zeros_like(x)
        )

    def __call__(self, in_seq: Array, res_state: Array, ts: Array) -> Array:  # type: ignore[override]
        return self.force(in_seq, res_state, ts)

    def _autonomous(self, ts, res_state):
        def field(t, r, _):
            return self.driver.advance(self.embedding.embed(self.readout.readout(r)), r)

        dt0 = self._dt0(ts[0], ts[-1], ts[1] - ts[0])
        ys = self._solve(field, ts[0], ts, dt0, res_state)
        return jax.vmap(self.readout.readout)(ys)

    @method
    def forecast(self, ts: Array, res_state: Array) -> Array:  # type: ignore[override]
        """Closed-loop forecast read out at the times ``ts`` (``ts[0]`` is the start)."""
        out = self._forecast_ts(ts, res_state)
        warn_if_untrained(self, f"{type(self).__name__}.forecast")
        return report_divergence(
            f"{type(self).__name__}.forecast", out, scale=_data_scale(self)
        )

    @compiled(host_results=True)  # read by report_divergence
    def _forecast_ts(self, ts: Array, res_state: Array) -> Array:
        ts = check_rank("ts", ts, 1, type(self).__name__, "(fcast_len,)")
        ts = self._check_ts(ts, ts.shape[0], "ts")
        res_state = jnp.asarray(_check_state(self, res_state), self.dtype)
        return self._autonomous(ts, self._finite(res_state, "res_state"))

    @method
    def forecast_from_IC(  # type: ignore[override]
        self, ts: Array, spinup_data: Array, spinup_ts: Array | None = None
    ) -> Array:
        """Warm up on ``spinup_data`` (times ``spinup_ts``, default spaced like ``ts``), then forecast."""
        _strategy.to_host_soon([spinup_data])  # read by report_divergence
        # concrete warm-up data with NaN/inf: refused now, naming its first bad row
        check_finite_rows(spinup_data, "spinup_data", type(self).__name__)
        out = self._forecast_from_IC_ts(ts, spinup_data, spinup_ts)
        warn_if_untrained(self, f"{type(self).__name__}.forecast_from_IC")
        return report_divergence(
            f"{type(self).__name__}.forecast_from_IC",
            out,
            spinup_data,
            scale=_data_scale(self),
        )

    @compiled(host_results=True)  # read by report_divergence
    def _forecast_from_IC_ts(
        self, ts: Array, spinup_data: Array, spinup_ts: Array | None = None
    ) -> Array:
        ts = check_rank("ts", ts, 1, type(self).__name__, "(fcast_len,)")
        ts = self._check_ts(ts, ts.shape[0], "ts")
        spinup_data = _check_sequence(self, spinup_data, "spinup_data")
        spinup_data = self._finite(spinup_data.astype(self.dtype), "spinup_data")
        if spinup_ts is not None:
            spinup_ts = self._check_ts(spinup_ts, spinup_data.shape[0], "spinup_ts")
        else:
            spinup_ts = jnp.arange(spinup_data.shape[0], dtype=self.dtype) * (
                ts[1] - ts[0]
            )
        with _errors.inputs_checked():  # spinup_data, checked just above
            states = self.force(spinup_data, self.driver.default_state(), spinup_ts)
        return self._autonomous(ts, states[-1])
