"""`python -m kerneljudge` is the `kerneljudge` command."""

import sys

from kerneljudge.cli import main

sys.exit(main())
