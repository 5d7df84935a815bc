"""The public red-team suite: fixtures of known reward hacks and honest look-alikes, and their runner."""

from pathlib import Path

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
