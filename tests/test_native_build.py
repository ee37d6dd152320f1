"""The native kernels are built by the install and loaded as a module.

Nothing is compiled at run time, no shared library is loaded from a user
cache, and compiled programs hold no process-specific addresses (so JAX's
persistent compilation cache can hit across processes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
import orc._config
from orc import _native

NATIVE_OFF = os.environ.get("ORC_NATIVE") == "0"


def _run(code: str, env_extra: dict | None = None, **kw) -> str:
    # the CPU kernels' programs, also where a GPU is the default device
    env = {**os.environ, "JAX_PLATFORMS": "cpu", **(env_extra or {})}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        **kw,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.skipif(NATIVE_OFF, reason="ORC_NATIVE=0: the XLA path is under test")
def test_kernels_are_the_installed_extension_module():
    config = _native.native_config()
    assert config["available"], config["reason"]
    so = Path(config["file"]).resolve()
    # orc/_native/_kernels.<abi>.so inside the installed package
    assert so.name.startswith("_kernels.") and so.suffix in (".so", ".pyd")
    assert so.parent.name == "_native" and so.parent.parent.name == "orc"
    cache = Path(os.environ.get("ORC_CACHE_DIR", Path.home() / ".cache" / "orc"))
    assert cache.resolve() not in so.parents
    assert all(config["routines"].values()), config["routines"]
    # the run-time builder and its cache are gone
    for name in ("_build", "_cache_dir", "_compiler"):
        assert not hasattr(_native, name)


@pytest.mark.skipif(NATIVE_OFF, reason="ORC_NATIVE=0: the XLA path is under test")
def test_no_compiler_or_writable_home_needed_at_run_time(tmp_path):
    # no compiler on PATH, an unwritable home and cache: the kernels still
    # load (they were compiled at install), and training runs natively
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o500)
    code = (
        "import jax; jax.config.update('jax_enable_x64', True)\n"
        "import numpy as np, jax.numpy as jnp, orc\n"
        "from orc import _native\n"
        "assert _native.native_available(), _native.native_config()\n"
        "m = orc.forecaster.ESNForecaster(3, 80, seed=0)  # >= GRAM_KERNEL_MIN_FEATURES\n"
        "U = jnp.asarray(np.random.default_rng(0).normal(size=(200, 3)))\n"
        "m, R = orc.forecaster.train_RCForecaster(m, U)\n"
        "print(float(jnp.abs(m.readout.wout).sum()))\n"
    )
    env = {
        "PATH": str(tmp_path / "empty"),
        "HOME": str(home),
        "ORC_CACHE_DIR": str(home / "cache"),
        "CXX": "/nonexistent/c++",
    }
    out = _run(code, env)
    assert float(out) > 0
    assert not (home / "cache").exists()


_PROGRAM = """
import hashlib, jax, numpy as np, jax.numpy as jnp
jax.config.update('jax_enable_x64', True)
import orc
m = orc.forecaster.ESNForecaster(3, 80, seed=0)  # >= GRAM_KERNEL_MIN_FEATURES
U = jnp.asarray(np.random.default_rng(0).normal(size=(200, 3)))
train = jax.jit(lambda m, U: orc.forecaster.train_RCForecaster(m, U)[0].readout.wout)
text = train.lower(m, U).as_text()
print(hashlib.sha256(text.encode()).hexdigest(), "orc_esn_fit" in text, "syrk" in text)
"""


@pytest.mark.skipif(NATIVE_OFF, reason="ORC_NATIVE=0: the XLA path is under test")
def test_training_program_is_the_same_in_every_process():
    # BLAS/LAPACK routines are set at import, not passed as call attributes:
    # two processes lower byte-identical programs (what the persistent
    # compilation cache and jax.export need)
    first = _run(_PROGRAM).split()
    second = _run(_PROGRAM).split()
    assert first[1] == "True", "the fused native fit is not in the program"
    assert first[2] == "False", "a BLAS routine is named in the program"
    assert first[0] == second[0]


def test_show_config_and_cli_info(capsys):
    orc.show_config()
    out = capsys.readouterr().out
    assert out.startswith(f"orc {orc.__version__}")
    config = _native.native_config()
    if config["available"]:
        assert "native kernels installed and registered" in out
        assert config["ell"] in out
    else:
        assert "native kernels OFF" in out and config["reason"] in out
    cli = _run("from orc.cli import main; raise SystemExit(main(['info']))")
    assert "native kernels" in cli and "BLAS" in cli
    json.dumps(orc._config.config())  # plain data


def test_show_config_on_a_gpu_says_what_runs_there(capsys, monkeypatch):
    # on a CPU machine: the report of a process whose default device is a GPU
    real = orc._config.config()
    orc.show_config()
    if real["platform"] == "cpu":
        assert "serve the CPU" not in capsys.readouterr().out
        assert real["gpu_forecast"].startswith("the unrolled scan (no GPU")
    monkeypatch.setattr(
        orc._config,
        "config",
        lambda: {
            **real,
            "platform": "cuda",
            "devices": ["cuda:0"],
            "gpu_forecast": "one thread-block cluster ...",
        },
    )
    orc.show_config()
    out = capsys.readouterr().out
    assert "JAX platform   cuda: cuda:0" in out
    assert "on cuda" in out and "native kernels below serve the CPU" in out
    assert "GPU forecast   one thread-block cluster ..." in out
    assert f"unrolled {orc._strategy.DEVICE_UNROLL} steps" in out
    assert "no TF32" in out


def test_show_config_says_how_a_gpu_forecast_runs(monkeypatch):
    monkeypatch.setattr(orc._kernels, "_gpu_has_clusters", lambda: True)
    if not _native.native_available():
        assert "built without" in orc._config._gpu_forecast()
        return
    monkeypatch.setitem(_native._state, "nvrtc_found", False)
    assert orc._config._gpu_forecast() == (
        "the unrolled scan (no NVRTC library found to compile its kernel)"
    )
    monkeypatch.setitem(_native._state, "nvrtc_found", True)
    text = orc._config._gpu_forecast()
    assert text.startswith("one thread-block cluster")
    assert str(orc._kernels.CLUSTER_MAX_NONZEROS) in text and "NVRTC" in text


def test_a_stale_build_without_a_target_takes_the_xla_path(monkeypatch):
    # an editable install not rebuilt since a kernel was added registers
    # fewer targets than the Python side knows: those callers must not name
    # a target XLA cannot find
    if not _native.native_available():
        pytest.skip("native kernels off")
    name = _native.column_quantiles_target("float64")
    assert name in _native.target_names()
    monkeypatch.setitem(_native._state, "targets", _native._state["targets"] - {name})
    assert _native.column_quantiles_target("float64") is None
    from orc.classifier.train import column_quantiles

    x = jnp.asarray(np.random.default_rng(0).standard_normal((50, 4)))
    q = jnp.asarray((0.25, 0.75))
    text = jax.jit(column_quantiles).lower(x, q).as_text()
    assert "orc_column_quantiles" not in text
    np.testing.assert_array_equal(column_quantiles(x, q), jnp.quantile(x, q, axis=0))
