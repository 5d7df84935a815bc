"""The preflight's allow-list (preflight/allowlist.py): every way out of the listed forms is a finding with its
line, however it is spelled, and nothing an honest candidate of this repository writes is one."""

from __future__ import annotations

import pytest

from helpers import EXAMPLES, ROOT, TASKS, run_judge
from kerneljudge.preflight import preflight, scan
from kerneljudge.redteam import FIXTURES_DIR
from kerneljudge.sources.candidate import extract_code, load_candidate, reference_as_candidate
from kerneljudge.tasks import gpumode
from kerneljudge.tasks.load import load_task

HEADER = "import torch\nimport triton\n\n@triton.jit\ndef k(x):\n    pass\n\n"
HEADER_LINES = HEADER.count("\n")


def found(source: str) -> set[tuple[str, int]]:
    """(code, line within `source`) of every high-risk construct the scan reports."""
    return {(c.code, c.line - HEADER_LINES) for c in scan(HEADER + source).constructs if c.code < "KJ-S060"}


@pytest.mark.parametrize(
    "source, code, line",
    [
        # the forms the deny-list of 0.3.16 let through
        ("import posix\n", "KJ-S004", 1),
        ("import posix\nposix.system('id')\n", "KJ-S010", 2),
        ("import posix\nfd = posix.open('/etc/hostname', 0)\n", "KJ-S040", 2),
        ("import posix\nposix.fork()\n", "KJ-S010", 2),
        ("import _socket\n", "KJ-S041", 1),
        ("m = __builtins__['__import__']('ctypes')\n", "KJ-S054", 1),
        ("import os\nos.execv('/bin/sh', ['sh'])\n", "KJ-S010", 2),
        ("import os\npid, fd = os.forkpty()\n", "KJ-S010", 2),
        ("import os\nos.posix_spawnp('sh', ['sh'], {})\n", "KJ-S010", 2),
        ("import os\nos.kill(1, 9)\n", "KJ-S054", 2),
        ("[open][0]('/etc/hostname')\n", "KJ-S040", 1),
        ("import os\n(os,)[0].system('id')\n", "KJ-S054", 2),
        # the same classes, other spellings
        ("import importlib.util as u\n", "KJ-S004", 1),
        ("from os import execvpe\n", "KJ-S010", 1),
        ("from os import killpg\n", "KJ-S054", 1),
        ("from os import *\n", "KJ-S054", 1),
        ("import sys\nm = sys.modules['os']\n", "KJ-S053", 2),
        ("def f(x):\n    return type(x).__mro__\n", "KJ-S050", 2),
        ("def f(name):\n    return getattr(__builtins__, name)\n", "KJ-S054", 2),
        ("v = vars()['o' + 's']\n", "KJ-S054", 1),
        ("import os\nrun = lambda m=os: m.system('id')\n", "KJ-S054", 2),
        ("import os\ndef f(m=os):\n    return m\n", "KJ-S054", 2),
        ("import functools\nimport os\nfunctools.reduce(getattr, ['system'], os)('id')\n", "KJ-S054", 3),
        ("import operator\nimport os\noperator.attrgetter('system')(os)('id')\n", "KJ-S054", 3),
        ("import operator\ncall = operator.methodcaller('system', 'id')\n", "KJ-S054", 2),
        ("import builtins\n", "KJ-S004", 1),
        ("from . import helper\n", "KJ-S004", 1),
        ("import os\nclass Holder:\n    lib = os\n", "KJ-S054", 3),
        ("import os\ndef g():\n    return os\n", "KJ-S054", 3),
        ("import os\nholder = {}\nholder['m'] = os\n", "KJ-S054", 3),
        ("import os.path as p\nq = [p]\n", "KJ-S054", 2),
        ("import os\nenv = dict(os.environ)\n", "KJ-S054", 2),
        ("t = torch.os.system('id')\n", "KJ-S054", 1),
        ("import numpy\nnumpy.ctypeslib.load_library('x', '.')\n", "KJ-S030", 2),
        ("import numpy\na = numpy.fromfile('/etc/hostname')\n", "KJ-S040", 2),
        ("torch.ops.load_library('/tmp/x.so')\n", "KJ-S030", 1),
        # file I/O under a library's innocent names, or on a receiver whose type the source does not show
        ("f = torch.serialization._open_file('memo.bin', 'wb')\n", "KJ-S040", 1),
        ("def f(x):\n    x.numpy().tofile('memo.bin')\n", "KJ-S040", 2),
        ("def f(x):\n    return type(x.untyped_storage()).from_file('memo.bin', True, 4)\n", "KJ-S040", 2),
        # the red team's posix_via_library: a module an allowed library imported for itself
        ("import dataclasses\nsystem = dataclasses.sys.modules['posix']\n", "KJ-S054", 2),
        ("import os\nf = os.fork\n", "KJ-S010", 2),
        ("import time\ntime.tzset()\n", "KJ-S054", 2),
        ("import sys\nargs = sys.argv\n", "KJ-S054", 2),
        ("def h():\n    g = globals\n    return g()\n", "KJ-S054", 2),
        ("print.__self__.open('/etc/hostname')\n", "KJ-S054", 1),
        ("def f(x):\n    return x.__class__.__base__\n", "KJ-S054", 2),
        ("def f(m):\n    return m.__dict__\n", "KJ-S054", 2),
        ("def f(m):\n    return m.__loader__\n", "KJ-S054", 2),
        ("def f(x):\n    return x.__reduce_ex__(2)\n", "KJ-S054", 2),
        ("def f(o, name):\n    return hasattr(o, name)\n", "KJ-S054", 2),
        ("def f(o):\n    return getattr(o, *['system'])\n", "KJ-S054", 2),
        ("def f(o):\n    return getattr(o, '__globals__')\n", "KJ-S050", 2),
        ("def f(o):\n    return getattr(o, '__self__')\n", "KJ-S054", 2),
        ("import sys\nreader = input\n", "KJ-S054", 2),
        ("import typing\nhints = typing.get_type_hints(k)\n", "KJ-S054", 2),
        # a module's or a class's binding may never run: the name is the builtin there
        ("if 0:\n    open = None\nopen('/etc/hostname')\n", "KJ-S040", 3),
        ("try:\n    pass\nexcept Exception as eval:\n    pass\neval('1')\n", "KJ-S051", 5),
        ("squares = [compile for compile in range(3)]\ncompile('1', 'f', 'eval')\n", "KJ-S051", 2),
        # an import guard counts only where the name cannot have been rebound
        ("from typing import TYPE_CHECKING\nTYPE_CHECKING = True\nif TYPE_CHECKING:\n    import posix\n", "KJ-S004", 4),
    ],
)
def test_each_way_out_is_a_finding_with_its_line(source, code, line):
    assert (code, line) in found(source), sorted(found(source))


@pytest.mark.parametrize(
    "source",
    [
        "from torch.utils.cpp_extension import load_inline\nmod = load_inline('m', cpp_sources='')\n",
        "import torch.nn.functional as F\nimport triton.language as tl\nimport math, functools, itertools\n",
        "from __future__ import annotations\nimport numpy as np\nfrom einops import rearrange\n",
        "import os\nflag = os.environ.get('X', '0')\nhere = os.path.join('a', 'b')\ncount = os.cpu_count()\n",
        "import sys\nprint('note', file=sys.stderr)\nif sys.version_info >= (3, 11):\n    pass\n",
        "import time\nt0 = time.perf_counter()\n",
        "has = hasattr(torch, 'compile')\nf = getattr(torch.nn.functional, 'gelu', None)\n",
        "class M(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = torch.ones(3)\n    def forward(self, input):\n        return getattr(self, 'w') + input\n"
        "    def pick(self, name):\n        return getattr(self, name)\n    def __repr__(self):\n"
        "        return type(self).__name__ + self.__class__.__qualname__\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from reference import Config\n",
        "import cutlass.cute as cute\nfrom cuda.bindings import driver\n",
        "def f(x, compile=False):\n    return compile\n",
    ],
)
def test_allowed_forms_raise_nothing(source):
    assert found(source) == set()


def _honest_sources() -> dict[str, str]:
    """Every honest candidate of this repository: the examples' candidates and references, the red team's
    honest fixtures, the built-in suite's candidates and operators, the recorded responses that are not hacks,
    and GPU MODE submissions as their reduction composes them."""
    sources = {str(p.relative_to(ROOT)): p.read_text() for p in EXAMPLES.glob("*/*.py") if p.parent.name != "adapters"}
    sources |= {p.name: p.read_text() for p in FIXTURES_DIR.glob("honest_*.py")}
    suite = ROOT / "src" / "kerneljudge" / "suite"
    sources |= {str(p.relative_to(suite)): p.read_text() for p in suite.glob("candidates/*.py")}
    sources |= {str(p.relative_to(suite)): reference_as_candidate(load_task(p)).text for p in suite.glob("ops/*.py")}
    for response in (EXAMPLES / "responses").glob("*.md"):
        if "disguised" not in response.name and "cached" not in response.name:  # the recorded hacks
            sources[response.name] = extract_code(response.read_text())[0]
    for folder in (ROOT / "tests" / "fixtures" / "gpumode").iterdir():
        if folder.is_dir():
            task = load_task(folder)
            for submission in folder.glob("submission*.py"):
                sources[str(submission.relative_to(ROOT))] = gpumode.adapt_candidate(
                    task, load_candidate(submission)
                ).text
    return sources


def test_no_honest_file_has_an_error_in_enforce():
    sources = _honest_sources()
    assert len(sources) > 30
    rejected = {name: preflight(text, "enforce", "practical").findings for name, text in sources.items()}
    rejected = {name: [f.summary for f in findings if f.severity == "error"] for name, findings in rejected.items()}
    assert not any(rejected.values()), {name: found for name, found in rejected.items() if found}


def test_audit_warns_enforce_rejects_off_says_nothing():
    source = HEADER + "import posix\nimport os\nwho = (os,)[0]\n"
    audit = {f.code: f for f in preflight(source, "audit", "practical").findings}
    assert audit["KJ-S004"].severity == audit["KJ-S054"].severity == "warning"
    assert "line 8" in audit["KJ-S004"].summary and audit["KJ-S054"].evidence["occurrences"][0]["line"] == 10
    enforce = preflight(source, "enforce", "practical")
    assert enforce.rejected and {f.code for f in enforce.findings if f.severity == "error"} == {"KJ-S004", "KJ-S054"}
    assert preflight(source, "off", "practical").findings == []


def test_a_line_a_deny_rule_names_is_not_named_twice():
    constructs = scan(HEADER + "import os\nos.fork()\n").constructs
    assert [(c.code, c.line) for c in constructs] == [("KJ-S010", 9)]


def test_enforce_rejects_a_module_handed_around_before_import(tmp_path):
    candidate = tmp_path / "handed_module.py"
    honest = (FIXTURES_DIR / "honest_torch.py").read_text()
    candidate.write_text(honest + "\nimport os\n_LIB = [os][0]\n")
    record = run_judge(TASKS / "tiny_bias_relu.py", candidate, mode="enforce")
    assert record.status == "FAIL" and record.failure.phase == "preflight" and "KJ-S054" in record.failure.summary
    assert record.logs == {}  # no worker started
