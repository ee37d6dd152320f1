"""Every model family with its default hyperparameters, on the standard
benchmark systems of ``orc.data``: a forecast is either finite and better than
persistence, or reported (:class:`orc.forecaster.DivergenceWarning`), never a
silent wrong result.

Persistence (the last warm-up sample held) is the baseline any forecast must
beat over one Lyapunov time (Mackey-Glass: ~150 samples at its unit step).
Errors are normalised by the training data's standard deviation per
dimension. ``GOOD`` lists the pairs that must beat persistence today; the
others (measured numbers in the comments) must at least be reported when
they diverge.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

import orc
from orc import forecaster as F

# (system) -> (data, one Lyapunov time in samples, dt)
LYAPUNOV = {"lorenz63": 0.906, "rossler": 0.071, "mackey_glass": 0.0065, "ks": 0.043}


@functools.cache
def _system(name):
    if name == "lorenz63":
        u, _ = orc.data.lorenz63(tN=60, dt=0.01)
        u, dt = np.asarray(u)[1000:], 0.01
    elif name == "lorenz63_dt025":
        u, _ = orc.data.lorenz63(tN=150, dt=0.025)
        u, dt = np.asarray(u)[400:], 0.025
    elif name == "rossler":
        u, _ = orc.data.rossler(tN=500, dt=0.05)
        u, dt = np.asarray(u)[1000:], 0.05
    elif name == "mackey_glass":
        u, dt = np.asarray(orc.data.mackey_glass(6000, seed=0))[1000:], 1.0
    else:
        u, _ = orc.data.KS_1D(tN=1500, dt=0.25)
        u, dt = np.asarray(u)[1000:], 0.25
    lam = LYAPUNOV[name.split("_dt")[0]]
    return u, int(round(1 / (lam * dt))), dt


# res_dim has no default (ORC's API asks for it): sized as a user would for
# the data's dimension, at least 16 nodes per dimension for a single reservoir
# (KS: 64 dimensions; 500 nodes forecast it with NRMSE 16.0 / 0.61 / 0.32 in
# the three windows, 1024 nodes 0.46 on average against persistence's 1.12)
FAMILIES = {
    "esn": lambda d: F.ESNForecaster(d, max(500, 16 * d), seed=1),
    # an ODE solve: small where the data allow, 8 nodes per dimension (KS:
    # 512 nodes 0.65; 1024 gave 0.51, 200 18 against persistence's 1.12)
    "cesn": lambda d: F.CESNForecaster(d, max(200, 8 * d), seed=1),
    "ensemble": lambda d: F.EnsembleESNForecaster(d, max(200, 8 * d), chunks=3, seed=1),
    "deep": lambda d: F.DeepESNForecaster(d, max(250, 12 * d), seed=1),
    "nvar": lambda d: F.NVARForecaster(d),
}
SYSTEMS = ("lorenz63", "lorenz63_dt025", "rossler", "mackey_glass", "ks")
# measured NRMSE over one Lyapunov time (persistence in brackets), 3 windows
GOOD = (
    {
        ("lorenz63", f)
        for f in FAMILIES  # all < 0.01 (0.70)
    }
    | {
        ("lorenz63_dt025", f)
        for f in FAMILIES  # all < 0.1 (1.24)
    }
    | {
        ("rossler", "esn"),  # 0.02 (1.32)
        ("rossler", "cesn"),  # 0.02
        ("rossler", "ensemble"),  # 0.08
        ("rossler", "deep"),  # 0.81 (coupling 0.5: 1.43; 5 seeds: median 0.03)
        ("mackey_glass", "esn"),  # 0.62 (1.13)
        ("mackey_glass", "ensemble"),  # 0.71
        ("rossler", "nvar"),  # 0.006 (cubic + input noise; quadratic: diverged)
        ("mackey_glass", "deep"),  # 0.86
        # 0.62: a scalar series' stride is its delay-embedding lag (11 here);
        # the period rule's s=2 spanned 3 samples of a 17-sample delay: 1.18
        ("mackey_glass", "nvar"),
        # KS, 64 dimensions, reservoirs sized to them (FAMILIES); the first
        # window is the hard one for all three (1.07-1.15)
        ("ks", "esn"),  # 0.49 (1.12)
        ("ks", "ensemble"),  # 0.65
        ("ks", "deep"),  # 0.54
        # the default time_const="auto" (0.5 / dt where ORC's 50 is too fast
        # for the sampling, else 50: Lorenz63 and Rossler above); ORC 0.4's
        # fixed 50 makes
        # the reservoir relax 50 and 12.5 times within a sample and the
        # forecast leave the attractor (75 and 5.4; training warns
        # TimeConstantWarning)
        ("mackey_glass", "cesn"),  # 0.94 (1.07)
        ("ks", "cesn"),  # 0.65
        # 8385 quadratic features (order="auto"), ~10 s of training here
        ("ks", "nvar"),  # 0.70
    }
)
# Pairs that fail silently (neither good nor reported), as a strict xfail so
# that a fix shows up as an unexpected pass (none today). DeepESN on Rossler
# was one (1.43 vs persistence 1.28) until its coupling_scaling default went
# from 0.5 to 0.2; NVAR on Mackey-Glass (1.18 vs 1.07) until a scalar series'
# stride became its delay-embedding lag.
SILENTLY_POOR: dict[tuple[str, str], str] = {}
N_TRAIN, WINDOWS, WARMUP = 4000, 3, 200


def _train(family, model, u, dt):
    if family == "nvar":
        return F.train_NVARForecaster(model, u)
    if family == "cesn":
        return F.train_CESNForecaster(
            model, u, np.arange(u.shape[0], dtype=u.dtype) * dt, spinup=100
        )
    return F.train_RCForecaster(model, u, spinup=100)


def _length(system):
    """Forecast steps: the longest horizon among the systems of the same
    dimension, so that their forecasts share one compiled program per family
    (the first ``hor`` steps are scored; a departure from the attractor
    later on is reported all the same)."""
    dim = _system(system)[0].shape[1]
    return max(_system(s)[1] for s in SYSTEMS if _system(s)[0].shape[1] == dim)


def _forecast(family, model, hor, warm, dt):
    if family == "cesn":
        return model.forecast_from_IC(np.arange(hor, dtype=warm.dtype) * dt, warm)
    return model.forecast_from_IC(hor, warm)


@pytest.mark.parametrize("system", SYSTEMS)
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_default_family_on_benchmark(family, system, request):
    if (system, family) in SILENTLY_POOR:
        request.applymarker(
            pytest.mark.xfail(strict=True, reason=SILENTLY_POOR[system, family])
        )
    u, hor, dt = _system(system)
    n = min(N_TRAIN, len(u) - WINDOWS * hor - 1)
    model = FAMILIES[family](u.shape[1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # ill-conditioned ridge
        # numpy data and times (the library converts them): no eager jnp
        # program per shape in the test
        model, _ = _train(family, model, u[:n], dt)
    sd = u[:n].std(axis=0)
    errs, persist, reported = [], [], 0
    for w in range(WINDOWS):
        s0 = n + w * hor
        truth = u[s0 : s0 + hor]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            warm = u[s0 - WARMUP : s0]
            fc = np.asarray(_forecast(family, model, _length(system), warm, dt))
        fc = fc[:hor]
        reported += any(issubclass(c.category, F.DivergenceWarning) for c in caught)
        with np.errstate(over="ignore", invalid="ignore"):
            errs.append(np.sqrt(np.mean(((fc - truth) / sd) ** 2)))
        persist.append(np.sqrt(np.mean(((truth - u[s0 - 1]) / sd) ** 2)))
    err, base = float(np.mean(errs)), float(np.mean(persist))
    if (system, family) in GOOD:
        assert np.isfinite(err) and err < base and not reported, (err, base, reported)
    else:
        # whatever the quality, a forecast that left the attractor is reported
        assert (np.isfinite(err) and err < base) or reported, (err, base)
