"""Static preflight: constructs found through aliases, not fooled by comments or strings, judged by mode and policy."""

import pytest

from helpers import CANDIDATES, run_judge
from kerneljudge.preflight import preflight, scan

HEADER = "import torch\nimport triton\n\n@triton.jit\ndef k(x):\n    pass\n\n"


def codes(source: str) -> set[str]:
    return scan(HEADER + source).codes()


@pytest.mark.parametrize(
    "source, code",
    [
        ("torch.allclose = lambda *a, **k: True\n", "KJ-S001"),
        ("import torch as t\nt.cuda.Event.elapsed_time = None\n", "KJ-S001"),
        ("setattr(torch, 'allclose', None)\n", "KJ-S001"),
        ("import time\ntime.perf_counter = lambda: 0.0\n", "KJ-S001"),
        ("del torch.testing\n", "KJ-S001"),
        ("torch.backends.cuda.matmul.allow_tf32 = True\n", "KJ-S002"),
        ("torch.set_float32_matmul_precision('medium')\n", "KJ-S002"),
        ("import kerneljudge.protocol.wire\n", "KJ-S003"),
        ("from threading import Thread as T\nT(target=print).start()\n", "KJ-S010"),
        ("import subprocess\nsubprocess.run(['pip', 'install', 'x'])\n", "KJ-S010"),
        ("import os\nos.fork()\n", "KJ-S010"),
        ("import sys\nsys.settrace(None)\n", "KJ-S011"),
        ("import atexit\natexit.register(print)\n", "KJ-S011"),
        ("class A:\n    def __del__(self):\n        pass\n", "KJ-S011"),
        ("s = torch.cuda.Stream()\n", "KJ-S020"),
        ("g = torch.cuda.CUDAGraph()\n", "KJ-S021"),
        ("import ctypes\n", "KJ-S030"),
        ("open('/etc/passwd').read()\n", "KJ-S040"),
        ("from pathlib import Path\nPath('x').write_text('y')\n", "KJ-S040"),
        ("import socket\n", "KJ-S041"),
        ("import urllib.request\nurllib.request.urlopen('http://x')\n", "KJ-S041"),
        ("import sys\nf = sys._getframe(1)\n", "KJ-S050"),
        ("import gc\ngc.get_objects()\n", "KJ-S050"),
        ("def f(frame):\n    return frame.f_back.f_locals\n", "KJ-S050"),
        ("exec('x = 1')\n", "KJ-S051"),
        ("m = __import__('os')\n", "KJ-S051"),
        ("import os\nos.environ['TRITON_INTERPRET'] = '0'\n", "KJ-S052"),
        ("getattr(torch, 'all' + 'close')\n", "KJ-S053"),
        ("y = torch.ones(3).half()\n", "KJ-S060"),
        ("with torch.autocast('cuda'):\n    pass\n", "KJ-S060"),
    ],
)
def test_construct_is_found(source, code):
    assert code in codes(source)


def test_setting_a_flag_to_the_stricter_value_is_not_a_change_of_numerics():
    """GPU MODE's pmpp conv2d solution turns TF32 off and cuDNN's determinism on: numerics only stricter."""
    stricter = (
        "import torch\ntorch.backends.cudnn.allow_tf32 = False\ntorch.backends.cudnn.deterministic = True\n"
        "torch.backends.cuda.matmul.allow_tf32 = False\ntorch.set_float32_matmul_precision('highest')\n"
        "torch.use_deterministic_algorithms(True)\n"
    )
    assert "KJ-S002" not in codes(stricter)
    for looser in (
        "import torch\ntorch.backends.cudnn.allow_tf32 = True\n",
        "import torch\ntorch.backends.cudnn.allow_tf32 = 0\n",  # not the value itself: judged as a change
        "import torch\ntorch.backends.cudnn.allow_tf32 = flag\n",
        "import torch\ntorch.set_float32_matmul_precision('high')\n",
        "import torch\ntorch.backends.cudnn.allow_tf32 |= False\n",
    ):
        assert "KJ-S002" in codes(looser), looser


def test_comments_and_strings_neither_hide_nor_fake():
    source = "# torch.allclose = None; import socket; exec('x')\ndoc = 'import ctypes; open(\"/etc/passwd\")'\n"
    assert codes(source) == set()


def test_aliases_are_followed():
    source = (
        "import torch.cuda as tc\nS = tc.Stream\ns = S()\nfrom torch import backends as b\nb.cudnn.benchmark = True\n"
    )
    assert {"KJ-S020", "KJ-S002"} <= codes(source)


def test_declared_kernels_are_listed():
    source = (
        "import triton\nimport triton.language as tl\n"
        "@triton.autotune(configs=[], key=['n'])\n@triton.jit\ndef a(x):\n    pass\n"
        "from torch.utils.cpp_extension import load_inline\nmod = load_inline('m', cpp_sources='')\n"
    )
    kernels = scan(source).declared_kernels
    assert [(k["name"], k["kind"]) for k in kernels] == [("a", "triton"), ("load_inline", "cuda_source")]


def test_torch_compute_in_forward_counts_but_not_in_init_or_kernels():
    source = HEADER + (
        "class ModelNew(torch.nn.Module):\n"
        "    def __init__(self, w):\n        super().__init__()\n        self.w = torch.matmul(w, w).contiguous()\n"
        "    def forward(self, x):\n        y = torch.empty_like(x).view(-1)\n        return x @ self.w\n"
    )
    compute = scan(source).torch_compute
    assert [c.detail for c in compute] == ["uses the @ operator"]


def test_modes_and_policies():
    risky = HEADER + "import socket\n"
    assert [f.severity for f in preflight(risky, "audit", "practical").findings if f.code == "KJ-S041"] == ["warning"]
    enforced = preflight(risky, "enforce", "practical")
    assert enforced.rejected and [f.severity for f in enforced.findings if f.code == "KJ-S041"] == ["error"]
    assert preflight(risky, "off", "strict").findings == []
    no_kernel = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x.relu()\n"
    strict = {f.code: f.severity for f in preflight(no_kernel, "audit", "strict").findings}
    practical = {f.code: f.severity for f in preflight(no_kernel, "audit", "practical").findings}
    assert strict == {"KJ-S070": "error", "KJ-S071": "warning"}
    assert practical == {"KJ-S070": "info", "KJ-S071": "info"}


def test_enforce_rejects_before_import(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "patch_allclose.py", mode="enforce")
    assert record.status == "FAIL" and record.failure.kind == "integrity_violation"
    assert record.failure.phase == "preflight" and "KJ-S001" in record.failure.summary
    assert record.logs == {} and record.correctness.trials == []  # no worker ever started


def test_audit_runs_the_candidate_and_withholds_verification(tmp_path, tiny_task):
    candidate = tmp_path / "honest_with_socket.py"
    candidate.write_text("import socket  # noqa\n" + (CANDIDATES / "honest_torch.py").read_text())
    record = run_judge(tiny_task, candidate, mode="audit")
    assert record.status == "SUSPICIOUS" and not record.verified and record.correctness.passed
    assert record.reward("kerneljudge.reward.v1").value == -1.0


def test_strict_policy_fails_a_candidate_without_custom_kernels(tiny_task):
    record = run_judge(tiny_task, CANDIDATES / "honest_torch.py", policy="strict")
    assert record.status == "FAIL" and record.failure.kind == "integrity_violation"
    assert "KJ-S070" in record.failure.summary and record.correctness.passed


def test_every_catalog_code_is_documented():
    import re

    from helpers import ROOT
    from kerneljudge.checks.catalog import CATALOG

    documented = set(re.findall(r"`(KJ-[A-Z]\d{3})`", (ROOT / "docs" / "findings.md").read_text()))
    assert documented == set(CATALOG)
