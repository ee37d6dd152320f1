"""Continuous ESN (CESN) time to first forecast, side by side with ORC 0.4.

A CESN integrates its reservoir with diffrax: its training and forecast
programs are the largest orc compiles, so a user's first call is mostly
tracing and compiling. Each library runs in fresh processes (``--runs`` each,
taken in turn, so that a busy machine slows all alike): import, build
``CESNForecaster(3, N)``, train on Lorenz63 (``train_CESNForecaster``), then
forecast; first calls and the best of ``--repeats`` warm calls. The same
script runs in every interpreter, which needs only the ORC 0.4 API.

    python benchmarks/cesn.py                       # ours and ORC 0.4
    python benchmarks/cesn.py --tree /tmp/before    # and another source tree

``--tree PATH`` times that tree's ``src/orc`` with this venv (e.g. a
``git worktree`` of an earlier commit, its native kernels copied into
``src/orc/_native``): before and after a change, in one run. ORC 0.4 runs in
``benchmarks/.venvs/orc04``, created on first use. Results: a table on
stdout and ``--out`` (JSON).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from harness import data, envs  # noqa: E402

# The child: times one process's calls and prints them as JSON. The
# editable install of ours is bypassed for --tree (its import hook would
# otherwise win over the tree's src/).
CHILD = r"""
import json, sys, time
if sys.argv[1]:
    sys.meta_path[:] = [f for f in sys.meta_path
                        if type(f).__module__ != "_editable_skbc_orc"]
    sys.path.insert(0, sys.argv[1])
cfg = json.loads(sys.argv[2])
t0 = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
import numpy as np
import orc
res = {"import": time.perf_counter() - t0, "orc": orc.__file__}
try:  # ours: the native kernels must be on (a tree without them is slower)
    from orc._native import native_config
    res["native"] = native_config()["available"]
except ImportError:  # ORC 0.4
    res["native"] = None

def timed(fn):
    t = time.perf_counter()
    out = fn()
    jax.block_until_ready(out)
    return time.perf_counter() - t, out

u = jnp.asarray(np.load(cfg["data"]))
ts = jnp.asarray(np.arange(u.shape[0]) * cfg["dt"])
res["build"], model = timed(
    lambda: orc.forecaster.CESNForecaster(data_dim=3, res_dim=cfg["n"], seed=0))
train = lambda: orc.forecaster.train_CESNForecaster(model, u, ts)
res["train_first"], (trained, states) = timed(train)
res["train_warm"] = min(timed(train)[0] for _ in range(cfg["repeats"]))
fts = jnp.asarray(np.arange(cfg["horizon"]) * cfg["dt"])
forecast = lambda: trained.forecast(fts, states[-1])
res["forecast_first"], out = timed(forecast)
res["forecast_warm"] = min(timed(forecast)[0] for _ in range(cfg["repeats"]))
res["finite"] = bool(np.all(np.isfinite(np.asarray(out))))
print("CESN_RESULT", json.dumps(res))
"""

KEYS = (
    "import",
    "build",
    "train_first",
    "train_warm",
    "forecast_first",
    "forecast_warm",
)


def run_child(python: Path, tree: str, cfg: dict, env: dict) -> dict:
    proc = subprocess.run(
        [str(python), "-c", CHILD, tree, json.dumps(cfg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    for line in proc.stdout.splitlines():
        if line.startswith("CESN_RESULT "):
            return json.loads(line.split(" ", 1)[1])
    raise RuntimeError(f"{python} failed:\n{proc.stderr[-3000:]}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--res-dim", type=int, default=200)
    p.add_argument("--train-len", type=int, default=2000)
    p.add_argument("--horizon", type=int, default=500)
    p.add_argument("--runs", type=int, default=3, help="fresh processes per library")
    p.add_argument("--repeats", type=int, default=3, help="warm calls per process")
    p.add_argument("--tree", help="another source tree to time with this venv")
    p.add_argument("--no-orc04", action="store_true", help="skip ORC 0.4")
    p.add_argument("--out", type=Path, help="write the results as JSON")
    args = p.parse_args(argv)

    ours = envs.LIBRARIES["ours"]
    runners = {"ours": (ours.python, "", envs.child_env(ours))}  # its editable install
    if args.tree:
        tree_src = str(Path(args.tree).resolve() / "src")
        runners["tree"] = (ours.python, tree_src, envs.child_env(None))
    if not args.no_orc04:
        lib = envs.LIBRARIES["orc04"]
        ok, msg = envs.ensure_env(lib)
        print(msg, file=sys.stderr)
        if ok:
            runners["orc04"] = (lib.python, "", envs.child_env(lib))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "lorenz.npy"
        data.np.save(path, data.lorenz63(args.train_len, dt=0.01))
        cfg = {"data": str(path), "dt": 0.01, "n": args.res_dim,
               "horizon": args.horizon, "repeats": args.repeats}  # fmt: skip
        results: dict[str, list[dict]] = {name: [] for name in runners}
        for _ in range(args.runs):
            for name, (python, tree, env) in runners.items():
                results[name].append(run_child(python, tree, cfg, env))
    for name, runs in results.items():
        print(f"{name}: {runs[0]['orc']} (native kernels: {runs[0]['native']})")
    median = {
        name: {k: statistics.median(r[k] for r in runs) for k in KEYS}
        for name, runs in results.items()
    }
    print(
        f"CESN N={args.res_dim}, {args.train_len} training samples, "
        f"{args.horizon}-step forecast; median of {args.runs} processes (s)"
    )
    names = list(median)
    print(f"{'':16}" + "".join(f"{n:>10}" for n in names) + "".join(
        f"{'ours/' + n:>13}" for n in names[1:]))  # fmt: skip
    for k in KEYS:
        row = "".join(f"{median[n][k]:10.3f}" for n in names)
        row += "".join(f"{median['ours'][k] / median[n][k]:12.2f}x" for n in names[1:])
        print(f"{k:16}{row}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"config": vars(args) | {"out": str(args.out)},
                                        "runs": results, "median": median}, indent=1))  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
