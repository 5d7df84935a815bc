"""Whether a device allocation crosses between two sandboxed workers by CUDA IPC (the driver's `cuIpc*` calls),
how fast, and whether a handle can be forged to open memory its owner never exported.

Level 1's largest KernelBench problems (outputs of 4-6 GiB) spend most of a judgment crossing the host: the
candidate's worker writes its outputs into its channel and the reference's reads them to compare (docs/conformance.md,
"The host crossing"). The reference could instead open the candidate's output where it lies, on the GPU, and copy it
device to device. Before the judge relies on that, this probe asks, in the judge's own sandbox (each side its own
uid, PID, mount and network namespaces, seccomp: sandbox/enter.py):

- does `cuIpcOpenMemHandle` open another sandboxed worker's exported allocation, and how long do the open, a copy of
  the allocation and the close take;
- does a process open its own handle (CUDA says it may not);
- does any handle made from the genuine one by changing one 32-bit word by a little (+-1 to +-64, a forger's first
  guesses at the driver's object ids) open anything, in particular the exporter's second allocation, never
  exported: if it does, a candidate could make the reference compare memory of its choosing;
- the way that works across the sandboxes (an H100, 2026-12-05, judge 0.3.5): an allocation made to be shared, passed as
  a file descriptor over a Unix socket, through the judge's own code for it (worker/device_crossing.py): how long an
  import, map and copy take, whether a map shorter than the allocation is allowed, whether one a granule past its end is
  refused (the reader maps its own expected size, so a writer that sent a smaller allocation must not make it read past
  the end), whether an allocation its exporter released before the import is still read right, and whether a descriptor
  that is no allocation's (/dev/null) is refused.

    python benchmarks/cuda_ipc_probe.py [--mib 1024] [--out DIR]     (CUDA only; prints a JSON report)
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
from pathlib import Path

from sandboxed_child import sandboxed

from kerneljudge.sandbox.workspace import Workspace

CHILD = r"""
import ctypes, json, os, socket, sys, time
import torch
from kerneljudge.worker import device_crossing as dc

cu = ctypes.CDLL("libcuda.so.1")


class Handle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


def opened(handle):
    ptr = ctypes.c_uint64()
    began = time.perf_counter()
    rc = cu.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), handle, ctypes.c_uint(1))  # lazy peer access
    return rc, ptr.value, time.perf_counter() - began


def export_fd(sock, shown, nbytes):
    # the VMM way, as the judge would cross (worker/device_crossing.py): two allocations holding `shown`, their
    # descriptors sent together; the second released by this side once sent, before the importer opens it
    driver = dc.Driver.load(torch.cuda.current_device())
    try:
        kept = dc.export(driver, shown.data_ptr(), nbytes)
        let_go = dc.export(driver, shown.data_ptr(), nbytes)
    except dc.CrossingError as exc:
        dc.send(sock, {"error": str(exc)}, [])
        return {"vmm_export": str(exc)}, None
    dc.send(sock, {"size": kept.size, "bytes": nbytes, "granularity": driver.granularity()}, [kept.fd, let_go.fd])
    dc.release(driver, let_go)
    dc.send(sock, {"released": True}, [])
    info = os.fstat(kept.fd)  # what a parent relaying it could check: the kind of file it is
    kind = {"st_mode": oct(info.st_mode), "st_rdev": info.st_rdev, "link": os.readlink(f"/proc/self/fd/{kept.fd}")}
    return {"vmm_export_rc": 0, "vmm_size": kept.size, "vmm_fd": kind}, (driver, kept)


def import_fd(sock, count):
    told, fds = dc.receive(sock, 2)
    if "error" in told or len(fds) != 2:
        return {"vmm_exporter": told, "vmm_fds": len(fds)}, lambda: None
    kept_fd, let_go_fd = fds
    driver = dc.Driver.load(torch.cuda.current_device())
    grain, nbytes = driver.granularity(), told["bytes"]
    expected = torch.arange(count, dtype=torch.float32, device="cuda")
    dst = torch.empty(count + grain // 4, dtype=torch.float32, device="cuda")
    out = {"vmm_told": told}

    def attempt(name, fd, n):  # on a duplicate of the descriptor: copy_in closes the one it is given
        dst.zero_()
        torch.cuda.synchronize()
        began = time.perf_counter()
        try:
            dc.copy_in(driver, os.dup(fd), dst.data_ptr(), n)
        except dc.CrossingError as exc:
            return {"error": str(exc), "s": time.perf_counter() - began}
        took = time.perf_counter() - began
        k = min(n, nbytes) // 4
        return {"ok": True, "s": took, "copied_right": bool((dst[:k] == expected[:k]).all())}

    out["vmm_exact"] = [attempt("exact", kept_fd, nbytes) for _ in range(3)]  # import, map, copy, unmap, release
    out["vmm_shorter_map"] = attempt("shorter", kept_fd, max(4, nbytes - grain))  # less than the allocation
    dc.receive(sock, 0)  # the exporter has released the second allocation and closed its descriptor
    out["vmm_released_by_exporter"] = attempt("released", let_go_fd, nbytes)
    other = os.open("/dev/null", os.O_RDONLY)  # not an allocation's descriptor: the driver must refuse it
    out["vmm_not_an_allocation"] = attempt("bogus", other, nbytes)

    def past_the_end():  # last of all, in case the driver maps past the allocation's end and the copy faults
        out["vmm_past_the_end"] = attempt("past", kept_fd, nbytes + grain)  # one granule more than it holds
        for fd in (kept_fd, let_go_fd, other):
            os.close(fd)

    return out, past_the_end


role, count, sock = sys.argv[1], int(sys.argv[2]), socket.socket(fileno=int(sys.argv[3]))
torch.zeros(1, device="cuda")  # the primary context, current on this thread
torch.cuda.synchronize()
if role == "export":
    shown = torch.arange(count, dtype=torch.float32, device="cuda")
    hidden = torch.full((count,), 7.0, device="cuda")  # never exported
    torch.cuda.synchronize()
    handle = Handle()
    rc = cu.cuIpcGetMemHandle(ctypes.byref(handle), ctypes.c_uint64(shown.data_ptr()))
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    cu.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(shown.data_ptr()))
    own_rc, _, _ = opened(handle)
    vmm, crossing = export_fd(sock, shown, count * 4)
    print(json.dumps({"get_rc": rc, "handle": bytes(handle.reserved).hex(), "offset": shown.data_ptr() - base.value,
                      "allocation_bytes": size.value, "own_open_rc": own_rc,
                      "hidden_distance": hidden.data_ptr() - shown.data_ptr(), **vmm}), flush=True)
    sys.stdin.readline()  # until the importer is done
    print(json.dumps({"shown_intact": bool((shown == torch.arange(count, dtype=torch.float32, device="cuda")).all()),
                      "hidden_intact": bool((hidden == 7.0).all())}), flush=True)
    if crossing is not None:
        dc.release(*crossing)
else:
    out, last = import_fd(sock, count)
    told = json.loads(sys.stdin.readline())
    raw = bytes.fromhex(told["handle"])
    rc, ptr, open_s = opened(Handle(raw))
    out |= {"open_rc": rc, "open_s": open_s}
    if rc == 0:
        dst = torch.empty(count, dtype=torch.float32, device="cuda")
        copies = []
        for _ in range(3):
            began = time.perf_counter()
            copy_rc = cu.cuMemcpyDtoD_v2(ctypes.c_uint64(dst.data_ptr()), ctypes.c_uint64(ptr + told["offset"]),
                                         ctypes.c_size_t(count * 4))
            cu.cuCtxSynchronize()
            copies.append(time.perf_counter() - began)
        out |= {"copy_rc": copy_rc, "copy_s": copies, "copied_right": bool(
            (dst == torch.arange(count, dtype=torch.float32, device="cuda")).all())}
        began = time.perf_counter()
        out["close_rc"] = cu.cuIpcCloseMemHandle(ctypes.c_uint64(ptr))
        out["close_s"] = time.perf_counter() - began
    forged, tried, failing_s = [], 0, []
    for word in range(16):
        for delta in [d for k in range(7) for d in (1 << k, -(1 << k))]:
            value = (int.from_bytes(raw[4 * word:4 * word + 4], "little") + delta) % 2**32
            changed = raw[:4 * word] + value.to_bytes(4, "little") + raw[4 * word + 4:]
            frc, fptr, fs = opened(Handle(changed))
            tried += 1
            failing_s.append(fs)
            if frc == 0:
                probe = torch.empty(4, dtype=torch.float32, device="cuda")
                cu.cuMemcpyDtoD_v2(ctypes.c_uint64(probe.data_ptr()), ctypes.c_uint64(fptr), ctypes.c_size_t(16))
                cu.cuCtxSynchronize()
                forged.append({"word": word, "delta": delta, "first_values": probe.tolist()})
                cu.cuIpcCloseMemHandle(ctypes.c_uint64(fptr))
    out |= {"forged_tried": tried, "forged_opened": forged, "forged_open_s_max": max(failing_s)}
    last()
    print(json.dumps(out), flush=True)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=1024, help="the exported allocation's size")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    count = args.mib * 2**20 // 4
    spaces = [Workspace.create("ipcprobe"), Workspace.create("ipcprobe")]
    report: dict[str, object] = {"mib": args.mib}
    exporter = importer = None
    try:
        ends = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)  # the VMM way's descriptor crosses here
        exporter = sandboxed(
            spaces[0], "ipc_probe.py", CHILD, ["export", str(count), str(ends[0].fileno())], (ends[0].fileno(),)
        )
        importer = sandboxed(
            spaces[1], "ipc_probe.py", CHILD, ["import", str(count), str(ends[1].fileno())], (ends[1].fileno(),)
        )
        report["layers"] = {"exporter": exporter.layers, "importer": importer.layers}  # type: ignore[attr-defined]
        told = exporter.stdout.readline()  # type: ignore[union-attr]
        report["exporter"] = json.loads(told) if told.strip() else {"stderr": exporter.stderr.read()[-3000:]}
        if told.strip():
            importer.stdin.write(told)  # type: ignore[union-attr]
            importer.stdin.flush()  # type: ignore[union-attr]
            answer = importer.stdout.readline()  # type: ignore[union-attr]
            report["importer"] = json.loads(answer) if answer.strip() else {"stderr": importer.stderr.read()[-3000:]}
            exporter.stdin.write("done\n")  # type: ignore[union-attr]
            exporter.stdin.flush()  # type: ignore[union-attr]
            after = exporter.stdout.readline()  # type: ignore[union-attr]
            report["exporter_after"] = json.loads(after) if after.strip() else None
    finally:
        for proc in (exporter, importer):
            if proc is not None:
                proc.kill()
                proc.wait()
        for space in spaces:
            space.remove()
    text = json.dumps(report, indent=1)
    print(text)
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "cuda_ipc_probe.json").write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
