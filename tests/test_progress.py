"""Progress bar on long training: shown when asked, silent otherwise, exact totals."""

from __future__ import annotations

import io

import jax
import jax.numpy as jnp
import numpy as np

import orc
from _helpers import on_device
from orc import _progress

_U = np.sin(np.linspace(0, 200, 9000))[:, None] * np.array([1.0, 0.5, -0.3])
U = on_device(_U)  # slices below are taken in numpy: no eager programs


def test_bar_reports_every_block_and_the_total(capsys, monkeypatch):
    monkeypatch.setattr(_progress.ProgressBar, "min_interval", 0.0)
    esn = orc.forecaster.ESNForecaster(3, 40)
    orc.forecaster.train_RCForecaster(esn, U, progress=True)
    err = capsys.readouterr().err
    frames = [f for f in err.split("\r") if f.strip()]
    assert frames[-1].strip().startswith("training [")
    assert "100% 9000/9000" in frames[-1]
    # 9000 steps in blocks of 4096: at least one intermediate update before the end
    assert any("4096/9000" in f or "8192/9000" in f for f in frames)


def test_multi_sequence_and_controller_totals(capsys):
    esn = orc.forecaster.ESNForecaster(3, 30)
    orc.forecaster.train_RCForecaster(
        esn,
        jnp.asarray(_U[:6000].reshape(2, 3000, 3)),
        multi_sequence=True,
        progress=True,
    )
    assert "100% 6000/6000" in capsys.readouterr().err
    ctrl = orc.control.ESNController(2, 1, 30)
    y, u = jnp.asarray(_U[:-1, :2]), jnp.asarray(_U[1:, 2:])
    orc.control.train_RCController(ctrl, y, u, progress=True)
    assert "100% 8999/8999" in capsys.readouterr().err


def test_silent_by_default_when_not_a_terminal_or_disabled(capsys, monkeypatch):
    esn = orc.forecaster.ESNForecaster(3, 30)
    orc.forecaster.train_RCForecaster(esn, U)  # stderr is captured: not a terminal
    orc.forecaster.train_RCForecaster(esn, U, progress=False)
    monkeypatch.setenv("ORC_PROGRESS", "0")
    orc.forecaster.train_RCForecaster(esn, U, progress=True)
    assert capsys.readouterr().err == ""


def test_resolve_rules(monkeypatch):
    monkeypatch.delenv("ORC_PROGRESS", raising=False)
    assert _progress.resolve(True, 10) and not _progress.resolve(False, 10**9)
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    assert not _progress.resolve(None, 10**9)


def test_under_outer_jit_no_bar_and_same_result():
    esn = orc.forecaster.ESNForecaster(3, 30)
    a, Ra = jax.jit(
        lambda m, u: orc.forecaster.train_RCForecaster(m, u, progress=True)
    )(esn, U)
    b, Rb = orc.forecaster.train_RCForecaster(esn, U, progress=False)
    np.testing.assert_allclose(Ra, Rb, rtol=1e-12, atol=1e-12)


def test_bar_text():
    s = io.StringIO()
    bar = _progress.ProgressBar(200, "work", stream=s, width=10)
    with bar:
        bar.update(100)
        bar.update(50)  # never goes backwards
    out = s.getvalue()
    assert "work [#####.....]  50% 100/200" in out
    assert out.rstrip().endswith("s") and "100% 200/200" in out
