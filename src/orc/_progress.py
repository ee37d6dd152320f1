"""A progress bar for long compiled loops, updated between time blocks.

The compiled loop calls :func:`tick` once per block (a few thousand steps)
through ``jax.debug.callback``, never per step, so the loop is not slowed
measurably. The bar writes to stderr only when it is a terminal (or when
asked explicitly) and is silent otherwise; ``ORC_PROGRESS=0`` silences it.
"""

from __future__ import annotations

import os
import sys
import time

__all__ = ["ProgressBar", "resolve", "tick"]

_current: list[ProgressBar] = []


class ProgressBar:
    """``label [#####.....] 42% 42000/100000 3.1 s`` on one refreshed line."""

    min_interval = 0.1  # seconds between redraws

    def __init__(self, total: int, label: str, stream=None, width: int = 28):
        self.total = max(int(total), 1)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.width = width
        self.done = 0
        self.start = time.perf_counter()
        self._last_draw = 0.0

    def update(self, done: int) -> None:
        self.done = max(self.done, min(int(done), self.total))
        now = time.perf_counter()
        if self.done < self.total and now - self._last_draw < self.min_interval:
            return
        self._last_draw = now
        frac = self.done / self.total
        filled = int(round(frac * self.width))
        bar = "#" * filled + "." * (self.width - filled)
        self.stream.write(
            f"\r{self.label} [{bar}] {frac:4.0%} {self.done}/{self.total} "
            f"{now - self.start:.1f} s"
        )
        self.stream.flush()

    def close(self) -> None:
        self.update(self.total)
        self.stream.write("\n")
        self.stream.flush()

    def __enter__(self):
        _current.append(self)
        return self

    def __exit__(self, *exc):
        _current.remove(self)
        if exc[0] is None:
            self.close()
        else:
            self.stream.write("\n")
        return False


def resolve(progress: bool | None, total: int, min_steps: int = 50_000) -> bool:
    """Whether to show a bar: explicit True/False, else only on a terminal for long runs."""
    if os.environ.get("ORC_PROGRESS", "1") == "0":
        return False
    if progress is not None:
        return bool(progress)
    isatty = getattr(sys.stderr, "isatty", lambda: False)
    return total >= min_steps and isatty()


def tick(done, *after) -> None:
    """Host-side update, called from compiled code with the number of steps done.

    ``after`` are values of the finished block, passed only so the call depends
    on (and therefore follows) the block's computation."""
    if _current:
        _current[-1].update(int(done))


def run_with_bar(progress: bool | None, steps: int, run):
    """``run(show)`` under a "training" bar when :func:`resolve` says so.

    The result is awaited before the bar closes (JAX dispatches asynchronously),
    except while tracing, when there is nothing to wait for.
    """
    import contextlib

    import jax

    show = resolve(progress, steps)
    bar = ProgressBar(steps, "training") if show else contextlib.nullcontext()
    with bar:
        result = run(show)
        if show and not any(
            isinstance(x, jax.core.Tracer) for x in jax.tree.leaves(result)
        ):
            result = jax.block_until_ready(result)
    return result
