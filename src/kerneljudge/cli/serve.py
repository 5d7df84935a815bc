"""`kerneljudge serve`: the judge as an HTTP reward service over a pool of judging lanes (docs/serve.md).

The backend that judges is chosen by `make_backend(args, config)`, the one place a new backend (`--backend
ray`) is added. FastAPI and uvicorn are imported when the command runs, never when the CLI loads: they are
the `serve` extra's.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kerneljudge.config import JudgeConfig
from kerneljudge.errors import UsageError
from kerneljudge.logs import FORMATS, LEVELS
from kerneljudge.serve.limits import BODY_TIMEOUT_S, MAX_CONNECTIONS, ServeLimits

if TYPE_CHECKING:
    from kerneljudge.runs.backends import Backend

logger = logging.getLogger(__name__)

BACKENDS = ("local", "ray")


def add_serve_parser(sub: Any) -> None:
    from kerneljudge.cli.judge import add_lane_options
    from kerneljudge.cli.options import MODE_HELP, POLICY_HELP, add_judge_options
    from kerneljudge.cli.usage import count, positive_int, positive_seconds

    s = sub.add_parser("serve", help="serve the judge over HTTP to trainers: POST /v1/judge, /v1/jobs (docs/serve.md)")
    s.add_argument("--store", type=Path, required=True, metavar="PATH", help="the SQLite results store (as batch's)")
    s.add_argument("--host", default="127.0.0.1", help="the address to listen on (0.0.0.0: every interface)")
    s.add_argument("--port", type=positive_int, default=8000, help="the TCP port to listen on")
    s.add_argument("--tasks", type=Path, metavar="DIR", help="task files (*.py, id: the stem) or GPU MODE folders")
    s.add_argument(
        "--queue",
        type=count,
        default=64,
        metavar="N",
        help="judgments that may wait for a lane; beyond them a request is refused at once (429, Retry-After)",
    )
    s.add_argument(
        "--group-size",
        type=positive_int,
        metavar="N",
        help="judge a request's items of one task as groups of at most N: one hidden plan and one reference worker "
        "per group, each candidate in a fresh worker (a training step's samples; docs/serve.md); default: each alone",
    )
    s.add_argument(
        "--backend",
        choices=BACKENDS,
        default="local",
        help="where judgments run: this machine's lanes (default), or every GPU of a Ray cluster, an actor each "
        "with --jobs lanes (docs/ray.md; pip install 'kerneljudge[ray]')",
    )
    s.add_argument(
        "--address",
        metavar="ADDR",
        help="with --backend ray: the cluster's head, HOST:PORT; default: RAY_ADDRESS, else the cluster "
        "`ray start` started on this machine, else a new one on this machine",
    )
    add_judge_options(s, "device")
    s.add_argument(
        "--gpus",
        metavar="all|I,J,...",
        help="lanes on every visible GPU, or on these (CUDA_VISIBLE_DEVICES entries); default: the inherited device",
    )
    s.add_argument(
        "--jobs", type=positive_int, default=1, metavar="N", help="lanes per GPU with --gpus, else on the device"
    )
    # The server's mode and policy are defaults that each item may override.
    add_judge_options(
        s,
        "mode",
        "policy",
        "timeout",
        mode={"help": f"the default mode; an item may ask. {MODE_HELP}"},
        policy={"help": f"the default policy. {POLICY_HELP}"},
    )
    s.add_argument("--no-timing", action="store_true", help="by default check correctness only; an item may ask")
    s.add_argument(
        "--max-connections",
        type=positive_int,
        default=MAX_CONNECTIONS,
        metavar="N",
        help="open connections and requests in progress at most; beyond them uvicorn answers 503 (docs/serve.md, "
        "'Bounded inputs')",
    )
    s.add_argument(
        "--body-timeout",
        type=positive_seconds,
        default=BODY_TIMEOUT_S,
        metavar="SECONDS",
        help="a request's body must arrive within this, from its first byte, or the answer is 408 (docs/serve.md, "
        "'Bounded inputs')",
    )
    s.add_argument(
        "--deadline",
        type=positive_seconds,
        metavar="SECONDS",
        help="POST /v1/judge waits at most this for its answers, then answers 202 with a job to poll; a request's "
        "X-KJ-Deadline-S header may shorten it (default: no bound but the header's)",
    )
    s.add_argument(
        "--log-level", choices=LEVELS, default="info", help="the server's log to stderr: this level and above"
    )
    s.add_argument("--log-format", choices=FORMATS, default="text", help="the log as text, or one JSON object a line")
    s.add_argument(
        "--cached-baselines",
        action="store_true",
        help="time each task's reference once per device (an A/A judgment) and share it (docs/batch.md)",
    )
    add_lane_options(s)


def make_backend(args: argparse.Namespace, config: JudgeConfig) -> tuple[Backend, str]:
    """The backend `--backend` names, and the environment digest of the machines it judges on (the store key's
    fourth field, known before judging so that a retry is answered from the store). A cluster of unlike nodes
    records each judgment under its own node's environment; the server's ledger maps it back to the request."""
    from kerneljudge.results.store import environment_digest

    if args.backend == "ray" and args.gpus is not None:
        raise UsageError("--gpus picks GPUs of this machine; with --backend ray every GPU of the cluster judges")
    if args.backend != "ray" and args.address is not None:
        raise UsageError("--address names a Ray cluster: give it with --backend ray")
    if args.backend == "ray" and args.spare_workers:
        raise UsageError("--spare-workers keeps spares on this machine's lanes, not on a Ray cluster")
    backend: Backend
    if args.backend == "local":
        from kerneljudge.runs.backends.local import LocalBackend
        from kerneljudge.runs.backends.machine import lanes_for

        lanes = lanes_for(config.device, args.gpus, args.jobs)
        backend = LocalBackend(
            lanes, cached_baselines=args.cached_baselines, spare_workers=args.spare_workers, timed=config.timing
        )
    elif args.backend == "ray":  # Ray is imported only here
        from kerneljudge.runs.backends.ray import RayBackend

        backend = RayBackend(args.address, jobs_per_gpu=args.jobs, cached_baselines=args.cached_baselines)
    else:
        raise UsageError(f"--backend {args.backend}: not one of {', '.join(BACKENDS)}")
    try:
        return backend, environment_digest(backend.machine_environments(config)[0])
    except BaseException:
        backend.close()
        raise


def cmd_serve(args: argparse.Namespace) -> int:
    from kerneljudge.cli.judge import config_of

    try:
        import uvicorn

        from kerneljudge.serve.app import create_app
        from kerneljudge.serve.limits import uvicorn_config
    except ImportError as exc:
        missing = f"kerneljudge serve needs its extra ({exc.name} is missing)"
        raise UsageError(f"{missing}: pip install 'kerneljudge[serve]'") from None
    from kerneljudge.api.catalog import TaskCatalog
    from kerneljudge.logs import configure
    from kerneljudge.serve.service import Service

    configure(args.log_level, args.log_format)
    config = config_of(args)
    if not args.store.parent.is_dir():
        raise UsageError(f"--store {args.store}: directory {args.store.parent} does not exist")
    tasks = TaskCatalog(args.tasks)
    backend, environment = make_backend(args, config)
    service = Service(
        backend, args.store, config, tasks, queue=args.queue, environment=environment, group_size=args.group_size
    )
    # The lanes are up before the port opens (make_backend returns once they are): a client that connects
    # finds /healthz ready (docs/serve.md, "Readiness").
    logger.info(
        "serving http://%s:%s (%d lanes, queue %d, store %s); API at /docs",
        args.host,
        args.port,
        backend.lanes,
        args.queue,
        args.store,
    )
    limits = ServeLimits(
        max_connections=args.max_connections, body_timeout_s=args.body_timeout, deadline_s=args.deadline
    )
    app = create_app(service, limits=limits)
    try:
        uvicorn.Server(uvicorn_config(app, args.host, args.port, limits, args.log_level)).run()
    finally:
        service.close()
    return 0
