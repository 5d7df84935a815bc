"""The commit's digests replayed from CUDA graphs (worker/seal/digest_graphs.py): on a CUDA device they are the eager
operators' digests of the same bytes (the CPU's), for every shape of words, a second tensor of a shape already
captured included (a replay reads its input afresh); a stack of small outputs alike; a tensor past GRAPH_BYTES and a
shape whose capture failed are digested eagerly, with the same values. Every one of them runs the fused kernels
(worker/seal/digest_kernels.py, built by the jiterator), which give the CPU operators' sums for every length, packing,
start and row count."""

import time

import pytest
import torch

from kerneljudge.worker import evidence
from kerneljudge.worker.seal import digest as commit_digest
from kerneljudge.worker.seal import digest_graphs, digest_kernels

pytestmark = pytest.mark.gpu

# (the base tensor, the output read of it): a view of the base moved to the device is the same bytes there.
SHAPES = [
    (lambda: torch.randn(8), lambda b: b),
    (lambda: torch.randn(7), lambda b: b),
    (lambda: torch.randn(5, dtype=torch.float16), lambda b: b),
    (lambda: torch.arange(6, dtype=torch.int64) * 977, lambda b: b),
    (lambda: torch.randn(9), lambda b: b[1:]),  # words four bytes into their storage
    (lambda: torch.randn(3, 5), lambda b: b[:, 1:]),  # not contiguous
    (lambda: torch.randn(1 << 18), lambda b: b),  # a 1 MiB output
]


@pytest.fixture(autouse=True)
def fresh_graphs(monkeypatch):
    monkeypatch.setattr(digest_graphs, "_graphs", {})
    monkeypatch.setattr(digest_graphs, "_refused", set())
    yield
    assert not commit_digest._fused_refused  # the CUDA digests above ran the fused kernels, not the operators


def test_the_fused_kernels_build_once_and_give_the_operators_sums_for_every_length():
    began = time.perf_counter()
    commit_digest.warm(torch.device("cuda"))
    print(f"fused kernels built in {(time.perf_counter() - began) * 1e3:.0f} ms")
    assert digest_kernels.usable(torch.zeros(2, dtype=torch.int64, device="cuda"))
    generator = torch.Generator().manual_seed(11)
    for dtype in (torch.int32, torch.uint8):
        for start in (0, 123_457):
            for length in [*range(2, 80), 255, 256, 257, 4097, 100_003]:
                for rows in ((), (3,)):
                    words = torch.randint(-(2**31), 2**31, (*rows, length), generator=generator).to(dtype)
                    on_device = commit_digest.sums(words.cuda(), start)
                    on_cpu = commit_digest.sums(words, start)
                    assert [t.tolist() for t in on_device] == [t.tolist() for t in on_cpu], (dtype, start, length)


@pytest.mark.parametrize(
    ("base", "view"), SHAPES, ids=["f32x8", "f32x7", "f16x5", "i64x6", "offset", "strided", "1MiB"]
)
def test_a_replayed_digest_is_the_eager_one_and_reads_each_input_afresh(base, view):
    for _ in range(3):
        made = base()
        assert commit_digest.digest(view(made.cuda())) == commit_digest.digest(view(made))
    assert len(digest_graphs._graphs) == 1 and not digest_graphs._refused


def test_a_stack_of_small_outputs_replays_one_graph_with_the_eager_digests():
    for _ in range(3):
        group = [torch.randn(528) for _ in range(70)]
        assert commit_digest.stacked([t.cuda() for t in group]) == commit_digest.stacked(group)
    assert [key[0] for key in digest_graphs._graphs] == ["stack"]


def test_pieces_and_large_tensors_and_a_failed_capture_digest_eagerly_alike(monkeypatch):
    big = torch.randn((digest_graphs.GRAPH_BYTES >> 2) + 3)
    assert commit_digest.digest(big.cuda()) == commit_digest.digest(big)
    assert not digest_graphs._graphs
    monkeypatch.setattr(evidence, "DIGEST_BYTES", 4096)
    pieces = torch.randn(5000)
    assert commit_digest.digest(pieces.cuda()) == commit_digest.digest(pieces)
    assert len(digest_graphs._graphs) == 5  # a graph a piece: each piece's first sum starts at its own word

    def refuse(compute, words):
        raise RuntimeError("capture refused")

    monkeypatch.setattr(digest_graphs, "capture", refuse)
    odd = torch.randn(77)
    assert commit_digest.digest(odd.cuda()) == commit_digest.digest(odd)
    assert len(digest_graphs._refused) == 1
