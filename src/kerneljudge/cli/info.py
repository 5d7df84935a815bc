"""`kerneljudge env` and `kerneljudge schema`: what this machine offers, and the record's JSON Schema.

`env` prints `judgment.env.report()` as a two-column table in groups (software, GPU, numerics flags, sandbox,
tools), a nested value as one row per entry under its dotted key (`sandbox.seccomp`), the same keys as
`--json` prints; a key the groups do not name still shows, under "other", so nothing of the report is lost.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import textwrap
from typing import Any

# The report's keys in the table's groups, in the order shown.
ENV_GROUPS = (
    (
        "software",
        (
            "kerneljudge",
            "python",
            "python_executable",
            "platform",
            "machine",
            "torch",
            "torch_cuda",
            "triton",
            "triton_interpreter",
        ),
    ),
    (
        "GPU",
        ("cuda_available", "gpu_name", "gpu_capability", "gpu_count", "gpu_memory_bytes", "l2_cache_bytes", "driver"),
    ),
    ("numerics flags (as a worker sees them)", ("flags",)),
    ("sandbox", ("namespaces", "sandbox", "sandbox_cuda_workers")),
    ("tools", ("compute_sanitizer", "clock_monitor")),
)
NARROWEST = 24  # the value column's least width when wrapping to a narrow terminal


def add_info_parsers(sub: Any) -> None:
    e = sub.add_parser(
        "env", help="report what this machine offers (software, GPU, sandbox layers, compute-sanitizer, NVML)"
    )
    e.add_argument("--json", action="store_true", help="print the report as JSON (the same keys as the table)")
    sub.add_parser("schema", help="print the JSON Schema of the verdict record")


def shown(key: str, value: Any) -> str:
    """One value of the report as a reader wants it: yes/no, sizes in GiB or MiB, '-' for unknown."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key.endswith("_bytes") and isinstance(value, int):
        unit, size = ("GiB", 2**30) if value >= 2**30 else ("MiB", 2**20)
        return f"{value / size:.1f} {unit} ({value} bytes)"
    if isinstance(value, list | tuple):
        return ".".join(map(str, value)) if key == "gpu_capability" else ", ".join(map(str, value))
    return str(value)


def flattened(key: str, value: Any) -> list[tuple[str, str]]:
    """A report entry as rows: a dict becomes a row per entry under the dotted key; an empty one a '-'."""
    if isinstance(value, dict):
        if not value:
            return [(key, "-")]
        return [row for name, item in value.items() for row in flattened(f"{key}.{name}", item)]
    return [(key, shown(key, value))]


def env_groups(info: dict[str, Any]) -> list[tuple[str, list[tuple[str, str]]]]:
    """The report's rows in ENV_GROUPS, then any key they do not name under "other"."""
    groups = []
    for title, keys in ENV_GROUPS:
        rows = [row for key in keys if key in info for row in flattened(key, info[key])]
        if rows:
            groups.append((title, rows))
    named = {key for _, keys in ENV_GROUPS for key in keys}
    rest = [row for key, value in info.items() if key not in named for row in flattened(key, value)]
    if rest:
        groups.append(("other", rest))
    return groups


def env_table(info: dict[str, Any], width: int | None = None) -> str:
    """The report as a two-column table; `width`: wrap long values to it (a terminal's), None: one line a row."""
    groups = env_groups(info)
    key_width = max(len(key) for _, rows in groups for key, _ in rows)
    lines: list[str] = []
    for title, rows in groups:
        lines.extend(([""] if lines else []) + [title])
        for key, value in rows:
            head = f"  {key:<{key_width}}  "
            if width is None or len(head) + len(value) <= width:
                lines.append(head + value)
                continue
            # Wrapped at spaces only: a path or a version is never split.
            parts = textwrap.wrap(
                value, max(width - len(head), NARROWEST), break_long_words=False, break_on_hyphens=False
            )
            lines.append(head + parts[0])
            lines.extend(" " * len(head) + part for part in parts[1:])
    return "\n".join(lines)


def cmd_env(args: argparse.Namespace) -> int:
    from kerneljudge.judgment.env import report

    info = report()
    if args.json:
        print(json.dumps(info, indent=2))
        return 0
    # A terminal gets its width; a pipe or a file gets each row whole, for grep.
    print(env_table(info, shutil.get_terminal_size().columns if sys.stdout.isatty() else None))
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from kerneljudge.results.verdict import record_json_schema

    print(json.dumps(record_json_schema(), indent=2))
    return 0
