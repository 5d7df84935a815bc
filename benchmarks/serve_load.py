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

`--client` chooses whose behaviour sends the load (the default, `judge`, is the above):

- `openrlhf`: as OpenRLHF 0.11.2's rollout does (openrlhf/utils/agent.py, `_fetch_rewards_via_http`): each
  sample alone to POST /get_reward (prompt + response as the query, the task as its label), a 180 s timeout
  (`--client-timeout`), five tries one second apart whatever the answer, Retry-After not read; `--load`
  times the server's capacity (lanes + queue) of senders side by side (default 3).
- `trl`: as TRL's GRPOTrainer calls its reward functions: `--clients` ranks, each calling
  `KernelJudgeReward(url=...)` on batches of `--batch` completions (default twice the capacity), which the
  client (`serve.client.RemoteJudge`) splits to what the server admits and retries.

Their checks: no sample lost (every one rewarded), no request failed (OpenRLHF: no try answered other than
200; TRL: no reward call raised), each content judged once, each kind its verdict. Their table gives calls,
samples, lost, failed and the latency of a sample (OpenRLHF) or a reward call (TRL).

`--fake S` judges nothing: the server runs in this process over stand-in lanes whose judgments take S seconds
and give each kind of the mix the verdict the real judge gives it, so that the protocol's load runs on any
machine in seconds (tests/serve/test_serve_load.py). Without it the server is `kerneljudge serve` judging for real.

    python benchmarks/serve_load.py --client openrlhf --fake 0.2 --requests 120 --lanes 2 --queue 2
    python benchmarks/serve_load.py --client trl --fake 0.2 --requests 120 --clients 2 --lanes 2 --queue 2
    python benchmarks/serve_load.py --client openrlhf --device cuda --work real --timing --lanes 4 --queue 4

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
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
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
    tries: int = 0  # --client openrlhf: requests sent for this sample
    failed_tries: int = 0  # --client openrlhf: of those, ones answered other than 200 or not at all


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


class StandInLanes:
    """`--fake`: lanes that run nothing. Each judgment takes `judgment_s` and gives the verdict the real judge
    gives the mix's kind of candidate (EXPECTED), so that a load's protocol runs on any machine in seconds."""

    def __init__(self, lanes: int, judgment_s: float) -> None:
        self.judgment_s = judgment_s
        self._lanes = lanes
        self._pool = ThreadPoolExecutor(lanes, thread_name_prefix="stand-in-lane")
        self._lock = threading.Lock()
        self._busy = 0

    @property
    def lanes(self) -> int:
        return self._lanes

    @property
    def busy(self) -> int:
        with self._lock:
            return self._busy

    def submit(self, job: Any, progress: Any = None) -> Future[Any]:
        return self._pool.submit(self._judge, job)

    def machine_environments(self, config: Any) -> list[dict[str, Any]]:
        return [{"machine": "serve_load stand-in"}]

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _judge(self, job: Any) -> Any:
        with self._lock:
            self._busy += 1
        try:
            time.sleep(self.judgment_s)
            return stand_in_record(job, self.judgment_s)
        finally:
            with self._lock:
                self._busy -= 1


def stand_in_record(job: Any, seconds: float) -> Any:
    """The record a real judgment of the job's candidate would end in, by its kind (BODIES), untimed."""
    from datetime import datetime, timezone

    from kerneljudge import __version__
    from kerneljudge.results.reward import rewards_for
    from kerneljudge.results.verdict import Correctness, Failure, Identity, Record, Timing

    kind = next((kind for kind, body in BODIES.items() if body in job.candidate.text), "wrong")
    status, failure_kind = EXPECTED[kind]
    failure = None if failure_kind is None else Failure(kind=failure_kind, phase="correctness", summary=kind)
    record = Record(
        kerneljudge_version=__version__,
        created_at=datetime.now(timezone.utc).isoformat(),
        task=Identity(sha256=job.task.sha256, name=job.task.name),
        candidate=Identity(sha256=job.candidate.sha256, name=job.candidate.name),
        config=job.config.to_dict(),
        device="cpu",
        status=status,
        verified=status == "PASS",
        valid=True,
        failure_kind=failure_kind,
        failure=failure,
        correctness=Correctness(checked=True, passed=status == "PASS", method="oracle"),
        timing=Timing(measured=False, reason="a stand-in judgment (serve_load --fake): nothing ran"),
        environment={"machine": "serve_load stand-in"},
        duration_s=seconds,
    )
    record.rewards = rewards_for(record)
    return record


@contextmanager
def serving(store: Path, args: argparse.Namespace) -> Iterator[str]:
    """The server's url while it serves: `kerneljudge serve` (real judgments), or with `--fake` the same app in
    this process over stand-in lanes; stopped gracefully on the way out."""
    if args.fake is None:
        server = start_server(store, port := free_port(), args)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.send_signal(signal.SIGINT)  # uvicorn's graceful stop: the service closes its lanes
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                server.kill()
        return
    import uvicorn

    from kerneljudge.config import JudgeConfig
    from kerneljudge.serve.app import create_app
    from kerneljudge.serve.service import Service

    config = JudgeConfig(device="cpu", mode=args.mode, policy="practical", timing=False)
    service = Service(StandInLanes(args.lanes, args.fake), store, config, queue=args.queue)  # type: ignore[arg-type]
    server = uvicorn.Server(uvicorn.Config(create_app(service), host="127.0.0.1", port=0, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started and thread.is_alive():
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(30)
        service.close()


OPENRLHF_TRIES = 5  # openrlhf/utils/agent.py: `_post_request(url, data, try_max_times=5)`, 1 s apart
OPENRLHF_PAUSE_S = 1.0
PROMPT = (
    "<|im_start|>user\nWrite ModelNew, a faster version of the model below, as one fenced Python block.\n"
    "<|im_end|>\n<|im_start|>assistant\n"
)


def openrlhf_body(sent: Sent) -> dict[str, Any]:
    """The body OpenRLHF's rollout posts for one sample: the prompt and the model's response as its query."""
    response = f"Here it is:\n```python\n{sent.item['candidate']}```\n"
    return {"query": [PROMPT + response], "prompts": [PROMPT], "labels": [sent.item["task_source"]]}


def send_like_openrlhf(client: Any, url: str, sent: Sent) -> None:
    """Five tries one second apart, any answer but a 200 (or no answer) tried again, Retry-After not read."""
    began = time.monotonic()
    for _ in range(OPENRLHF_TRIES):
        sent.tries += 1
        try:
            response = client.post(f"{url}/get_reward", json=openrlhf_body(sent))
            sent.status_code = response.status_code
            if response.status_code == 200:
                sent.answer = response.json()
                break
            sent.error = response.text[:300]
        except httpx.HTTPError as exc:
            sent.error = f"{type(exc).__name__}: {exc}"
        sent.failed_tries += 1
        time.sleep(OPENRLHF_PAUSE_S)
    sent.seconds = time.monotonic() - began


def drive_openrlhf(url: str, requests: list[Sent], senders: int, timeout_s: float) -> list[Sent]:
    """Every request sent by `senders` threads side by side, each sample alone, as OpenRLHF sends them."""
    pending = iter(requests)
    lock = threading.Lock()

    def sender() -> None:
        with httpx.Client(timeout=httpx.Timeout(timeout_s)) as client:
            while True:
                with lock:
                    entry = next(pending, None)
                if entry is None:
                    return
                send_like_openrlhf(client, url, entry)

    threads = [threading.Thread(target=sender, daemon=True) for _ in range(senders)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return requests


@dataclass
class Call:
    """One reward call of a TRL rank: its batch and what came back."""

    batch: list[Sent]
    rewards: list[float | None] | None = None
    verdicts: list[tuple[str, str | None]] | None = None
    seconds: float = 0.0
    error: str | None = None


def drive_trl(url: str, requests: list[Sent], ranks: int, batch: int) -> list[Call]:
    """`ranks` threads, each calling `KernelJudgeReward` on its next batch of `batch` completions until none
    is left, as GRPOTrainer calls a reward function on each rank."""
    from kerneljudge.adapters.trl import KernelJudgeReward

    calls = [Call(requests[start : start + batch]) for start in range(0, len(requests), batch)]
    pending = iter(calls)
    lock = threading.Lock()

    def rank() -> None:
        reward = KernelJudgeReward(url=url)
        while True:
            with lock:
                call = next(pending, None)
            if call is None:
                return
            began = time.monotonic()
            try:
                completions = [
                    [{"role": "assistant", "content": f"```python\n{s.item['candidate']}```"}] for s in call.batch
                ]
                call.rewards = reward(
                    prompts=[[{"role": "user", "content": "write it"}]] * len(call.batch),
                    completions=completions,
                    task=[s.item["task_source"] for s in call.batch],
                )
                call.verdicts = [(o.status, o.failure_kind) for o in reward.last]
            except Exception as exc:  # a failed training step: what the check counts
                call.error = f"{type(exc).__name__}: {exc}"
            call.seconds = time.monotonic() - began

    threads = [threading.Thread(target=rank, daemon=True) for _ in range(ranks)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return calls


@dataclass(frozen=True)
class TrainerLoad:
    """What a trainer's client got, as the checks and the table read it."""

    client: str
    senders: int  # OpenRLHF: senders side by side; TRL: ranks
    calls: int  # OpenRLHF: requests sent (tries); TRL: reward calls
    samples: int
    lost: list[str]  # the samples without a reward
    failed: int  # OpenRLHF: tries answered other than 200 or not at all; TRL: reward calls that raised
    seconds: list[float]  # OpenRLHF: per sample; TRL: per reward call
    misjudged: dict[str, int]  # per kind, samples that got another verdict
    contents: int


def openrlhf_load(sent: list[Sent], senders: int) -> TrainerLoad:
    lost = [s.request_id for s in sent if s.answer is None or s.answer["extra_logs"]["kerneljudge_rewarded"] != [1.0]]
    misjudged: Counter[str] = Counter()
    for s in sent:
        if s.answer is not None and (s.answer["extra_logs"]["kerneljudge_verified"] == [1.0]) != verified(s.kind):
            misjudged[s.kind] += 1
    return TrainerLoad(
        "openrlhf",
        senders,
        sum(s.tries for s in sent),
        len(sent),
        lost,
        sum(s.failed_tries for s in sent),
        [s.seconds for s in sent],
        dict(misjudged),
        len({s.item["candidate"] for s in sent}),
    )


def trl_load(calls: list[Call], ranks: int) -> TrainerLoad:
    lost, misjudged = [], Counter[str]()
    for call in calls:
        rewards = call.rewards or [None] * len(call.batch)
        for s, reward in zip(call.batch, rewards, strict=True):
            if reward is None:
                lost.append(s.request_id)
        for s, (status, failure_kind) in zip(call.batch, call.verdicts or [], strict=False):
            if not as_expected(s.kind, {"status": status, "failure_kind": failure_kind}):
                misjudged[s.kind] += 1
    samples = [s for call in calls for s in call.batch]
    return TrainerLoad(
        "trl",
        ranks,
        len(calls),
        len(samples),
        lost,
        sum(call.error is not None for call in calls),
        [call.seconds for call in calls],
        dict(misjudged),
        len({s.item["candidate"] for s in samples}),
    )


def verified(kind: str) -> bool:
    """Whether a candidate of `kind` must be verified: the mix's honest ones, the manifest's honest ones."""
    if kind in EXPECTED:
        return EXPECTED[kind][0] == "PASS"
    import throughput_manifest

    return throughput_manifest.expected_pass(kind)


def trainer_checks(load: TrainerLoad, judgments: float) -> list[tuple[str, bool, str]]:
    """(check, passed, detail): no sample lost, no request failed, each content judged once, each verdict."""
    lost = f"{len(load.lost)} of {load.samples} without a reward" + (
        f": {', '.join(load.lost[:5])}" if load.lost else ""
    )
    return [
        ("no sample lost", not load.lost, lost),
        ("no request failed", load.failed == 0, f"{load.failed} failed"),
        ("each content judged once", judgments == load.contents, f"{load.contents} contents, {judgments:.0f} judged"),
        (
            "each kind its verdict",
            not load.misjudged,
            f"misjudged: {load.misjudged}" if load.misjudged else "as expected",
        ),
    ]


def p50_p95(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.2f} / {values[0]:.2f}" if values else "-"
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return f"{statistics.median(values):.2f} / {cuts[94]:.2f}"


def trainer_table(load: TrainerLoad, refused: float, seconds: float, args: argparse.Namespace) -> str:
    """One row: the client, its calls and samples, lost and failed, the latency, the server's refusals."""
    judging = (
        f"stand-in {args.fake:g} s"
        if args.fake is not None
        else f"{args.device}, timed: {'yes' if args.timing else 'no'}"
    )
    what = "sample" if load.client == "openrlhf" else "reward call"
    head = (
        f"| client | senders | lanes + queue | judgments | calls | samples | lost | failed | {what} latency p50 / p95 "
        "| refusals the server counted (429, 413) | wall time |"
    )
    row = (
        f"| {load.client} | {load.senders} | {args.lanes} + {args.queue} | {judging} | {load.calls} | {load.samples} "
        f"| {len(load.lost)} | {load.failed} | {p50_p95(load.seconds)} s | {refused:.0f} | {seconds:.1f} s |"
    )
    return "\n".join([head, "|---|---|---|---|---|---|---|---|---|---|---|", row]) + "\n"


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
    parser.add_argument("--client", choices=("judge", "openrlhf", "trl"), default="judge", help="whose client sends")
    parser.add_argument("--load", type=float, default=3.0, help="--client openrlhf: senders, times the capacity")
    parser.add_argument("--batch", type=int, help="--client trl: completions a reward call (default 2 x capacity)")
    parser.add_argument("--client-timeout", type=float, default=180.0, help="--client openrlhf: its timeout, s")
    parser.add_argument("--fake", type=float, metavar="S", help="stand-in judgments of S seconds (nothing runs)")
    args = parser.parse_args(argv)
    if args.timeout is None:
        args.timeout = 180.0 if args.work == "real" else 20.0
    if args.fake is not None and args.work == "real":
        raise SystemExit("--fake judges the mix's kinds only: leave out --work real, or --fake")
    if args.client != "judge":
        return trainer_main(args)
    with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
        if args.work == "real":
            requests = plan_real(args.retries, args.seed, Path(folder) / "work")
        else:
            requests = plan(args.requests, args.variants, args.seed, parse_mix(args.mix))
        store = Path(folder) / "rewards.db"
        with serving(store, args) as url:
            began = time.monotonic()
            sent = drive(url, requests, args.clients, began + args.max_seconds, args.timeout * 20)
            seconds = time.monotonic() - began
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
        from kerneljudge.results.store import Store

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


def trainer_main(args: argparse.Namespace) -> int:
    """`--client openrlhf` or `trl`: the load as that trainer's client sends it, its table and its checks."""
    capacity = args.lanes + args.queue
    with tempfile.TemporaryDirectory(prefix="serve-load-") as folder:
        if args.work == "real":
            requests = plan_real(args.retries, args.seed, Path(folder) / "work")
        else:
            requests = plan(args.requests, args.variants, args.seed, parse_mix(args.mix))
        with serving(Path(folder) / "rewards.db", args) as url:
            began = time.monotonic()
            if args.client == "openrlhf":
                senders = max(1, round(args.load * capacity))
                load = openrlhf_load(drive_openrlhf(url, requests, senders, args.client_timeout), senders)
            else:
                batch = args.batch or 2 * capacity
                load = trl_load(drive_trl(url, requests, args.clients, batch), args.clients)
            seconds = time.monotonic() - began
            metrics = httpx.get(f"{url}/metrics", timeout=10).text
    judgments = metric_total(metrics, "kerneljudge_judgments_total")
    checks = trainer_checks(load, judgments)
    text = trainer_table(load, metric_total(metrics, "kerneljudge_rejected_total"), seconds, args) + "\n"
    text += "\n".join(f"- {'passed' if ok else 'FAILED'}: {name} ({detail})" for name, ok, detail in checks) + "\n"
    print(text, end="")
    if args.markdown is not None:
        args.markdown.write_text(text)
    if args.json is not None:
        fields = {k: v for k, v in vars(load).items() if k != "seconds"} | {"seconds": load.seconds}
        args.json.write_text(json.dumps({"checks": checks, "load": fields}, indent=1) + "\n")
    return 0 if all(ok for _, ok, _ in checks) else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    # A stage's `timeout` ends this script with SIGTERM: stop the server on the way out, not leave it judging.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
