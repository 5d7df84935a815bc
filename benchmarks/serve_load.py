"""Sustained load on `kerneljudge serve` over loopback: is every request answered once, the same each time?

Starts `kerneljudge serve` on 127.0.0.1 (a free port, a fresh store; `--device`, `--mode`, timing with
`--timing`) and sends it single-item requests from `--clients` threads. `--work mix` (the default, for the
CPU) is `--requests` requests, a fixed mix drawn with `--seed`:

- honest candidates (a pool of `--variants` texts, so that some contents come again under new request ids),
- wrong ones (FAIL, tolerance), ones that raise (FAIL, runtime_error) and ones that hang in forward (FAIL,
  timeout after the judge's `--timeout`),
- retries: an earlier request sent again with its request id, as a trainer retries after a lost reply.

`--work real` (for a GPU) is real-size work instead: benchmarks/throughput_manifest.py's tasks (the built-in
suite's fp32 operations at 64 and 128 MiB a tensor), each with its honest Triton candidate, the reference as
its own candidate, four reward hacks and a bug, every pair sent once, then `--retries` of them again; the
honest ones must pass and the others must not. With `--device cuda` the server's lanes are `--lanes` per
visible GPU (`serve --gpus all --jobs`).

A client that is refused with 429 waits the Retry-After seconds and sends again. No request is sent after
`--max-seconds`. Then the server is stopped and the checks read the answers, the server's /metrics and its
store:

1. every request sent was answered (HTTP 200), none lost;
2. every answer to one request id is the same, field for field;
3. one content (task, candidate, options) has one record id, whoever asked;
4. the store holds one record per content, and the server judged each content once (its judgments counter);
5. each kind of candidate got its verdict.

It prints a Markdown table (requests, judgments, judgments per minute, latency percentiles of first
answers and of answers from the store, 429s) and the checks; exit 0 when every check passed. Loopback
only: the server listens on 127.0.0.1 and the clients talk to nothing else.

    python benchmarks/serve_load.py --requests 80 --clients 8 --lanes 2 --markdown load.md --json load.json
    python benchmarks/serve_load.py --device cuda --work real --mode enforce --timing --lanes 4 --clients 8

docs/serve.md keeps the tables measured ("Under load").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
# The red-team suite's small task, sent as task_source: relu(x + bias), 16 x 33 fp32.
TASK = (ROOT / "src" / "kerneljudge" / "redteam" / "tasks" / "bias_relu.py").read_text()
HEAD = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(width))

    def forward(self, x):
"""
BODIES = {
    "honest": "        return torch.clamp_min(x + self.bias, 0.0)\n",
    "wrong": "        return torch.clamp_min(x + self.bias, 0.0) * 1.01\n",
    "raises": "        raise RuntimeError('not written yet')\n",
    "hangs": "        while True:\n            pass\n",
}
EXPECTED = {"honest": ("PASS", None), "wrong": ("FAIL", "tolerance"), "raises": ("FAIL", "runtime_error")}
EXPECTED["hangs"] = ("FAIL", "timeout")
MIX = {"honest": 50, "wrong": 15, "raises": 10, "hangs": 5, "retry": 20}  # percent of requests


@dataclass
class Sent:
    """One request and what came back."""

    request_id: str
    kind: str
    item: dict[str, Any]
    retry: bool = False
    status_code: int | None = None
    answer: dict[str, Any] | None = None
    seconds: float = 0.0
    refusals: int = 0  # 429s waited out
    error: str | None = None


def candidate(kind: str, variant: int) -> str:
    return f"{HEAD}{BODIES[kind]}# variant {variant}\n"


def plan(count: int, variants: int, seed: int, mix: dict[str, int]) -> list[Sent]:
    """`count` requests in the order sent; retries repeat an earlier request, request id included. The first
    requests are one of each kind the mix has, the rest drawn by its weights."""
    rng = random.Random(seed)
    kinds, weights = zip(*((kind, weight) for kind, weight in mix.items() if weight > 0), strict=True)
    out: list[Sent] = []
    for index in range(count):
        kind = kinds[index] if index < len(kinds) else rng.choices(kinds, weights)[0]
        if kind == "retry" and out:
            first = rng.choice([sent for sent in out if not sent.retry])
            out.append(Sent(first.request_id, first.kind, first.item, retry=True))
            continue
        kind = "honest" if kind == "retry" else kind
        variant = rng.randrange(variants) if kind == "honest" else index  # honest texts repeat; others do not
        item = {"task_source": TASK, "candidate": candidate(kind, variant), "request_id": f"load-{index:04d}"}
        out.append(Sent(item["request_id"], kind, item))
    return out


def plan_real(retries: int, seed: int, folder: Path) -> list[Sent]:
    """Every pair of the real-size manifest once, in an order drawn with `seed`, then `retries` of them again."""
    import throughput_manifest

    rng = random.Random(seed)
    lines = throughput_manifest.write(folder)
    rng.shuffle(lines)
    out = []
    for index, line in enumerate(lines):
        item = {
            "task_source": Path(line["task"]).read_text(),
            "candidate": Path(line["candidate"]).read_text(),
            "request_id": f"real-{index:04d}-{Path(line['task']).parent.name}-{line['kind']}",
        }
        out.append(Sent(item["request_id"], line["kind"], item))
    again = [rng.choice(out) for _ in range(retries)]
    return out + [Sent(first.request_id, first.kind, first.item, retry=True) for first in again]


def as_expected(kind: str, answer: dict[str, Any]) -> bool:
    """The verdict each kind must get: the mix's exact status and failure kind; of the real manifest's, a PASS
    for an honest candidate and anything else for a hack or the bug."""
    if kind in EXPECTED:
        return (answer["status"], answer["failure_kind"]) == EXPECTED[kind]
    import throughput_manifest

    return (answer["status"] == "PASS") == throughput_manifest.expected_pass(kind)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(store: Path, port: int, args: argparse.Namespace) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "kerneljudge", "serve", "--store", str(store), "--host", "127.0.0.1"]
    command += ["--port", str(port), "--device", args.device, "--mode", args.mode, "--policy", "practical"]
    command += ["--jobs", str(args.lanes), "--queue", str(args.queue), "--timeout", str(args.timeout)]
    command += [] if args.timing else ["--no-timing"]
    command += ["--spare-workers"] if args.spare_workers else []
    command += ["--gpus", "all"] if args.device == "cuda" else []
    log = (store.parent / "server.log").open("wb")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    began = time.monotonic()
    while time.monotonic() - began < 120:
        if server.poll() is not None:
            raise SystemExit(f"the server exited at start ({server.returncode}); see {log.name}")
        try:
            if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise SystemExit(f"the server did not answer /healthz within 120 s; see {log.name}")


def send(client: httpx.Client, url: str, sent: Sent, max_wait_s: float) -> None:
    began = time.monotonic()
    try:
        while True:
            response = client.post(f"{url}/v1/judge", json=sent.item)
            waited = time.monotonic() - began
            if response.status_code == 429 and waited < max_wait_s:
                sent.refusals += 1
                time.sleep(min(float(response.headers.get("Retry-After", "1")), max_wait_s - waited))
                continue
            sent.status_code = response.status_code
            if response.status_code == 200:
                sent.answer = response.json()
            else:
                sent.error = response.text[:300]
            break
    except httpx.HTTPError as exc:
        sent.error = f"{type(exc).__name__}: {exc}"
    sent.seconds = time.monotonic() - began


def drive(url: str, requests: list[Sent], clients: int, deadline: float, timeout_s: float) -> list[Sent]:
    """Send `requests` in order from `clients` threads until `deadline`; the requests sent."""
    lock = threading.Lock()
    pending = iter(requests)
    sent: list[Sent] = []

    def worker() -> None:
        with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=10.0)) as client:
            while time.monotonic() < deadline:
                with lock:
                    entry = next(pending, None)
                    if entry is None:
                        return
                    sent.append(entry)
                send(client, url, entry, max(1.0, deadline - time.monotonic()))

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sent


def metric_total(text: str, name: str) -> float:
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def check(sent: list[Sent], judgments: float, stored: int) -> list[tuple[str, bool, str]]:
    """(check, passed, detail) for each of the module's checks."""
    lost = [s.request_id for s in sent if s.answer is None]
    by_id: dict[str, set[str]] = defaultdict(set)
    by_content: dict[str, set[str]] = defaultdict(set)
    unexpected: dict[str, Counter[tuple[str, str | None]]] = defaultdict(Counter)
    for s in sent:
        if s.answer is None:
            continue
        by_id[s.request_id].add(json.dumps(s.answer, sort_keys=True))
        by_content[s.item["candidate"]].add(s.answer["record_id"])
        verdict = (s.answer["status"], s.answer["failure_kind"])
        if not as_expected(s.kind, s.answer):
            unexpected[s.kind][verdict] += 1
    differing = [rid for rid, answers in by_id.items() if len(answers) > 1]
    split = [text for text, ids in by_content.items() if len(ids) > 1]
    wrong = {kind: dict(seen) for kind, seen in unexpected.items()}
    contents = len(by_content)
    return [
        ("every request answered", not lost, f"{len(lost)} lost" + (f": {', '.join(lost[:5])}" if lost else "")),
        ("one answer per request id", not differing, f"{len(differing)} request ids answered differently"),
        ("one record per content", not split, f"{len(split)} contents with more than one record id"),
        (
            "each content judged and stored once",
            stored == contents and judgments == contents,
            f"{contents} contents, {stored} records stored, {judgments:.0f} judgments made",
        ),
        ("each kind its verdict", not wrong, f"unexpected: {wrong}" if wrong else "as expected"),
    ]


def percentiles(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.2f}"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"{statistics.median(values):.2f} / {cuts[89]:.2f} / {max(values):.2f}"


def table(sent: list[Sent], seconds: float, judgments: float, args: argparse.Namespace) -> str:
    seen: set[str] = set()
    first, again = [], []
    for s in sorted((s for s in sent if s.answer is not None), key=lambda s: s.seconds):
        (again if s.item["candidate"] in seen else first).append(s.seconds)
        seen.add(s.item["candidate"])
    kinds = Counter(("retry" if s.retry else s.kind) for s in sent)
    rows = [
        ("requests sent", f"{len(sent)} (" + ", ".join(f"{kind} {n}" for kind, n in kinds.items()) + ")"),
        ("device, mode, timed", f"{args.device}, {args.mode}, {'yes' if args.timing else 'no'}"),
        ("clients, lanes, queue, judge timeout", f"{args.clients}, {args.lanes}, {args.queue}, {args.timeout:g} s"),
        ("judgments made", f"{judgments:.0f}"),
        ("wall time", f"{seconds:.1f} s"),
        ("judgments per minute", f"{60 * judgments / seconds:.1f}"),
        ("requests per second", f"{len(sent) / seconds:.2f}"),
        ("latency, judged (p50 / p90 / max)", percentiles(first) + " s"),
        ("latency, answered again: shared or stored (p50 / p90 / max)", percentiles(again) + " s"),
        ("429s waited out", str(sum(s.refusals for s in sent))),
    ]
    lines = ["| figure | value |", "|---|---|", *(f"| {name} | {value} |" for name, value in rows)]
    return "\n".join(lines) + "\n"


def verdict_table(sent: list[Sent]) -> str:
    """Per kind of candidate: its answers' statuses and failure kinds, and the median speedup where timed."""
    seen: dict[str, Counter[str]] = defaultdict(Counter)
    speedups: dict[str, list[float]] = defaultdict(list)
    for s in sent:
        if s.answer is None or s.retry:
            continue
        seen[s.kind][s.answer["status"] + (f" ({s.answer['failure_kind']})" if s.answer["failure_kind"] else "")] += 1
        if s.answer["metrics"].get("speedup") is not None:
            speedups[s.kind].append(s.answer["metrics"]["speedup"])
    lines = ["| kind | verdicts | median speedup |", "|---|---|---|"]
    for kind, counts in seen.items():
        told = ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common())
        speed = f"{statistics.median(speedups[kind]):.2f}x" if speedups[kind] else "-"
        lines.append(f"| {kind} | {told} | {speed} |")
    return "\n".join(lines) + "\n"


def parse_mix(text: str) -> dict[str, int]:
    mix = dict(MIX)
    for part in filter(None, text.split(",")):
        name, _, value = part.partition("=")
        if name not in MIX or not value.isdigit():
            raise SystemExit(f"--mix {text}: each part is NAME=PERCENT with NAME one of {', '.join(MIX)}")
        mix[name] = int(value)
    return mix


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", choices=("mix", "real"), default="mix", help="the small mix, or real-size work")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="the server's device")
    parser.add_argument("--mode", choices=("audit", "enforce"), default="enforce", help="the server's mode")
    parser.add_argument("--timing", action="store_true", help="judge with timing (default: correctness only)")
    parser.add_argument("--requests", type=int, default=80, help="--work mix: requests to send (default 80)")
    parser.add_argument("--retries", type=int, default=12, help="--work real: requests sent again")
    parser.add_argument("--clients", type=int, default=8, help="client threads sending side by side")
    parser.add_argument("--lanes", type=int, default=2, help="the server's lanes (serve --jobs)")
    parser.add_argument("--spare-workers", action="store_true", help="the server keeps spare worker pairs")
    parser.add_argument("--queue", type=int, default=4, help="the server's queue (serve --queue): 429 beyond it")
    parser.add_argument(
        "--timeout", type=float, help="the judge's timeout (serve --timeout), s; default 20 (mix), 180 (real)"
    )
    parser.add_argument("--variants", type=int, default=6, help="distinct honest texts (contents that repeat)")
    parser.add_argument("--mix", default="", help=f"percentages, e.g. hangs=0,retry=30 (default {MIX})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-seconds", type=float, default=900.0, help="no request is sent after this")
    parser.add_argument("--markdown", type=Path, help="write the table and the checks here too")
    parser.add_argument("--json", type=Path, help="write every request and its answer here")
    parser.add_argument("--keep-store", type=Path, metavar="PATH", help="copy the server's store here (a backup)")
    args = parser.parse_args(argv)
    if args.timeout is None:
        args.timeout = 180.0 if args.work == "real" else 20.0
    with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
        if args.work == "real":
            requests = plan_real(args.retries, args.seed, Path(folder) / "work")
        else:
            requests = plan(args.requests, args.variants, args.seed, parse_mix(args.mix))
        store = Path(folder) / "rewards.db"
        server = start_server(store, port := free_port(), args)
        url = f"http://127.0.0.1:{port}"
        try:
            began = time.monotonic()
            sent = drive(url, requests, args.clients, began + args.max_seconds, args.timeout * 20)
            seconds = time.monotonic() - began
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
        finally:
            server.send_signal(signal.SIGINT)  # uvicorn's graceful stop: the service closes its lanes
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
        from kerneljudge.store import Store

        with Store(store) as opened:
            stored = len(opened)
        if args.keep_store is not None:
            import sqlite3

            with sqlite3.connect(store) as source, sqlite3.connect(args.keep_store) as copy:
                source.backup(copy)  # the WAL's pages included
    judgments = metric_total(metrics, "kerneljudge_judgments_total")
    checks = check(sent, judgments, stored)
    text = table(sent, seconds, judgments, args) + "\n" + verdict_table(sent) + "\n"
    text += "\n".join(f"- {'passed' if ok else 'FAILED'}: {name} ({detail})" for name, ok, detail in checks) + "\n"
    print(text, end="")
    if args.markdown is not None:
        args.markdown.write_text(text)
    if args.json is not None:
        rows = [{k: v for k, v in vars(s).items() if k != "item"} | {"candidate": s.item["candidate"]} for s in sent]
        args.json.write_text(json.dumps({"checks": checks, "requests": rows}, indent=1) + "\n")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    # A stage's `timeout` ends this script with SIGTERM: stop the server on the way out, not leave it judging.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
