"""GPU benchmark (issue 21): build, first/warm training, forecast cost per
step, peak device memory, population build and ensemble forecasting.

Run on a machine with a CUDA GPU::

    PYTHONPATH=src python benchmarks/gpu.py --out DIR        # everything
    PYTHONPATH=src python benchmarks/gpu.py --out DIR --quick # N=2000 only

Each measurement runs in its own process (JAX's peak-memory counter cannot be
reset, and XLA flags are per process), so every peak below belongs to one
configuration: the process that built, trained and forecast it. The parent
writes ``gpu_results.json`` and ``gpu_results.md`` to ``--out``.

Protocol: Lorenz63 (dt = 0.01, integrated once on the CPU and shared by all
processes), ``ESNForecaster(3, N)`` with ORC's defaults, float64 (x64 on),
train on T = 20000 steps (``train_RCForecaster``, XLA path), forecast 2000
steps from the last training state. Times are wall-clock after
``block_until_ready``; "warm" is the median of repeats after the first call.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from harness.report import md_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _jax(x64: bool = True):
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import jax

    jax.config.update("jax_enable_x64", x64)
    return jax


def _ready(tree):
    import jax

    jax.block_until_ready(tree)
    return tree


def _timed(fn, *args):
    t0 = time.perf_counter()
    out = _ready(fn(*args))
    return out, time.perf_counter() - t0


def _peak(jax) -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def _emit(record: dict) -> None:
    print("RESULT " + json.dumps(record), flush=True)


def job_size(args) -> None:
    """Build, train and forecast one reservoir size; peak memory of each stage."""
    jax = _jax(args.dtype == "float64")
    import jax.numpy as jnp
    import numpy as np

    from orc import forecaster as F

    dtype = jnp.float64 if args.dtype == "float64" else jnp.float32
    data = np.load(args.data)
    U = jnp.asarray(data[: args.T], dtype)
    n = args.n
    rec = {"job": "size", "n": n, "T": args.T, "dtype": args.dtype}
    rec["device"] = str(jax.devices()[0].device_kind)
    if args.host_build:
        _, rec["build_host_s"] = _timed(
            lambda: F.ESNForecaster(3, n, seed=0, dtype=dtype)
        )
    model, rec["build_first_s"] = _timed(
        lambda: F.ESNForecaster(3, n, seed=0, dtype=dtype, construction="jax")
    )
    builds = [
        _timed(
            lambda s=s: F.ESNForecaster(3, n, seed=s, dtype=dtype, construction="jax")
        )[1]
        for s in (1, 2, 3)
    ]
    rec["build_warm_s"] = statistics.median(builds)
    rec["peak_after_build"] = _peak(jax)
    try:
        (trained, R), rec["train_first_s"] = _timed(
            lambda: F.train_RCForecaster(model, U)
        )
        warm = []
        for _ in range(2):
            (trained, R), t = _timed(lambda: F.train_RCForecaster(model, U))
            warm.append(t)
        rec["train_warm_s"] = min(warm)
        rec["peak_after_train"] = _peak(jax)
        r0 = R[-1]
        del R
        _, rec["forecast_first_s"] = _timed(lambda: trained.forecast(args.steps, r0))
        times = [_timed(lambda: trained.forecast(args.steps, r0))[1] for _ in range(5)]
        rec["forecast_us_per_step"] = statistics.median(times) / args.steps * 1e6
        out = trained.forecast(args.steps, r0)
        rec["forecast_finite"] = bool(jnp.all(jnp.isfinite(out)))
        rec["peak_after_forecast"] = _peak(jax)
    except Exception as exc:  # report the failure (e.g. out of memory) and go on
        rec["error"] = f"{type(exc).__name__}: {str(exc)[:400]}"
        rec["peak_at_error"] = _peak(jax)
    _emit(rec)


def _reduce_form_scan(
    values, indices, win, window, bias, wout, r0, leak, length, unroll: int = 1
):
    """``orc._kernels._forecast_scan`` with its two small contractions (the
    readout ``wout r`` and the input ``win y``) written as products and sums,
    which XLA fuses into its own kernels instead of calling cuBLAS for each
    (a candidate for the GPU loop; same arithmetic up to summation order)."""
    import jax
    import jax.numpy as jnp

    from orc import _kernels

    def readout(r):
        return jnp.sum(wout * r[:, None, :], axis=-1).reshape(-1)

    def step(r, _):
        p = jnp.sum(win * readout(r)[window][:, None, :], axis=-1) + bias
        r = jax.vmap(
            functools.partial(_kernels._esn_step, _kernels._gather_matvec),
            in_axes=(0, 0, 0, 0, None),
        )(values, indices, r, p, leak)
        return r, readout(r)

    rest = jax.lax.scan(step, r0, None, length=length - 1, unroll=unroll)[1]
    return jnp.concatenate([readout(r0)[None], rest], axis=0)


def job_variants(args) -> None:
    """Forecast cost per step at one N for scan unrolls and dtypes (XLA_FLAGS
    come from the environment: the parent runs this job under several)."""
    jax = _jax(True)
    import jax.numpy as jnp
    import numpy as np

    from orc import _kernels
    from orc import forecaster as F

    data = np.load(args.data)
    for dname in ("float32", "float64"):
        dtype = jnp.float32 if dname == "float32" else jnp.float64
        U = jnp.asarray(data[:5000], dtype)
        model = F.ESNForecaster(3, args.n, seed=0, dtype=dtype, construction="jax")
        trained, R = F.train_RCForecaster(model, U)
        d, e, ro = trained.driver, trained.embedding, trained.readout
        win, window = e.linear_window()
        wout = ro.linear_weights()
        r0 = d._bank(R[-1])
        base = None
        for form, unroll in [
            (f, u) for f in ("einsum", "reduce") for u in args.unrolls
        ]:
            scan = (
                functools.partial(_kernels._forecast_scan, _kernels._gather_matvec)
                if form == "einsum"
                else _reduce_form_scan
            )
            fc = jax.jit(
                functools.partial(
                    scan,
                    window=window,
                    bias=d.bias,
                    leak=jnp.asarray(d.leak, dtype),
                    length=args.steps,
                    unroll=unroll,
                )
            )
            kw = dict(
                values=d.wr.values, indices=d.wr.columns, win=win, wout=wout, r0=r0
            )
            out, first = _timed(functools.partial(fc, **kw))
            times = [_timed(functools.partial(fc, **kw))[1] for _ in range(7)]
            if base is None:
                base = np.asarray(out)
            _emit(
                {
                    "job": "variants",
                    "n": args.n,
                    "dtype": dname,
                    "unroll": unroll,
                    "form": form,
                    "flags": os.environ.get("XLA_FLAGS", ""),
                    "first_s": first,
                    "us_per_step": statistics.median(times) / args.steps * 1e6,
                    "max_diff_vs_unroll1": float(
                        np.max(np.abs(np.asarray(out) - base))
                    ),
                }
            )


def job_fused(args) -> None:
    """The one-kernel-per-step forecast (``gpu_fused.py``, Pallas on Triton)
    against the scan orc runs, side by side in one process: µs per step for
    row tilings, agreement over 50 steps, and 64 trajectories under vmap."""
    jax = _jax(True)
    import jax.numpy as jnp
    import numpy as np

    import gpu_fused
    from orc import _kernels
    from orc import forecaster as F

    data = np.load(args.data)
    for n in args.fused_sizes:
        for dname in ("float64", "float32"):
            dtype = jnp.float32 if dname == "float32" else jnp.float64
            model = F.ESNForecaster(3, n, seed=0, dtype=dtype, construction="jax")
            trained, R = F.train_RCForecaster(model, jnp.asarray(data[:5000], dtype))
            d, e, ro = trained.driver, trained.embedding, trained.readout
            win, window = e.linear_window()
            a = (d.wr.values, d.wr.columns, win, window, d.bias, ro.linear_weights())
            a = a + (d._bank(R[-1]), jnp.asarray(d.leak, dtype))
            forms = {
                "scan": functools.partial(
                    _kernels._forecast_scan, _kernels._gather_matvec
                )
            }
            for rows in (16, 32, 64):
                forms[f"fused rows {rows}"] = functools.partial(
                    gpu_fused.esn_forecast_fused, rows=rows
                )
            short = {}
            for form, fn in forms.items():
                run = jax.jit(functools.partial(fn, length=args.steps, unroll=16))
                _, first = _timed(run, *a)
                times = [_timed(run, *a)[1] for _ in range(7)]
                short[form] = np.asarray(fn(*a, length=50, unroll=16))
                _emit(
                    {
                        "job": "fused",
                        "n": n,
                        "dtype": dname,
                        "form": form,
                        "first_s": first,
                        "us_per_step": statistics.median(times) / args.steps * 1e6,
                        "max_diff_vs_scan_50": float(
                            np.max(np.abs(short[form] - short["scan"]))
                        ),
                    }
                )
            starts = a[6] + 1e-3 * jax.random.normal(
                jax.random.key(0), (64,) + a[6].shape, dtype
            )
            for form in ("scan", "fused rows 16"):
                fn = functools.partial(forms[form], length=args.steps, unroll=16)
                run = jax.jit(jax.vmap(lambda r0, fn=fn, a=a: fn(*a[:6], r0, a[7])))
                _timed(run, starts)
                t = statistics.median(_timed(run, starts)[1] for _ in range(3))
                _emit(
                    {
                        "job": "fused",
                        "n": n,
                        "dtype": dname,
                        "form": f"{form}, vmap 64",
                        "us_per_step": t / args.steps / 64 * 1e6,
                    }
                )


def job_population(args) -> None:
    """64 reservoirs built in one call; 1000 forecasts in one call vs a loop."""
    jax = _jax(True)
    import equinox as eqx
    import jax.numpy as jnp
    import numpy as np

    from orc import forecaster as F

    n, pop = args.n, args.pop
    rec = {"job": "population", "n": n, "pop": pop}

    @eqx.filter_jit
    def build(seeds):
        return eqx.filter_vmap(
            lambda s: F.ESNForecaster(3, n, seed=s, construction="jax")
        )(seeds)

    _, rec["pop_build_first_s"] = _timed(build, jnp.arange(pop))
    rec["pop_build_warm_s"] = min(
        _timed(build, jnp.arange(pop) + 100 * i)[1] for i in (1, 2, 3)
    )
    one = [
        _timed(lambda s=s: F.ESNForecaster(3, n, seed=s, construction="jax"))[1]
        for s in range(8)
    ]
    rec["single_build_warm_s"] = statistics.median(one[1:])
    rec["pop_vs_loop_speedup"] = (
        rec["single_build_warm_s"] * pop / rec["pop_build_warm_s"]
    )

    # ensemble: one trained model, many initial states
    data = np.load(args.data)
    U = jnp.asarray(data[:5000])
    trained, R = F.train_RCForecaster(
        F.ESNForecaster(3, n, seed=0, construction="jax"), U
    )
    rng = np.random.default_rng(0)
    starts = R[jnp.asarray(rng.integers(1000, 5000, args.ensemble))]
    steps = args.steps

    @eqx.filter_jit
    def ensemble(model, r0s):
        return jax.vmap(lambda r: model.forecast(steps, r))(r0s)

    out, rec["ensemble_first_s"] = _timed(ensemble, trained, starts)
    rec["ensemble_warm_s"] = min(_timed(ensemble, trained, starts)[1] for _ in range(3))
    loop_n = min(args.ensemble, 20)
    trained.forecast(steps, starts[0]).block_until_ready()
    t0 = time.perf_counter()
    for i in range(loop_n):
        trained.forecast(steps, starts[i]).block_until_ready()
    per_traj = (time.perf_counter() - t0) / loop_n
    rec["loop_per_trajectory_s"] = per_traj
    rec["ensemble_size"] = args.ensemble
    rec["steps"] = steps
    rec["ensemble_throughput_ratio"] = per_traj * args.ensemble / rec["ensemble_warm_s"]
    rec["ensemble_finite"] = bool(jnp.all(jnp.isfinite(out)))
    _emit(rec)


def _run_child(argv, env_extra=None, timeout=900) -> list[dict]:
    env = dict(os.environ)
    env.update(env_extra or {})
    env["PYTHONPATH"] = (
        os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    )
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, __file__, *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return [{"job": argv[0], "argv": argv, "error": f"timeout after {timeout} s"}]
    out = [
        json.loads(line[7:])
        for line in proc.stdout.splitlines()
        if line.startswith("RESULT ")
    ]
    if proc.returncode != 0 or not out:
        out.append(
            {
                "job": argv[0],
                "argv": argv,
                "rc": proc.returncode,
                "stderr": proc.stderr[-1500:],
            }
        )
    for rec in out:
        rec.setdefault("wall_s", time.perf_counter() - t0)
        print(json.dumps(rec), flush=True)
    return out


def _make_data(path: str, T: int) -> None:
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = (
        os.path.join(ROOT, "src") + os.pathsep + env.get("PYTHONPATH", "")
    )
    code = (
        "import jax, numpy as np; jax.config.update('jax_enable_x64', True);"
        f"import orc; U, _ = orc.data.lorenz63(tN={T + 10} * 0.01, dt=0.01);"
        f"np.save({path!r}, np.asarray(U))"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=env)


def _table(results: list[dict]) -> str:
    def fmt(x, spec):
        return "-" if x is None else format(x, spec)

    def table(job, headers, row):
        rows = [row(r) for r in results if r.get("job") == job]
        return ["", md_table(headers, rows)] if rows else []

    def size_row(r):
        peak = r.get("peak_after_train") or r.get("peak_at_error")
        return [
            r["n"],
            fmt(r.get("build_host_s"), ".2f"),
            f"{fmt(r.get('build_first_s'), '.2f')} / {fmt(r.get('build_warm_s'), '.3f')}",
            f"{fmt(r.get('train_first_s'), '.2f')} / {fmt(r.get('train_warm_s'), '.2f')}",
            fmt(r.get("forecast_us_per_step"), ".1f"),
            fmt(peak / 1e9 if peak else None, ".2f"),
            r.get("error", "")[:80],
        ]

    lines = table(
        "size",
        ["N", "build (host, numpy) s", "build first / warm (jax) s"]
        + ["train first / warm s", "forecast µs/step", "peak after train GB", "note"],
        size_row,
    )
    lines += table(
        "variants",
        ["dtype", "form", "unroll", "XLA_FLAGS", "µs/step", "max diff vs unroll 1"],
        lambda r: (
            [r["dtype"], r["form"], r["unroll"], r["flags"] or "(none)"]
            + [f"{r['us_per_step']:.2f}", f"{r['max_diff_vs_unroll1']:.1e}"]
        ),
    )
    lines += table(
        "fused",
        ["N", "dtype", "forecast", "µs/step", "max diff vs scan, 50 steps"],
        lambda r: (
            [r["n"], r["dtype"], r["form"], f"{r['us_per_step']:.2f}"]
            + [fmt(r.get("max_diff_vs_scan_50"), ".1e")]
        ),
    )
    for r in results:
        if r.get("job") == "population":
            lines += [
                "",
                f"Population: {r['pop']} x N={r['n']} built in one call: "
                f"{r['pop_build_warm_s']:.3f} s warm ({r['pop_build_first_s']:.1f} s first); "
                f"one at a time {r['single_build_warm_s']:.3f} s each "
                f"({r['pop_vs_loop_speedup']:.1f}x for the population call).",
                f"Ensemble: {r['ensemble_size']} forecasts of {r.get('steps', '')} steps in one "
                f"call {r['ensemble_warm_s']:.3f} s vs {r['loop_per_trajectory_s'] * 1e3:.1f} ms "
                f"each in a loop: {r['ensemble_throughput_ratio']:.0f}x the throughput.",
            ]
    return "\n".join(lines).lstrip("\n") + "\n"


def _ints(text: str) -> list[int]:
    """A comma-separated list of integers (an option's value)."""
    return [int(x) for x in text.split(",")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "job",
        nargs="?",
        default="all",
        choices=["all", "size", "variants", "population", "fused"],
    )
    p.add_argument("--out", default=os.path.join(ROOT, "benchmarks", ".cache", "gpu"))
    p.add_argument("--data")
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--T", type=int, default=20000)
    p.add_argument("--steps", type=int, default=2000)
    p.add_argument("--dtype", default="float64")
    p.add_argument("--host-build", action="store_true")
    p.add_argument("--unrolls", type=_ints, default=[1, 4, 16, 64])
    p.add_argument("--fused-sizes", type=_ints, default=[2000, 8000])
    p.add_argument("--pop", type=int, default=64)
    p.add_argument("--ensemble", type=int, default=1000)
    p.add_argument("--sizes", type=_ints, default=[2000, 8000, 16000, 32000])
    p.add_argument("--quick", action="store_true")
    p.add_argument(
        "--skip",
        default="",
        help="comma-separated: size,variants,population,fused",
    )
    args = p.parse_args()
    if args.job == "size":
        return job_size(args)
    if args.job == "variants":
        return job_variants(args)
    if args.job == "population":
        return job_population(args)
    if args.job == "fused":
        return job_fused(args)

    os.makedirs(args.out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    data = os.path.join(tmp, "l63.npy")
    _make_data(data, args.T)
    sizes = [2000] if args.quick else args.sizes
    skip = set(args.skip.split(","))
    results = []

    def save():
        with open(os.path.join(args.out, "gpu_results.json"), "w") as f:
            json.dump(results, f, indent=1)
        with open(os.path.join(args.out, "gpu_results.md"), "w") as f:
            f.write(_table(results))

    def child(job, env=None, **opts):
        """Run ``job`` in its own process with the data and ``--key value``
        options (underscores as dashes); keep and save what it reports."""
        argv = [job, "--data", data, "--steps", str(args.steps)]
        for key, value in opts.items():
            if value is None:
                continue
            flag = "--" + key.replace("_", "-")
            argv += [flag] if value is True else [flag, str(value)]
        results.extend(_run_child(argv, env))
        save()

    if "size" not in skip:
        for n in sizes:
            child("size", n=n, T=args.T, host_build=True if n <= 16000 else None)
    if "variants" not in skip:
        command_buffers = (
            "--xla_gpu_enable_command_buffer="
            "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CONDITIONAL,WHILE "
            "--xla_gpu_graph_min_graph_size=1"
        )
        for flags in ("", command_buffers):
            child(
                "variants",
                {"XLA_FLAGS": flags},
                n=args.n,
                unrolls=",".join(map(str, args.unrolls)),
            )
    if "population" not in skip:
        child("population", n=args.n, pop=args.pop, ensemble=args.ensemble)
    if "fused" not in skip:
        child("fused", fused_sizes=",".join(map(str, args.fused_sizes)))
    save()
    print(_table(results))


if __name__ == "__main__":
    main()
