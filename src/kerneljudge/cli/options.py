"""The options that several commands share (--device, --mode, --policy, --timeout), each declared once here.

An option's choices are config.py's, its default JudgeConfig's field default and its help one text, so that
`judge`, `batch`, `serve`, `improve`, `confirm`, `redteam` and `tasks lint` say the same of it. A command that
deliberately differs (`redteam` judges only in the hardened modes, with a shorter timeout) names the
difference where it adds the option.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, fields
from typing import Any

from kerneljudge.cli.usage import positive_seconds
from kerneljudge.config import DEVICES, MODES, POLICIES, JudgeConfig

DEVICE_HELP = "where to run: cuda when a GPU is visible, else the CPU (auto); cuda only (cuda); the CPU (cpu)"
MODE_HELP = (
    "off: KernelBench's own check, for comparison; audit: hardened checks, risky constructs recorded; "
    "enforce: hardened checks, risky constructs rejected before import"
)
POLICY_HELP = (
    "strict: the candidate must declare a custom kernel and should not compute with high-level torch; "
    "practical: both only recorded"
)
TIMEOUT_HELP = "wall-clock limit in seconds for each worker step (import and build, one call, one timing block)"

# JudgeConfig's field defaults: what a command's option defaults to unless the command says otherwise.
CONFIG_DEFAULTS = {f.name: f.default for f in fields(JudgeConfig)}


@dataclass(frozen=True)
class SharedOption:
    flag: str
    field: str  # the JudgeConfig field the option sets, whose default it takes
    help: str
    choices: tuple[str, ...] | None = None
    extra: tuple[tuple[str, Any], ...] = ()  # further add_argument keywords (type, metavar)

    def arguments(self) -> dict[str, Any]:
        declared: dict[str, Any] = {"default": CONFIG_DEFAULTS[self.field], "help": self.help, **dict(self.extra)}
        if self.choices is not None:
            declared["choices"] = self.choices
        return declared


SHARED_OPTIONS = {
    "device": SharedOption("--device", "device", DEVICE_HELP, DEVICES),
    "mode": SharedOption("--mode", "mode", MODE_HELP, MODES),
    "policy": SharedOption("--policy", "policy", POLICY_HELP, POLICIES),
    "timeout": SharedOption(
        "--timeout", "timeout_s", TIMEOUT_HELP, extra=(("type", positive_seconds), ("metavar", "SECONDS"))
    ),
}


def add_judge_options(parser: argparse.ArgumentParser, *names: str, **differences: dict[str, Any]) -> None:
    """Add the shared options `names` (keys of SHARED_OPTIONS) to a command's parser, in that order.

    `differences` maps an option's name to the add_argument keywords in which this command deliberately departs
    from the shared declaration, e.g. `mode={"choices": ("audit", "enforce")}`."""
    unknown = set(differences) - set(names)
    if unknown:
        raise ValueError(f"differences for options not added: {', '.join(sorted(unknown))}")
    for name in names:
        option = SHARED_OPTIONS[name]
        parser.add_argument(option.flag, **{**option.arguments(), **differences.get(name, {})})
