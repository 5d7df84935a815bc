"""A worker's private, disposable workspace: its cwd, HOME, temp and compiler caches."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Each cache a compiler or framework may write goes inside the workspace, so that
# nothing a candidate builds survives it or leaks into the next candidate (H26).
CACHE_DIRS = {
    "HOME": "home",
    "TMPDIR": "tmp",
    "XDG_CACHE_HOME": "cache",
    "TRITON_CACHE_DIR": "cache/triton",
    "TRITON_DUMP_DIR": "cache/triton_dump",
    "TRITON_OVERRIDE_DIR": "cache/triton_override",
    "TORCH_EXTENSIONS_DIR": "cache/torch_extensions",
    "TORCHINDUCTOR_CACHE_DIR": "cache/inductor",
    "CUDA_CACHE_PATH": "cache/nv",
    "PYTHONPYCACHEPREFIX": "cache/pycache",
}


@dataclass(frozen=True)
class Workspace:
    root: Path

    @classmethod
    def create(cls, role: str) -> Workspace:
        root = Path(tempfile.mkdtemp(prefix=f"kerneljudge-{role}-"))
        for sub in CACHE_DIRS.values():
            (root / sub).mkdir(parents=True, exist_ok=True)
        return cls(root)

    def env(self) -> dict[str, str]:
        return {var: str(self.root / sub) for var, sub in CACHE_DIRS.items()}

    def write_source(self, name: str, text: str) -> Path:
        path = self.root / name
        path.write_text(text)
        return path

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
