"""Benchmark workloads for libraries with the ORC 0.4 API.

The same file is run, unchanged, by the interpreter of each library that exposes
the ``orc`` API: ours (``/work/main/.venv``) and OpenReservoirComputing 0.4.0
(``benchmarks/.venvs/orc04``).  It imports only the standard library, numpy, jax
and the ``orc`` under test.

Usage (normally called by ``benchmarks/run.py``)::

    python orc_api.py '<json config>'

The config names the workload (a, b, c, d, e), the size, the number of warm
repeats and the cached data files.  The script prints one line
``BENCH_RESULT {...json...}`` on stdout, also when the workload fails.
"""

import json
import os
import statistics
import sys
import time

import numpy as np
from _report import reported


def block(tree):
    import jax

    for leaf in jax.tree_util.tree_leaves(tree):
        if hasattr(leaf, "block_until_ready"):
            leaf.block_until_ready()
    return tree


def timed(fn):
    """Run ``fn()``, wait for every array it returns, return (seconds, output)."""
    t0 = time.perf_counter()
    out = block(fn())
    return time.perf_counter() - t0, out


def first_and_warm(fn, repeats, key, res):
    """Time a first call and ``repeats`` warm calls of ``fn``; store in ``res``.

    Only one output is alive at a time (reservoir-state arrays can be large), so
    peak memory is that of a single call.  Returns the output of the last call.
    """
    t, out = timed(fn)
    res[key + "_first"] = t
    warm = []
    for _ in range(repeats):
        out = None
        t, out = timed(fn)
        warm.append(t)
    res[key + "_warm"] = warm
    if warm:
        res[key + "_min"] = min(warm)
        res[key + "_median"] = statistics.median(warm)
    return out


def load(cfg, name):
    return np.load(cfg["files"][name])


def workload_forecast(cfg, orc, jnp, res):
    """(a) build, train and forecast a Lorenz63 ESN of size N."""
    n = cfg["size"]
    reps = cfg["repeats"]
    u_train = jnp.asarray(load(cfg, "lorenz_train")[: cfg["train_len"]])
    block(u_train)

    def build():
        return orc.forecaster.ESNForecaster(data_dim=3, res_dim=n, seed=0)

    model = first_and_warm(build, reps, "build", res)

    def train():
        return orc.forecaster.train_RCForecaster(model, u_train)

    trained, r_seq = first_and_warm(train, reps, "train", res)
    r_last = block(r_seq[-1])
    res["train_states_shape"] = list(r_seq.shape)
    del r_seq
    fcast_len = cfg["forecast_len"]

    def forecast():
        return trained.forecast(fcast_len, r_last)

    fcast = np.asarray(first_and_warm(forecast, reps, "forecast", res))
    res["forecast_shape"] = list(fcast.shape)
    res["forecast_finite"] = bool(np.all(np.isfinite(fcast)))
    truth = load(cfg, "lorenz_train")[cfg["train_len"] : cfg["train_len"] + 1]
    if truth.shape[0] == 1:
        res["forecast_first_step_error"] = float(np.linalg.norm(fcast[0] - truth[0]))


def workload_train_sweep(cfg, orc, jnp, res):
    """(b) training time for a training length T at fixed N."""
    n = cfg["size_n"]
    u_train = jnp.asarray(load(cfg, "lorenz_train")[: cfg["size"]])
    block(u_train)
    model = block(orc.forecaster.ESNForecaster(data_dim=3, res_dim=n, seed=0))

    def train():
        return orc.forecaster.train_RCForecaster(model, u_train)

    first_and_warm(train, cfg["repeats"], "train", res)


def workload_classifier(cfg, orc, jnp, res):
    """(c) ESN classifier on noisy sinusoids: train, then vmapped classification."""
    import jax

    reps = cfg["repeats"]
    train_x = jnp.asarray(load(cfg, "clf_train_x"))
    train_y = jnp.asarray(load(cfg, "clf_train_y"))
    test_x = jnp.asarray(load(cfg, "clf_test_x"))
    block((train_x, train_y, test_x))
    n = cfg["size"]

    def build():
        return orc.classifier.ESNClassifier(data_dim=3, n_classes=3, res_dim=n, seed=0)

    clf = first_and_warm(build, reps, "build", res)

    def train():
        return orc.classifier.train_RCClassifier(clf, train_x, train_y)

    trained = first_and_warm(train, reps, "train", res)
    classify = jax.vmap(trained.classify)

    def run():
        return classify(test_x)

    probs = np.asarray(first_and_warm(run, reps, "classify", res))
    res["predictions"] = [int(i) for i in np.argmax(probs, axis=-1)]
    # Accuracy depends on the random weights: the same fit for more draws
    # (untimed), so the report shows a mean, not one draw.
    draws = [res["predictions"]]
    for seed in range(1, cfg["clf_seeds"]):
        other = orc.classifier.ESNClassifier(
            data_dim=3, n_classes=3, res_dim=n, seed=seed
        )
        other = orc.classifier.train_RCClassifier(other, train_x, train_y)
        probs = np.asarray(jax.vmap(other.classify)(test_x))
        draws.append([int(i) for i in np.argmax(probs, axis=-1)])
    res["predictions_seeds"] = draws


def workload_controller(cfg, orc, jnp, res):
    """(d) ESN controller of a linear plant: train, then optimise a control."""
    reps = cfg["repeats"]
    outputs = jnp.asarray(load(cfg, "plant_outputs"))
    u = jnp.asarray(load(cfg, "plant_u"))
    ref = jnp.asarray(load(cfg, "plant_ref"))
    block((outputs, u, ref))
    n = cfg["size"]

    def build():
        return orc.control.ESNController(data_dim=2, control_dim=1, res_dim=n, seed=0)

    ctrl = first_and_warm(build, reps, "build", res)

    def train():
        return orc.control.train_RCController(ctrl, outputs[:-1], u[1:])

    trained, r_seq = first_and_warm(train, reps, "train", res)
    r_last = block(r_seq[-1])
    u0 = jnp.zeros((ref.shape[0], 1))

    def control():
        return trained.compute_control(u0, r_last, ref)

    u_opt = first_and_warm(control, reps, "control", res)
    res["penalty_opt"] = float(trained.compute_penalty(u_opt, r_last, ref))
    res["penalty_zero"] = float(trained.compute_penalty(u0, r_last, ref))
    res["u_opt_rms"] = float(np.sqrt(np.mean(np.asarray(u_opt) ** 2)))
    res["u_opt_finite"] = bool(np.all(np.isfinite(np.asarray(u_opt))))


def workload_skill(cfg, orc, jnp, res):
    """(e) forecasts from held-out spin-up windows; VPT is computed by the parent."""
    n = cfg["size"]
    u_train = jnp.asarray(load(cfg, "lorenz_train")[: cfg["train_len"]])
    test = load(cfg, "lorenz_test")
    spinup = cfg["spinup"]
    fcast_len = cfg["forecast_len"]
    model = orc.forecaster.ESNForecaster(data_dim=3, res_dim=n, seed=0)
    t, (model, r_seq) = timed(lambda: orc.forecaster.train_RCForecaster(model, u_train))
    res["train_first"] = t
    del r_seq
    forecasts = []
    times = []
    for start in cfg["window_starts"]:
        warm = jnp.asarray(test[start : start + spinup])
        t, fc = timed(lambda warm=warm: model.forecast_from_IC(fcast_len, warm))
        times.append(t)
        forecasts.append(np.asarray(fc))
    res["forecast_from_ic_first"] = times[0]
    if len(times) > 1:
        res["forecast_from_ic_min"] = min(times[1:])
        res["forecast_from_ic_median"] = statistics.median(times[1:])
    np.save(cfg["out_file"], np.stack(forecasts))
    res["forecasts_file"] = cfg["out_file"]


WORKLOADS = {
    "a": workload_forecast,
    "b": workload_train_sweep,
    "c": workload_classifier,
    "d": workload_controller,
    "e": workload_skill,
}


def main():
    cfg = json.loads(sys.argv[1])
    res = {
        "library": cfg.get("library"),
        "workload": cfg["workload"],
        "size": cfg["size"],
        "ok": False,
    }
    with reported(res):
        t0 = time.perf_counter()
        import jax

        jax.config.update("jax_enable_x64", True)
        import jax.numpy as jnp

        import orc

        res["import_s"] = time.perf_counter() - t0
        res["orc_file"] = os.path.dirname(orc.__file__)
        tree = os.environ.get("PYTHONPATH", "")
        if cfg.get("library") == "ours" and tree:
            here = os.path.realpath(orc.__file__)
            if not here.startswith(os.path.realpath(tree) + os.sep):
                # an editable install's import hook wins over PYTHONPATH: a
                # tree timed with another tree's venv would time the wrong code
                raise RuntimeError(
                    f"imported orc from {here}, not from the tree under test "
                    f"({tree}); give that tree its own .venv (make .venv/.installed)"
                )
        res["x64"] = bool(jax.config.jax_enable_x64)
        WORKLOADS[cfg["workload"]](cfg, orc, jnp, res)


if __name__ == "__main__":
    main()
