"""dysts panel forecasts with reservoirpy 0.4.2 (run by its own interpreter).

Reuses the model of ``benchmarks/workloads/reservoirpy_api.py`` (ORC's default
hyperparameters in reservoirpy: ``build_reservoir``, ``Ridge(ridge=8e-8,
fit_bias=False)``, one-step closed loop ``closed_loop``) and its window
alignment: the reservoir is driven from the zero state by the spin-up data and
the first output predicts the sample right after it.  Column ``esn``, one
reservoir per seed.  Usage: ``python rpy_forecast.py '<json config>'``.
"""

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workloads"))

from _report import reported, timed  # noqa: E402
from reservoirpy_api import RIDGE, build_reservoir, closed_loop  # noqa: E402


def run_task(cfg, task):
    from reservoirpy.nodes import Ridge

    u_train = np.load(task["train"])
    test = np.load(task["test"])
    dim = int(u_train.shape[1])
    horizon = int(task["horizon"])
    spinup = int(task["spinup"])
    rec = {"train_s": [], "forecast_s": []}
    try:
        stack = []
        for seed in cfg["seeds"]:
            reservoir = build_reservoir(cfg["res_dim"], dim, seed=seed)
            model = reservoir >> Ridge(ridge=RIDGE, fit_bias=False)
            t, _ = timed(lambda m=model: m.fit(u_train[:-1], u_train[1:]))
            rec["train_s"].append(t)
            windows = []
            for start in task["starts"]:
                warm = test[start : start + spinup]

                def window(warm=warm, model=model, reservoir=reservoir):
                    reservoir.reset()
                    reservoir.run(warm[:-1])
                    return closed_loop(model, warm[-1], horizon)

                t, fc = timed(window)
                rec["forecast_s"].append(t)
                windows.append(fc)
            stack.append(np.stack(windows))
        path = Path(cfg["out_dir"]) / f"{cfg['library']}_esn_{task['flow']}.npy"
        np.save(path, np.stack(stack))
        rec.update(ok=True, file=str(path), seeds=list(cfg["seeds"]))
    except Exception as exc:
        rec.update(ok=False, error=f"{type(exc).__name__}: {exc}"[:500])
    return {"esn": rec}


def main():
    cfg = json.loads(sys.argv[1])
    res = {"library": cfg.get("library"), "ok": False, "tasks": {}}
    with reported(res):
        t0 = time.perf_counter()
        import reservoirpy

        res["reservoirpy_version"] = reservoirpy.__version__
        res["import_s"] = time.perf_counter() - t0
        Path(cfg["out_dir"]).mkdir(parents=True, exist_ok=True)
        for task in cfg["tasks"]:
            res["tasks"][task["flow"]] = run_task(cfg, task)


if __name__ == "__main__":
    main()
