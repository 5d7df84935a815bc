"""The seal between a timed sample and the copy of its checked output (worker/seal/sample.py): each door a candidate
could leave open is seen, nothing is seen where none is, and what runs after the seal reads and writes the
protocol's frames as the parent does."""

from __future__ import annotations

import ctypes
import gc
import json
import os
import shutil
import signal
import subprocess
import sys
import threading

import digest_emulation
import pytest
import torch

import kerneljudge.worker.base  # noqa: F401  (the worker's modules, all imported as in a worker)
from kerneljudge import protocol
from kerneljudge.protocol import wire
from kerneljudge.worker import evidence
from kerneljudge.worker.seal import commit as sample_commit
from kerneljudge.worker.seal import digest_kernels
from kerneljudge.worker.seal import sample as sample_seal
from kerneljudge.worker.timing import timer


class Worker(timer.Timer):
    """A timer alone: the seal takes its class's attributes like a worker's."""


@pytest.fixture
def seal():
    # A first seal and its check, so that what a first check may add to the seal's own module (a namespace the
    # seal compares whole; a once-per-process warning's `__warningregistry__`, for one) is in the baseline of the
    # seal under test: a clean clone's run once saw `replaced kerneljudge.worker.seal.sample` here, depending on
    # which test files its test process had run before. Not yet seen in a worker.
    # The test process is no worker: threads earlier tests left in it may still add a key to a namespace the seal
    # compares whole (a clean clone's run saw it again after the warm check). The baseline is retaken then, and
    # what was added is named if it never settles.
    warm = sample_seal.Seal(Worker())
    warm.open_doors(warm.begin(evidence.python_threads()))
    for _ in range(3):
        seal = sample_seal.Seal(Worker())
        doors = seal.open_doors(seal.begin(evidence.python_threads()))
        if not doors:
            return seal
    added = {s.name: sorted(set(s.space) - set(s.keys)) for s in seal.spaces if set(s.space) - set(s.keys)}
    raise AssertionError(f"no clean baseline: {doors}; keys added: {added}")


def doors_with(seal, arm, disarm):
    before = seal.begin(evidence.python_threads())
    arm()
    try:
        return seal.open_doors(before)
    finally:
        disarm()


def test_hooks_handlers_and_timers_left_behind_are_seen(seal):
    assert "sys.setprofile" in doors_with(seal, lambda: sys.setprofile(lambda *a: None), lambda: sys.setprofile(None))
    assert "sys.settrace" in doors_with(
        seal, lambda: threading.settrace(lambda *a: None), lambda: threading.settrace(None)
    )
    original = signal.getsignal(signal.SIGUSR2)
    found = doors_with(
        seal, lambda: signal.signal(signal.SIGUSR2, lambda *a: None), lambda: signal.signal(signal.SIGUSR2, original)
    )
    assert "signal handlers" in found and not any("C handler" in door for door in found)  # Python's own, in libpython
    found = doors_with(
        seal, lambda: signal.setitimer(signal.ITIMER_VIRTUAL, 30.0), lambda: signal.setitimer(signal.ITIMER_VIRTUAL, 0)
    )
    assert "interval timers" in found
    assert seal.open_doors(seal.begin(evidence.python_threads())) == []


def test_a_garbage_collector_callback_a_torch_mode_and_a_thread_are_seen(seal):
    def callback(phase, info):
        return None

    found = doors_with(seal, lambda: gc.callbacks.append(callback), lambda: gc.callbacks.remove(callback))
    assert found == ["gc.callbacks"]
    from torch.overrides import TorchFunctionMode

    mode = TorchFunctionMode()
    assert doors_with(seal, mode.__enter__, lambda: mode.__exit__(None, None, None)) == ["torch function modes"]
    stop = threading.Event()
    waiter = threading.Thread(target=stop.wait)
    try:
        found = doors_with(seal, waiter.start, stop.set)
    finally:
        waiter.join()
    assert found == ["1 thread(s) alive beside the worker's own", "1 native thread(s) started in the request"]


def test_a_patched_namespace_is_seen_entry_by_entry(seal, monkeypatch):
    monkeypatch.setattr(torch.Tensor, "stride", lambda self, *a: (1,), raising=False)
    assert "replaced torch.Tensor" in seal.open_doors(seal.begin(evidence.python_threads()))
    monkeypatch.undo()
    monkeypatch.setattr(sample_seal, "_read", lambda fd, n: b"")
    assert "replaced kerneljudge.worker.seal.sample._read" in seal.open_doors(seal.begin(evidence.python_threads()))
    monkeypatch.undo()
    monkeypatch.setattr("builtins.len", lambda value: 0)
    assert "replaced builtins.len" in seal.open_doors(seal.begin(evidence.python_threads()))
    monkeypatch.undo()
    monkeypatch.setattr(torch, "arange", lambda *a, **k: None)
    assert "replaced torch.arange" in seal.open_doors(seal.begin(evidence.python_threads()))
    monkeypatch.undo()
    torch.kj_lazy_attribute = 1  # a library's attribute added later to a module the worker does not own: no door
    try:
        assert seal.open_doors(seal.begin(evidence.python_threads())) == []
    finally:
        del torch.kj_lazy_attribute


def test_a_python_kernel_over_the_copys_operator_is_seen():
    seal = sample_seal.Seal(Worker())
    assert seal.kernels_replaced() == []
    library = torch.library.Library("aten", "IMPL")
    try:
        library.impl("copy_", lambda self, src, non_blocking=False: self, "CPU")
        assert seal.kernels_replaced() == ["a kernel of aten::copy_"]
    finally:
        library._destroy()
    assert seal.kernels_replaced() == []


@pytest.mark.parametrize("fused", [False, True], ids=["operators", "fused"])
def test_the_seal_names_every_operator_its_copy_and_the_commits_digests_dispatch(monkeypatch, fused):
    from torch.utils._python_dispatch import TorchDispatchMode

    if fused:  # the steps around worker/seal/digest_kernels.py's kernels, which are emulated and not recorded
        digest_emulation.install(monkeypatch, digest_kernels)

    seen = set()

    class Recorder(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            overload = func._overloadname
            seen.add(func._schema.name + ("" if overload == "default" else f".{overload}"))
            return func(*args, **(kwargs or {}))

    made = torch.randn(6, 5)[:, :3]
    into = torch.empty_strided(made.shape, made.stride())
    nest = (torch.ones(3, dtype=torch.float16), [torch.ones(2, dtype=torch.int8)])
    empty = torch.ones(0)
    unaligned = torch.randn(9)[1:]  # its words four bytes into their storage (commit_digest.packed)
    with Recorder():
        assert sample_seal.copy_kept(into, made)
        sample_commit.commit_digests([made, made, nest])  # stacked
        sample_commit.commit_digests([nest, empty])
        stack_bytes, sample_commit.STACK_BYTES = sample_commit.STACK_BYTES, 8
        piece_bytes, evidence.DIGEST_BYTES = evidence.DIGEST_BYTES, 16
        try:
            sample_commit.commit_digests([made, made, unaligned])  # one at a time, in pieces (a tree over their roots)
        finally:
            sample_commit.STACK_BYTES, evidence.DIGEST_BYTES = stack_bytes, piece_bytes
    assert seen <= set(sample_seal.COPY_OPS)
    assert torch.equal(into, made)


def test_keep_and_sampled_frames_read_and_write_as_the_parent_does():
    read, write = os.pipe()
    try:
        for call in (-1, 0, 7, 123456):
            wire.write_frame(write, protocol.Keep(call=call).header())
            assert sample_seal.read_keep(read) == call
        for calls in (0, 1, 5, 10_000):
            wire.write_frame(write, protocol.Commit(calls=calls).header())
            assert sample_seal.committed_calls(sample_seal.read_keep(read)) == calls
        assert [sample_seal.committed_calls(answer) for answer in (None, -1, 0, 7)] == [None] * 4
        wire.write_frame(write, protocol.Captured().header())
        assert sample_seal.read_keep(read) is None
        sample_seal.write_sampled(write, 41)
        assert wire.read_frame(read) == {"type": "sampled", "sample": 41}
        assert json.dumps(protocol.Keep(call=3).header()).encode() == b'{"op": "keep", "call": 3}'
    finally:
        os.close(read)
        os.close(write)


def test_copies_of_nests_and_what_is_no_plain_nest():
    made = (torch.randn(4, 3), [torch.arange(5)])
    into = (torch.empty(4, 3), [torch.empty(5, dtype=torch.int64)])
    assert sample_seal.copy_kept(into, made)
    assert torch.equal(into[0], made[0]) and torch.equal(into[1][0], made[1][0])

    class Listed(list):
        def __iter__(self):  # a container that computes as it is read: never called by the copy
            raise AssertionError("read by its own iterator")

    into = [torch.empty(2)]
    assert sample_seal.copy_kept(into, Listed([torch.ones(2)])) and torch.equal(into[0], torch.ones(2))
    assert not sample_seal.copy_kept(Listed([torch.empty(2)]), Listed([torch.ones(2)]))  # storage of the built-in kind
    assert not sample_seal.copy_kept(torch.empty(2), [torch.ones(2)])
    assert not sample_seal.copy_kept([torch.empty(2)], [torch.ones(2), torch.ones(2)])


def test_a_named_tuple_of_torchs_is_copied_as_a_tuple_and_another_container_class_is_not_plain():
    from kerneljudge.worker.seal import timed_outputs

    named = torch.linalg.qr(torch.randn(4, 3))
    assert type(named) in timed_outputs.RETURN_TYPES and timed_outputs.not_plain([named]) is None
    into = timed_outputs.empty_alike(named)
    assert type(into) is tuple and sample_seal.copy_kept(into, named)
    assert all(torch.equal(a, b) for a, b in zip(into, named, strict=True))

    class Lazy(tuple):
        def __iter__(self):
            raise AssertionError("read by its own iterator")

    lazy = Lazy((torch.ones(2),))
    assert timed_outputs.not_plain([lazy]).endswith("Lazy") and timed_outputs.items(lazy)[0] is lazy[0]


def test_garbage_collection_is_off_between_the_seal_and_the_copy_and_back_after():
    was = sample_seal.gc_off()
    assert not gc.isenabled()
    sample_seal.gc_back(was)
    assert gc.isenabled() == was


def set_c_handler(number: int, address: int) -> bytes:
    """Set signal `number`'s handler to the code at `address` through the C library (x86-64 glibc's struct
    sigaction: the handler first, the flags at byte 136); the old action's bytes, for `restore_c_handler`."""
    libc = ctypes.CDLL(None, use_errno=True)
    new, old = ctypes.create_string_buffer(512), ctypes.create_string_buffer(512)
    ctypes.c_void_p.from_buffer(new).value = address
    assert libc.sigaction(number, new, old) == 0, ctypes.get_errno()
    return old.raw


def restore_c_handler(number: int, old: bytes) -> None:
    assert ctypes.CDLL(None).sigaction(number, ctypes.create_string_buffer(old, 512), None) == 0


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="glibc's x86-64 sigaction")
def test_a_c_handler_outside_the_installed_libraries_is_a_door_and_a_librarys_own_is_not(seal):
    """Triton's compiler sets handlers for nine signals at its first compile (an H100, 2026-12-06), in libtriton:
    an honest candidate's first call. A ctypes callback set as a handler runs the candidate's Python code when
    its signal comes, and lies in no shared object."""
    callback = ctypes.CFUNCTYPE(None, ctypes.c_int)(lambda number: None)
    saved: list[bytes] = []
    found = doors_with(
        seal,
        lambda: saved.append(set_c_handler(signal.SIGUSR1, ctypes.cast(callback, ctypes.c_void_p).value)),
        lambda: restore_c_handler(signal.SIGUSR1, saved.pop()),
    )
    assert "a C handler of SIGUSR1 (in no shared object)" in found
    in_libc = ctypes.cast(ctypes.CDLL(None).getpid, ctypes.c_void_p).value  # never raised: only where it lies counts
    found = doors_with(
        seal,
        lambda: saved.append(set_c_handler(signal.SIGUSR1, in_libc)),
        lambda: restore_c_handler(signal.SIGUSR1, saved.pop()),
    )
    assert not any("C handler" in door for door in found), found
    assert seal.open_doors(seal.begin(evidence.python_threads())) == []


@pytest.mark.skipif(sys.platform != "linux" or os.uname().machine != "x86_64", reason="glibc's x86-64 sigaction")
@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_a_c_handler_in_a_shared_object_built_outside_the_installed_environment_is_a_door(seal, tmp_path):
    """A candidate's compiled extension lies in its own build folder, not among the installed libraries."""
    source, built = tmp_path / "handler.c", tmp_path / "libhandler.so"
    source.write_text("void on_signal(int number) { (void)number; }\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(built), str(source)], check=True)
    library = ctypes.CDLL(str(built))
    saved: list[bytes] = []
    found = doors_with(
        seal,
        lambda: saved.append(set_c_handler(signal.SIGUSR1, ctypes.cast(library.on_signal, ctypes.c_void_p).value)),
        lambda: restore_c_handler(signal.SIGUSR1, saved.pop()),
    )
    assert f"a C handler of SIGUSR1 ({os.path.realpath(built)})" in found
    assert seal.open_doors(seal.begin(evidence.python_threads())) == []
