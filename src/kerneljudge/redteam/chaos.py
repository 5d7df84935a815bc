"""The chaos suite's generator: candidates that leave hostile artefacts, hostile HTTP bodies, hostile input files.

The red team (suite.py) asks whether a hack is caught; the chaos suite asks whether the trusted side survives what
a candidate leaves, whatever the verdict. Each hostile candidate computes the bias-ReLU task honestly and, on the
way, fills its workspace (its cwd) with something the parent will read or remove afterwards: folder chains deeper
than any recursion limit, folders of many entries, names that are not UTF-8 or that look like markup, links in
every place (to the root, to devices, in loops, in place of the judge's cache folders), huge sparse files, modes
that lock the parent out, FIFOs and sockets. It does so at one of several moments (its construction, its first
call, or from a thread while its calls run), so that no one moment of the parent's reading is the only one tried.

What is asserted of each case lives with the callers (tests/runs/test_chaos.py, benchmarks/chaos_batch.py): a record or
a clean one-line error, the next honest judgment PASSes, nothing left in the temporary folder, the store's integrity
check clean, the server's memory within a bound. docs/security.md tables what each case showed.
"""

from __future__ import annotations

import json
import random
import textwrap
from dataclasses import dataclass
from pathlib import Path

# The task every hostile candidate solves honestly (relu(x + bias), 16 x 33): fast on the CPU.
TASK = Path(__file__).resolve().parent / "tasks" / "bias_relu.py"
MOMENTS = ("init", "first_call", "thread")

# Each action is the body of `_leave_behind()`, run with the workspace as the cwd. It uses only os, socket and
# stat, catches what the sandbox refuses (an honest candidate would never try these, a hostile one shrugs them
# off), and never touches torch's random state: the parameters must match the reference's (same seed).
ACTIONS: dict[str, str] = {
    "deep_chain": """
        fd = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
        for _ in range({depth}):
            os.mkdir("d", dir_fd=fd)
            inner = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        os.close(fd)
    """,
    "wide_folder": """
        os.mkdir("wide")
        for i in range({entries}):
            os.close(os.open(f"wide/f{{i}}", os.O_CREAT | os.O_WRONLY, 0o644))
    """,
    "odd_names": """
        names = [b"\\xff\\xfe", b"new\\nline", b"tab\\there", b"back\\\\slash", b"-rf", b" ", b"...", b"x" * 255,
                 b"\\xe9t\\xe9", b"\\x1b[31mred", b'{{"status": "PASS"}}', b"\\xed\\xa0\\x80", "\\u202eevil".encode(),
                 b"<img src=x onerror=alert(1)>", b"a\\rb", b"\\x7f"]
        for name in names:
            with open(name, "wb") as out:
                out.write(name)
        os.mkdir(b"\\xff-dir")
        with open(b"\\xff-dir/\\xfe\\n", "wb") as out:
            out.write(b"nested")
    """,
    "links": """
        for target, name in [("/", "root"), ("/dev/zero", "zero"), ("/etc/passwd", "passwd"), ("nowhere", "dangling"),
                             ("loop_b", "loop_a"), ("loop_a", "loop_b"), ("self", "self"), ("../../../..", "up"),
                             ("/proc/self/fd/0", "stdin"), ("/proc/self/root", "proc_root")]:
            os.symlink(target, name)
        for sub in ("cache/triton", "cache/inductor", "tmp"):
            try:
                os.rename(sub, sub + ".moved")
                os.symlink("/", sub)
            except OSError:
                pass
        os.mkdir("linkdir")
        os.symlink("/", "linkdir/root")
        try:
            os.link("/etc/passwd", "hardlink")
        except OSError:
            pass
    """,
    "sparse_file": """
        with open("sparse", "wb") as out:
            out.truncate({size_bytes})
        with open("dense", "wb") as out:
            out.write(os.urandom(1 << 20) * 8)
    """,
    "locked_modes": """
        os.makedirs("locked/inner/deeper")
        for i in range(5):
            with open(f"locked/inner/f{{i}}", "w") as out:
                out.write("x")
        os.chmod("locked/inner/deeper", 0)
        os.chmod("locked/inner", 0o500)
        os.chmod("locked", 0)
        os.makedirs("readonly/sub")
        os.chmod("readonly/sub", 0o555)
        os.chmod("readonly", 0o555)
        with open("nomode", "w") as out:
            out.write("x")
        os.chmod("nomode", 0)
        for sub in ("cache", "home"):
            os.chmod(sub, 0)
        os.chmod(".", 0o500)
    """,
    "special_files": """
        os.mkfifo("fifo")
        os.mkfifo("fifo_many_readers")
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind("sock")
        server.listen(1)
        try:
            os.mknod("device", 0o600 | stat.S_IFCHR, os.makedev(1, 5))
        except OSError:
            pass
        os.mkdir("fifos")
        for i in range(50):
            os.mkfifo(f"fifos/p{{i}}")
    """,
}


# A thread started at construction leaves its artefacts while the calls run (a worker ends by os._exit, so an
# atexit hook never would): the parent reads a workspace still being filled.
THREAD = "        threading.Timer(0.05, _leave_behind).start()\n"
FIRST_CALL = "        if not self.left:\n            self.left = True\n            _leave_behind()\n"


@dataclass(frozen=True)
class ChaosCase:
    """One hostile candidate: what it leaves (`actions`, each with its size), and when."""

    name: str
    actions: tuple[tuple[str, dict[str, int]], ...]
    moment: str = "init"

    def source(self) -> str:
        """The candidate's text: the honest computation, and its artefacts left at `moment`."""
        body = "\n".join(textwrap.dedent(ACTIONS[kind]).format(**sizes).strip() for kind, sizes in self.actions)
        leave = f"def _leave_behind():\n{textwrap.indent(body, '    ')}\n"
        hook = {
            "init": ("        _leave_behind()\n", ""),
            "first_call": (
                "",
                "        if not self.left:\n            self.left = True\n            _leave_behind()\n",
            ),
            "thread": (THREAD, ""),
        }[self.moment]
        return (
            f'"""Chaos: {self.name} ({self.moment})."""\n'
            "import os\nimport socket\nimport stat\nimport threading\n\nimport torch\nimport torch.nn as nn\n\n\n"
            f"{leave}\n\n"
            "class ModelNew(nn.Module):\n"
            "    def __init__(self, width):\n"
            "        super().__init__()\n"
            "        self.bias = nn.Parameter(torch.randn(width))\n"
            "        self.left = False\n"
            f"{hook[0]}"
            "\n"
            "    def forward(self, x):\n"
            f"{hook[1]}"
            "        return torch.clamp_min(x + self.bias, 0.0)\n"
        )


# Sizes: the first of each is within the judge's bounds, the others past them (depth 1,200 broke os.walk).
SIZES: dict[str, list[dict[str, int]]] = {
    "deep_chain": [{"depth": 40}, {"depth": 1200}, {"depth": 3000}],
    "wide_folder": [{"entries": 2000}, {"entries": 60_000}],
    "odd_names": [{}],
    "links": [{}],
    "sparse_file": [{"size_bytes": 1 << 30}, {"size_bytes": 15 << 30}],
    "locked_modes": [{}],
    "special_files": [{}],
}


def core_cases() -> list[ChaosCase]:
    """Every kind within its bounds in one candidate and each size past a bound alone (at construction), then
    every kind at its worst in one candidate at each later moment: each kind, size and moment tried by seven
    candidates (CI's chaos test judges these, bounded for the 2-core machine)."""
    kinds = sorted(SIZES, key=lambda kind: kind == "locked_modes")  # locked last: it would refuse the others
    within = ChaosCase("within_bounds", tuple((kind, SIZES[kind][0]) for kind in kinds))
    past = [ChaosCase(f"{kind}-{i}", ((kind, sizes),)) for kind in kinds for i, sizes in enumerate(SIZES[kind]) if i]
    worst = [ChaosCase("worst", tuple((kind, SIZES[kind][-1]) for kind in kinds), moment) for moment in MOMENTS[1:]]
    return [within, *past, *worst]


def generated_cases(count: int, seed: int) -> list[ChaosCase]:
    """`count` candidates, each a mix of one to three kinds at drawn sizes and a drawn moment (reproducible)."""
    draw = random.Random(seed)
    cases = []
    for n in range(count):
        # Locked modes last: a folder the candidate locked would refuse the kinds after it.
        kinds = sorted(draw.sample(sorted(SIZES), draw.randint(1, 3)), key=lambda kind: kind == "locked_modes")
        actions = tuple((kind, draw.choice(SIZES[kind])) for kind in kinds)
        cases.append(ChaosCase(f"mix{n:03d}-{'+'.join(kinds)}", actions, draw.choice(MOMENTS)))
    return cases


# The honest candidate mixed in: the red team's own (plain torch, verified under the practical policy).
HONEST = (Path(__file__).resolve().parent / "fixtures" / "honest_torch.py").read_text()


def write_manifest(folder: Path, cases: list[ChaosCase], honest: int, seed: int = 0) -> Path:
    """A batch manifest in `folder`: the cases and `honest` honest candidates (each a distinct text), shuffled."""
    folder.mkdir(parents=True, exist_ok=True)
    entries = []
    for case in cases:
        path = folder / f"{case.name}-{case.moment}.py"
        path.write_text(case.source())
        entries.append({"task": str(TASK), "candidate": path.name})
    for n in range(honest):
        path = folder / f"honest{n:03d}.py"
        path.write_text(f"# honest candidate {n}\n{HONEST}")
        entries.append({"task": str(TASK), "candidate": path.name})
    random.Random(seed).shuffle(entries)
    manifest = folder / "manifest.jsonl"
    manifest.write_text("".join(json.dumps(entry) + "\n" for entry in entries))
    return manifest


# ---------------------------------------------------------------- hostile request bodies and input files


def hostile_bodies() -> dict[str, bytes]:
    """Bodies a client could post to the server's JSON routes: each must get a 4xx with a one-line reason, fast,
    and leave the server's memory within a bound."""
    item = {"task": "builtin:softmax", "candidate": "x"}
    return {
        "huge_list": b"[" + b",".join([b"1"] * 20_000_000) + b"]",  # 40 MB
        "long_item_list": json.dumps([item] * 100_000).encode(),
        "deep_nesting": b"[" * 200_000 + b"]" * 200_000,
        "deep_object": b'{"a":' * 100_000 + b"1" + b"}" * 100_000,
        "bad_utf8": b'{"task": "builtin:softmax", "candidate": "\xff\xfe"}',
        "truncated": b'{"task": "builtin:softmax", "candidate": "import torch',
        "huge_string": json.dumps({"task": "builtin:softmax", "candidate": "#" * 30_000_000}).encode(),
        "not_json": b"\x00\x01\x02" * 1000,
    }


def hostile_inputs(folder: Path) -> dict[str, Path]:
    """Paths given to `judge` as a task or a candidate: each must end in a one-line error, within seconds."""
    import os

    folder.mkdir(parents=True, exist_ok=True)
    paths = {"dev_zero": Path("/dev/zero"), "dev_urandom": Path("/dev/urandom"), "directory": folder}
    fifo = folder / "fifo.py"
    if not fifo.exists():
        os.mkfifo(fifo)
    paths["fifo"] = fifo
    big = folder / "big.py"
    with open(big, "wb") as out:
        out.write(b"# " + b"x" * (64 << 20) + b"\n")
    paths["big"] = big
    sparse = folder / "sparse.py"
    with open(sparse, "wb") as out:
        out.truncate(8 << 30)
    paths["sparse"] = sparse
    bad = folder / "bad_utf8.py"
    bad.write_bytes(b"import torch\n# \xff\xfe\n")
    paths["bad_utf8"] = bad
    loop = folder / "loop.py"
    if not loop.is_symlink():
        os.symlink(loop.name, loop)
    paths["link_loop"] = loop
    return paths
