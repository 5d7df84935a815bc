"""The public red-team suite: fixtures of known reward hacks and honest look-alikes, and their runner (docs/redteam.md).

- `suite.py`: each fixture, the attack class it stands for, and what the judge must conclude;
- `runner.py`: each fixture judged against its task and held against what it expects (`kerneljudge redteam`);
- `chaos.py`: the chaos suite's generator: hostile artefacts, hostile HTTP bodies, hostile input files;
- `fixtures/` (candidates) and `tasks/` (their tasks): text the judge reads and runs in its workers, never imports.
"""

from pathlib import Path

FIXTURES_DIR = Path(__file__).resolve().parent / "fixtures"
TASKS_DIR = Path(__file__).resolve().parent / "tasks"
