# ruff: noqa: E402, E702, B023, E731  (the script as it ran on the H100)
"""Per-call costs of a short forecast, piece by piece (one dtype/N per process)."""

import json
import statistics
import sys
import time

N = int(sys.argv[1])
import jax

jax.config.update("jax_enable_x64", True)
import numpy as np

import orc
from orc import _divergence, _strategy, _validation
from orc.forecaster import base as fb

U, _ = orc.data.lorenz63(tN=30, dt=0.01)
esn = orc.forecaster.ESNForecaster(3, N, seed=0)
esn, R = orc.forecaster.train_RCForecaster(esn, U[:2000])
r = R[-1]


def med(fn, reps=200):
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return round(statistics.median(ts) * 1e6, 1)


meth = fb.RCForecasterBase.__dict__["_forecast"]
cl = dict(
    zip(
        meth._call.__code__.co_freevars,
        [c.cell_contents for c in meth._call.__closure__],
        strict=False,
    )
)
jitted = cl["jitted"]
structure, marked, arrays = _strategy._split(((esn, 10, r), {}))
key = (structure, marked, _strategy.resolve(None))
out_arrays, static = jitted(key, arrays)
codes = jax.tree_util.tree_leaves(out_arrays)[-1]
y = jax.tree_util.tree_leaves(out_arrays)[0]
f = jax.jit(lambda m, s: m._forecast(10, s))
res = {"N": N, "device": str(jax.devices()[0])}
for name, fn in [
    ("forecast", lambda: jax.block_until_ready(esn.forecast(10, r))),
    ("_forecast", lambda: jax.block_until_ready(esn._forecast(10, r))),
    ("jit_lambda", lambda: jax.block_until_ready(f(esn, r))),
    ("jitted_dispatch", lambda: jitted(key, arrays)),
    ("jitted_block", lambda: jax.block_until_ready(jitted(key, arrays))),
    ("asarray_codes", lambda: np.asarray(codes)),
    ("asarray_y", lambda: np.asarray(y)),
    ("fresh_y_asarray", lambda: np.asarray(jitted(key, arrays)[0][0])),
    ("split", lambda: _strategy._split(((esn, 10, r), {}))),
    ("check_state", lambda: fb._check_state(esn, r)),
    ("warn_if_untrained", lambda: _validation.warn_if_untrained(esn, "x")),
    ("report_divergence", lambda: _divergence.report_divergence("x", y)),
]:
    res[name] = med(fn)
print(json.dumps(res))
