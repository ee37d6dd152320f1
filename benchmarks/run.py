"""Side-by-side benchmarks: our ``orc`` vs ORC 0.4.0 vs reservoirpy 0.4.2.

One command runs everything on identical data and hyperparameters::

    .venv/bin/python benchmarks/run.py            # full suite (tens of minutes)
    .venv/bin/python benchmarks/run.py --quick    # smoke run, N=500 only
    .venv/bin/python benchmarks/run.py --only ours,orc04 --workloads a,c

Each (library, workload, size) runs in its own subprocess, with that library's
interpreter, one at a time, so that timings do not compete for the two cores and
peak RSS is per workload.  Peer libraries get cached virtualenvs under
``benchmarks/.venvs``; data are generated once and cached under
``benchmarks/.cache``.  See ``benchmarks/README.md``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402

from harness import data, envs, report  # noqa: E402
from workloads._report import MARK  # noqa: E402

BENCH_DIR = envs.BENCH_DIR
CACHE_DIR = BENCH_DIR / ".cache"

WORKLOADS = {
    "a": "Lorenz63 forecaster: build, train (T=20000), forecast 2000 steps",
    "b": "Training time vs training length T (N=2000)",
    "c": "Classifier: 3 classes of noisy sinusoids (N=500)",
    "d": "Controller: linear plant, optimised 50-step control (N=500)",
    "e": "Skill parity: valid prediction time on held-out Lorenz63",
}

TRAIN_LEN = 20000
FORECAST_LEN = 2000
SWEEP_N = 2000
CLF_N = 500
CLF_SEEDS = 5  # weight draws whose test accuracy is averaged (the first is timed)
CTRL_N = 500
SPINUP = 200
SKILL_FORECAST_LEN = 1500
WINDOW_STRIDE = 2000
N_TRAIN_DATA = 100000
N_TEST_DATA = 40000
DT = 0.01


def build_plan(args: argparse.Namespace) -> dict:
    """Sizes, repeats and windows of a run, from the command-line options."""
    if args.quick:
        plan = {
            "sizes_a": [500],
            "sweep_t": [],
            "sizes_e": [500],
            "repeats": 2,
            "windows": 10,
        }
    else:
        plan = {
            "sizes_a": [500, 2000, 4000],
            "sweep_t": [10000, 20000, 50000, 100000],
            "sizes_e": [500, 2000],
            "repeats": 3,
            "windows": 20,
        }
    if args.sizes:
        plan["sizes_a"] = args.sizes
        plan["sizes_e"] = [n for n in args.sizes if n <= 2000] or args.sizes[:1]
    if args.sweep:
        plan["sweep_t"] = args.sweep
    if args.repeats is not None:
        plan["repeats"] = args.repeats
    if args.windows is not None:
        plan["windows"] = args.windows
    max_windows = (N_TEST_DATA - SPINUP - SKILL_FORECAST_LEN) // WINDOW_STRIDE + 1
    plan["windows"] = max(1, min(plan["windows"], max_windows))
    plan["window_starts"] = [i * WINDOW_STRIDE for i in range(plan["windows"])]
    plan["quick"] = bool(args.quick)
    return plan


def make_jobs(plan: dict, libraries: list[str], workloads: list[str]) -> list[dict]:
    """One job per (workload, size, library), workload-major so that the libraries
    are timed back to back on each configuration."""
    sizes = {
        "a": plan["sizes_a"],
        "b": plan["sweep_t"],
        "c": [CLF_N],
        "d": [CTRL_N],
        "e": plan["sizes_e"],
    }
    jobs = []
    for wl in workloads:
        for size in sizes[wl]:
            for lib in libraries:
                jobs.append({"library": lib, "workload": wl, "size": size})
    return jobs


def job_config(job: dict, plan: dict, files: dict) -> dict:
    cfg = {
        **job,
        "files": files,
        "repeats": plan["repeats"],
        "train_len": TRAIN_LEN,
        "forecast_len": FORECAST_LEN,
    }
    if job["workload"] == "b":
        cfg["size_n"] = SWEEP_N
        # A training call at T=100000 takes a while; two warm repeats suffice.
        if job["size"] > TRAIN_LEN:
            cfg["repeats"] = min(plan["repeats"], 2)
    if job["workload"] == "c":
        cfg["clf_seeds"] = CLF_SEEDS
    if job["workload"] == "e":
        out_dir = CACHE_DIR / "forecasts"
        out_dir.mkdir(parents=True, exist_ok=True)
        cfg["spinup"] = SPINUP
        cfg["forecast_len"] = SKILL_FORECAST_LEN
        cfg["window_starts"] = plan["window_starts"]
        cfg["out_file"] = str(out_dir / f"{job['library']}_e_{job['size']}.npy")
    return cfg


def parse_child_output(stdout: str, stderr: str, returncode: int) -> dict:
    """The workload's JSON result, or an error record if there is none."""
    for line in reversed(stdout.splitlines()):
        if line.startswith(MARK):
            try:
                return json.loads(line[len(MARK) :])
            except json.JSONDecodeError as exc:
                return {"ok": False, "error": f"unreadable result line: {exc}"}
    if returncode < 0:
        why = f"killed by signal {-returncode}"
        if returncode == -9:
            why += " (out of memory?)"
    else:
        why = f"exit code {returncode} without a result line"
    tail = (stderr or stdout or "").strip().splitlines()[-5:]
    return {"ok": False, "error": why + (": " + " | ".join(tail) if tail else "")}


def run_job(lib: envs.Library, cfg: dict, timeout: float) -> dict:
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            [str(lib.python), str(lib.script), json.dumps(cfg)],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=envs.child_env(lib),
            cwd=str(BENCH_DIR),
        )
        res = parse_child_output(proc.stdout, proc.stderr, proc.returncode)
        if not res.get("ok"):
            res["stderr_tail"] = proc.stderr[-3000:]
    except subprocess.TimeoutExpired:
        res = {"ok": False, "error": f"timeout after {timeout:.0f} s"}
    except OSError as exc:
        res = {"ok": False, "error": f"could not start {lib.python}: {exc}"}
    res.update({k: cfg[k] for k in ("library", "workload", "size")})
    res["wall_s"] = time.perf_counter() - t0
    return res


def postprocess(res: dict, files: dict, plan: dict) -> None:
    """Derived metrics computed identically for every library."""
    if not res.get("ok"):
        return
    try:
        if res["workload"] == "c" and "predictions" in res:
            labels = np.load(files["clf_test_y"])
            res["accuracy"] = report.accuracy(res.pop("predictions"), labels)
            draws = [
                report.accuracy(p, labels) for p in res.pop("predictions_seeds", [])
            ]
            if draws:
                res["accuracy_mean"] = float(np.mean(draws))
                res["accuracy_min"] = float(np.min(draws))
                res["accuracy_max"] = float(np.max(draws))
                res["accuracy_draws"] = len(draws)
        if res["workload"] == "e" and "forecasts_file" in res:
            forecasts = np.load(res["forecasts_file"])
            test = np.load(files["lorenz_test"])
            skill = report.skill_summary(
                forecasts, test, plan["window_starts"], SPINUP, dt=DT
            )
            res.update(skill)
    except Exception as exc:  # a broken result must not stop the run
        res["ok"] = False
        res["error"] = f"post-processing failed: {type(exc).__name__}: {exc}"


def summary_line(res: dict) -> str:
    if res.get("na"):
        return "n/a"
    if not res.get("ok"):
        return "ERROR " + str(res.get("error", ""))[:160]
    bits = []
    for key in ("train_median", "forecast_median", "classify_median"):
        if key in res:
            bits.append(f"{key}={report.fmt_seconds(res[key])}")
    if "control_median" in res:
        bits.append(f"control_median={report.fmt_seconds(res['control_median'])}")
    if "accuracy" in res:
        bits.append(f"acc={res['accuracy']:.3f}")
    if "vpt_mean" in res:
        bits.append(f"VPT={res['vpt_mean']:.2f}")
    bits.append(f"rss={res.get('peak_rss_mb', 0):.0f}MiB")
    return "ok " + " ".join(bits)


def machine_info(libraries: list[str]) -> dict:
    cpu = envs.cpu_name()
    ram_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                ram_gib = int(line.split()[1]) / 1024**2
                break
    except OSError:
        pass
    child = envs.child_env(None)
    info = {
        "date_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_gib": ram_gib,
        "loadavg_at_start": list(os.getloadavg()),
        "harness_python": platform.python_version(),
        "platform": platform.platform(),
        "env_vars": {v: child.get(v) for v in envs.RECORDED_ENV_VARS},
        "git": git_info(),
        "libraries": {},
    }
    for key in libraries:
        info["libraries"][key] = envs.env_versions(envs.LIBRARIES[key])
    return info


def git_info() -> dict:
    def git(*argv):
        proc = subprocess.run(
            ["git", *argv], capture_output=True, text=True, cwd=str(envs.REPO_ROOT)
        )
        return proc.stdout.strip() if proc.returncode == 0 else None

    status = git("status", "--porcelain", "--", "src")
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "src_dirty": bool(status) if status is not None else None,
    }


def results_markdown(payload: dict) -> str:
    """``RESULTS.md`` of a run's payload, with the reports written by hand
    beside it (GPU.md, TUNE.md, ..., HISTORY.md: ``harness.markdown``)."""
    from harness.markdown import render_results

    labels = {k: envs.LIBRARIES[k].label for k in payload["libraries"]}
    return render_results(payload, labels)


def write_outputs(results_dir: Path, payload: dict, final: bool) -> None:
    """Save results.json; at the end also the plot and RESULTS.md."""
    results_dir.mkdir(parents=True, exist_ok=True)
    if final:
        libs = payload["libraries"]
        labels = {k: envs.LIBRARIES[k].label for k in libs}
        plot_path = results_dir / "time_vs_size.png"
        plotted = report.plot_time_vs_size(
            payload["results"], libs, labels, payload["plan"]["sizes_a"], plot_path
        )
        payload["plot"] = plot_path.name if plotted else None
        (results_dir / "RESULTS.md").write_text(results_markdown(payload))
    tmp = results_dir / "results.json.tmp"
    tmp.write_text(json.dumps(payload, indent=1) + "\n")
    tmp.replace(results_dir / "results.json")


def merge_previous(payload: dict, previous: dict, jobs: list[dict]) -> None:
    """Fold an earlier run into ``payload``: keep its results that this run does
    not redo, and widen the lists of libraries, workloads and sizes to match."""
    redo = {(j["library"], j["workload"], j["size"]) for j in jobs}
    kept = [
        r
        for r in previous.get("results", [])
        if (r.get("library"), r.get("workload"), r.get("size")) not in redo
    ]
    payload["results"] = kept + payload["results"]
    order = list(envs.LIBRARIES)
    libs = set(payload["libraries"]) | set(previous.get("libraries", []))
    payload["libraries"] = [k for k in order if k in libs]
    wls = set(payload["workloads"]) | set(previous.get("workloads", []))
    payload["workloads"] = [w for w in WORKLOADS if w in wls]
    plan, old_plan = payload["plan"], previous.get("plan", {})
    for key in ("sizes_a", "sweep_t", "sizes_e"):
        plan[key] = sorted(set(plan.get(key, [])) | set(old_plan.get(key, [])))
    if old_plan.get("window_starts") != plan.get("window_starts"):
        plan["note"] = "merged runs used different skill windows"
    old_libs = previous.get("meta", {}).get("libraries", {})
    for key, info in old_libs.items():
        payload["meta"]["libraries"].setdefault(key, info)
    payload["meta"]["merged_from"] = previous.get("meta", {}).get("date_utc")


def parse_args(argv=None) -> argparse.Namespace:
    def csv_list(text: str) -> list[str]:
        return [t.strip() for t in text.split(",") if t.strip()]

    def int_list(text: str) -> list[int]:
        return [int(t) for t in csv_list(text)]

    p = argparse.ArgumentParser(
        description="Benchmark ours vs ORC 0.4.0 vs reservoirpy 0.4.2.",
        epilog="Workloads: " + "; ".join(f"{k}: {v}" for k, v in WORKLOADS.items()),
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: N=500 only, 2 repeats, 10 skill windows, no T sweep; "
        "results go to benchmarks/.cache/quick unless --results-dir is given",
    )
    p.add_argument(
        "--only",
        type=csv_list,
        default=list(envs.LIBRARIES),
        help="libraries to run, comma-separated (default: ours,orc04,rpy)",
    )
    p.add_argument(
        "--workloads",
        type=csv_list,
        default=list(WORKLOADS),
        help="workloads to run, comma-separated from a,b,c,d,e (default: all)",
    )
    p.add_argument("--sizes", type=int_list, help="reservoir sizes N for a and e")
    p.add_argument("--sweep", type=int_list, help="training lengths T for b")
    p.add_argument("--repeats", type=int, help="warm repeats per timing")
    p.add_argument("--windows", type=int, help="test windows for skill (e)")
    p.add_argument(
        "--timeout", type=float, default=3600.0, help="seconds per workload process"
    )
    p.add_argument("--results-dir", type=Path, help="where to write the report")
    p.add_argument(
        "--merge",
        action="store_true",
        help="keep the other results already in the results dir's results.json "
        "(e.g. re-run only ours and keep the peers' numbers)",
    )
    p.add_argument(
        "--render",
        action="store_true",
        help="run nothing: write RESULTS.md again from the results dir's "
        "results.json and the reports beside it (after editing one of them)",
    )
    p.add_argument(
        "--no-setup",
        action="store_true",
        help="do not create or repair peer venvs; fail their jobs if missing",
    )
    args = p.parse_args(argv)
    unknown = [lib for lib in args.only if lib not in envs.LIBRARIES]
    if unknown:
        p.error(f"unknown library {unknown}; choose from {list(envs.LIBRARIES)}")
    bad = [w for w in args.workloads if w not in WORKLOADS]
    if bad:
        p.error(f"unknown workload {bad}; choose from {list(WORKLOADS)}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.render:
        results_dir = (args.results_dir or BENCH_DIR).resolve()
        payload = json.loads((results_dir / "results.json").read_text())
        (results_dir / "RESULTS.md").write_text(results_markdown(payload))
        print(f"[done] report: {results_dir / 'RESULTS.md'}")
        return 0
    plan = build_plan(args)
    libraries = [lib for lib in envs.LIBRARIES if lib in args.only]
    workloads = [w for w in WORKLOADS if w in args.workloads]
    results_dir = args.results_dir or (CACHE_DIR / "quick" if args.quick else BENCH_DIR)
    results_dir = results_dir.resolve()

    print(f"[setup] libraries: {', '.join(libraries)}; workloads: {workloads}")
    ready = {}
    for key in libraries:
        lib = envs.LIBRARIES[key]
        if args.no_setup and lib.dist is not None:
            have = envs.installed_version(lib.python, lib.dist)
            ok = have == lib.version
            msg = f"{lib.python}: {lib.dist} {have} (--no-setup)"
        else:
            ok, msg = envs.ensure_env(lib)
        ready[key] = (ok, msg)
        print(f"[setup] {key}: {'ok' if ok else 'UNAVAILABLE'} - {msg}")
    if ready.get("ours", (False,))[0]:
        # The native kernels are compiled once per install and source (like a
        # pip build), then cached: build them here so that no workload's
        # "first call" includes that one-time C++ compile.
        t0 = time.perf_counter()
        lib = envs.LIBRARIES["ours"]
        built = subprocess.run(
            [
                str(lib.python),
                "-c",
                "import orc._native as n; print(n.native_available())",
            ],
            env=envs.child_env(lib),
            capture_output=True,
            text=True,
        )
        state = built.stdout.strip() or built.stderr.strip()[-200:]
        print(
            f"[setup] ours: native kernels {state} ({time.perf_counter() - t0:.1f} s)"
        )

    t0 = time.perf_counter()
    files = data.prepare_data(
        CACHE_DIR, n_train=N_TRAIN_DATA, n_test=N_TEST_DATA, seed=0
    )
    print(f"[setup] data ready in {time.perf_counter() - t0:.1f} s under {CACHE_DIR}")

    payload = {
        "meta": machine_info(libraries),
        "plan": plan,
        "libraries": libraries,
        "workloads": workloads,
        "settings": {
            "train_len": TRAIN_LEN,
            "forecast_len": FORECAST_LEN,
            "sweep_n": SWEEP_N,
            "classifier_n": CLF_N,
            "controller_n": CTRL_N,
            "spinup": SPINUP,
            "skill_forecast_len": SKILL_FORECAST_LEN,
            "window_stride": WINDOW_STRIDE,
            "dt": DT,
            "lyapunov": data.LORENZ_LYAPUNOV,
            "vpt_threshold": 0.4,
        },
        "data_files": {k: str(Path(v).name) for k, v in files.items()},
        "results": [],
    }
    jobs = make_jobs(plan, libraries, workloads)
    previous = None
    if args.merge and (results_dir / "results.json").exists():
        previous = json.loads((results_dir / "results.json").read_text())
        merge_previous(payload, previous, jobs)
        print(f"[setup] merging {len(payload['results'])} earlier result(s)")
    start = time.perf_counter()
    for i, job in enumerate(jobs, 1):
        lib = envs.LIBRARIES[job["library"]]
        tag = f"[{i}/{len(jobs)}] {job['library']:<5} {job['workload']} "
        tag += f"{'T' if job['workload'] == 'b' else 'N'}={job['size']}"
        if job["workload"] not in lib.workloads:
            res = {**job, "ok": False, "na": True, "note": "no equivalent API"}
        elif not ready[job["library"]][0]:
            res = {**job, "ok": False, "error": ready[job["library"]][1]}
        else:
            print(tag + " ...", flush=True)
            res = run_job(lib, job_config(job, plan, files), args.timeout)
            postprocess(res, files, plan)
        payload["results"].append(res)
        wall = res.get("wall_s")
        took = f" ({wall:.1f} s)" if wall else ""
        print(f"{tag} {summary_line(res)}{took}", flush=True)
        write_outputs(results_dir, payload, final=False)
    payload["meta"]["total_wall_s"] = time.perf_counter() - start
    write_outputs(results_dir, payload, final=True)
    print(f"[done] {len(jobs)} jobs in {payload['meta']['total_wall_s']:.0f} s")
    print(f"[done] report: {results_dir / 'RESULTS.md'}")
    failed = [r for r in payload["results"] if not r.get("ok") and not r.get("na")]
    if failed:
        print(f"[done] {len(failed)} job(s) failed; see the Errors section")
    return 0


if __name__ == "__main__":
    sys.exit(main())
