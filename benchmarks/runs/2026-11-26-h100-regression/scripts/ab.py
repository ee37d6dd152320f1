# ruff: noqa: E402, E702, B023, E731  (the script as it ran on the H100)
"""A/B in one process: the forecasts' host copies started early (to_host_soon)
or not, interleaved rounds, medians (us per call)."""

import json
import statistics
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np

import orc
from orc import _strategy

on = _strategy.to_host_soon


def off(arrays):
    return None


res = {"device": str(jax.devices()[0])}
for N in (500, 2000):
    U, _ = orc.data.lorenz63(tN=30, dt=0.01)
    esn = orc.forecaster.ESNForecaster(3, N, seed=0)
    esn, R = orc.forecaster.train_RCForecaster(esn, U[:2000])
    r = R[-1]
    warm = jnp.asarray(U[2000:2100])
    cases = {
        "forecast10": lambda: esn.forecast(10, r),
        "forecast2000": lambda: esn.forecast(2000, r),
        "from_IC10": lambda: esn.forecast_from_IC(10, warm),
    }
    for name, fn in cases.items():
        times = {"on": [], "off": []}
        for _ in range(3):
            fn()
        for rnd in range(10):
            for mode, f in (
                (("on", on), ("off", off))
                if rnd % 2 == 0
                else (("off", off), ("on", on))
            ):
                _strategy.to_host_soon = f
                for _ in range(30):
                    t0 = time.perf_counter()
                    np.asarray(fn())
                    times[mode].append(time.perf_counter() - t0)
        _strategy.to_host_soon = on
        res[f"N{N}_{name}"] = {
            m: round(statistics.median(t) * 1e6, 1) for m, t in times.items()
        }
        print(N, name, res[f"N{N}_{name}"], flush=True)
print(json.dumps(res))
