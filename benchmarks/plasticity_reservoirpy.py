"""reservoirpy 0.4.2's plasticity on ``benchmarks/plasticity.py``'s task.

Run by the interpreter of ``benchmarks/.venvs/rpy`` (``plasticity.py``
starts it); imports numpy and reservoirpy, never orc or JAX. ``TASK_DIR``
holds what ``plasticity.py`` wrote: ``narma_u.npy``, ``narma_y.npy`` and
``task.json`` (sizes, epochs, seeds). Writes ``TASK_DIR/reservoirpy.json``:

- ``time``: seconds of ``IPReservoir.fit`` (``epochs`` passes, warmup 100)
  and of ``LocalPlasticityReservoir.fit`` (Oja, one pass) per size, the
  median of ``repeats`` runs (reservoirpy compiles nothing; its matrices
  are drawn before the clock starts);
- ``narma``: NARMA10 NRMSE of a ridge readout (``1e-7``) on the states of
  an ``IPReservoir(100, sr=0.95, input_scaling=0.2)``, before and after
  ``fit``, one value per seed (the script of docs/from-reservoirpy.md,
  section 6).

    python plasticity_reservoirpy.py TASK_DIR
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np


def narma_scores(x_train, y_train, x_test, y_test, seed, epochs):
    import reservoirpy as rpy
    from reservoirpy.nodes import IPReservoir, Ridge
    from reservoirpy.observables import nrmse

    rpy.set_seed(seed)
    reservoir = IPReservoir(
        100, sr=0.95, input_scaling=0.2, mu=0.0, sigma=0.2, learning_rate=5e-4,
        epochs=epochs,
    )  # fmt: skip
    scores = []
    for adapt in (False, True):
        if adapt:  # IP from the zero state
            reservoir.reset()
            reservoir.fit(x_train, warmup=100)
        if reservoir.initialized:
            reservoir.reset()
        states = reservoir.run(x_train)
        readout = Ridge(ridge=1e-7).fit(states[100:], y_train[100:])
        y_pred = readout.run(reservoir.run(x_test))
        scores.append(float(nrmse(y_test, y_pred, norm_value=y_test.std())))
    return scores


def fit_time(make, x, repeats):
    times = []
    for _ in range(repeats):
        node = make()
        node.run(x[:1])  # draws the matrices
        node.reset()
        start = time.perf_counter()
        node.fit(x, warmup=100)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def main(task_dir: Path) -> None:
    import reservoirpy as rpy
    from reservoirpy.nodes import IPReservoir, LocalPlasticityReservoir

    warnings.simplefilter("ignore")
    task = json.loads((task_dir / "task.json").read_text())
    u = np.load(task_dir / "narma_u.npy")
    y = np.load(task_dir / "narma_y.npy")
    x_train, y_train = u[:1999], y[1:2000]
    x_test, y_test = u[1999:-1], y[2000:]
    rpy.set_seed(0)
    timings = {}
    for n in task["sizes"]:
        ip = fit_time(
            lambda n=n: IPReservoir(
                n, sr=0.95, input_scaling=0.2, epochs=task["epochs"]
            ),
            x_train,
            task["repeats"],
        )
        local = fit_time(
            lambda n=n: LocalPlasticityReservoir(
                n, sr=0.95, input_scaling=0.2, local_rule="oja", epochs=1
            ),
            x_train,
            task["repeats"],
        )
        timings[str(n)] = {"ip": ip, "local": local}
        print(f"reservoirpy N={n}: IP {ip:.3f} s, Oja {local:.3f} s", flush=True)
    narma = [
        narma_scores(x_train, y_train, x_test, y_test, s, task["epochs"])
        for s in task["seeds"]
    ]
    out = {"time": timings, "narma": narma, "version": rpy.__version__}
    (task_dir / "reservoirpy.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
