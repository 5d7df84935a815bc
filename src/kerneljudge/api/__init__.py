"""The HTTP contract: what a trainer and `kerneljudge serve` agree on, with neither's machinery (docs/serve.md).

Shared by the server (serve/), its clients (client/) and the trainer adapters (adapters/), so that those three import
this package and not each other.

- `schema.py`: what crosses the wire: the items a trainer sends and the answers it gets (plain pydantic);
- `catalog.py`: which tasks a server judges against: the built-in suite, `--tasks DIR`, a task's own text;
- `outcomes.py`: what every adapter shares: how a row names its task, which judge answers, how an answer scores;
- `openrlhf.py`: OpenRLHF's remote reward model as a contract: what its rollout posts and reads, how it is scored;
- `window.py`: calls gathered over a short window and answered by one (the adapters' batcher, `/get_reward`).
"""
