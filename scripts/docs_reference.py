"""The documentation site's generated reference pages, and the MkDocs hook that adds them to every build.

The pages are read from the code at build time, so they cannot go stale: the command line's reference from
`kerneljudge.cli.build_parser()` (every command's usage, options with their help and defaults, exit codes), the
findings catalogue from `kerneljudge.checks.catalog` (every code, its detector, summary, severity by policy or mode,
remedy), the configuration from `kerneljudge.config.JudgeConfig` and the record's JSON Schema from
`kerneljudge.results.verdict`. mkdocs.yml names this file under `hooks:`; `on_files` adds the pages to the build
(they are never written into docs/), and `on_config` makes docs/benchmarks/'s pages a nav section whatever their
names.

Run as a script, it writes the pages into a folder, to read them without building the site:

    .venv/bin/python scripts/docs_reference.py --out /tmp/reference
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

GENERATED_NOTE = "<!-- generated at build time by scripts/docs_reference.py: edit the code it reads, not this page -->"


def text(value: str) -> str:
    """Plain text made safe for Markdown: no raw HTML, no emphasis from a stray `*` or `_` (`__import__`); a span
    in backticks stays code, as written."""
    parts = re.split(r"(`[^`]*`)", " ".join(value.split()))
    return "".join(
        part if part.startswith("`") else re.sub(r"([*_])", r"\\\1", html.escape(part, quote=False)) for part in parts
    )


# ---- the command line


def subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command of `parser`, in the order `--help` lists them."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:  # an alias names the same parser again
                    seen.add(id(sub))
                    found.append((name, helps.get(name, ""), sub))
    return found


def option_line(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One Markdown list item: the option as typed, then its help and default as `--help` gives them."""
    formatter = parser._get_formatter()
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs != 0:
            names += " " + formatter._format_args(action, action.dest.upper())
    else:
        names = formatter._format_args(action, action.dest)
    # The program's formatter (cli/usage.py's HelpFormatter) adds the default, as --help shows it.
    helped = text(formatter._expand_help(action)) if action.help else ""
    if action.required and action.option_strings:
        helped += " **Required.**"
    return f"- `{names}`" + (f": {helped}" if helped else "")


def command_section(
    path: str, summary: str, parser: argparse.ArgumentParser, depth: int, sub_depth: int = 0
) -> list[str]:
    """A command's heading at `depth`, its usage, arguments, options and exit codes; then its sub-commands', each
    at `sub_depth` (one deeper by default)."""
    from kerneljudge.cli.usage import EXIT_CODES_OF

    lines = [f"{'#' * depth} `{path}`", ""]
    if summary:
        lines += [text(summary[0].upper() + summary[1:]) + ".", ""]
    usage = parser.format_usage().removeprefix("usage: ").strip()
    lines += ["```text", usage, "```", ""]
    positional = [a for a in parser._actions if not a.option_strings and not isinstance(a, argparse._SubParsersAction)]
    optional = [a for a in parser._actions if a.option_strings and not isinstance(a, argparse._HelpAction)]
    if positional:
        lines += ["Arguments:", ""] + [option_line(parser, a) for a in positional] + [""]
    if optional:
        lines += ["Options:", ""] + [option_line(parser, a) for a in optional] + [""]
    rows = EXIT_CODES_OF.get(path.removeprefix("kerneljudge").strip())
    if rows:
        lines += ["| exit code | meaning |", "|---|---|"]
        lines += [f"| {code} | {text(meaning).replace('|', '&#124;')} |" for code, meaning in rows] + [""]
    for name, helped, sub in subcommands(parser):
        lines += command_section(f"{path} {name}", helped, sub, sub_depth or depth + 1)
    return lines


def cli_page() -> str:
    """The command line's reference: every command and sub-command of `kerneljudge`, from its parsers."""
    from kerneljudge.cli import build_parser

    # argparse wraps usage to the terminal's width: the page's must not depend on where it was built.
    columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        return cli_markdown(build_parser())
    finally:
        if columns is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = columns


def cli_markdown(parser: argparse.ArgumentParser) -> str:
    """The page of `parser`: a table of its commands, its own usage, then each command's section."""
    commands = subcommands(parser)
    lines = [
        GENERATED_NOTE,
        "",
        "# Command-line reference",
        "",
        "Every command of `kerneljudge`, read from its argument parsers when this site was built: each one's "
        "usage, its arguments and options with their defaults, and its exit codes. The same text, command by "
        "command, is `kerneljudge COMMAND --help`; [The command line](../cli.md) explains what `judge` prints "
        "and how to read it.",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{name}`](#kerneljudge-{name}) | {text(helped)} |" for name, helped, _ in commands] + [""]
    # The program's own usage and codes under one heading, then each command's section beside it.
    lines += command_section(
        "kerneljudge", "The program itself: its version, and the exit codes across commands", parser, 2, 2
    )
    return "\n".join(lines)


# ---- the findings catalogue


def severity_of(code: str) -> str:
    """Where the settings decide a code's severity, what it is under each; else that its check decides it."""
    from kerneljudge.checks.catalog import CATALOG, HIGH_RISK_BY_MODE, severity
    from kerneljudge.config import POLICIES

    entry = CATALOG[code]
    if entry.high_risk:
        by_mode = ", ".join(f"{mode}: {severity(code, mode=mode)}" for mode in HIGH_RISK_BY_MODE)
        return f"{by_mode} (rejected before import in enforce)"
    if entry.by_policy:
        cases = []
        for case in entry.by_policy:
            by_policy = ", ".join(f"{policy}: {severity(code, policy, case=case)}" for policy in POLICIES)
            cases.append(f"{case}: {by_policy}" if case else by_policy)
        return "; ".join(cases)
    return "set by its check ([findings](../findings.md))"


def findings_page() -> str:
    """Every code of the findings catalogue, grouped by its detector."""
    from kerneljudge.checks.catalog import CATALOG

    lines = [
        GENERATED_NOTE,
        "",
        "# Findings catalogue",
        "",
        "Every code kerneljudge can raise, read from `kerneljudge/checks/catalog.py` when this site was built. "
        "A finding's severity decides its effect on the verdict: **error** makes it FAIL, **warning** makes it "
        "SUSPICIOUS (correct but not verified), **info** is recorded only. Where the judge's settings decide the "
        "severity, the column gives it under each: a high-risk construct's by the mode, others by the policy. "
        "[Findings](../findings.md) explains each code, its evidence and its effect in full; the attack classes "
        "are listed in [attacks](../attacks.md).",
        "",
    ]
    detectors: dict[str, list[Any]] = {}
    for entry in CATALOG.values():
        detectors.setdefault(entry.detector, []).append(entry)
    for detector, entries in detectors.items():
        lines += [f"## {detector}", "", "| code | summary | severity | attacks | remedy |", "|---|---|---|---|---|"]
        for e in entries:
            cells = [f"`{e.code}`", text(e.title), severity_of(e.code), ", ".join(e.attacks), text(e.remediation)]
            lines.append("| " + " | ".join(c.replace("|", "&#124;") for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


# ---- the configuration


def configuration_page() -> str:
    """Every setting of JudgeConfig: its type, its default and, where it has a fixed set, the values it takes."""
    from kerneljudge import config

    allowed = {
        "device": config.DEVICES,
        "mode": config.MODES,
        "policy": config.POLICIES,
        "timing_method": config.TIMING_METHODS,
        "timing_regime": config.TIMING_REGIMES,
        "timing_baseline": config.TIMING_BASELINES,
        "sandbox": config.SANDBOX_MODES,
        "sanitizer": config.SANITIZER_MODES,
    }
    lines = [
        GENERATED_NOTE,
        "",
        "# Configuration",
        "",
        "The judge's settings are one frozen `JudgeConfig` (`kerneljudge/config.py`), read from its fields when "
        "this site was built. The Python API takes them as keyword overrides (`judge(task, candidate, mode="
        '"enforce")`, [the Python API](../api.md)), or as a mapping through `JudgeConfig.from_mapping`, which '
        "rejects an unknown key with the nearest known one; the command line's options set the same fields "
        "([command-line reference](cli.md)). A value outside its set, or out of range, is a one-line "
        "`ConfigError`.",
        "",
        "| setting | type | default | values |",
        "|---|---|---|---|",
    ]
    for f in fields(config.JudgeConfig):
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        values = ", ".join(f"`{v}`" for v in allowed.get(f.name, ()))
        kind = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        lines.append(f"| `{f.name}` | `{kind.replace('|', '&#124;')}` | `{default!r}` | {values} |")
    return "\n".join(lines) + "\n"


# ---- the record's schema


def schema_page() -> str:
    """The verdict record's JSON Schema, as `kerneljudge schema` prints it, with its top-level fields listed."""
    from kerneljudge.results.verdict import record_json_schema

    schema = record_json_schema()
    lines = [
        GENERATED_NOTE,
        "",
        "# Record schema",
        "",
        "The JSON Schema of the verdict record, as `kerneljudge schema` prints it, read from "
        "`kerneljudge/results/verdict.py` when this site was built. [The verdict record](../record.md) says "
        "what each part means and how to read a verdict.",
        "",
        "| field | type | required |",
        "|---|---|---|",
    ]
    required = set(schema.get("required", ()))
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or ("object" if "$ref" in prop else "any")
        if "anyOf" in prop:
            kind = " or ".join(str(p.get("type") or p.get("$ref", "").rsplit("/", 1)[-1]) for p in prop["anyOf"])
        elif "$ref" in prop:
            kind = prop["$ref"].rsplit("/", 1)[-1]
        lines.append(f"| `{name}` | {text(str(kind))} | {'yes' if name in required else 'no'} |")
    lines += ["", "## The schema", "", "```json", json.dumps(schema, indent=2), "```", ""]
    return "\n".join(lines)


# Each generated page, by its path in the site (under docs/ it would be this path; it is never written there).
PAGES: dict[str, Callable[[], str]] = {
    "reference/cli.md": cli_page,
    "reference/findings.md": findings_page,
    "reference/configuration.md": configuration_page,
    "reference/schema.md": schema_page,
}


# ---- the MkDocs hook (mkdocs.yml: `hooks: [scripts/docs_reference.py]`)


def benchmark_pages(docs_dir: Path) -> list[str]:
    """docs/benchmarks/'s pages, paths relative to docs/, index first, the rest by name."""
    folder = docs_dir / "benchmarks"
    pages = sorted(p.relative_to(docs_dir).as_posix() for p in folder.rglob("*.md")) if folder.is_dir() else []
    return sorted(pages, key=lambda p: (not p.endswith("/index.md"), p))


def on_config(config: Any) -> Any:
    """Fill the nav's `Benchmarks` section (written empty in mkdocs.yml) with the pages docs/benchmarks/ holds."""
    pages = benchmark_pages(Path(config["docs_dir"]))
    nav = config["nav"] or []
    for i, section in enumerate(nav):
        if isinstance(section, dict) and "Benchmarks" in section:
            if pages:
                section["Benchmarks"] = pages
            else:  # no measurements moved there yet: no empty section
                del nav[i]
            break
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add each generated page to the build, as if it were a file of docs/."""
    from mkdocs.structure.files import File

    for path, render in PAGES.items():
        files.append(File.generated(config, path, content=render()))
    return files


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the site's generated reference pages into a folder.")
    parser.add_argument("--out", type=Path, required=True, help="the folder (reference/*.md go under it)")
    args = parser.parse_args(argv)
    for path, render in PAGES.items():
        target = args.out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(render(), encoding="utf-8")
        print(target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
