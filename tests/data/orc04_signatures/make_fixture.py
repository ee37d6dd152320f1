"""Record ORC 0.4's public constructor and training signatures.

Run in ORC 0.4's own environment (it also imports as ``orc``)::

    python -m venv /tmp/orc04 && /tmp/orc04/bin/pip install openreservoircomputing==0.4.0
    /tmp/orc04/bin/python tests/data/orc04_signatures/make_fixture.py

writes ``signatures.json`` next to this file: for every public class and
function of ORC's model and component modules, its parameters in order as
``[name, kind, default]`` (``default`` is ``null`` for a required parameter,
else :func:`describe` of the value). ``tests/test_orc_signatures.py`` checks
ours against it.
"""

from __future__ import annotations

import importlib
import inspect
import json
from pathlib import Path

MODULES = (
    "orc.forecaster",
    "orc.classifier",
    "orc.control",
    "orc.drivers",
    "orc.embeddings",
    "orc.readouts",
)


def describe(value) -> str:
    """A default as text that does not depend on the library: a class by its
    module and name, anything else by ``repr``."""
    if inspect.isclass(value):
        return f"{value.__module__}.{value.__qualname__}"
    return repr(value)


def parameters(obj) -> list:
    out = []
    for p in inspect.signature(obj).parameters.values():
        default = None if p.default is p.empty else describe(p.default)
        out.append([p.name, p.kind.name, default])
    return out


def main() -> None:
    record = {}
    for name in MODULES:
        module = importlib.import_module(name)
        for attr in sorted(dir(module)):
            obj = getattr(module, attr)
            public = not attr.startswith("_")
            if not public or not getattr(obj, "__module__", "").startswith("orc"):
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                record[f"{name}.{attr}"] = parameters(obj)
    path = Path(__file__).with_name("signatures.json")
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
