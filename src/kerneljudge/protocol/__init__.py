"""The worker protocol: what the trusted parent may ask a worker, one request type per operation.

Imported by the workers as well as the parent, so it imports the standard library only. The wire format
(frames, channels) is protocol/wire.py and protocol/channel.py; this package is what a frame's header means.
"""

from kerneljudge.protocol.requests import (
    OPS,
    Call,
    Captured,
    Commit,
    Compare,
    Compile,
    Derive,
    Exit,
    Keep,
    Load,
    ProtocolError,
    Recheck,
    Request,
    Rerun,
    Stage,
    Time,
    Trial,
    decode,
)
from kerneljudge.protocol.responses import ANSWERS, INTERIM, check_response

__all__ = [
    "ANSWERS",
    "INTERIM",
    "OPS",
    "Call",
    "Captured",
    "Compare",
    "Compile",
    "Derive",
    "Exit",
    "Keep",
    "Commit",
    "Load",
    "ProtocolError",
    "Recheck",
    "Request",
    "Rerun",
    "Stage",
    "Time",
    "Trial",
    "check_response",
    "decode",
]
