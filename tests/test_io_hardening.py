"""Saving and loading where other users, odd files and edited files meet orc
(issue 47 items 3, 4 and 9): ``orc.save`` follows a symbolic link only where
Linux's protected-symlinks rule would and creates no directory for a link's
target; ``orc._native.nvrtc_library`` never returns a library planted in the
working directory; ``orc.load`` says what a path really is, reads only what
a header declares, and refuses files laid out otherwise than the version
they claim."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import os
import signal
import struct
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import orc
from orc.io import MAGIC, ModelFileError
from test_io_safety import forge, split

DATA = Path(__file__).parent / "data"
OTHER_UID = 12345  # an attacker
DIR_OWNER_UID = 23456  # the owner of the shared directory
VICTIM = b"# the victim's shell startup file\nexport SAFE=1\n"


@pytest.fixture(scope="module")
def model():
    return orc.forecaster.ESNForecaster(3, 20, seed=4)


def same(a, b) -> bool:
    la, lb = jax.tree.leaves(a), jax.tree.leaves(b)
    return jax.tree.structure(a) == jax.tree.structure(b) and all(
        x.dtype == y.dtype and bool(jnp.array_equal(x, y))
        for x, y in zip(la, lb, strict=True)
    )


# --------------------------------------------------------------------------- #
# Item 3: links planted by another user
# --------------------------------------------------------------------------- #


@pytest.fixture()
def shared(tmp_path):
    """A world-writable sticky directory like /tmp, owned by another user,
    and a victim file outside it. Needs root (to give files to other uids)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("giving a link to another uid (os.lchown) needs root")
    directory = tmp_path / "shared"
    directory.mkdir()
    os.chown(directory, DIR_OWNER_UID, DIR_OWNER_UID)
    directory.chmod(0o1777)
    home = tmp_path / "home"
    home.mkdir()
    victim = home / ".bashrc"
    victim.write_bytes(VICTIM)
    return directory, victim


def plant(link: Path, target, uid: int) -> Path:
    link.symlink_to(target)
    os.lchown(link, uid, uid)
    assert os.lstat(link).st_uid == uid
    return link


def test_a_link_planted_by_another_user_is_refused(shared, model):
    directory, victim = shared
    link = plant(directory / "model.orc", victim, OTHER_UID)
    with pytest.raises(PermissionError) as info:
        orc.save(link, model)
    message = str(info.value)
    assert str(link) in message and f"uid {OTHER_UID}" in message
    assert "world-writable sticky" in message and "protected_symlinks" in message
    assert info.value.errno == errno.EACCES
    assert victim.read_bytes() == VICTIM  # byte for byte
    assert sorted(p.name for p in victim.parent.iterdir()) == [".bashrc"]
    assert [p.name for p in directory.iterdir()] == ["model.orc"]  # no temporary
    assert link.is_symlink() and os.readlink(link) == str(victim)


def test_a_planted_link_to_a_directory_on_the_path_is_refused(shared, model):
    directory, victim = shared
    link = plant(directory / "models", victim.parent, OTHER_UID)
    with pytest.raises(PermissionError, match=r"models -> .*home"):
        orc.save(link / ".bashrc", model)
    with pytest.raises(PermissionError, match="refusing to follow"):
        orc.save(link / "new.orc", model)
    assert victim.read_bytes() == VICTIM
    assert sorted(p.name for p in victim.parent.iterdir()) == [".bashrc"]


def test_a_planted_dangling_link_creates_nothing(shared, model, tmp_path):
    directory, _ = shared
    target = tmp_path / "home" / "missing" / "deeper" / "x.orc"
    link = plant(directory / "model.orc", target, OTHER_UID)
    with pytest.raises(PermissionError, match="refusing to follow"):
        orc.save(link, model)
    assert not (tmp_path / "home" / "missing").exists()
    # the link's target in an existing directory: refused as well
    link.unlink()
    plant(link, tmp_path / "home" / "new.orc", OTHER_UID)
    with pytest.raises(PermissionError, match="refusing to follow"):
        orc.save(link, model)
    assert not (tmp_path / "home" / "new.orc").exists()


@pytest.mark.parametrize("owner", ["saver", "directory owner"])
def test_links_the_kernel_would_follow_are_followed(shared, model, tmp_path, owner):
    directory, _ = shared
    real = tmp_path / "home" / "real.orc"
    real.write_bytes(b"old")
    uid = os.geteuid() if owner == "saver" else DIR_OWNER_UID
    link = plant(directory / "model.orc", real, uid)
    assert orc.save(link, model) == link
    assert link.is_symlink() and same(orc.load(real), model)
    assert same(orc.load(link), model)


@pytest.mark.parametrize("mode", [0o777, 0o1755])
def test_the_rule_applies_only_in_world_writable_sticky_directories(
    shared, model, tmp_path, mode
):
    """Another user's link in a directory that is not both world-writable
    and sticky is followed, as the kernel does."""
    directory, _ = shared
    directory.chmod(mode)
    real = tmp_path / "home" / "real.orc"
    link = plant(directory / "model.orc", real, OTHER_UID)
    orc.save(link, model)
    assert same(orc.load(real), model)


def test_no_directory_is_created_for_a_links_target(tmp_path, model):
    missing = tmp_path / "elsewhere" / "sub"
    link = tmp_path / "model.orc"
    link.symlink_to(missing / "m.orc")
    with pytest.raises(FileNotFoundError, match="creates no directories") as info:
        orc.save(link, model)
    assert str(link) in str(info.value)
    assert not (tmp_path / "elsewhere").exists()
    # nor any a link's text names on the way
    (tmp_path / "real").mkdir()
    (tmp_path / "dirlink").symlink_to(tmp_path / "real" / "a" / "b")
    with pytest.raises(FileNotFoundError, match="creates no directories"):
        orc.save(tmp_path / "dirlink" / "m.orc", model)
    assert list((tmp_path / "real").iterdir()) == []
    # the directories of the path as given are created, also past a link
    # on it (like mkdir -p)
    (tmp_path / "dirlink").unlink()
    (tmp_path / "dirlink").symlink_to(tmp_path / "real")
    orc.save(tmp_path / "dirlink" / "c" / "m.orc", model)
    assert same(orc.load(tmp_path / "real" / "c" / "m.orc"), model)
    orc.save(tmp_path / "a" / "b" / "m.orc", model)
    assert same(orc.load(tmp_path / "a" / "b" / "m.orc"), model)
    # a dangling link (of one's own) whose target's directory exists is
    # followed: the target is created, as open(link, "w") would
    link.unlink()
    link.symlink_to(tmp_path / "real" / "new.orc")
    orc.save(link, model)
    assert same(orc.load(tmp_path / "real" / "new.orc"), model)


def test_relative_links_and_dotdot_resolve_as_the_kernel_does(
    tmp_path, model, monkeypatch
):
    (tmp_path / "x" / "y").mkdir(parents=True)
    (tmp_path / "x" / "up").symlink_to("y/..")  # -> x
    (tmp_path / "x" / "m.orc").symlink_to("y/m.orc")
    monkeypatch.chdir(tmp_path)
    orc.save(Path("x") / "up" / "up" / "m.orc", model)
    assert same(orc.load(tmp_path / "x" / "y" / "m.orc"), model)
    assert (tmp_path / "x" / "m.orc").is_symlink()


def test_save_refuses_link_loops_and_directories(tmp_path, model):
    loop = tmp_path / "loop.orc"
    loop.symlink_to(loop)
    with pytest.raises(OSError, match="symbolic link loop") as info:
        orc.save(loop, model)
    assert info.value.errno == errno.ELOOP
    with pytest.raises(IsADirectoryError, match="is a directory"):
        orc.save(tmp_path, model)
    (tmp_path / "file").write_bytes(b"x")
    with pytest.raises(NotADirectoryError, match="is not a directory"):
        orc.save(tmp_path / "file" / "m.orc", model)
    assert (tmp_path / "file").read_bytes() == b"x"


# --------------------------------------------------------------------------- #
# Item 4: NVRTC is never taken from the working directory
# --------------------------------------------------------------------------- #


def fake_library(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(b"not a library: nothing may dlopen it")
    return folder / name


@pytest.fixture()
def planted(tmp_path, monkeypatch):
    """A working directory holding NVRTC in every place a relative search
    would look: ./nvidia/..., ./rel/nvidia/... and ./lib; ``sys.path`` and
    ``LD_LIBRARY_PATH`` name it by relative entries and by its absolute path;
    no system library is found unless a test says so."""
    from orc import _native

    work = tmp_path / "work"
    for root in (work, work / "rel"):
        for folder in ("cu13/lib", "cuda_nvrtc/lib", "cu12/lib"):
            fake_library(root / "nvidia" / folder, "libnvrtc.so.13")
    fake_library(work / "lib", "libnvrtc.so.13")
    monkeypatch.chdir(work)
    monkeypatch.setattr(sys, "path", ["", ".", "rel", "./rel", str(work)])
    monkeypatch.setenv("LD_LIBRARY_PATH", os.pathsep.join(["", ".", "lib"]))
    monkeypatch.setattr(_native, "_SYSTEM_LIB_DIRS", ())
    import ctypes.util

    monkeypatch.setattr(ctypes.util, "find_library", lambda name: None)
    return work


def test_nvrtc_planted_in_the_working_directory_is_never_returned(planted, monkeypatch):
    import ctypes.util

    from orc import _native

    assert _native.nvrtc_library() is None
    # nor found as the system's library through relative LD_LIBRARY_PATH entries
    for name in ("libnvrtc.so.13", "./libnvrtc.so.13", "lib/libnvrtc.so.13"):
        monkeypatch.setattr(ctypes.util, "find_library", lambda _n, name=name: name)
        assert _native.nvrtc_library() is None, name


def test_nvrtc_from_an_installed_wheel_is_found(planted, tmp_path, monkeypatch):
    from orc import _native

    site = tmp_path / "site-packages"
    cu12 = fake_library(site / "nvidia" / "cuda_nvrtc" / "lib", "libnvrtc.so.12")
    # a CUDA 12 wheel listed after the planted relative entries
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    found = _native.nvrtc_library()
    assert found == os.path.realpath(cu12) and os.path.isabs(found)
    # a CUDA 13 wheel wins over CUDA 12, in any absolute entry
    other = tmp_path / "other-site"
    cu13 = fake_library(other / "nvidia" / "cu13" / "lib", "libnvrtc.so.13")
    fake_library(other / "nvidia" / "cu13" / "lib", "libnvrtc-builtins.so.13")
    monkeypatch.setattr(sys, "path", [*sys.path, str(other)])
    assert _native.nvrtc_library() == os.path.realpath(cu13)


def test_nvrtc_from_the_system_is_an_absolute_path(planted, tmp_path, monkeypatch):
    import ctypes.util

    from orc import _native

    system = tmp_path / "usr-lib"
    real = fake_library(system, "libnvrtc.so.12")
    fake_library(planted, "libnvrtc.so.12")  # in the working directory too
    monkeypatch.setattr(_native, "_SYSTEM_LIB_DIRS", ("relative/lib", str(system)))
    monkeypatch.setattr(ctypes.util, "find_library", lambda name: "libnvrtc.so.12")
    assert _native.nvrtc_library() == os.path.realpath(real)
    # an absolute LD_LIBRARY_PATH entry comes first, as for the dynamic loader
    mine = fake_library(tmp_path / "my-cuda", "libnvrtc.so.12")
    monkeypatch.setenv("LD_LIBRARY_PATH", os.pathsep.join([".", str(mine.parent)]))
    assert _native.nvrtc_library() == os.path.realpath(mine)


# --------------------------------------------------------------------------- #
# Item 9: what a path really is, sizes before reading, layouts of versions
# --------------------------------------------------------------------------- #


@contextmanager
def deadline(seconds: int):
    """Fail (instead of hanging the suite) if the block blocks."""

    def expire(*_):
        raise TimeoutError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def test_directories_fifos_devices_and_link_loops_are_named(tmp_path):
    fifo = tmp_path / "pipe.orc"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.orc"
    zero.symlink_to("/dev/zero")
    loop = tmp_path / "loop.orc"
    loop.symlink_to(loop)
    dangling = tmp_path / "dangling.orc"
    dangling.symlink_to(tmp_path / "gone.orc")
    with deadline(20):
        for read in (orc.load, orc.io.read_header, orc.io.read_metadata):
            with pytest.raises(IsADirectoryError, match="is a directory"):
                read(tmp_path)
            with pytest.raises(ModelFileError, match=r"not a regular file \(a FIFO"):
                read(fifo)
            with pytest.raises(
                ModelFileError, match=r"not a regular file \(a character device"
            ):
                read(zero)
            with pytest.raises(OSError, match="symbolic link loop") as info:
                read(loop)
            assert info.value.errno == errno.ELOOP
            with pytest.raises(FileNotFoundError, match="no such file.*gone.orc"):
                read(dangling)
            with pytest.raises(FileNotFoundError, match="no such file"):
                read(tmp_path / "absent.orc")


def test_a_fifo_swapped_in_after_the_check_does_not_block(tmp_path, monkeypatch):
    """The file is opened without blocking and checked again on its
    descriptor: a FIFO that replaced a checked file is refused at once."""
    fifo = tmp_path / "pipe.orc"
    os.mkfifo(fifo)
    regular = tmp_path / "regular"
    regular.write_bytes(b"x")
    real_stat = os.stat
    monkeypatch.setattr(
        os, "stat", lambda p, *a, **k: real_stat(regular if p == fifo else p, *a, **k)
    )
    with deadline(20), pytest.raises(ModelFileError, match="a FIFO"):
        orc.load(fifo)


@pytest.fixture()
def with_extra(tmp_path, model):
    """A model saved with an empty extra leaf, and the number of that leaf."""
    path = orc.save(tmp_path / "m.orc", model, extras={"empty": np.zeros((0, 3))})
    header, _, _ = split(path.read_bytes())
    return path, header["extras"]["empty"]


def npy_record(shape, descr="<f8") -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buf, {"descr": descr, "fortran_order": False, "shape": tuple(shape)}
    )
    return buf.getvalue()


@pytest.mark.parametrize("shape", [[0, 2**70], [2**30, 2**29, 0], [0, 2**63 - 1]])
def test_huge_empty_leaves_are_refused_naming_the_field(with_extra, shape):
    path, i = with_extra
    header, payload, _ = split(path.read_bytes())
    records = io.BytesIO(payload)
    arrays = [np.load(records) for _ in header["leaves"]]
    body = b""
    for j, a in enumerate(arrays):  # the record declares the shape too
        buf = io.BytesIO()
        np.lib.format.write_array(buf, a, allow_pickle=False)
        body += npy_record(shape) if j == i else buf.getvalue()
    header["leaves"][i]["shape"] = shape
    path.write_bytes(forge(header, body))
    with (
        deadline(20),
        pytest.raises(
            ModelFileError,
            match=rf"leaves\[{i}\]: shape .* is empty, but its other axes",
        ),
    ):
        orc.load(path)


def test_empty_leaves_within_bounds_round_trip(tmp_path, model):
    extras = {"a": np.zeros((0, 3)), "b": np.zeros((1000, 0), np.float32)}
    path = orc.save(tmp_path / "m.orc", model, extras=extras)
    loaded, got = orc.load(path, return_extras=True)
    assert same(loaded, model)
    assert {k: (v.shape, v.dtype) for k, v in got.items()} == {
        "a": ((0, 3), jnp.float64),
        "b": ((1000, 0), jnp.float32),
    }


def test_declared_sizes_are_checked_against_the_file(tmp_path, model):
    path = orc.save(tmp_path / "m.orc", model)
    data = path.read_bytes()
    header, payload, _ = split(data)
    # trailing bytes after the declared payload
    path.write_bytes(data + b"\0" * 100)
    with pytest.raises(ModelFileError, match="100 bytes after the .*-byte payload"):
        orc.load(path)
    with pytest.raises(ModelFileError, match="100 bytes after"):
        orc.io.read_header(path)
    # a payload larger than its leaves' records could be
    path.write_bytes(forge(header, payload + b"\0" * 10**6))
    with pytest.raises(ModelFileError, match="'payload_nbytes' is .* at most"):
        orc.load(path)
    # a header length beyond the file
    head = MAGIC + struct.pack("<Q", 10**9) + b"{}"
    path.write_bytes(head)
    with pytest.raises(ModelFileError, match="truncated .header incomplete"):
        orc.load(path)


SPARSE_SCRIPT = """
import json, os, resource, struct, sys
import jax
jax.config.update("jax_enable_x64", True)
import orc
from orc.io import ModelFileError

valid, trailing, long_payload, long_header = sys.argv[1:5]
orc.load(valid)  # threads and caches exist before the limit
with open("/proc/self/status") as f:
    vm = int(f.read().split("VmSize:")[1].split()[0]) * 1024
limit = max(vm + 2 * 2**30, 3 * 2**30)
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
assert os.path.getsize(trailing) > limit - vm
orc.load(valid)  # still loads under the limit
for path in (trailing, long_payload, long_header):
    try:
        orc.load(path)
        print("LOADED")
    except ModelFileError as err:
        print("REFUSED", err)
    except MemoryError:
        print("MEMORYERROR")
"""


def test_a_huge_sparse_file_is_refused_before_it_is_read(tmp_path, model):
    """6 GiB sparse files (a valid model and zeros after it; a header
    declaring a 6 GiB payload; a header length of 6 GiB) are refused under
    an address-space limit 2 GiB above what the process uses: nothing of
    their size is read or allocated."""
    six = 6 * 2**30
    valid = orc.save(tmp_path / "valid.orc", model)
    data = valid.read_bytes()
    header, payload, _ = split(data)
    trailing = tmp_path / "trailing.orc"
    trailing.write_bytes(data)
    long_payload = tmp_path / "long_payload.orc"
    blob = json.dumps(dict(header, payload_nbytes=six)).encode()
    head = MAGIC + struct.pack("<Q", len(blob)) + blob
    long_payload.write_bytes(head + hashlib.sha256(head).digest() + payload)
    long_header = tmp_path / "long_header.orc"
    long_header.write_bytes(MAGIC + struct.pack("<Q", six))
    for path in (trailing, long_payload, long_header):
        with open(path, "r+b") as f:
            f.truncate(six + 4096)
    proc = subprocess.run(
        [sys.executable, "-c", SPARSE_SCRIPT, valid, trailing, long_payload]
        + [long_header],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == 3, proc.stdout
    assert lines[0].startswith("REFUSED") and "bytes after the" in lines[0]
    assert lines[1].startswith("REFUSED") and "'payload_nbytes'" in lines[1]
    assert lines[2].startswith("REFUSED") and "declares a header of" in lines[2]


# --- a file's layout must be that of the version it claims --------------------


def relabel(data: bytes, version: int) -> bytes:
    """The bytes of a saved file with only its version edited."""
    old = b'"format_version": 3'
    assert data.count(old) == 1
    return data.replace(old, b'"format_version": %d' % version)


def v1_names(node):
    """The tree with every class and function named as format 1 did."""
    if isinstance(node, dict):
        out = {k: v1_names(v) for k, v in node.items()}
        if set(node) in ({"module", "fields"}, {"function"}):
            kind = "module" if "module" in node else "function"
            obj = orc.io.registered()[node[kind]]
            out[kind] = f"{obj.__module__}:{obj.__qualname__}"
        return out
    if isinstance(node, list):
        return [v1_names(v) for v in node]
    return node


def test_a_current_file_relabelled_as_an_older_version_is_refused(tmp_path, model):
    path = orc.save(tmp_path / "m.orc", model)
    data = path.read_bytes()
    header, payload, _ = split(data)
    # only the version byte edited: the header checksum is still there
    path.write_bytes(relabel(data, 1))
    with pytest.raises(
        ModelFileError, match="claims format version 1 but holds 32 bytes more"
    ):
        orc.load(path)
    # ... and removed: format 3's names are not format 1's
    path.write_bytes(forge(header, payload, version=1))
    with pytest.raises(
        ModelFileError, match=r"claims format version 1.*'orc\.forecaster\.ESN"
    ):
        orc.load(path)
    # ... and the names rewritten as format 1 wrote them: format 3's fields
    old = dict(header, tree=v1_names(header["tree"]))
    old["model_class"] = old["tree"]["module"]
    path.write_bytes(forge(old, payload, version=1))
    with pytest.raises(ModelFileError, match=r"only format 3 writes"):
        orc.load(path)
    # relabelled as format 2 with a valid checksum: format 3's fields again
    path.write_bytes(forge(header, payload, version=2))
    with pytest.raises(
        ModelFileError, match=r"claims format version 2 but .* only format 3 writes"
    ):
        orc.load(path)
    # a relabelled file edited further is refused the same way (the edit is
    # never reached), and the untouched file still loads
    edited = relabel(data, 1).replace(b'"locality": 0', b'"locality": 1')
    path.write_bytes(edited)
    with pytest.raises(ModelFileError, match="does not match its version"):
        orc.load(path)
    path.write_bytes(data)
    assert same(orc.load(path), model)


@pytest.mark.parametrize("name", ["esn", "cesn", "classifier"])
def test_format_1_files_still_load_bit_exactly(name, tmp_path):
    """The format-1 fixtures load with the leaves they hold, and saved again
    (format 3) round-trip bit for bit."""
    path = DATA / f"model_v1_{name}.orc"
    header, payload, version = split(path.read_bytes())
    assert version == 1
    model = orc.load(path)
    records = io.BytesIO(payload)
    stored = [np.load(records) for _ in header["leaves"]]
    values = np.asarray(model.driver.wr.values).reshape(-1)
    i = header["tree"]["fields"]["driver"]["fields"]["wr"]["fields"]["values"]
    np.testing.assert_array_equal(values, stored[i["leaf"]].reshape(-1))
    again = orc.save(tmp_path / "again.orc", model)
    assert same(orc.load(again), model)


def test_oversized_header_is_refused_by_save(tmp_path, model):
    big = {"columns": ["x" * 1000] * 20_000}  # 20 MB of column names
    with pytest.raises(ValueError, match="header would take .* bytes, more than"):
        orc.save(tmp_path / "m.orc", model, metadata=big)
    assert list(tmp_path.iterdir()) == []


def test_unreadable_file_names_the_reason(tmp_path, model):
    path = orc.save(tmp_path / "m.orc", model)
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as root: a file without read permission stays readable")
    with pytest.raises(PermissionError, match="cannot read"):
        orc.load(path)
