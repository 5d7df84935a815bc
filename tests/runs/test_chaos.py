"""The chaos suite (kerneljudge/redteam/chaos.py) against `judge`, `batch` and `serve`, on the CPU.

Whatever a candidate leaves in its workspace, whatever a client posts, whatever file is given as an input, the
trusted side answers: a record or a clean one-line error, the next honest judgment PASSes, nothing is left in the
temporary folder, the store's integrity check is clean, the server's memory stays within a bound. Each test runs
its judge with a temporary folder of its own, so what is left there is what this judge left.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT
from kerneljudge.redteam import chaos
from kerneljudge.sandbox.tree import remove_tree

KJ = [sys.executable, "-m", "kerneljudge"]
# A worker's workspace, and the files of the judge's bytecode cache (sandbox/bytecode.py, kept on purpose).
LEFT_PREFIX = "kerneljudge-"
BYTECODE_PREFIX = "kerneljudge-bytecode"


def env_with_tmp(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["TMPDIR"] = str(tmp)
    env["PYTHONPATH"] = str(ROOT / "src")
    return env


def left_behind(tmp: Path) -> list[str]:
    """What a judge left in its temporary folder (its bytecode cache apart)."""
    return sorted(n for n in os.listdir(tmp) if n.startswith(LEFT_PREFIX) and not n.startswith(BYTECODE_PREFIX))


def integrity(store: Path) -> str:
    with sqlite3.connect(store) as conn:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]


def stored(store: Path) -> list[dict]:
    if not store.exists():
        return []
    with sqlite3.connect(store) as conn:
        try:
            return [json.loads(row[0]) for row in conn.execute("SELECT record_json FROM judgments")]
        except sqlite3.OperationalError:  # the batch has not made its tables yet
            return []


def batch(manifest: Path, store: Path, tmp: Path, jobs: int = 2) -> subprocess.Popen[bytes]:
    command = [*KJ, "batch", str(manifest), "--store", str(store), "--device", "cpu", "--no-timing"]
    command += ["--mode", "audit", "--policy", "practical", "--jobs", str(jobs), "--timeout", "120"]
    log = (store.parent / f"batch-{time.monotonic_ns()}.log").open("wb")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env_with_tmp(tmp))


@pytest.fixture(scope="module")
def chaos_batch(tmp_path_factory):
    """The core cases (every kind, size and moment) and four honest candidates, batched; the batch SIGKILLed once
    a few records are in, then run again to the end."""
    folder = tmp_path_factory.mktemp("chaos")
    tmp = folder / "tmp"
    tmp.mkdir()
    cases = chaos.core_cases()
    manifest = chaos.write_manifest(folder / "items", cases, honest=4)
    store = folder / "results.db"
    first = batch(manifest, store, tmp)
    began = time.monotonic()
    while first.poll() is None and len(stored(store)) < 3 and time.monotonic() - began < 600:
        time.sleep(0.5)
    killed = first.poll() is None
    if killed:
        first.send_signal(signal.SIGKILL)
        first.wait()
    second = batch(manifest, store, tmp)
    second.wait(timeout=1200)
    yield {
        "folder": folder,
        "tmp": tmp,
        "store": store,
        "cases": cases,
        "killed": killed,
        "rerun_rc": second.returncode,
        "records": stored(store),
        "items": len(manifest.read_text().splitlines()),
    }
    # Whatever a failed run left (pytest's own clean-up of old temporary folders recurses: a chain 1,200 deep
    # left there would break the next run's).
    remove_tree(folder)


def test_a_batch_of_hostile_workspaces_records_every_item_and_leaves_nothing(chaos_batch):
    """Killed in the middle and run again: every item has a record, none is the judge's ERROR, honest ones PASS."""
    assert chaos_batch["killed"], "the batch ended before it could be killed; the rerun proves nothing"
    assert chaos_batch["rerun_rc"] in (0, 2), (chaos_batch["folder"] / "batch.log").as_posix()
    records = chaos_batch["records"]
    assert len(records) == chaos_batch["items"]
    by_name = {Path(r["candidate"]["path"]).stem: r for r in records}
    assert [n for n, r in by_name.items() if r["status"] == "ERROR"] == []
    honest = [r for n, r in by_name.items() if n.startswith("honest")]
    assert len(honest) == 4 and all(r["status"] == "PASS" for r in honest)
    assert left_behind(chaos_batch["tmp"]) == []
    assert integrity(chaos_batch["store"]) == "ok"


def test_workspaces_past_the_bounds_fail_the_candidate_with_their_finding(chaos_batch):
    """A chain past the depth bound, a folder past the entry bound: the candidate's failure (KJ-R070), not the
    judge's; within the bounds, no such finding."""
    by_name = {Path(r["candidate"]["path"]).stem: r for r in chaos_batch["records"]}

    def codes(name: str) -> set[str]:
        return {f["code"] for f in by_name[name]["findings"]}

    for name in ("deep_chain-1-init", "deep_chain-2-init", "wide_folder-1-init", "worst-first_call"):
        assert by_name[name]["status"] == "FAIL" and "KJ-R070" in codes(name), name
    for name in ("within_bounds-init", "sparse_file-1-init"):
        assert "KJ-R070" not in codes(name), name


def test_odd_names_reach_the_record_escaped(chaos_batch):
    """Names of non-UTF-8 bytes, newlines and markup are written escaped, and distinct names stay distinct."""
    by_name = {Path(r["candidate"]["path"]).stem: r for r in chaos_batch["records"]}
    changes = by_name["within_bounds-init"]["logs"]["candidate"]["workspace_changes"]
    created = changes["created"]
    assert "\\xff\\xfe" in created and "new\\x0aline" in created and "back\\\\slash" in created
    assert all("\n" not in name for name in created)
    assert len(set(created)) == len(created)
    json.dumps(by_name["within_bounds-init"]).encode("utf-8")


@pytest.mark.parametrize(("case", "moment"), [("deep_chain-1", "init"), ("worst", "thread")])
def test_judge_answers_a_hostile_workspace_with_a_record_and_the_next_judgment_passes(tmp_path, case, moment):
    """`kerneljudge judge` on one hostile candidate, then on an honest one, in the same temporary folder."""
    chosen = next(c for c in chaos.core_cases() if (c.name, c.moment) == (case, moment))
    hostile, honest = tmp_path / "hostile.py", tmp_path / "honest.py"
    hostile.write_text(chosen.source())
    honest.write_text(chaos.HONEST)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    outcomes = []
    for candidate in (hostile, honest):
        out = tmp_path / f"{candidate.stem}.json"
        done = subprocess.run(
            [*KJ, "judge", str(chaos.TASK), str(candidate), "--device", "cpu", "--no-timing", "--mode", "audit"]
            + ["--policy", "practical", "--json", str(out), "--quiet"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env_with_tmp(tmp),
        )
        assert done.returncode in (0, 2), done.stderr[-2000:]
        outcomes.append(json.loads(out.read_text())["status"])
        assert left_behind(tmp) == [], candidate.name
    assert outcomes[0] != "ERROR" and outcomes[1] == "PASS"
    remove_tree(tmp_path)


# ---------------------------------------------------------------- hostile inputs


@pytest.mark.parametrize("role", ["candidate", "task"])
def test_hostile_input_files_end_in_one_line_within_seconds(tmp_path, role):
    """A device, a FIFO, a folder, a huge or sparse file, bad UTF-8, a link loop: exit 1 and one line, fast."""
    paths = chaos.hostile_inputs(tmp_path / "inputs")
    honest = ROOT / "src" / "kerneljudge" / "redteam" / "fixtures" / "honest_torch.py"
    script = (
        "import sys, time\n"
        "from kerneljudge import JudgeConfig, judge\n"
        "from kerneljudge.errors import KernelJudgeError\n"
        f"paths = {json.dumps({k: str(v) for k, v in paths.items()})}\n"
        "for name, path in paths.items():\n"
        "    began = time.monotonic()\n"
        f"    args = (path, {str(honest)!r}) if {role == 'task'} else ({str(chaos.TASK)!r}, path)\n"
        "    try:\n"
        "        judge(*args, JudgeConfig(device='cpu', timing=False))\n"
        "        print(name, 'JUDGED', flush=True)\n"
        "    except KernelJudgeError as exc:\n"
        "        print(name, 'ERROR', round(time.monotonic() - began, 1), repr(str(exc)), flush=True)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=240, env=env_with_tmp(tmp_path)
    )
    remove_tree(tmp_path / "inputs")  # a 64 MiB file and an 8 GiB sparse one
    assert done.returncode == 0, done.stderr[-2000:]
    lines = {line.split(" ", 1)[0]: line for line in done.stdout.splitlines()}
    assert sorted(lines) == sorted(paths), done.stdout
    for line in lines.values():
        _, outcome, seconds, message = line.split(" ", 3)
        assert outcome == "ERROR", line
        assert float(seconds) < 10, line
        assert "\\n" not in message and len(message) < 400, line


def test_the_cli_answers_a_fifo_candidate_with_exit_1_and_one_line(tmp_path):
    fifo = tmp_path / "candidate.py"
    os.mkfifo(fifo)
    done = subprocess.run(
        [*KJ, "judge", str(chaos.TASK), str(fifo), "--device", "cpu", "--no-timing"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env_with_tmp(tmp_path),
    )
    assert done.returncode == 1
    assert len(done.stderr.strip().splitlines()) == 1 and "FIFO" in done.stderr, done.stderr


def test_a_batch_whose_manifest_names_a_device_or_a_fifo_stops_with_one_line_before_judging(tmp_path):
    paths = chaos.hostile_inputs(tmp_path / "inputs")
    for name in ("dev_zero", "fifo"):
        manifest = tmp_path / f"{name}.jsonl"
        manifest.write_text(json.dumps({"task": str(chaos.TASK), "candidate": str(paths[name])}) + "\n")
        began = time.monotonic()
        done = subprocess.run(
            [*KJ, "batch", str(manifest), "--store", str(tmp_path / "s.db"), "--device", "cpu", "--no-timing"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env_with_tmp(tmp_path),
        )
        assert done.returncode == 1 and time.monotonic() - began < 60, done.stderr[-2000:]
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    remove_tree(tmp_path / "inputs")


# ---------------------------------------------------------------- the server

pytest.importorskip("httpx")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    pytest.importorskip("fastapi")
    import httpx

    folder = tmp_path_factory.mktemp("serve")
    tmp = folder / "tmp"
    tmp.mkdir()
    port = free_port()
    command = [*KJ, "serve", "--store", str(folder / "rewards.db"), "--port", str(port), "--device", "cpu"]
    command += ["--mode", "audit", "--policy", "practical", "--no-timing", "--jobs", "2", "--timeout", "120"]
    command += ["--body-timeout", "5"]
    log = (folder / "server.log").open("wb")
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env_with_tmp(tmp))
    url = f"http://127.0.0.1:{port}"
    began = time.monotonic()
    while time.monotonic() - began < 120:
        assert proc.poll() is None, (folder / "server.log").read_text()[-2000:]
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                break
        except httpx.TransportError:
            time.sleep(0.3)
    yield {"url": url, "proc": proc, "folder": folder, "tmp": tmp, "port": port}
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    remove_tree(folder)


def test_hostile_bodies_get_a_4xx_and_the_server_stays_small(server):
    import httpx

    baseline = rss_bytes(server["proc"].pid)
    with httpx.Client(timeout=60) as client:
        for name, body in chaos.hostile_bodies().items():
            began = time.monotonic()
            try:
                response = client.post(
                    f"{server['url']}/v1/judge", content=body, headers={"content-type": "application/json"}
                )
            except httpx.TransportError:  # the server may close a connection whose body it will not read
                status = None
            else:
                status = response.status_code
                assert 400 <= status < 500, (name, status, response.text[:300])
                assert len(response.text) < 4096, name
            assert time.monotonic() - began < 30, name
            assert server["proc"].poll() is None, name
            grown = rss_bytes(server["proc"].pid) - baseline
            assert grown < 300 * 1024**2, (name, status, grown)


def test_a_slow_sender_is_cut_off(server):
    """A body dribbled a byte a second never ends: the server answers or closes the connection within its read
    timeout, rather than holding it open."""
    with socket.create_connection(("127.0.0.1", server["port"]), timeout=5) as conn:
        head = b"POST /v1/judge HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n["
        conn.sendall(head)
        conn.settimeout(1.0)
        began = time.monotonic()
        cut = False
        while not cut and time.monotonic() - began < 90:
            try:
                conn.recv(4096)  # an answer (408) or end-of-file: either way the server let go
                cut = True
            except TimeoutError:
                try:
                    conn.sendall(b" ")
                except OSError:
                    cut = True
            except OSError:
                cut = True
        assert cut and time.monotonic() - began < 15  # its --body-timeout is 5 s


def test_hostile_candidates_through_the_server_then_an_honest_one_passes(server):
    import httpx

    task_text = chaos.TASK.read_text()
    cases = [c for c in chaos.core_cases() if f"{c.name}-{c.moment}" in ("deep_chain-1-init", "worst-first_call")]
    items = [{"task_source": task_text, "candidate": c.source()} for c in cases]
    with httpx.Client(timeout=600) as client:
        answers = client.post(f"{server['url']}/v1/judge", json=items).json()
        assert [a["valid"] for a in answers] == [True] * len(items), answers
        assert all(a["status"] != "ERROR" for a in answers)
        honest = client.post(f"{server['url']}/v1/judge", json={"task_source": task_text, "candidate": chaos.HONEST})
        assert honest.status_code == 200 and honest.json()["status"] == "PASS", honest.text[:500]
    assert left_behind(server["tmp"]) == []
    assert integrity(server["folder"] / "rewards.db") == "ok"
