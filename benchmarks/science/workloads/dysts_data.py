"""Integrate dysts flows for the dysts panel (run by the dysts interpreter).

Run by ``benchmarks/.venvs/dysts/bin/python`` (dysts and its numerics only;
never our ``orc``).  For every flow named in the config it calls dysts' own
``make_trajectory`` at a fixed number of points per dominant period, from the
flow's stored initial condition, with a per-flow wall-clock limit, drops a
transient and saves the raw trajectory as ``.npy``.  Nothing is downloaded:
dysts reads the parameters, periods and Lyapunov exponents shipped in its wheel.

Usage (normally called by ``benchmarks/science/dysts_panel.py``)::

    python dysts_data.py '<json config>'

Prints one line ``BENCH_RESULT {...json...}``: per flow either the file, the
sampling step, the stored maximum Lyapunov exponent and period, or the reason
it was rejected (not integrable, NaN or blow-up, timeout, ...).
"""

import json
import signal
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "workloads"))

from _report import reported  # noqa: E402

BLOWUP = 1e8  # |x| above this anywhere counts as a blow-up


class FlowTimeout(Exception):
    pass


def _alarm(signum, frame):
    raise FlowTimeout()


def integrate(name, cfg):
    """One flow: ``{"ok": True, ...}`` with the saved file, or the reason it failed."""
    import dysts.flows

    info = {"flow": name}
    model = getattr(dysts.flows, name)()
    lyap = getattr(model, "maximum_lyapunov_estimated", None)
    period = getattr(model, "period", None)
    info["lyapunov"] = None if lyap is None else float(lyap)
    info["period"] = None if period is None else float(period)
    if lyap is None or not np.isfinite(lyap) or lyap <= 0:
        return {
            **info,
            "ok": False,
            "reason": f"no positive stored Lyapunov exponent ({lyap})",
        }
    if period is None:
        return {**info, "ok": False, "reason": "no stored period (cannot resample)"}
    n_total = cfg["n_points"]
    t0 = time.perf_counter()
    signal.alarm(int(cfg["timeout_s"]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = model.make_trajectory(
                n_total,
                pts_per_period=cfg["pts_per_period"],
                resample=True,
                return_times=True,
                method=cfg["method"],
                rtol=cfg["rtol"],
                atol=cfg["atol"],
                random_seed=cfg["seed"],
            )
    except FlowTimeout:
        return {
            **info,
            "ok": False,
            "reason": f"timeout after {cfg['timeout_s']:g} s",
            "timeout_s": cfg["timeout_s"],
        }
    finally:
        signal.alarm(0)
    info["integrate_s"] = time.perf_counter() - t0
    times, traj = out if isinstance(out, tuple) else (None, out)
    if traj is None:
        return {
            **info,
            "ok": False,
            "reason": "integration did not complete (solver stopped early)",
        }
    traj = np.asarray(traj, dtype=np.float64)
    if traj.ndim == 3:  # (n_ic, T, D) with a single initial condition
        traj = traj[0]
    if traj.ndim != 2 or traj.shape[0] != n_total:
        return {
            **info,
            "ok": False,
            "reason": f"unexpected trajectory shape {traj.shape}",
        }
    if not np.all(np.isfinite(traj)):
        return {**info, "ok": False, "reason": "NaN or inf in the trajectory"}
    if np.max(np.abs(traj)) > BLOWUP:
        return {**info, "ok": False, "reason": f"blow-up (|x| > {BLOWUP:g})"}
    times = np.asarray(times, dtype=np.float64).ravel()
    steps = np.diff(times)
    dt = float(np.mean(steps))
    traj = traj[cfg["n_transient"] :]
    path = Path(cfg["out_dir"]) / f"{name}.npy"
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, traj)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file
    return {**info, "ok": True, "file": str(path), "dt": dt, "dim": int(traj.shape[1])}


def main():
    cfg = json.loads(sys.argv[1])
    res = {"ok": False, "flows": {}}
    with reported(res, rss=False):
        import dysts

        res["dysts_version"] = getattr(dysts, "__version__", None)
        try:
            import importlib.metadata as md

            res["dysts_version"] = md.version("dysts")
        except Exception:
            pass
        Path(cfg["out_dir"]).mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGALRM, _alarm)
        if cfg.get("list_only"):
            from dysts.systems import get_attractor_list

            res["names"] = list(get_attractor_list("continuous"))
        for name in cfg.get("flows", []):
            try:
                res["flows"][name] = integrate(name, cfg)
            except Exception as exc:
                res["flows"][name] = {
                    "flow": name,
                    "ok": False,
                    "reason": f"{type(exc).__name__}: {exc}"[:300],
                }


if __name__ == "__main__":
    main()
