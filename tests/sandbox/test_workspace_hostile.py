"""The parent reads a worker's workspace as hostile data (sandbox/tree.py, sandbox/workspace.py, KJ-R070).

Whatever a candidate leaves there (a folder chain deeper than Python's recursion limit, names that are not
UTF-8 or hold newlines, links to / and /dev/zero and to themselves, FIFOs, sockets, a terabyte sparse file,
folders of mode 000), the walks stay bounded and never follow a link, a record still serialises, the removal
leaves nothing and touches nothing outside, and a judgment past the bounds is the candidate's FAIL.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from contextlib import closing
from pathlib import Path

import pytest

from helpers import CANDIDATES, ROOT, TASKS, run_judge
from kerneljudge.checks.workspace import past_bounds
from kerneljudge.results.verdict import WorkerLog
from kerneljudge.sandbox import cache_carry, workspace
from kerneljudge.sandbox.tree import Bounds, Tally, remove_tree, shown, walk
from kerneljudge.sandbox.workspace import Workspace, diff

DEEP = 1_500  # past the interpreter's recursion limit (1,000): os.walk and shutil.rmtree raised RecursionError

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root: changes owners and uids")


def chain(top: Path, depth: int, name: str = "d") -> None:
    """A chain of folders `depth` deep under `top`, made relative to folder descriptors (no long paths)."""
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    for _ in range(depth):
        os.mkdir(name, dir_fd=fd)
        deeper = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
        os.close(fd)
        fd = deeper
    os.close(fd)


def hostile_tree(top: Path, outside: Path, depth: int = DEEP) -> None:
    """What a hostile candidate leaves: every kind the parent must read or remove without harm."""
    chain(top, depth)
    (top / "locked" / "inner").mkdir(parents=True)
    (top / "locked" / "inner" / "file").write_text("x")
    os.chmod(top / "locked" / "inner", 0)
    os.chmod(top / "locked", 0)
    (top / "no_write").mkdir()
    (top / "no_write" / "file").write_text("x")
    os.chmod(top / "no_write", 0o500)
    for name in (b"\xff\xfe", b"new\nline", b"back\\slash", b"\x1b[31mred"):
        with open(os.path.join(os.fsencode(top), name), "wb") as handle:
            handle.write(b"x")
    (top / "to_outside").symlink_to(outside)
    (top / "to_outside_file").symlink_to(outside / "target")
    (top / "to_root").symlink_to("/")
    (top / "to_zero").symlink_to("/dev/zero")
    (top / "loop").symlink_to("loop")
    os.mkfifo(top / "fifo")
    with open(top / "sparse", "wb") as handle:
        handle.truncate(2**40)
    sock = socket.socket(socket.AF_UNIX)
    try:
        sock.bind(str(top / "sock"))
    finally:
        sock.close()


@pytest.fixture(autouse=True)
def tidy(tmp_path):
    """pytest removes old temporary folders with shutil.rmtree, which a chain past the recursion limit breaks
    (for every later pytest run on the machine): each test's folder goes with it."""
    yield
    remove_tree(tmp_path)


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "target").write_text("keep")
    return folder


# ---------------------------------------------------------------- names


def test_names_are_escaped_so_that_any_name_is_valid_json_and_no_two_show_alike():
    names = [b"\xff\xfe", b"new\nline", b"\\xff", b"\\", b"\x1b[2J", "é".encode(), b"plain.py", b"\xc2\x9b"]
    shown_names = [shown(name) for name in names]
    assert shown_names[:3] == ["\\xff\\xfe", "new\\x0aline", "\\\\xff"]
    assert shown_names[4:7] == ["\\x1b[2J", "é", "plain.py"]
    assert shown_names[7] == "\\xc2\\x9b"  # a C1 control (a terminal's CSI) too
    assert len(set(shown_names)) == len(names)
    json.dumps(shown_names, ensure_ascii=False).encode("utf-8")  # no surrogate survives


# ---------------------------------------------------------------- walks


def test_a_walk_stops_at_its_first_bound_and_never_recurses(tmp_path):
    deep, wide = tmp_path / "deep", tmp_path / "wide"
    deep.mkdir()
    chain(deep, DEEP)
    tally = Tally()
    with closing(walk(deep, tally=tally)) as found:
        depths = [entry.depth for entry in found]
    assert (tally.bound, tally.limit, tally.depth) == ("depth", 64, 65) and depths == list(range(1, 65))
    wide.mkdir()
    for name in range(30):
        (wide / f"f{name}").write_text("x")
    for bounds, bound in [(Bounds(), None), (Bounds(entries=20), "entries"), (Bounds(name_bytes=50), "name_bytes")]:
        tally = Tally()
        with closing(walk(wide, bounds, tally)) as found:
            list(found)
        assert tally.bound == bound


def test_a_manifest_of_a_hostile_workspace_is_bounded_and_follows_nothing(outside):
    ws = Workspace.create("unit")
    try:
        before = ws.manifest()
        hostile_tree(ws.root, outside, depth=10)
        after = ws.manifest()
        changes = diff(before, after)
        chain(ws.root, DEEP, name="e")
        past = diff(before, ws.manifest())
    finally:
        assert ws.remove() == []
    assert changes.bound is None and not changes.truncated and changes.walked["depth"] == 10
    kinds = {shown(rel): entry.kind for rel, entry in after.entries.items()}
    assert {kinds[n] for n in ("to_outside", "to_root", "to_zero", "loop", "fifo", "sock")} == {"other"}
    assert kinds["sparse"] == "file" and after.entries[b"sparse"].sha256 is None  # never read
    assert after.entries[b"\xff\xfe"].sha256 is not None
    assert "\\xff\\xfe" in changes.created and "new\\x0aline" in changes.created
    assert "locked/inner/file" in changes.created  # root reads a folder of mode 0
    assert not any(n.startswith("to_outside/") for n in kinds)  # the link's folder is not walked
    json.dumps(changes.created, ensure_ascii=False).encode("utf-8")
    assert past.bound == "depth" and past.truncated and past.walked["depth"] == 65
    assert (outside / "target").read_text() == "keep" and not ws.root.exists()


# ---------------------------------------------------------------- removal


def test_the_removal_leaves_nothing_and_follows_no_link(tmp_path, outside):
    top = tmp_path / "ws"
    top.mkdir()
    hostile_tree(top, outside)
    for name in range(2_000):  # wide too
        (top / "locked_wide").mkdir(exist_ok=True)
        (top / "locked_wide" / f"f{name}").write_bytes(b"")
    os.chmod(top / "locked_wide", 0)
    assert remove_tree(top) == []
    assert not os.path.lexists(top)
    assert sorted(os.listdir(outside)) == ["target"] and (outside / "target").read_text() == "keep"
    assert remove_tree(top) == []  # nothing there: nothing to say


@as_root
def test_the_removal_empties_folders_of_mode_0_as_their_non_root_owner(outside):
    """A judge that runs as a user: its workers keep its uid and can chmod their folders to 0. The remover runs
    as that user (65534) on a tree that user made; the folder above is theirs, as /tmp's sticky bit allows."""
    base = Path(tempfile.mkdtemp(prefix="kj-hostile-"))
    os.chmod(base, 0o755)
    os.chown(base, NOBODY, NOBODY)
    os.chmod(outside.parent, 0o755)
    os.chmod(outside, 0o755)
    script = f"""
import os, sys
from pathlib import Path
sys.path[:0] = [{str(ROOT / "tests")!r}, {str(ROOT / "tests" / "sandbox")!r}]
from test_workspace_hostile import hostile_tree
from kerneljudge.sandbox.tree import remove_tree
os.setgroups([]); os.setgid({NOBODY}); os.setuid({NOBODY})  # after the imports: the interpreter is root's
top = Path({str(base)!r}) / "ws"
top.mkdir()
hostile_tree(top, Path({str(outside)!r}))
(top / "bare").mkdir(); (top / "bare" / "f").write_text("x"); os.chmod(top / "bare", 0)
print(remove_tree(top), os.path.lexists(top))
"""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    finally:
        remove_tree(base)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[] False"
    assert (outside / "target").read_text() == "keep"


def test_stale_workspaces_of_any_depth_are_swept(tmp_path):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = tmp_path / f"kerneljudge-candidate-p{int(gone.stdout)}-x"
    stale.mkdir()
    chain(stale, DEEP)
    with open(os.path.join(os.fsencode(stale), b"\xff"), "w"):
        pass
    assert workspace.remove_stale(tmp_path) == [stale.name] and not stale.exists()


# ---------------------------------------------------------------- the launcher's chown and the carry


DROP_USER = """
import json, os, sys
from kerneljudge.sandbox.enter_layers import Report, drop_user
report = Report()
try:
    drop_user({"uid": 65534, "gid": 65534, "workspace": sys.argv[1], "needed": [], "skip": []}, report)
    error = None
except Exception as exc:
    error = f"{type(exc).__name__}: {exc}"
print(json.dumps({"layer": report.layers["unprivileged_user"], "error": error, "uid": os.getuid()}))
"""


def drop_user_in(folder: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", DROP_USER, str(folder)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@as_root
def test_the_launchers_chown_follows_no_link_and_starts_nothing_past_the_bound(tmp_path, outside):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "file").write_text("x")
    (ws / "to_outside_file").symlink_to(outside / "target")
    (ws / "to_outside").symlink_to(outside)
    os.chmod(tmp_path, 0o755)
    result = drop_user_in(ws)
    assert result["layer"]["status"] == "in_force" and result["uid"] == NOBODY, result
    assert os.lstat(ws / "file").st_uid == NOBODY and os.lstat(ws / "to_outside_file").st_uid == NOBODY
    assert os.stat(outside / "target").st_uid == 0 and os.stat(outside).st_uid == 0  # the targets are not
    chain(ws, 1_200)
    result = drop_user_in(ws)
    assert (
        result["layer"]["status"] == "missing" and "past the walk's bound (depth past 64)" in result["layer"]["detail"]
    )
    assert result["error"].startswith("RuntimeError") and result["uid"] == 0  # no worker starts, as root or not


def test_a_cache_past_the_walks_bound_is_not_carried(tmp_path):
    source, dest = Workspace.create("unit"), Workspace.create("unit")
    try:
        (source.root / "cache" / "triton" / "kernel.json").write_text("{}")
        chain(source.root / "cache" / "triton", 1_200)
        carried = cache_carry.carry(source.root, dest.root, None)
        assert carried.dropped is not None and "depth past 64" in carried.dropped
        assert not any((dest.root / "cache" / "triton").iterdir())  # what was copied before the bound is gone
    finally:
        assert source.remove() == [] and dest.remove() == []


# ---------------------------------------------------------------- the finding


def log(changes: dict | None) -> WorkerLog:
    return WorkerLog(
        stdout_tail="", stdout_bytes=0, stderr_tail="", stderr_bytes=0, truncated=False, workspace_changes=changes
    )


def test_past_the_bound_is_the_candidates_error_and_the_references_workspace_never_is():
    walked = {"entries": 50_001, "depth": 2, "name_bytes": 9, "bound": "entries", "limit": 50_000}
    past = {"bound": "entries", "walked": walked}
    assert past_bounds({"reference": log(past), "candidate": log({"bound": None}), "other": log(None)}) == []
    (found,) = past_bounds({"candidate": log({"bound": None}), "candidate_timing": log(past)})
    assert (found.code, found.severity) == ("KJ-R070", "error")
    assert found.evidence["bound"] == "entries" and found.evidence["limit"] == 50_000
    assert found.evidence["entries"] == 50_001 and found.evidence["workers"] == ["candidate_timing"]


# ---------------------------------------------------------------- whole judgments


DEEP_INIT = """
import os
fd = os.open(".", os.O_RDONLY)
for _ in range(1200):
    os.mkdir("d")
    os.chdir("d")
os.fchdir(fd)
"""
ODD_NAMES_INIT = """
open(b"\\xff\\xfe", "w").close()
open("new\\nline", "w").close()
"""


def candidate_with(folder: Path, name: str, init_code: str) -> Path:
    """honest_torch.py with `init_code` run at the start of its __init__ (its cwd is its workspace)."""
    text = (CANDIDATES / "honest_torch.py").read_text()
    body = "".join(f"        {line}\n" for line in init_code.strip().splitlines())
    text = text.replace("        super().__init__()\n", f"        super().__init__()\n{body}")
    path = folder / name
    path.write_text(text)
    return path


@pytest.fixture
def private_tmp(monkeypatch):
    """A temporary folder of this test's own (the workers' uids can reach it), so what is left there is this
    judge's; the sweep of stale workspaces runs again in it."""
    folder = Path(tempfile.mkdtemp(prefix="kj-private-tmp-"))
    os.chmod(folder, 0o755)
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setattr(workspace, "_swept", [])
    yield folder
    remove_tree(folder)


def left_behind(folder: Path) -> list[str]:
    return [n for n in os.listdir(folder) if n.startswith("kerneljudge-") and not n.startswith("kerneljudge-bytecode")]


def test_a_candidate_that_leaves_a_deep_chain_fails_and_the_next_judgment_passes(private_tmp, tmp_path):
    task = TASKS / "tiny_bias_relu.py"
    record = run_judge(task, candidate_with(tmp_path, "deep.py", DEEP_INIT))  # audit: enforce rejects os.mkdir
    assert record.status == "FAIL" and record.failure.kind == "integrity_violation", record.failure
    (found,) = [f for f in record.findings if f.code == "KJ-R070"]
    assert found.evidence["bound"] == "depth" and found.evidence["workers"] == ["candidate"]
    assert left_behind(private_tmp) == []
    assert run_judge(task, CANDIDATES / "honest_torch.py").status == "PASS"
    assert left_behind(private_tmp) == []


def test_a_candidate_that_leaves_odd_names_gets_a_record_that_serialises(private_tmp, tmp_path):
    record = run_judge(TASKS / "tiny_bias_relu.py", candidate_with(tmp_path, "odd.py", ODD_NAMES_INIT))
    assert record.status == "SUSPICIOUS", record.failure  # its open() calls, in audit
    assert "KJ-R070" not in {f.code for f in record.findings}
    created = json.loads(record.to_json())["logs"]["candidate"]["workspace_changes"]["created"]
    assert "\\xff\\xfe" in created and "new\\x0aline" in created
    assert left_behind(private_tmp) == []
