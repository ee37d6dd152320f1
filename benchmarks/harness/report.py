"""Pure-Python report helpers: ratios, skill metrics, Markdown tables, the plot.

Nothing here runs a library; everything works on the JSON results the workload
subprocesses print, so it can be unit-tested quickly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

MISSING = "—"

# (result key, label) of each timing row, per workload.
FORECAST_METRICS = (
    ("build_first", "build, first call"),
    ("build_min", "build, warm min"),
    ("build_median", "build, warm median"),
    ("train_first", "train, first call (incl. compile)"),
    ("train_min", "train, warm min"),
    ("train_median", "train, warm median"),
    ("forecast_first", "forecast 2000 steps, first call"),
    ("forecast_min", "forecast 2000 steps, warm min"),
    ("forecast_median", "forecast 2000 steps, warm median"),
    ("peak_rss_mb", "peak RSS"),
)
SWEEP_METRICS = (
    ("train_first", "train, first call (incl. compile)"),
    ("train_min", "train, warm min"),
    ("train_median", "train, warm median"),
    ("peak_rss_mb", "peak RSS"),
)
CLASSIFIER_METRICS = (
    ("build_first", "build, first call"),
    ("train_first", "train, first call (incl. compile)"),
    ("train_min", "train, warm min"),
    ("train_median", "train, warm median"),
    ("classify_first", "classify 300 seqs, first call"),
    ("classify_min", "classify 300 seqs, warm min"),
    ("classify_median", "classify 300 seqs, warm median"),
    ("accuracy", "test accuracy (seed 0)"),
    ("accuracy_mean", "test accuracy, mean over weight seeds"),
    ("accuracy_min", "test accuracy, worst seed"),
    ("accuracy_max", "test accuracy, best seed"),
    ("accuracy_draws", "weight seeds"),
    ("peak_rss_mb", "peak RSS"),
)
CONTROLLER_METRICS = (
    ("build_first", "build, first call"),
    ("train_first", "train, first call (incl. compile)"),
    ("train_min", "train, warm min"),
    ("train_median", "train, warm median"),
    ("control_first", "compute_control, first call"),
    ("control_min", "compute_control, warm min"),
    ("control_median", "compute_control, warm median"),
    ("penalty_zero", "penalty of zero control"),
    ("penalty_opt", "penalty of optimised control"),
    ("peak_rss_mb", "peak RSS"),
)
# Rows that are not times: their unit, and whether a ratio makes sense.
UNITS = {
    "peak_rss_mb": ("MiB", True),
    "accuracy": ("", False),
    "accuracy_mean": ("", False),
    "accuracy_min": ("", False),
    "accuracy_max": ("", False),
    "accuracy_draws": ("count", False),
    "penalty_zero": ("", False),
    "penalty_opt": ("", False),
    "vpt_mean": ("LT", False),
    "vpt_median": ("LT", False),
    "vpt_std": ("LT", False),
    "vpt_min": ("LT", False),
    "vpt_max": ("LT", False),
    "windows": ("count", False),
    "censored": ("count", False),
}
SKILL_METRICS = (
    ("vpt_mean", "VPT mean (Lyapunov times)"),
    ("vpt_median", "VPT median"),
    ("vpt_std", "VPT std over windows"),
    ("vpt_min", "VPT worst window"),
    ("windows", "test windows"),
    ("censored", "windows valid to the end"),
    ("forecast_from_ic_median", "forecast_from_IC, warm median"),
)


def ratio(ours: float | None, peer: float | None) -> float | None:
    """``ours / peer``; None when either is missing or the peer is not positive.

    For times and memory a ratio below 1 means ours is faster / smaller.
    """
    if ours is None or peer is None:
        return None
    try:
        ours_f, peer_f = float(ours), float(peer)
    except (TypeError, ValueError):
        return None
    if not (math.isfinite(ours_f) and math.isfinite(peer_f)) or peer_f <= 0:
        return None
    return ours_f / peer_f


def fmt_seconds(s: float | None) -> str:
    """Seconds with three significant digits, in s, ms or µs."""
    if s is None or not math.isfinite(s):
        return MISSING
    if s >= 100:
        return f"{s:.0f} s"
    if s >= 1:
        return f"{s:.3g} s"
    if s >= 1e-3:
        return f"{s * 1e3:.3g} ms"
    return f"{s * 1e6:.3g} µs"


def fmt_ratio(r: float | None) -> str:
    if r is None:
        return MISSING
    if r >= 100:
        return f"{r:.0f}×"
    return f"{r:.3g}×"


def fmt_value(key: str, value) -> str:
    """Format one metric value according to its kind."""
    if value is None:
        return MISSING
    if key not in UNITS:
        return fmt_seconds(float(value))
    unit, _ = UNITS[key]
    if key.startswith("accuracy") and key != "accuracy_draws":
        return f"{100.0 * float(value):.1f}%"
    if unit == "MiB":
        return f"{float(value):.0f} MiB"
    if unit == "LT":
        return f"{float(value):.2f}"
    if unit == "count":
        return str(int(value))
    return f"{float(value):.4g}"


def valid_prediction_time(
    forecast: np.ndarray,
    truth: np.ndarray,
    norm: float,
    *,
    threshold: float = 0.4,
    dt: float = 0.01,
    lyapunov: float = 0.906,
) -> tuple[float, bool]:
    """Valid prediction time in Lyapunov times, and whether it was censored.

    ``forecast[k]`` and ``truth[k]`` are the prediction and true value ``k + 1``
    steps after the end of the spin-up window.  The error at step ``k`` is
    ``||forecast[k] - truth[k]|| / norm``; if it first exceeds ``threshold`` at
    index ``k``, then ``k`` steps were valid and VPT = ``k * dt * lyapunov``.  A
    forecast that never exceeds the threshold gets the full length and
    ``censored=True``.
    """
    forecast = np.asarray(forecast, dtype=np.float64)
    truth = np.asarray(truth, dtype=np.float64)
    if forecast.shape != truth.shape:
        raise ValueError(f"shape mismatch {forecast.shape} vs {truth.shape}")
    err = np.linalg.norm(forecast - truth, axis=-1) / norm
    bad = ~(err <= threshold)  # NaN counts as a failure
    if bad.any():
        steps = int(np.argmax(bad))
        return steps * dt * lyapunov, False
    return forecast.shape[0] * dt * lyapunov, True


def skill_summary(
    forecasts: np.ndarray,
    test: np.ndarray,
    starts: Sequence[int],
    spinup: int,
    **vpt_kwargs,
) -> dict:
    """Mean/median/std VPT over windows; the norm is the RMS of ||truth|| on test."""
    forecasts = np.asarray(forecasts)
    test = np.asarray(test, dtype=np.float64)
    norm = float(np.sqrt(np.mean(np.sum(test**2, axis=-1))))
    fcast_len = forecasts.shape[1]
    vpts, censored = [], 0
    for fc, start in zip(forecasts, starts, strict=True):
        truth = test[start + spinup : start + spinup + fcast_len]
        vpt, cens = valid_prediction_time(fc, truth, norm, **vpt_kwargs)
        vpts.append(vpt)
        censored += int(cens)
    arr = np.asarray(vpts)
    return {
        "vpt_mean": float(arr.mean()),
        "vpt_median": float(np.median(arr)),
        "vpt_std": float(arr.std(ddof=1)) if arr.size > 1 else 0.0,
        "vpt_min": float(arr.min()),
        "vpt_max": float(arr.max()),
        "vpt_all": [float(v) for v in arr],
        "windows": int(arr.size),
        "censored": censored,
        "norm": norm,
    }


def accuracy(predictions: Sequence[int], labels: Sequence[int]) -> float:
    pred = np.asarray(predictions)
    lab = np.asarray(labels)
    if pred.shape != lab.shape:
        raise ValueError(f"{pred.shape[0]} predictions for {lab.shape[0]} labels")
    return float(np.mean(pred == lab))


def find(results: Iterable[dict], library: str, workload: str, size) -> dict | None:
    for r in results:
        if (
            r.get("library") == library
            and r.get("workload") == workload
            and r.get("size") == size
        ):
            return r
    return None


def cell(result: dict | None, key: str) -> str:
    """Table cell for one library: value, 'n/a', 'error' or missing."""
    if result is None:
        return MISSING
    if result.get("na"):
        return "n/a"
    if not result.get("ok"):
        return "error"
    return fmt_value(key, result.get(key))


def md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured Markdown table; first column left, others right."""
    align = [":---"] + ["---:"] * (len(headers) - 1)
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(align) + " |"]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def comparison_rows(
    results: Sequence[dict],
    workload: str,
    sizes: Sequence,
    metrics: Sequence[tuple[str, str]],
    libraries: Sequence[str],
    *,
    ours: str = "ours",
    size_fmt=str,
) -> list[list[str]]:
    """Rows ``[size, metric, lib1..libk, ours/peer...]`` for one workload."""
    peers = [lib for lib in libraries if lib != ours]
    rows = []
    for size in sizes:
        found = {lib: find(results, lib, workload, size) for lib in libraries}
        for key, label in metrics:
            row = [size_fmt(size), label]
            row += [cell(found[lib], key) for lib in libraries]
            if ours in libraries:
                for peer in peers:
                    with_ratio = UNITS.get(key, ("s", True))[1]
                    r = None
                    o, p = found[ours], found[peer]
                    if with_ratio and o and p and o.get("ok") and p.get("ok"):
                        r = ratio(o.get(key), p.get(key))
                    row.append(fmt_ratio(r))
            rows.append(row)
    return rows


def comparison_headers(
    first: str, libraries: Sequence[str], labels: dict, *, ours: str = "ours"
) -> list[str]:
    headers = [first, "metric"] + [labels.get(lib, lib) for lib in libraries]
    if ours in libraries:
        headers += [f"ours / {labels.get(p, p)}" for p in libraries if p != ours]
    return headers


def plot_time_vs_size(
    results: Sequence[dict],
    libraries: Sequence[str],
    labels: dict,
    sizes: Sequence[int],
    path,
) -> bool:
    """Log-log time vs N for build / warm train / warm forecast (workload a).

    Returns False (and writes nothing) when matplotlib is missing or no library
    has a successful point.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import LogFormatter, NullLocator
    except ImportError:
        return False

    class SecondsFormatter(LogFormatter):
        """Log-axis labels in s / ms; minor ticks labelled on short axes."""

        def _num_to_string(self, x, vmin, vmax):
            return fmt_seconds(x)

    panels = (
        ("build_first", "model build (first call)"),
        ("train_median", "training, T = 20000 (warm median)"),
        ("forecast_median", "forecast, 2000 steps (warm median)"),
    )
    colours = {"ours": "tab:blue", "orc04": "tab:orange", "rpy": "tab:green"}
    markers = {"ours": "o", "orc04": "s", "rpy": "^"}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8), constrained_layout=True)
    any_point = False
    for ax, (key, title) in zip(axes, panels, strict=True):
        for lib in libraries:
            pts = []
            for n in sizes:
                r = find(results, lib, "a", n)
                if r and r.get("ok") and r.get(key) is not None:
                    pts.append((n, float(r[key])))
            if not pts:
                continue
            any_point = True
            xs, ys = zip(*pts, strict=True)
            ax.plot(
                xs,
                ys,
                marker=markers.get(lib, "o"),
                color=colours.get(lib),
                label=labels.get(lib, lib),
                linewidth=2,
                markersize=7,
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=12)
        ax.set_xlabel("reservoir size N (units)", fontsize=11)
        ax.set_ylabel("wall time (s)", fontsize=11)
        ax.set_xticks(list(sizes))
        ax.set_xticklabels([str(n) for n in sizes])
        ax.xaxis.set_minor_locator(NullLocator())
        ax.yaxis.set_major_formatter(SecondsFormatter(labelOnlyBase=False))
        ax.yaxis.set_minor_formatter(
            SecondsFormatter(labelOnlyBase=False, minor_thresholds=(1.5, 0.6))
        )
        ax.grid(True, which="major", alpha=0.4)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=10)
    fig.suptitle("Lorenz63 ESN: time vs reservoir size (log-log)", fontsize=13)
    if any_point:
        fig.savefig(path, dpi=110)
    plt.close(fig)
    return any_point
