"""`kerneljudge generate` and `kerneljudge improve`: candidates from a model into a KernelBench run folder, and
the repair loop that judges them and sends the verdict back (docs/generate.md; the work is in
kerneljudge/generate/)."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kerneljudge.errors import UsageError

RESUME_NOTE = "run the same command again to resume: samples already written are not asked for again"


def add_generate_commands(sub: Any) -> None:
    """Register `generate` and `improve` on the CLI's subparsers."""
    from kerneljudge.cli.options import add_judge_options
    from kerneljudge.cli.usage import count, positive_int, positive_seconds

    g = sub.add_parser("generate", help="ask a model for candidates into a KernelBench run folder; reruns resume")
    i = sub.add_parser("improve", help="the repair loop: generate, judge, send the verdict back, up to K rounds")
    for p in (g, i):
        add_model_arguments(p, count, positive_int, positive_seconds)
    i.add_argument("--rounds", type=positive_int, default=3, metavar="K", help="rounds per chain at most")
    i.add_argument(
        "--feedback-template",
        type=Path,
        metavar="FILE",
        help="the repair message, with {{explanation}} (docs/generate.md); default: the built-in one",
    )
    i.add_argument("--store", type=Path, metavar="PATH", help="also keep every judgment in this results store")
    add_judge_options(i, "device", "mode", "policy", "timeout")
    i.add_argument("--no-timing", action="store_true", help="check correctness only")
    i.add_argument("--judge-jobs", type=positive_int, default=1, metavar="N", help="judgments side by side")


def add_model_arguments(p: argparse.ArgumentParser, count: Any, positive_int: Any, positive_seconds: Any) -> None:
    from kerneljudge.generate.datasets import SPEC_HELP

    p.add_argument("--tasks", nargs="+", required=True, metavar="SPEC", help=SPEC_HELP)
    p.add_argument("--level", type=int, nargs="+", metavar="L", help="keep only tasks of these levels")
    p.add_argument("--name", nargs="+", metavar="GLOB", help="keep only tasks whose name (or id) matches")
    p.add_argument("--out", type=Path, required=True, metavar="RUN_DIR", help="the run folder (made, or resumed)")
    p.add_argument("--model", help="the model's name as the server knows it (with --offline: default 'replay')")
    p.add_argument("--base-url", metavar="URL", help="an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1")
    p.add_argument(
        "--api-key-env",
        default="OPENAI_API_KEY",
        metavar="NAME",
        help="the environment variable holding the API key (read, never written anywhere)",
    )
    p.add_argument(
        "--offline",
        type=Path,
        metavar="RESPONSES",
        help="replay canned responses (a JSONL file or a folder with responses.jsonl) instead of a server",
    )
    p.add_argument("--samples", type=positive_int, default=1, metavar="N", help="samples (improve: chains) per task")
    p.add_argument("--temperature", type=float, help="sampling temperature (default: the server's)")
    p.add_argument("--top-p", type=float, help="nucleus sampling (default: the server's)")
    p.add_argument("--max-tokens", type=positive_int, metavar="N", help="the response's length limit")
    p.add_argument("--seed", type=int, help="sample S is sent seed+S (servers that honour it repeat their answers)")
    p.add_argument("--concurrency", type=positive_int, default=4, metavar="N", help="requests in flight at most")
    p.add_argument("--retries", type=count, default=5, metavar="N", help="retries of a 429, 5xx or lost connection")
    p.add_argument(
        "--request-timeout", type=positive_seconds, default=600.0, metavar="SECONDS", help="the limit of one request"
    )
    p.add_argument(
        "--prompt-template",
        type=Path,
        metavar="FILE",
        help="the prompt, with {{reference}} (docs/generate.md); default: the KernelBench-style one",
    )


def backend_of(args: argparse.Namespace) -> Any:
    from kerneljudge.generate.client import ChatClient
    from kerneljudge.generate.offline import OfflineBackend, ResponseBook

    if args.offline is not None:
        if args.base_url is not None:
            raise UsageError("give either --offline RESPONSES or --base-url URL, not both")
        return OfflineBackend(ResponseBook.load(args.offline))
    if args.model is None:
        raise UsageError("say which model to ask: --model NAME (and --base-url URL for a server of your own)")
    return ChatClient(args.base_url, args.api_key_env, retries=args.retries, timeout_s=args.request_timeout)


def generate_spec(args: argparse.Namespace) -> Any:
    from kerneljudge.generate.client import Sampling
    from kerneljudge.generate.prompts import prompt_template
    from kerneljudge.generate.run import GenerateSpec

    sampling = Sampling(args.temperature, args.top_p, args.max_tokens, args.seed)
    model = args.model or "replay"
    return GenerateSpec(model, args.samples, prompt_template(args.prompt_template), sampling, args.concurrency)


@contextlib.contextmanager
def progress_bar(total: int, what: str) -> Iterator[Callable[[str | None], None]]:
    """A bar on a terminal's stderr; elsewhere (a log, CI) a line on stdout per item done."""
    if not sys.stderr.isatty():
        yield lambda line: print(line, flush=True) if line else None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, transient=True) as bar:
        job = bar.add_task(what, total=total)
        yield lambda line: bar.advance(job)


def cmd_generate(args: argparse.Namespace) -> int:
    """Exit 0 when every sample is written, 1 when a request failed for good (a rerun retries it)."""
    from kerneljudge.generate.datasets import select_tasks
    from kerneljudge.generate.run import generate

    spec = generate_spec(args)
    tasks = select_tasks(args.tasks, args.level or (), args.name or ())
    backend = backend_of(args)
    print(f"{len(tasks)} tasks x {args.samples} samples from {spec.model} ({backend.description}) to {args.out}")

    def line(record: Any) -> str | None:
        if record is None:
            return None
        state = f"error: {record.error}" if record.error else f"{len(record.source or '')} chars"
        return f"{record.task_id} sample {record.sample_id}: {state}"

    with progress_bar(len(tasks) * args.samples, "generating") as advance:
        counts = generate(tasks, backend, spec, args.out, on_sample=lambda r: advance(line(r)))
    print(
        f"{counts.summary()}; judge them with: kerneljudge batch --kernelbench-run {args.out} "
        f"--kernelbench-problems {args.out / 'problems'} --store results.db"
    )
    if counts.failed:
        print(f"kerneljudge: {counts.failed} requests failed (failures.jsonl); {RESUME_NOTE}", file=sys.stderr)
    return 1 if counts.failed else 0


def cmd_improve(args: argparse.Namespace) -> int:
    """Exit 0 when every chain ends verified, 2 when one ends unverified, 1 when a request failed for good."""
    from kerneljudge.cli.judge import config_of
    from kerneljudge.generate.datasets import select_tasks
    from kerneljudge.generate.improve import ImproveSpec, improve
    from kerneljudge.generate.prompts import feedback_template

    config = config_of(args)
    if args.store is not None and not args.store.parent.is_dir():
        raise UsageError(f"cannot write {args.store}: directory {args.store.parent} does not exist")
    spec = ImproveSpec(
        generate_spec(args), args.rounds, feedback_template(args.feedback_template), config, args.store, args.judge_jobs
    )
    tasks = select_tasks(args.tasks, args.level or (), args.name or ())
    backend = backend_of(args)
    print(
        f"{len(tasks)} tasks x {args.samples} chains of up to {args.rounds} rounds from {spec.generation.model} "
        f"({backend.description}), judged on {args.device}, to {args.out}"
    )

    def line(last: Any) -> str | None:
        if last is None:
            return None
        verdict = last.verdict.status if last.verdict else "no verdict"
        return f"{last.task_id} chain {last.sample_id}: round {last.round} {verdict}, stopped: {last.stop}"

    with progress_bar(len(tasks) * args.samples, "improving") as advance:
        counts = improve(tasks, backend, spec, args.out, on_chain=lambda r: advance(line(r)))
    print(f"{counts.summary()}; rounds in {args.out / 'rounds.jsonl'}")
    if counts.failed:
        print(
            f"kerneljudge: {counts.failed} chains stopped on a failed request; run the same command again",
            file=sys.stderr,
        )
        return 1
    return 0 if counts.verified == counts.chains else 2


GENERATE_COMMANDS = {"generate": cmd_generate, "improve": cmd_improve}
