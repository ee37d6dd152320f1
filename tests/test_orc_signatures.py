"""ORC 0.4's public signatures, parameter by parameter.

``tests/data/orc04_signatures/signatures.json`` was recorded from ORC 0.4 in
its own environment (``make_fixture.py`` there). ORC users call these classes
and functions by position and by name, so for each one ORC's parameters must
stand in ours in the same order, with the same kind (positional or keyword-only)
and default. Ours may add parameters only after ORC's (``construction=``),
where no ORC call can reach them by position.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "data" / "orc04_signatures"
sys.path.insert(0, str(FIXTURE))
from make_fixture import parameters  # noqa: E402  (ORC's recorder, run on ours)

sys.path.remove(str(FIXTURE))
ORC = json.loads((FIXTURE / "signatures.json").read_text())

_DTYPE = "jax.numpy.float64"

#: Defaults that differ from ORC 0.4's on purpose, each with its reason.
#: ORC's value is still accepted and gives ORC's model.
DELIBERATE_DEFAULTS = {
    # ORC 0.4: 50.0, which suits samples about 0.01 apart only; CESNs with it
    # leave the attractor on Mackey-Glass (dt 1) and KS (dt 0.25). "auto" is
    # ORC's 50 wherever 50 dt <= 5 (ORC's model bit for bit) and 0.5 / dt on
    # coarser samples (test_cesn_time_const.py).
    ("orc.forecaster.CESNForecaster", "time_const"): ("50.0", "'auto'"),
}


def _ours(qualname: str):
    module, name = qualname.rsplit(".", 1)
    return getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("qualname", sorted(ORC))
def test_orc_parameters_stand_in_ours_in_order(qualname):
    expected = ORC[qualname]
    ours = parameters(_ours(qualname))
    names = [p[0] for p in ours]
    orc_names = [p[0] for p in expected if p[1] != "VAR_KEYWORD"]
    assert names[: len(orc_names)] == orc_names, (qualname, names)
    by_name = {p[0]: p for p in ours}
    for name, kind, default in expected:
        if kind == "VAR_KEYWORD":  # ORC's **force_kwargs: ours must take any keyword
            assert any(p[1] == "VAR_KEYWORD" for p in ours), qualname
            continue
        assert by_name[name][1] == kind, (qualname, name, by_name[name][1], kind)
        if (qualname, name) in DELIBERATE_DEFAULTS:
            orcs, ours_now = DELIBERATE_DEFAULTS[qualname, name]
            assert (default, by_name[name][2]) == (orcs, ours_now), (qualname, name)
            continue
        assert by_name[name][2] == default, (qualname, name, by_name[name][2], default)
    # (ORC's parameters first, in order and of the same kinds: a parameter
    # of ours can only come after them, where no ORC call reaches it by
    # position)


def test_fixture_covers_the_constructors_users_call():
    for name in (
        "orc.forecaster.ESNForecaster",
        "orc.forecaster.CESNForecaster",
        "orc.forecaster.EnsembleESNForecaster",
        "orc.classifier.ESNClassifier",
        "orc.control.ESNController",
        "orc.drivers.ParallelESNDriver",
        "orc.embeddings.ParallelLinearEmbedding",
        "orc.readouts.ParallelLinearReadout",
    ):
        assert name in ORC
    assert ORC["orc.forecaster.ESNForecaster"][7] == [
        "dtype",
        "POSITIONAL_OR_KEYWORD",
        _DTYPE,
    ]


def test_a_call_outside_the_signature_names_the_class():
    from orc.forecaster import ESNForecaster

    with pytest.raises(
        TypeError, match=r"ESNForecaster\(\): .*unexpected keyword.*leak\b"
    ):
        ESNForecaster(3, 20, leak=0.5)
    with pytest.raises(TypeError, match=r"ESNForecaster\(\): missing .*res_dim"):
        ESNForecaster(3)
    assert inspect.signature(ESNForecaster).parameters["leak_rate"].default == 0.6
