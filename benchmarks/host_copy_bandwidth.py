"""Device <-> host copies through a memfd mapping, the way worker channels move tensors (docs/conformance.md).

Copies 4 GiB between a CUDA tensor and 256 MiB windows of a memfd mapping (as worker/channel.py maps them,
populated at once), in both directions, pageable and with each window page-locked first
(cudaHostRegister), twice (the first pass also pays for the memfd's pages). Needs CUDA.

    python benchmarks/host_copy_bandwidth.py
"""

from __future__ import annotations

import mmap
import os
import time

import torch

WINDOW = 256 * 2**20
TOTAL = 4 * 2**30


def one_pass(fd: int, device: torch.Tensor, register: bool, to_host: bool) -> tuple[float, float]:
    """Seconds for the whole copy, and of it the seconds spent registering windows."""
    began, registering = time.perf_counter(), 0.0
    for offset in range(0, TOTAL, WINDOW):
        flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
        window = mmap.mmap(fd, WINDOW, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE, offset=offset)
        host = torch.frombuffer(window, dtype=torch.uint8, count=WINDOW)
        if register:
            started = time.perf_counter()
            assert int(torch.cuda.cudart().cudaHostRegister(host.data_ptr(), WINDOW, 0)) == 0
            registering += time.perf_counter() - started
        if to_host:
            host.copy_(device[offset : offset + WINDOW], non_blocking=register)
        else:
            device[offset : offset + WINDOW].copy_(host, non_blocking=register)
        torch.cuda.synchronize()
        if register:
            torch.cuda.cudart().cudaHostUnregister(host.data_ptr())
        del host
        window.close()
    return time.perf_counter() - began, registering


def main() -> None:
    fd = os.memfd_create("kj-bandwidth")
    os.ftruncate(fd, TOTAL)
    device = torch.empty(TOTAL, dtype=torch.uint8, device="cuda").random_()
    print("| pass | direction | host memory | GB/s | of it registering (s) |")
    print("|---|---|---|---|---|")
    for repeat in (1, 2):
        for register in (False, True):
            for to_host in (True, False):
                seconds, registering = one_pass(fd, device, register, to_host)
                print(
                    f"| {repeat} | {'device to host' if to_host else 'host to device'} | "
                    f"{'page-locked' if register else 'pageable'} | {TOTAL / seconds / 1e9:.1f} | {registering:.2f} |"
                )


if __name__ == "__main__":
    main()
