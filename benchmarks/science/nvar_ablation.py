"""NVAR on the dysts panel: which choice keeps the closed loop from diverging?

Run from the repository root with our interpreter, after the panel has
integrated the flows (``dysts_panel.py --data-only`` or any panel run)::

    .venv/bin/python benchmarks/science/nvar_ablation.py            # all configs
    .venv/bin/python benchmarks/science/nvar_ablation.py --only paper,order3

It reuses the panel's cached trajectories, splits, windows and scoring
(``dysts_panel.prepare``, ``window_vpts``, ``diverged``), varies one NVAR
choice at a time from the paper's setting (k=2, order 2, no input noise, with
our ``s="auto"``, beta 2.5e-6, standardised features and increment target),
runs the library's defaults (cubic terms and ``input_noise="auto"`` on these
low-dimensional flows) and writes ``benchmarks/science/NVAR_ABLATION.md`` (one row
per configuration: flows with at least one diverged window, median and mean
VPT over flows) and ``nvar_ablation.json`` (per flow). NVAR has no random
parts: one run per flow.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import dysts_panel as panel  # noqa: E402

from harness.report import md_table  # noqa: E402

# The baseline every other configuration changes: Gauthier et al.'s quadratic
# NVAR without noise, with our stride rule and standardised fit.
PAPER_MODEL = {"order": 2}
PAPER_TRAIN = {"input_noise": 0.0}
# name -> (description, NVARForecaster kwargs, train_NVARForecaster kwargs),
# kwargs on top of the paper's; None: the library's defaults, nothing given
CONFIGS = {
    "defaults": (
        'library defaults (order "auto": 3 on these flows, input_noise "auto": '
        "1e-3 to 1e-1 of the std, chosen by closed-loop validation)",
        None,
        None,
    ),
    "paper": ("paper setting (k=2, order 2, no noise, s=auto, beta 2.5e-6)", {}, {}),
    "beta1e-2": ("beta 1e-2", {}, {"beta": 1e-2}),
    "beta1": ("beta 1", {}, {"beta": 1.0}),
    "noise1e-3": ("input_noise 1e-3", {}, {"input_noise": 1e-3}),
    "noise1e-2": ("input_noise 1e-2", {}, {"input_noise": 1e-2}),
    "taps10": ("stride P/10 (3x the auto stride)", {"taps": 10}, {}),
    "direct": ('target="direct"', {"target": "direct"}, {}),
    "k1": ("k=1 (no delay taps)", {"k": 1}, {}),
    "order3": ("order 3", {"order": 3}, {}),
    "order3_noise1e-3": (
        "order 3, input_noise 1e-3",
        {"order": 3},
        {"input_noise": 1e-3},
    ),
    "order3_noise1e-2": (
        "order 3, input_noise 1e-2",
        {"order": 3},
        {"input_noise": 1e-2},
    ),
    "order3_k1": ("order 3, k=1", {"order": 3, "k": 1}, {}),
    "order3_k1_noise1e-3": (
        "order 3, k=1, input_noise 1e-3",
        {"order": 3, "k": 1},
        {"input_noise": 1e-3},
    ),
    "order3_k1_noise1e-2": (
        "order 3, k=1, input_noise 1e-2",
        {"order": 3, "k": 1},
        {"input_noise": 1e-2},
    ),
    "order3_beta1e-2": ("order 3, beta 1e-2", {"order": 3}, {"beta": 1e-2}),
    "order3_noise1e-3_beta1e-3": (
        "order 3, input_noise 1e-3, beta 1e-3",
        {"order": 3},
        {"input_noise": 1e-3, "beta": 1e-3},
    ),
    "order4_k1": ("order 4, k=1", {"order": 4, "k": 1}, {}),
    "order4_k1_noise1e-3": (
        "order 4, k=1, input_noise 1e-3",
        {"order": 4, "k": 1},
        {"input_noise": 1e-3},
    ),
    "order3_taps10_noise1e-3": (
        "order 3, stride P/10, input_noise 1e-3",
        {"order": 3, "taps": 10},
        {"input_noise": 1e-3},
    ),
}


def run_config(orc, jnp, tasks, model_kw, train_kw):
    if model_kw is None:  # the library's defaults
        model_kw, train_kw = {}, {}
    else:
        model_kw = {**PAPER_MODEL, **model_kw}
        train_kw = {**PAPER_TRAIN, **train_kw}
    taps = model_kw.pop("taps", None)
    out = {}
    for p in tasks:
        train, test = np.load(p["train"]), np.load(p["test"])
        kw = dict(model_kw)
        if taps is not None:
            kw["s"] = orc.forecaster.nvar_stride(train, taps_per_period=taps)
        model = orc.forecaster.NVARForecaster(train.shape[1], **kw)
        if model.k > 1:  # the delay window must fit in the spin-up
            s = model.s or orc.forecaster.nvar_stride(train)
            kw["s"] = min(s, (p["spinup"] - 1) // (model.k - 1))
            model = orc.forecaster.NVARForecaster(train.shape[1], **kw)
        model, _ = orc.forecaster.train_NVARForecaster(
            model, jnp.asarray(train), return_states=False, **train_kw
        )
        fcs = np.stack(
            [
                np.asarray(
                    model.forecast_from_IC(
                        p["horizon"], jnp.asarray(test[st : st + p["spinup"]])
                    )
                )
                for st in p["starts"]
            ]
        )
        vpts = panel.window_vpts(
            fcs, test, p["starts"], p["spinup"], p["dt"], p["lyapunov"]
        )
        out[p["flow"]] = {
            "s": int(model.s),
            "vpt": float(np.mean([v for v, _ in vpts])),
            "diverged": int(sum(panel.diverged(f) for f in fcs)),
        }
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="", help="comma-separated config names")
    ap.add_argument("--out-dir", type=Path, default=HERE)
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CONFIGS)
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        ap.error(f"unknown config(s) {unknown}; choose from {sorted(CONFIGS)}")

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp

    import orc

    data_dir = panel.CACHE_DIR / f"data_{panel.config_hash(panel.data_params())}"
    metas = [json.loads(f.read_text()) for f in sorted(data_dir.glob("*.json"))]
    tasks = [t for t in map(panel.prepare, metas) if t.get("ok")]
    if not tasks:
        print(f"no integrated flows under {data_dir}: run dysts_panel.py first")
        return 1
    results, rows = {}, []
    for name in names:
        desc, model_kw, train_kw = CONFIGS[name]
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # divergence is what we count
            per_flow = run_config(orc, jnp, tasks, model_kw, train_kw)
        vpt = [r["vpt"] for r in per_flow.values()]
        bad = sum(r["diverged"] > 0 for r in per_flow.values())
        results[name] = {"description": desc, "flows": per_flow}
        rows.append(
            [name, desc, len(per_flow), f"{bad} ({100 * bad / len(per_flow):.0f}%)",
             f"{np.median(vpt):.2f}", f"{np.mean(vpt):.2f}"]
        )  # fmt: skip
        print(f"[{name}] {rows[-1][3]} flows diverge, median VPT {rows[-1][4]} "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
    head = ["config", "change from the paper setting", "flows",
            "flows with a diverged window", "median VPT", "mean VPT"]  # fmt: skip
    md = [
        "# NVAR on the dysts panel: what keeps the closed loop finite",
        "",
        "Generated by `benchmarks/science/nvar_ablation.py` (protocol: the panel's, "
        "`DYSTS.md`; changes from the paper's quadratic NVAR without noise, and "
        "the library's defaults). A window diverges when "
        "its forecast is non-finite or leaves |x| < 1000 (standardised units); VPT in "
        "Lyapunov times, per flow the mean over 5 windows.",
        "",
        md_table(head, rows),
        "",
    ]
    (args.out_dir / "NVAR_ABLATION.md").write_text("\n".join(md))
    (args.out_dir / "nvar_ablation.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {args.out_dir / 'NVAR_ABLATION.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
