"""The allow-listed root for CUDA workers: the sentinel test of tests/sandbox/test_allowlist.py on the GPU.

The judgment runs on CUDA with `SandboxPolicy.allowlist_cuda` on (the default; set here whatever
KJ_ALLOWLIST_CUDA says), so both workers initialize CUDA, run
the task's kernels and the candidate's inside a root of the allow-list only; the candidate reads no
sentinel, sees only the way to allowed paths, and is judged correct.
"""

from __future__ import annotations

import dataclasses

import pytest
from test_allowlist import judge_the_explorer

pytestmark = pytest.mark.gpu


def test_a_cuda_candidate_reads_no_sentinel_inside_the_allow_listed_root(tmp_path, monkeypatch):
    from kerneljudge.sandbox import confine

    monkeypatch.setattr(confine, "DEFAULT_POLICY", dataclasses.replace(confine.DEFAULT_POLICY, allowlist_cuda=True))
    layer = judge_the_explorer(tmp_path, monkeypatch, "cuda")
    assert layer is not None, "the allow-listed root was not in force for the CUDA worker"
