"""`kerneljudge env` and `kerneljudge schema`: what this machine offers, and the record's JSON Schema."""

from __future__ import annotations

import argparse
import json
from typing import Any


def add_info_parsers(sub: Any) -> None:
    e = sub.add_parser("env", help="report what this machine offers (CUDA, Triton, interpreter, namespaces)")
    e.add_argument("--json", action="store_true", help="print JSON")
    sub.add_parser("schema", help="print the JSON Schema of the verdict record")


def cmd_env(args: argparse.Namespace) -> int:
    from kerneljudge.judgment.env import report

    info = report()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    width = max(len(k) for k in info)
    for key, value in info.items():
        print(f"{key:<{width}}  {value}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from kerneljudge.results.verdict import record_json_schema

    print(json.dumps(record_json_schema(), indent=2))
    return 0
