"""Where a short forecast's call spends its time off the compiled program:
medians of ``forecast(10, r)``, ``_forecast(10, r)`` (the compiled entry
point) and ``jax.jit`` of it, then cProfile of 300 calls of ``forecast``
(the functions by own time). For the next GPU session: on the H200 of
2026-11-30 the Python around ``_forecast`` took 323 us in float64 (100 in
float32), against ~30 us on the H100 of 2026-11-26.

    python percall_profile.py [res_dim] [float32|float64]
"""

import cProfile
import io
import pstats
import statistics
import sys
import time

import jax

N = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
jax.config.update("jax_enable_x64", (sys.argv[2:] or ["float64"])[0] == "float64")
import numpy as np  # noqa: E402

import orc  # noqa: E402

t = np.arange(3000) * 0.01
U = np.stack([np.sin(t), np.cos(1.3 * t), np.sin(0.7 * t + 1)], axis=1)
esn = orc.forecaster.ESNForecaster(3, N, seed=0)
esn, R = orc.forecaster.train_RCForecaster(esn, jax.device_put(U))
r = R[-1]
f = jax.jit(lambda m, s: m._forecast(10, s))


def med(fn, reps=300):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return round(statistics.median(ts) * 1e6, 1)


print(jax.devices()[0], N, r.dtype)
for name, fn in [
    ("forecast", lambda: jax.block_until_ready(esn.forecast(10, r))),
    ("_forecast", lambda: jax.block_until_ready(esn._forecast(10, r))),
    ("jax.jit(_forecast)", lambda: jax.block_until_ready(f(esn, r))),
    ("forecast again", lambda: jax.block_until_ready(esn.forecast(10, r))),
]:
    print(f"{name:20s} {med(fn):8.1f} us")
prof = cProfile.Profile()
prof.enable()
for _ in range(300):
    jax.block_until_ready(esn.forecast(10, r))
prof.disable()
out = io.StringIO()
pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(25)
print(out.getvalue())
