"""The shape of the code that issue 43 asks for, checked so it stays.

* no import cycle inside ``orc`` (imports inside functions count), checked
  with the project's shared tool when it is present beside the repository;
* importing the model families does not import matplotlib (plots are loaded
  on first use of ``orc.utils.visualization``);
* the version is written once, in ``orc._version``.
"""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CYCLES_TOOL = ROOT.parent / "shared" / "tools" / "import_cycles.py"


@pytest.mark.skipif(
    not CYCLES_TOOL.exists(),
    reason="the shared import_cycles tool is not beside the repo",
)
def test_no_import_cycles():
    out = subprocess.run(
        [sys.executable, str(CYCLES_TOOL), str(ROOT / "src"), "orc"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1].startswith("0 import cycle"), out.stdout


def test_models_do_not_import_matplotlib():
    # nor diffrax (0.7 s of a 2.4 s import of orc.forecaster): a CESN, the
    # data integrators and loading a CESN file import it when they run
    code = (
        "import sys\n"
        "import orc.forecaster, orc.classifier, orc.control, orc.regression\n"
        "import orc.io, orc.online, orc.metrics, orc.utils, orc.cli, orc.tune\n"
        "assert 'matplotlib' not in sys.modules, 'matplotlib imported'\n"
        "assert 'diffrax' not in sys.modules, 'diffrax imported'\n"
        "m = orc.forecaster.CESNForecaster(3, 20)\n"
        "assert 'diffrax' in sys.modules and type(m.solver).__name__ == 'Tsit5'\n"
        "from orc.utils import visualization\n"
        "assert 'matplotlib' in sys.modules\n"
        "import orc.utils as u\n"
        "assert u.visualization is visualization\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_version_written_once():
    import orc
    from orc._version import __version__

    assert orc.__version__ == __version__
    literal = f'"{__version__}"'
    holders = [
        p.relative_to(ROOT).as_posix()
        for p in (ROOT / "src").rglob("*.py")
        if literal in p.read_text()
    ]
    assert holders == ["src/orc/_version.py"]
