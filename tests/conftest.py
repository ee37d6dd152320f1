"""Test configuration: float64 on and strict dtype promotion, as DESIGN §5 asks.

Both are switched on here, in the test process, never by the library itself.
"""

import gc
import os
import pwd
import shutil
import socket
import subprocess
import tempfile

# XLA's default code generation, as users get it. Measured and rejected
# (2026-11-28, jaxlib 0.10.2): --xla_cpu_use_fusion_emitters=false cuts the
# suite's compile time by ~40% but changes results. Most programs kept their
# bits, but the default NVAR's ill-conditioned KS fit (8385 features) gave
# window errors 0.83, 0.29 and a divergence instead of 1.15, 0.80, 0.13.
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=true")

# A persistent compilation cache per test process for the subprocesses it
# starts (docs pages, command-line runs, reproducibility checks), which
# inherit it: a program one subprocess compiled is loaded by the next. One
# directory per xdist worker under one per run, created empty and removed at the end of the run: no run reads
# another's programs, and no two processes use a directory at the same time
# (a test waits for its subprocesses), which matters because jax writes cache
# entries in place and locks them only when the cache has a size limit, whose
# eviction scans the whole directory at every write (a shared, locked cache
# made the suite twice as slow). (_helpers.count_compiles counts a program
# loaded from the cache as a compilation.)
# A cache the user set (JAX_COMPILATION_CACHE_DIR) is left as it is.
# The test processes themselves do not write to it (switched off below, after
# the import): with every program serialised, a worker that had compiled
# some thousand programs crashed twice inside XLA's executable serialisation
# (jax 0.10.2, compilation_cache.put_executable_and_time; 2026-11-26 and
# 2026-11-27) and took its xdist run down; the cache saved only ~6% of a
# worker's time. The subprocesses, short-lived, still share their programs.
_CACHE_OWNER = not {"ORC_TEST_JAX_CACHE", "JAX_COMPILATION_CACHE_DIR"} & set(os.environ)
if _CACHE_OWNER:
    os.environ["ORC_TEST_JAX_CACHE"] = tempfile.mkdtemp(prefix="orc-test-jax-cache-")
if "ORC_TEST_JAX_CACHE" in os.environ:  # the run's (inherited by the workers)
    os.environ["JAX_COMPILATION_CACHE_DIR"] = os.path.join(
        os.environ["ORC_TEST_JAX_CACHE"], os.environ.get("PYTEST_XDIST_WORKER", "main")
    )
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    # the command line's own cache ($ORC_CACHE_DIR/jax, default ~/.cache/orc)
    # for the `orc` subprocesses: the run's too, never the user's home (a
    # warm home cache also made local runs faster than CI's cold ones)
    # (one a user set is left as it is; ours is one per process, as above)
    if "ORC_CACHE_DIR" not in os.environ or os.environ.get("ORC_TEST_CLI_CACHE"):
        os.environ["ORC_TEST_CLI_CACHE"] = "1"
        os.environ["ORC_CACHE_DIR"] = os.environ["JAX_COMPILATION_CACHE_DIR"] + "-cli"

import jax  # noqa: E402
import pytest  # noqa: E402

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_enable_compilation_cache", False)  # see above
jax.config.update("jax_numpy_dtype_promotion", "strict")


def pytest_report_header(config):
    """The test log says which implementation runs (native kernels or XLA)."""
    from orc._native import native_config

    native = native_config()
    if not native["available"]:
        return f"orc native kernels: OFF ({native['reason']})"
    return (
        f"orc native kernels: ON ({native['file']}; sparse rows {native['ell']}, "
        f"tanh {native['tanh']}, {native['threads']} threads)"
    )


def _memory_maps() -> int | None:
    """The number of memory mappings of this process (Linux), else None."""
    try:
        with open("/proc/self/maps", "rb") as f:
            return sum(1 for _ in f)
    except OSError:
        return None


def _map_limit() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except (OSError, ValueError):
        return 65530


def pytest_runtest_teardown(item, nextitem):
    """Between test files, JAX's compiled programs are dropped once the
    process holds half the memory mappings the kernel allows.

    Each program XLA compiles for the CPU stays loaded while its function
    lives (orc's entry points live as long as the process) and holds ~18
    mappings (code and data sections); the kernel's limit
    (``vm.max_map_count``, 65530 by default) is reached after ~3600 live
    programs, and a test process compiles 4000-5000: the next mapping fails
    and XLA aborts the process (seen 2026-11-27 in a full run, a worker
    aborted inside ``backend_compile_and_load``; probably the earlier aborts
    in the executable serialisation too). A user's process that compiles
    thousands of programs meets the same limit; the suite compiles far more
    distinct programs than any application."""
    if nextitem is not None and nextitem.module is item.module:
        return
    maps = _memory_maps()
    if maps is not None and maps > _map_limit() // 2:
        jax.clear_caches()
        gc.collect()


# -- nothing heavy is compiled when a file is collected

#: Compilation a test file may do when it is imported (seconds of XLA): every
#: xdist worker imports every file, so what a module computes at import is
#: paid once per worker, also by the workers that run none of its tests
#: (a file that trained six models at import cost each of them ~8 s; one
#: that integrated orc.data's Lorenz63 0.7-3 s). Today's files compile at
#: most 0.06 s each when imported (transfers, a native probe); build models
#: and data in fixtures or in a ``functools.cache`` called from the tests.
COLLECT_COMPILE_LIMIT_S = 0.5
_collecting: dict = {"file": None, "seconds": {}, "programs": {}}


def _compile_listener(event, duration, **kwargs):
    where = _collecting["file"]
    if where is not None and event == "/jax/core/compile/backend_compile_duration":
        _collecting["seconds"][where] = (
            _collecting["seconds"].get(where, 0.0) + duration
        )
        name = kwargs.get("fun_name", "?")
        _collecting["programs"].setdefault(where, []).append((duration, name))


# A process's first program on a GPU pays the backend's start (seconds: the
# CUDA context, the PTX tools), which would be charged to the first test file
# that compiles anything when imported; it is paid here instead.
if jax.default_backend() != "cpu":
    jax.block_until_ready(jax.jit(lambda x: x + 1)(jax.numpy.zeros(())))


jax.monitoring.register_event_duration_secs_listener(_compile_listener)


def pytest_collectstart(collector):
    if isinstance(collector, pytest.Module):
        _collecting["file"] = collector.nodeid


def pytest_collectreport(report):
    if _collecting["file"] == report.nodeid:
        _collecting["file"] = None


def pytest_runtest_setup(item):
    """A test of a file that compiled more than ``COLLECT_COMPILE_LIMIT_S``
    when imported fails, saying so (in every worker: each imported it)."""
    where = item.nodeid.split("::")[0]
    seconds = _collecting["seconds"].get(where, 0.0)
    if seconds > COLLECT_COMPILE_LIMIT_S:
        pytest.fail(
            f"{where} compiled JAX programs for {seconds:.1f} s when it was "
            f"imported (over COLLECT_COMPILE_LIMIT_S = {COLLECT_COMPILE_LIMIT_S} s, "
            "tests/conftest.py): build its models and data in fixtures or in a "
            "functools.cache that the tests call. The longest: "
            + ", ".join(
                f"{name} {t:.2f} s"
                for t, name in sorted(_collecting["programs"].get(where, []))[::-1][:6]
            ),
            pytrace=False,
        )


def pytest_unconfigure(config):
    if _CACHE_OWNER:
        shutil.rmtree(os.environ["ORC_TEST_JAX_CACHE"], ignore_errors=True)


# -- a PostgreSQL server (tests/test_tune_study.py, tests/test_cli_tune_workers.py)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_url():
    """A PostgreSQL server on loopback from the system's binaries, in a
    temporary folder, for the test run (each test uses studies of its own
    names); as root, run as the unprivileged user ``nobody`` (PostgreSQL
    refuses to run as root). Skipped without the server's binaries or the
    psycopg2 driver."""
    initdb, pg_ctl = shutil.which("initdb"), shutil.which("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl) on PATH")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        pytest.skip('no PostgreSQL driver: pip install "orc[tune-postgres]"')
    base = tempfile.mkdtemp(prefix="orc-pg-")  # in /tmp: the server user reads it
    who = {}
    if os.geteuid() == 0:
        try:
            user = pwd.getpwnam("nobody")
        except KeyError:
            shutil.rmtree(base)
            pytest.skip("running as root with no user 'nobody' to run PostgreSQL as")
        os.chown(base, user.pw_uid, user.pw_gid)
        # set in the child by subprocess itself (no Python runs after fork)
        who = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}

    def as_server(*args):
        return subprocess.run(
            args, cwd=base, capture_output=True, text=True, timeout=120, **who
        )

    data = os.path.join(base, "data")
    port = _free_port()
    init = as_server(initdb, "-D", data, "-U", "postgres", "--auth=trust",
                     "--no-sync", "--no-locale", "-E", "UTF8")  # fmt: skip
    assert init.returncode == 0, init.stderr
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off "
               "-c max_connections=50")  # fmt: skip
    start = as_server(pg_ctl, "-D", data, "-l", os.path.join(base, "server.log"),
                      "-w", "-t", "60", "-o", options, "start")  # fmt: skip
    assert start.returncode == 0, start.stdout + start.stderr
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        as_server(pg_ctl, "-D", data, "-m", "immediate", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)
