"""`kerneljudge batch`, `export`, `verify` and `report`: the commands over a results store (docs/batch.md,
docs/report.md)."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

from kerneljudge.errors import UsageError
from kerneljudge.results.store import Store
from kerneljudge.runs.backends.machine import lanes_for
from kerneljudge.runs.batch import Interrupt, read_manifest, run_batch, stop_on_signals
from kerneljudge.runs.kernelbench_runs import kernelbench_results, problems_from_parquet, read_kernelbench_run


def add_batch_commands(sub: Any) -> None:
    """Register `batch`, `export` and `report` on the CLI's subparsers."""
    from kerneljudge.cli.judge import add_lane_options
    from kerneljudge.cli.options import add_judge_options
    from kerneljudge.cli.usage import positive_int

    b = sub.add_parser("batch", help="judge every item of a JSONL manifest into a results store; reruns resume")
    b.add_argument(
        "manifest",
        type=Path,
        nargs="?",
        help='JSONL, one {"task": PATH, "candidate": PATH} a line, or a group: {"task": PATH, "candidates": '
        "[PATH, ...]}",
    )
    b.add_argument(
        "--kernelbench-run",
        type=Path,
        metavar="RUN_DIR",
        help="instead of a manifest: a KernelBench run folder of level_L_problem_P_sample_S_kernel.py files",
    )
    b.add_argument(
        "--kernelbench-problems",
        type=Path,
        metavar="DIR",
        help="with --kernelbench-run: the KernelBench/ folder of a checkout (level1/, level2/, ...)",
    )
    b.add_argument(
        "--kernelbench-parquet",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="with --kernelbench-run, instead of a checkout: the Hugging Face dataset's parquet files "
        "(their problems are written beside the store, in kernelbench-problems/)",
    )
    b.add_argument("--store", type=Path, required=True, metavar="PATH", help="the SQLite results store")
    add_judge_options(b, "device", "mode", "policy", "timeout")
    b.add_argument("--no-timing", action="store_true", help="check correctness only")
    b.add_argument(
        "--gpus",
        metavar="all|I,J,...",
        help="lanes on every visible GPU, or on these (CUDA_VISIBLE_DEVICES entries); default: the inherited device",
    )
    b.add_argument(
        "--jobs",
        type=positive_int,
        default=1,
        metavar="N",
        help="lanes (judgments side by side) per GPU with --gpus or --backend ray, else on the CPU or the "
        "inherited device",
    )
    b.add_argument(
        "--backend",
        choices=("local", "ray"),
        default="local",
        help="where the lanes are: this machine (default), or every GPU of a Ray cluster, an actor each with "
        "--jobs lanes (docs/ray.md; pip install 'kerneljudge[ray]')",
    )
    b.add_argument(
        "--address",
        metavar="ADDR",
        help="with --backend ray: the cluster's head, HOST:PORT; default: RAY_ADDRESS, else the cluster "
        "`ray start` started on this machine, else a new one on this machine",
    )
    b.add_argument(
        "--cached-baselines",
        action="store_true",
        help="time each task's reference once per device (an A/A judgment) and share it with the task's "
        "candidates, instead of timing it in every judgment",
    )
    add_lane_options(b)
    b.add_argument(
        "--group-size",
        type=positive_int,
        metavar="N",
        help="judge every item with the others of its task, in groups of at most N (one hidden plan and one "
        "reference worker per group; docs/batch.md); default: a manifest line's group together, other items alone",
    )
    b.add_argument(
        "--log",
        type=Path,
        metavar="PATH",
        help="append every judgment's stages there, a line each with the time, as they start",
    )
    e = sub.add_parser("export", help="write a results store's records as JSONL and/or a flat CSV table")
    e.add_argument("--store", type=Path, required=True, metavar="PATH", help="the results store (SQLite) to read")
    e.add_argument("--jsonl", type=Path, metavar="PATH", help="every record, one JSON document a line")
    e.add_argument("--csv", type=Path, metavar="PATH", help="one row per record: status, speedup, rewards")
    e.add_argument(
        "--kernelbench-json",
        type=Path,
        metavar="PATH",
        help="KernelBench samples as eval_results.json has them, correctness meaning verified "
        "(name it verified_eval_results.json beside the run's eval_results.json)",
    )
    e.add_argument("--level", type=int, help="with --kernelbench-json: the KernelBench level to write")
    e.add_argument(
        "--bundle",
        type=Path,
        metavar="DIR",
        help="an evidence bundle in a new folder: the records, the exact sources they judged, the worker logs "
        "and SHA256SUMS (check it with `kerneljudge verify DIR`)",
    )
    v = sub.add_parser("verify", help="check an evidence bundle: every hash, and each record against its sources")
    v.add_argument("bundle", type=Path, metavar="DIR")
    r = sub.add_parser("report", help="fast_p, verified_fast_p and speedups of a results store (Markdown, HTML)")
    r.add_argument("--store", type=Path, required=True, metavar="PATH", help="the results store (SQLite) to summarise")
    r.add_argument("--markdown", type=Path, metavar="PATH", help="write the summary here too")
    r.add_argument("--html", type=Path, metavar="PATH", help="write a self-contained HTML page with plots")
    r.add_argument(
        "--baseline",
        type=Path,
        metavar="JSON",
        help="speedups against reference times in KernelBench's baseline format (baseline_time_torch.json) "
        "instead of each judgment's paired live reference",
    )


def cmd_batch(args: argparse.Namespace) -> int:
    from kerneljudge.cli.judge import config_of

    config = config_of(args)
    if (args.manifest is None) == (args.kernelbench_run is None):
        raise UsageError("give either a MANIFEST or --kernelbench-run RUN_DIR --kernelbench-problems DIR")
    if args.kernelbench_run is not None:
        if (args.kernelbench_problems is None) == (args.kernelbench_parquet is None):
            raise UsageError(
                "--kernelbench-run needs its problems: --kernelbench-problems DIR (a checkout's KernelBench/ "
                "folder) or --kernelbench-parquet FILE ..."
            )
        problems = args.kernelbench_problems
        if problems is None:
            problems = problems_from_parquet(args.kernelbench_parquet, args.store.parent / "kernelbench-problems")
        items = read_kernelbench_run(args.kernelbench_run, problems)
    else:
        items = read_manifest(args.manifest)
    if args.backend == "ray" and args.gpus is not None:
        raise UsageError("--gpus picks GPUs of this machine; with --backend ray every GPU of the cluster judges")
    if args.backend != "ray" and args.address is not None:
        raise UsageError("--address names a Ray cluster: give it with --backend ray")
    if args.backend == "ray" and args.spare_workers:
        raise UsageError("--spare-workers keeps spares on this machine's lanes, not on a Ray cluster")
    lanes = lanes_for(config.device, args.gpus, args.jobs) if args.backend == "local" else [None]
    if args.log is not None and not args.log.parent.is_dir():
        raise UsageError(f"cannot write {args.log}: directory {args.log.parent} does not exist")
    # SIGINT or SIGTERM: nothing more starts, the judgments in flight are stopped and not stored, and the summary
    # says what finished; a second signal ends the process at once (runs/batch.stop_on_signals).
    stop = Interrupt()
    with stop_on_signals(stop), contextlib.suppress(Stopped):
        with contextlib.ExitStack() as stack:
            stages = stack.enter_context(args.log.open("a")) if args.log is not None else None
            backend = None
            if args.backend == "ray":  # Ray is imported only here
                from kerneljudge.runs.backends.ray import RayBackend

                ray = RayBackend(args.address, jobs_per_gpu=args.jobs, cached_baselines=args.cached_baselines)
                backend = stack.enter_context(ray)
            counts = run_batch(
                items,
                config,
                args.store,
                lanes=lanes,
                log=stages,
                backend=backend,
                spare_workers=args.spare_workers,
                stop=stop,
                group_size=args.group_size,
            )
            if stop and backend is not None:
                raise Stopped  # a backend's exit on an exception stops its jobs in flight instead of waiting for them
    if stop:
        print(f"stopped by {stop.name}: {counts.summary()}; store {args.store}")
        print(f"kerneljudge: stopped by {stop.name}; the same command again judges the rest", file=sys.stderr)
        return stop.exit_code
    print(f"{counts.summary()}; store {args.store}")
    return 1 if counts.errors else 0


class Stopped(Exception):
    """Raised out of a batch on a backend that was asked to stop, for the backend's exit to stop at once."""


def cmd_export(args: argparse.Namespace) -> int:
    targets = (args.jsonl, args.csv, args.kernelbench_json, args.bundle)
    if all(target is None for target in targets):
        raise UsageError("say what to write: --jsonl PATH, --csv PATH, --kernelbench-json PATH and/or --bundle DIR")
    if not args.store.is_file():
        raise UsageError(f"no store at {args.store}: run `kerneljudge batch MANIFEST --store {args.store}` first")
    for target in targets:
        if target is not None and not target.parent.is_dir():
            raise UsageError(f"cannot write {target}: directory {target.parent} does not exist")
    with Store(args.store) as store:
        if args.jsonl is not None:
            print(f"{store.export_jsonl(args.jsonl)} records to {args.jsonl}")
        if args.csv is not None:
            print(f"{store.export_csv(args.csv)} rows to {args.csv}")
        if args.kernelbench_json is not None:
            results = kernelbench_results(list(store), args.level)
            args.kernelbench_json.write_text(json.dumps(results, indent=2) + "\n")
            count = sum(len(samples) for samples in results.values())
            print(f"{count} KernelBench samples of {len(results)} problems to {args.kernelbench_json}")
        if args.bundle is not None:
            from kerneljudge.runs.bundle import BundleError, write_bundle

            records = list(store)
            try:
                files = write_bundle(records, args.bundle)
            except BundleError as exc:
                raise UsageError(str(exc)) from None
            print(f"{len(records)} records in {files} files to {args.bundle}; check it with kerneljudge verify")
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 when the bundle verifies, 2 when it does not."""
    from kerneljudge.runs.bundle import verify_bundle

    if not args.bundle.is_dir():
        raise UsageError(f"no bundle at {args.bundle}: write one with `kerneljudge export --store DB --bundle DIR`")
    count, problems = verify_bundle(args.bundle)
    for problem in problems:
        print(f"  {problem}")
    if problems:
        print(f"bundle {args.bundle}: NOT verified, {len(problems)} problem(s)")
        return 2
    print(f"bundle {args.bundle}: verified, {count} records, every hash and source as recorded")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from kerneljudge.report.markdown import summary_markdown
    from kerneljudge.results.best_of_k import best_of_k
    from kerneljudge.results.metrics import Baseline, BaselineError, speedup_of, summarize

    if not args.store.is_file():
        raise UsageError(f"no store at {args.store}: run `kerneljudge batch MANIFEST --store {args.store}` first")
    for target in (args.markdown, args.html):
        if target is not None and not target.parent.is_dir():
            raise UsageError(f"cannot write {target}: directory {target.parent} does not exist")
    with Store(args.store) as store:
        records = list(store)
    try:
        baseline = Baseline.read(args.baseline) if args.baseline is not None else None
        summary = summarize(records, baseline=baseline)
    except BaselineError as exc:
        raise UsageError(str(exc)) from None
    claims = best_of_k(records)
    text = summary_markdown(summary, claims, records)
    print(text, end="")
    if args.markdown is not None:
        args.markdown.write_text(text)
    if args.html is not None:
        from kerneljudge.report.page import render

        try:
            page = render(records, summary, str(args.store), baseline.speedup if baseline else speedup_of, claims)
        except RuntimeError as exc:  # matplotlib missing
            raise UsageError(str(exc)) from None
        args.html.write_text(page)
        print(f"HTML report: {args.html}")
    return 0


BATCH_COMMANDS = {"batch": cmd_batch, "export": cmd_export, "report": cmd_report, "verify": cmd_verify}
