"""Deterministic data sets shared by every library in one benchmark run.

Everything here is plain numpy (and the standard library), generated from a seed
and cached as ``.npy`` files, so that each workload subprocess -- whatever its
interpreter -- loads exactly the same numbers.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np

LORENZ_SIGMA = 10.0
LORENZ_RHO = 28.0
LORENZ_BETA = 8.0 / 3.0
LORENZ_LYAPUNOV = 0.906  # largest Lyapunov exponent of Lorenz63 (1 / time unit)

PLANT_A = ((0.95, 0.1), (-0.1, 0.95))
PLANT_B = ((0.1,), (0.0,))

# Bump when a generator changes so that stale caches are not reused.
GENERATOR_VERSION = 2


def _lorenz_rhs(x: float, y: float, z: float) -> tuple[float, float, float]:
    return (
        LORENZ_SIGMA * (y - x),
        x * (LORENZ_RHO - z) - y,
        x * y - LORENZ_BETA * z,
    )


def lorenz63(
    n_samples: int,
    *,
    dt: float = 0.01,
    inner_dt: float = 0.001,
    transient: float = 50.0,
    seed: int = 0,
) -> np.ndarray:
    """Sample a Lorenz63 trajectory with classic RK4.

    The integrator runs at ``inner_dt`` and the trajectory is recorded every
    ``dt`` after discarding ``transient`` time units.  The initial condition is
    drawn from ``numpy.random.default_rng(seed)``.  Scalar Python floats are used
    for the arithmetic (IEEE-754 double, deterministic across machines, and faster
    than numpy for a 3-vector).

    Returns an array of shape ``(n_samples, 3)``.
    """
    ratio = dt / inner_dt
    sub = int(round(ratio))
    if sub < 1 or abs(ratio - sub) > 1e-9:
        raise ValueError("dt must be an integer multiple of inner_dt")
    rng = np.random.default_rng(seed)
    x, y, z = (float(v) for v in rng.uniform(-10.0, 10.0, size=3) + (0, 0, 25.0))
    h = inner_dt
    h2 = 0.5 * h
    h6 = h / 6.0
    n_transient = int(round(transient / dt))
    out = np.empty((n_samples, 3), dtype=np.float64)
    for i in range(n_transient + n_samples):
        for _ in range(sub):
            k1x, k1y, k1z = _lorenz_rhs(x, y, z)
            k2x, k2y, k2z = _lorenz_rhs(x + h2 * k1x, y + h2 * k1y, z + h2 * k1z)
            k3x, k3y, k3z = _lorenz_rhs(x + h2 * k2x, y + h2 * k2y, z + h2 * k2z)
            k4x, k4y, k4z = _lorenz_rhs(x + h * k3x, y + h * k3y, z + h * k3z)
            x += h6 * (k1x + 2.0 * k2x + 2.0 * k3x + k4x)
            y += h6 * (k1y + 2.0 * k2y + 2.0 * k3y + k4y)
            z += h6 * (k1z + 2.0 * k2z + 2.0 * k3z + k4z)
        if i >= n_transient:
            out[i - n_transient] = (x, y, z)
    return out


def noisy_sinusoids(
    n_per_class: int,
    seq_len: int = 200,
    *,
    n_classes: int = 3,
    data_dim: int = 3,
    dt: float = 0.5,
    noise: float = 0.1,
    amplitude: float = 1.0,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Noisy multi-channel sinusoids, one frequency per class.

    Class ``c`` has angular frequency ``1 + c``; every channel has its own random
    phase and a random amplitude factor in [0.8, 1.2]; Gaussian noise of standard
    deviation ``noise * amplitude`` is added.  With the defaults (sample step 0.5,
    periods of about 12, 6 and 4 samples) a 500-unit ESN with ORC's default
    hyperparameters and final-state features reaches roughly 85% test accuracy:
    hard enough to be informative, easy enough to compare libraries.  Sequences
    are shuffled.

    Returns ``(seqs, labels)`` with shapes ``(n, seq_len, data_dim)`` and ``(n,)``.
    """
    rng = np.random.default_rng(seed)
    n = n_per_class * n_classes
    labels = np.repeat(np.arange(n_classes), n_per_class)
    t = np.arange(seq_len) * dt
    omega = 1.0 + labels.astype(np.float64)
    phase = rng.uniform(0.0, 2.0 * np.pi, size=(n, 1, data_dim))
    amp = rng.uniform(0.8, 1.2, size=(n, 1, data_dim))
    seqs = amp * np.sin(omega[:, None, None] * t[None, :, None] + phase)
    seqs = amplitude * (seqs + noise * rng.standard_normal(seqs.shape))
    order = rng.permutation(n)
    return seqs[order], labels[order].astype(np.int64)


def linear_plant(
    n_steps: int = 600,
    *,
    u_std: float = 0.3,
    horizon: int = 50,
    seed: int = 0,
) -> dict[str, np.ndarray]:
    """Linear plant ``x_{t+1} = A x_t + B u_t`` driven by Gaussian inputs.

    ``outputs[t] = x_{t+1}`` is the state after input ``u[t]`` (``x_0 = 0``), so
    ``outputs[t + 1] = A outputs[t] + B u[t + 1]``: a controller trained with
    ``train_RCController(ctrl, outputs[:-1], u[1:])`` sees the input that drives
    each next output.

    ``ref`` (``horizon`` x 2) is the free (zero-input) response from the last
    output plus a smooth offset towards the steady state reached under a constant
    input of 0.1, ``(I - A)^{-1} B 0.1``.  ``free`` is the free response itself.
    """
    a = np.array(PLANT_A)
    b = np.array(PLANT_B)
    rng = np.random.default_rng(seed)
    u = u_std * rng.standard_normal((n_steps, 1))
    x = np.zeros(2)
    outputs = np.empty((n_steps, 2))
    for t in range(n_steps):
        x = a @ x + b @ u[t]
        outputs[t] = x
    free = np.empty((horizon, 2))
    x = outputs[-1]
    for k in range(horizon):
        x = a @ x
        free[k] = x
    target = np.linalg.solve(np.eye(2) - a, b @ np.array([0.1]))
    ramp = 1.0 - np.exp(-np.arange(1, horizon + 1) / 10.0)
    ref = free + ramp[:, None] * target[None, :]
    return {"u": u, "outputs": outputs, "ref": ref, "free": free}


def _key(name: str, params: dict) -> str:
    blob = json.dumps(
        {"name": name, "v": GENERATOR_VERSION, **params}, sort_keys=True
    ).encode()
    return f"{name}_{hashlib.sha1(blob).hexdigest()[:10]}"


def _cached(
    cache_dir: Path, name: str, params: dict, make, parts: tuple[str, ...]
) -> dict[str, Path]:
    cache_dir.mkdir(parents=True, exist_ok=True)
    stem = _key(name, params)
    paths = {p: cache_dir / f"{stem}_{p}.npy" for p in parts}
    if not all(path.exists() for path in paths.values()):
        arrays = make()
        for part, path in paths.items():
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, np.ascontiguousarray(arrays[part]))
            tmp.replace(path)
    return paths


def prepare_data(
    cache_dir: Path, *, n_train: int, n_test: int, seed: int = 0
) -> dict[str, str]:
    """Create (or reuse) every cached data file; return ``{name: path}``.

    ``lorenz_train`` holds ``n_train`` samples and ``lorenz_test`` the
    ``n_test`` samples that follow on the same trajectory (held-out data).
    """
    lorenz_params = {"n_train": n_train, "n_test": n_test, "seed": seed}

    def make_lorenz():
        traj = lorenz63(n_train + n_test, seed=seed)
        return {"train": traj[:n_train], "test": traj[n_train:]}

    files = {}
    for part, path in _cached(
        cache_dir, "lorenz63", lorenz_params, make_lorenz, ("train", "test")
    ).items():
        files[f"lorenz_{part}"] = str(path)

    def make_clf():
        tx, ty = noisy_sinusoids(20, seed=seed)
        vx, vy = noisy_sinusoids(100, seed=seed + 1)
        return {"train_x": tx, "train_y": ty, "test_x": vx, "test_y": vy}

    clf_parts = ("train_x", "train_y", "test_x", "test_y")
    for part, path in _cached(
        cache_dir, "sinusoids", {"seed": seed}, make_clf, clf_parts
    ).items():
        files[f"clf_{part}"] = str(path)

    for part, path in _cached(
        cache_dir,
        "plant",
        {"seed": seed},
        lambda: linear_plant(seed=seed),
        ("u", "outputs", "ref", "free"),
    ).items():
        files[f"plant_{part}"] = str(path)
    return files
