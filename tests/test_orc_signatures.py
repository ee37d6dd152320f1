"""ORC 0.4's public signatures, parameter by parameter, and their defaults
written once.

``tests/data/orc04_signatures/signatures.json`` was recorded from ORC 0.4 in
its own environment (``make_fixture.py`` there). ORC users call these classes
and functions by position and by name, so for each one ORC's parameters must
stand in ours in the same order, with the same kind (positional or keyword-only)
and default. Ours may add parameters only after ORC's (``construction=``),
where no ORC call can reach them by position.

The constructors spell their signatures out in the source, and each default
value stands once in ``src/orc``, in ``orc._defaults``: the constructors, the
command line and the scikit-learn estimators take it from there.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import json
import re
import sys
import textwrap
from pathlib import Path

import pytest

from orc import _defaults

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

    # Python's own message for a written-out signature: ESNForecaster.__init__()
    with pytest.raises(
        TypeError, match=r"ESNForecaster\.__init__\(\) .*unexpected keyword.*leak\b"
    ):
        ESNForecaster(3, 20, leak=0.5)
    with pytest.raises(
        TypeError, match=r"ESNForecaster\.__init__\(\) missing .*res_dim"
    ):
        ESNForecaster(3)
    assert inspect.signature(ESNForecaster).parameters["leak_rate"].default == 0.6


# ------------------------------------------------------- defaults written once
SRC = Path(__file__).resolve().parents[1] / "src" / "orc"
FAMILIES = {name: getattr(_defaults, name) for name in _defaults.__all__}
#: The components' names (and the command line's) for the models' hyperparameters.
ALIASES = {
    "leak": ("leak_rate",),
    "spectral_radius": ("Wr_spectral_radius",),
    "density": ("Wr_density",),
    "scaling": ("embedding_scaling",),
    "layers": ("n_layers",),
    "stride": ("s",),
    "chunks": ("chunks", "ensemble_chunks"),
}


def _declared(families=tuple(FAMILIES)) -> dict[str, set]:
    """Parameter name -> the values the declaration gives it (any of ``families``)."""
    out: dict[str, set] = {}
    for family in (FAMILIES[name] for name in families):
        for field in dataclasses.fields(family):
            out.setdefault(field.name, set()).add(getattr(family, field.name))
    for alias, names in ALIASES.items():
        out.setdefault(alias, set()).update(*(out.get(n, ()) for n in names))
    return out


#: The constructors of the model families: every default they have is the
#: declaration's (``dtype``'s ``jnp.float64`` and ``None`` apart).
CONSTRUCTORS = [
    "orc.forecaster.ESNForecaster",
    "orc.forecaster.CESNForecaster",
    "orc.forecaster.EnsembleESNForecaster",
    "orc.forecaster.DeepESNForecaster",
    "orc.forecaster.NVARForecaster",
    "orc.classifier.ESNClassifier",
    "orc.control.ESNController",
    "orc.regression.ESNRegressor",
    "orc.drivers.ParallelESNDriver",
    "orc.drivers.ESNDriver",
    "orc.drivers.ParallelTaylorDriver",
    "orc.drivers.TaylorDriver",
    "orc.drivers.DeepESNDriver",
    "orc.embeddings.ParallelLinearEmbedding",
    "orc.embeddings.LinearEmbedding",
    "orc.embeddings.EnsembleLinearEmbedding",
    "orc.readouts.ParallelLinearReadout",
    "orc.readouts.ParallelQuadraticReadout",
    "orc.readouts.ParallelNonlinearReadout",
    "orc.readouts.EnsembleLinearReadout",
]
#: Front ends whose declared hyperparameters come from the declaration (their
#: other parameters, such as the estimators' ``spinup``, are their own).
FRONT_ENDS = ["orc.sklearn.ESNClassifier", "orc.sklearn.ESNRegressor"]
#: The families of the models' hyperparameters (the rest are the metrics',
#: the numerical helpers' and the tuning's).
MODEL_FAMILIES = ("ESN", "CLASSIFIER", "CONTROLLER", "REGRESSOR", "NVAR")


def _reference(node) -> tuple[str, str] | None:
    """``(family, field)`` of a default written ``ESN.leak_rate``."""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in FAMILIES
    ):
        return node.value.id, node.attr
    return None


def _parameter_defaults(args: ast.arguments) -> list[tuple[str, ast.expr]]:
    """``(name, default)`` of the parameters of ``args`` that have one."""
    positional = args.posonlyargs + args.args
    with_default = positional[len(positional) - len(args.defaults) :]
    out = [(a.arg, d) for a, d in zip(with_default, args.defaults, strict=True)]
    keyword = zip(args.kwonlyargs, args.kw_defaults, strict=True)
    return out + [(a.arg, d) for a, d in keyword if d is not None]


def _source_signature(function) -> tuple[list[str], dict[str, ast.expr]]:
    """The parameter names of ``function`` and their defaults, read from its
    source (which must be a plain, undecorated ``def``)."""
    (node,) = ast.parse(textwrap.dedent(inspect.getsource(function))).body
    assert isinstance(node, ast.FunctionDef), function
    assert not node.decorator_list, f"{function.__qualname__} is decorated"
    args = node.args
    names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs]
    return names, dict(_parameter_defaults(args))


@pytest.mark.parametrize("qualname", CONSTRUCTORS + FRONT_ENDS)
def test_constructor_signatures_are_written_out(qualname):
    if qualname.startswith("orc.sklearn"):
        pytest.importorskip("sklearn")
    cls = _ours(qualname)
    init = cls.__init__
    assert "__signature__" not in vars(init) and not hasattr(init, "__wrapped__")
    names, written = _source_signature(init)
    signature = inspect.signature(cls).parameters
    assert names[1:] == list(signature), qualname  # the source is the signature
    declared = _declared(MODEL_FAMILIES)
    checked = 0
    for name, node in written.items():
        value = signature[name].default
        ref = _reference(node)
        if ref is not None:
            family, field = ref
            assert value == getattr(FAMILIES[family], field), (qualname, name)
            checked += 1
        elif qualname in FRONT_ENDS:
            assert name not in declared or name == "dtype", (qualname, name)
        else:
            exempt = (qualname, name) in DELIBERATE_DEFAULTS or value is None
            assert exempt or ast.unparse(node) == "jnp.float64", (qualname, name)
    assert checked, qualname


def _number(node):
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _number(node.operand)
        return None if value is None else -value
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def _default_positions(tree):
    """``(name, expression)`` of every place in a module that states a
    default: a parameter's default, a class field's, a click option's
    ``default=`` (named by its ``--flag``) and ``.get("name", default)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _parameter_defaults(node.args)
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and item.value is not None:
                    yield ast.unparse(item.target), item.value
        elif isinstance(node, ast.Call):
            flags = [
                a.value
                for a in node.args
                if isinstance(a, ast.Constant) and str(a.value).startswith("--")
            ]
            for keyword in node.keywords:
                if keyword.arg == "default" and flags:
                    yield flags[0][2:].replace("-", "_"), keyword.value
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr == "get":
                if len(node.args) == 2 and isinstance(node.args[0], ast.Constant):
                    yield str(node.args[0].value), node.args[1]


#: Numbers in a default position that equal a declared default but are
#: another quantity, ``(file, name) -> why``.
OTHER_QUANTITIES = {
    ("metrics.py", "test_size"): "memory capacity's held-out fraction, 0.2",
    ("data/datasets.py", "a"): "a parameter of a dynamical system, 0.2",
    ("data/datasets.py", "x0"): "the logistic map's initial value, 0.5",
    ("data/datasets.py", "a1"): "NARMA's first coefficient, 0.3",
    ("metrics.py", "beta"): "memory capacity's ridge strength, 1e-4",
    ("online.py", "delta"): "RLS's initial regularisation 1e-6 (reservoirpy's)",
    ("control/base.py", "rtol"): "the control optimiser's tolerance, 1e-7",
    ("control/base.py", "atol"): "the control optimiser's tolerance, 1e-7",
    ("data/datasets.py", "b"): "a parameter of a dynamical system, 0.1",
    ("data/datasets.py", "c"): "a parameter of a dynamical system, 0.1",
    ("data/integrators.py", "a"): "a parameter of a dynamical system, 0.1",
    ("data/integrators.py", "b"): "a parameter of a dynamical system, 0.1",
    ("data/datasets.py", "a2"): "NARMA's second coefficient, 0.05",
    ("tune/_refine.py", "learning_rate"): "the gradient refinement's step, 0.05",
}


def _restated_defaults(root: Path) -> list[str]:
    """Where a file under ``root`` (other than ``_defaults.py``) states a
    declared default as a number: a default of a declared name (or of one
    of its ``ALIASES``) equal to a value the declaration gives it, or any
    default equal to a declared non-integer value. Zero and one (``seed=0``,
    ``chunks=1``: none, one) are written where they are meant."""
    declared = _declared()
    floats = {v for vs in declared.values() for v in vs if type(v) is float}
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "_defaults.py":
            continue
        where = path.relative_to(root).as_posix()
        for name, node in _default_positions(ast.parse(path.read_text())):
            value = _number(node)
            if value is None or value in (0, 1):
                continue
            by_name = value in declared.get(name, ())
            if by_name or (value in floats and (where, name) not in OTHER_QUANTITIES):
                found.append(f"{where}:{node.lineno} {name}={value!r}")
        text = path.read_text()
        for name, values in declared.items():
            for value in values:
                if type(value) not in (int, float) or value in (0, 1):
                    continue
                spelled = {repr(value), f"{value:g}", re.sub(r"e-0", "e-", repr(value))}
                number = "|".join(re.escape(v) for v in spelled)
                said = rf"\b{name}\b[^\n]*?\bdefault:?\s*(?:``)?(?:{number})(?![\w.])"
                for match in re.finditer(said, text):
                    line = text.count("\n", 0, match.start()) + 1
                    found.append(f"{where}:{line} {match.group(0)!r}")
    return found


def test_each_default_is_written_once():
    assert _restated_defaults(SRC) == []


#: Names that default to the same literal in two places by coincidence, not
#: as one default written twice: the checkers' ``name`` (the argument each
#: checks), and constants of different dynamical systems.
COINCIDENCES = {
    ("name", "in_seq"),
    ("name", "res_state"),
    ("a", 10.0),  # hyper_lorenz63's and hyper_xu's own a
    ("b", 0.1),  # rossler's and mackey_glass's own b
    ("rtol", 1e-7),  # compute_control's tolerances, both 1e-7
    ("atol", 1e-7),
    # the regressor's and the classifier estimator's, each measured on its tasks
    ("embedding_scaling", 0.4),
}


def _repeated_literals(root: Path) -> dict:
    """``(name, literal) -> places`` for every literal default (a constant
    other than None, the booleans, 0, 1 and "") that stands under one name in
    more than one place below ``root``, any family or none."""
    places: dict = {}
    for path in sorted(root.rglob("*.py")):
        where = path.relative_to(root).as_posix()
        for name, node in _default_positions(ast.parse(path.read_text())):
            if not isinstance(node, ast.Constant):
                continue
            value = node.value
            if value is None or isinstance(value, bool) or value in (0, 1, ""):
                continue
            places.setdefault((name, value), []).append(f"{where}:{node.lineno}")
    return {
        key: where
        for key, where in places.items()
        if len(where) > 1 and key not in COINCIDENCES
    }


def test_no_default_literal_stands_in_two_places():
    """Defaults outside the families too (the metrics' threshold, the
    searches' ridge points, ...): a second place names the first."""
    assert _repeated_literals(SRC) == {}


def test_a_repeated_literal_is_found(tmp_path):
    (tmp_path / "a.py").write_text("def f(x, threshold=0.4, *, axis='time'): ...\n")
    (tmp_path / "b.py").write_text(
        "class C:\n    threshold: float = 0.4\n    axis: str = 'time'\n    n: int = 1\n"
    )
    assert _repeated_literals(tmp_path) == {
        ("threshold", 0.4): ["a.py:1", "b.py:2"],
        ("axis", "time"): ["a.py:1", "b.py:3"],
    }


def test_a_restated_default_is_found(tmp_path):
    """The check above can fail: a default written again is found, in a
    signature, a click option, a ``.get`` fallback or a docstring."""
    (tmp_path / "mod.py").write_text(
        textwrap.dedent(
            '''
            import click

            def driver(res_dim, leak=0.6, *, scale=0.08):
                """leak_rate : float, default 0.6"""

            option = click.option("--spectral-radius", default=0.8)
            density = {}.get("Wr_density", 0.02)
            seed, chunks = driver(1, seed=0), 1
            '''
        )
    )
    found = _restated_defaults(tmp_path)
    assert [f.split()[0] for f in found] == [
        "mod.py:4",
        "mod.py:4",
        "mod.py:7",
        "mod.py:8",
        "mod.py:5",
    ], found


def test_the_command_line_shows_the_declared_defaults():
    from click.testing import CliRunner

    from orc._defaults import ESN
    from orc.cli import ESN_ARGS, cli, train

    options = {p.name: p for p in train.params}
    for option, argument in ESN_ARGS.items():
        assert options[option].default == getattr(ESN, argument), option
    assert options["layers"].default == ESN.n_layers
    shown = " ".join(CliRunner().invoke(cli, ["train", "--help"]).output.split())
    assert "[default: 0.6]" in shown and "[default: 8e-8; nvar 2.5e-6]" in shown


def test_estimators_take_the_models_defaults():
    """The regressor estimator takes its model's defaults; the classifier
    estimator its own declared recipe where it has one (the orc classifier
    keeps ORC 0.4's), the model's elsewhere."""
    pytest.importorskip("sklearn")
    from orc import classifier, regression, sklearn
    from orc._defaults import ESN, ESTIMATOR_CLASSIFIER

    recipe = {f.name: getattr(ESTIMATOR_CLASSIFIER, f.name)
              for f in dataclasses.fields(ESTIMATOR_CLASSIFIER)}  # fmt: skip
    for estimator, model, own in [
        (sklearn.ESNClassifier, classifier.ESNClassifier, recipe),
        (sklearn.ESNRegressor, regression.ESNRegressor, {}),
    ]:
        ours = inspect.signature(model).parameters
        theirs = inspect.signature(estimator).parameters
        shared = set(ours) & set(theirs) - {"dtype", "res_dim"}  # dtype: None there
        assert len(shared) >= 9
        for name in shared - set(own):
            assert theirs[name].default == ours[name].default, (estimator, name)
        for name, value in own.items():
            assert theirs[name].default == value, (estimator, name)
        assert theirs["res_dim"].default == ESN.res_dim
