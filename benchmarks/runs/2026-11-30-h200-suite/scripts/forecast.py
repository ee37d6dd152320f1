# ruff: noqa: E402, E702, B023, E731  (the script as it ran on the H100)
"""GPU check: model.forecast through the installed package (cluster kernel
where it applies) against backend="xla" (the scan), and the per-call cost of
a short forecast. One dtype per process."""

import json
import statistics
import sys
import time

dtype = sys.argv[1]
import jax

jax.config.update("jax_enable_x64", dtype == "float64")
import numpy as np

import orc
from orc import _native


def med(fn, reps):
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


U, _ = orc.data.lorenz63(tN=60, dt=0.01)
esn = orc.forecaster.ESNForecaster(
    data_dim=3, res_dim=int(sys.argv[2]) if len(sys.argv) > 2 else 2000
)
t0 = time.perf_counter()
esn, R = orc.forecaster.train_RCForecaster(esn, U[:5000])
jax.block_until_ready(R)
first_train = time.perf_counter() - t0
warm_train = med(lambda: orc.forecaster.train_RCForecaster(esn, U[:5000])[0].readout, 3)
r = R[-1]
out = {
    "dtype": dtype,
    "device": str(jax.devices()[0]),
    "native": _native.native_available(),
    "model_dtype": str(r.dtype),
    "train_first_s": first_train,
    "train_warm_s": warm_train,
}
a = esn.forecast(2000, r)
b = esn.forecast(2000, r, backend="xla")
a2 = esn.forecast(2000, r)
out["same_bits_twice"] = bool(np.array_equal(np.asarray(a), np.asarray(a2)))
out["maxdiff_first100"] = float(
    np.max(np.abs(np.asarray(a[:100]) - np.asarray(b[:100])))
)
out["us_step_default"] = med(lambda: esn.forecast(2000, r), 7) / 2000 * 1e6
out["us_step_xla"] = med(lambda: esn.forecast(2000, r, backend="xla"), 7) / 2000 * 1e6
esn.forecast(10, r)
out["us_call_forecast10"] = med(lambda: esn.forecast(10, r), 50) * 1e6
out["us_call__forecast10"] = med(lambda: esn._forecast(10, r), 50) * 1e6
f = jax.jit(lambda m, s: m._forecast(10, s))
f(esn, r)
out["us_call_jit_forecast10"] = med(lambda: f(esn, r), 50) * 1e6
print(json.dumps(out, indent=1))
