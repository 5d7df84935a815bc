"""Device <-> host copies through a memfd mapping, the way worker channels move tensors (docs/conformance.md).

Copies 4 GiB between a CUDA tensor and a memfd, in both directions, four ways:

- `pageable`: 256 MiB windows of the memfd mapped (populated at once) one after another and copied straight to
  or from the device, as protocol/channel.py does now;
- `page-locked`: the same windows, each page-locked first (cudaHostRegister) and released after;
- `staged`: the same windows, through two reused page-locked staging buffers: the device copies into one while
  the host copies the other into its window (torch's CPU copy, on the process's threads), so the bus and the
  host's memory work side by side;
- `registered once`: the whole 4 GiB mapped and page-locked once (its registration timed apart), then copied
  with no further setup: what a worker that kept its channel mapped and locked between trials would pay.

Each way runs twice (the first pass also pays for the memfd's pages). Needs CUDA.

    python benchmarks/host_copy_bandwidth.py
"""

from __future__ import annotations

import mmap
import os
import time

import torch

WINDOW = 256 * 2**20
TOTAL = 4 * 2**30
FLAGS = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
PROT = mmap.PROT_READ | mmap.PROT_WRITE


def mapped(fd: int, offset: int, length: int) -> tuple[mmap.mmap, torch.Tensor]:
    window = mmap.mmap(fd, length, flags=FLAGS, prot=PROT, offset=offset)
    return window, torch.frombuffer(window, dtype=torch.uint8, count=length)


def register(host: torch.Tensor) -> float:
    began = time.perf_counter()
    assert int(torch.cuda.cudart().cudaHostRegister(host.data_ptr(), host.numel(), 0)) == 0
    return time.perf_counter() - began


def windowed_pass(fd: int, device: torch.Tensor, locked: bool, to_host: bool) -> tuple[float, float]:
    """Seconds for the whole copy, and of it the seconds spent registering windows."""
    began, registering = time.perf_counter(), 0.0
    for offset in range(0, TOTAL, WINDOW):
        window, host = mapped(fd, offset, WINDOW)
        if locked:
            registering += register(host)
        if to_host:
            host.copy_(device[offset : offset + WINDOW], non_blocking=locked)
        else:
            device[offset : offset + WINDOW].copy_(host, non_blocking=locked)
        torch.cuda.synchronize()
        if locked:
            torch.cuda.cudart().cudaHostUnregister(host.data_ptr())
        del host
        window.close()
    return time.perf_counter() - began, registering


def staged_pass(fd: int, device: torch.Tensor, to_host: bool) -> tuple[float, float]:
    """Through two page-locked staging buffers, the device's copy of one window beside the host's of another."""
    stages = [torch.empty(WINDOW, dtype=torch.uint8, pin_memory=True) for _ in range(2)]
    done = [torch.cuda.Event(), torch.cuda.Event()]
    stream = torch.cuda.Stream()
    offsets = list(range(0, TOTAL, WINDOW))
    began = time.perf_counter()
    if to_host:
        with torch.cuda.stream(stream):
            stages[0].copy_(device[: min(WINDOW, TOTAL)], non_blocking=True)
            done[0].record(stream)
        for k, offset in enumerate(offsets):
            if k + 1 < len(offsets):  # the next window crosses the bus while this one is copied on the host
                with torch.cuda.stream(stream):
                    nxt = offsets[k + 1]
                    stages[(k + 1) % 2].copy_(device[nxt : nxt + WINDOW], non_blocking=True)
                    done[(k + 1) % 2].record(stream)
            done[k % 2].synchronize()
            window, host = mapped(fd, offset, WINDOW)
            host.copy_(stages[k % 2])
            del host
            window.close()
    else:
        for k, offset in enumerate(offsets):
            done[k % 2].synchronize()  # the bus is done with this buffer's last window
            window, host = mapped(fd, offset, WINDOW)
            stages[k % 2].copy_(host)
            del host
            window.close()
            with torch.cuda.stream(stream):
                device[offset : offset + WINDOW].copy_(stages[k % 2], non_blocking=True)
                done[k % 2].record(stream)
        stream.synchronize()
    torch.cuda.synchronize()
    return time.perf_counter() - began, 0.0


def registered_once_pass(host: torch.Tensor, device: torch.Tensor, to_host: bool) -> tuple[float, float]:
    began = time.perf_counter()
    if to_host:
        host.copy_(device, non_blocking=True)
    else:
        device.copy_(host, non_blocking=True)
    torch.cuda.synchronize()
    return time.perf_counter() - began, 0.0


def main() -> None:
    fd = os.memfd_create("kj-bandwidth")
    os.ftruncate(fd, TOTAL)
    device = torch.empty(TOTAL, dtype=torch.uint8, device="cuda").random_()
    print(f"torch CPU threads: {torch.get_num_threads()}")
    print("| pass | direction | host memory | GB/s | of it registering (s) |")
    print("|---|---|---|---|---|")

    def row(repeat: int, to_host: bool, way: str, seconds: float, registering: float) -> None:
        direction = "device to host" if to_host else "host to device"
        print(f"| {repeat} | {direction} | {way} | {TOTAL / seconds / 1e9:.1f} | {registering:.2f} |")

    for repeat in (1, 2):
        for to_host in (True, False):
            for locked in (False, True):
                way = "page-locked windows" if locked else "pageable windows"
                row(repeat, to_host, way, *windowed_pass(fd, device, locked, to_host))
            row(repeat, to_host, "staged (2 x 256 MiB page-locked)", *staged_pass(fd, device, to_host))
    window, host = mapped(fd, 0, TOTAL)
    print(f"registering the whole {TOTAL / 2**30:.0f} GiB mapping once: {register(host):.2f} s")
    for repeat in (1, 2):
        for to_host in (True, False):
            row(repeat, to_host, "registered once", *registered_once_pass(host, device, to_host))
    torch.cuda.cudart().cudaHostUnregister(host.data_ptr())
    del host
    window.close()


if __name__ == "__main__":
    main()
