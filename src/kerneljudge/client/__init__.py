"""The judge as a trainer reaches it, with one method, `judge(items) -> answers`:

- remote.py: `RemoteJudge`, a `kerneljudge serve` over HTTP, with retries that never judge twice;
- local.py: `LocalJudge`, the server's own service in this process, and `default_judge`, which picks one.

The adapters (adapters/) reach the judge through this package only; the server (serve/) knows nothing of them.
"""

from kerneljudge.client.local import LocalJudge, default_judge
from kerneljudge.client.remote import RemoteError, RemoteJudge

__all__ = ["LocalJudge", "RemoteError", "RemoteJudge", "default_judge"]
