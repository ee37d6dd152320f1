"""How a workload process reports (stdlib only: it runs in every library's
interpreter, ours and the peers').

A workload prints exactly one line ``BENCH_RESULT {...json...}`` on stdout,
also when it fails; :func:`reported` wraps a workload's body so that it does.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time
import traceback

MARK = "BENCH_RESULT "


def peak_rss_mb():
    """Peak resident set size of this process, in MiB (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def emit(result):
    sys.stdout.write(MARK + json.dumps(result) + "\n")
    sys.stdout.flush()


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


@contextlib.contextmanager
def reported(res: dict, rss: bool = True):
    """Run the block, then emit ``res`` whatever happened: ``ok`` if the block
    finished, else the error and its traceback (any exception, MemoryError
    included, is reported instead of raised), and the peak RSS if ``rss``."""
    try:
        yield res
        res["ok"] = True
    except BaseException as exc:  # report every failure, including MemoryError
        res["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        res["traceback"] = traceback.format_exc()[-4000:]
    if rss:
        res["peak_rss_mb"] = peak_rss_mb()
    emit(res)
