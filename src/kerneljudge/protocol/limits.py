"""What a request may ask of a worker, by number: the perturbed replays' kinds and bounds (worker/correctness/perturb.py
does them; judge/stages/replays.py draws them) and the shapes a task's family may list (worker/correctness/family.py
reads them; tasks/shapes.py checks a family's description). Both sides import these, so they live here."""

PERTURB_KINDS = ("gpu_load", "launch_order", "copy_traffic", "sm_hold", "staggered_release")
# The kinds whose work of the judge's own goes on past the call's return on the host's side (pinned copies in
# flight, served by CUDA's threads): the CPU those threads use after the return is the judge's, not work the call
# left (KJ-R012). The worker does not clock the threads after such a replay (worker/evidence.CallWatch), and the
# parent, which asked for the kind, does not read them (judgment/stages/calls.py); every other call is read.
HOST_BUSY_KINDS = frozenset({"copy_traffic"})
MIN_PRODUCTS, MAX_PRODUCTS = 4, 512
MIN_COPIES, MAX_COPIES = 4, 256
MIN_COPY_BYTES, MAX_COPY_BYTES = 1 << 20, 128 << 20  # each of the three buffers (two on the device, one pinned)
MIN_HOLD_MS, MAX_HOLD_MS = 0.05, 200.0
MAX_DELAY_MS = 5.0
MAX_CYCLES = 2**31 - 1  # a kernel argument of 32 bits

MAX_FAMILY_SHAPES = 4096  # explicit shapes, or values on one axis (a range is not counted: it is sent as its bounds)


def hold_blocks(share: float, sms: int) -> int:
    """The blocks (SMs) `sm_hold` takes: `share` of them, at least one, and at least one left to the call."""
    return min(max(1, sms - 1), max(1, round(share * sms)))
