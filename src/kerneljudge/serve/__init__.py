"""`kerneljudge serve`: the judge as a reward service for trainers on other machines (docs/serve.md).

What crosses the wire is api/'s (schema, catalog, OpenRLHF's contract); the clients are client/'s. One module
per part:

- `app.py`: the HTTP routes (FastAPI) over a `Service`;
- `get_reward.py`: `POST /get_reward`, OpenRLHF's remote reward model, over the same service;
- `service.py`: admission, idempotency (a judgment per content, shared in flight, kept in the store) and the
  bounded queue, over any `kerneljudge.runs.backends.Backend`;
- `ledger.py`: the results store and the server's record-id and request-id tables in the same SQLite file;
- `answers.py`: an answer from a record (reward, failure, metrics, `kerneljudge.results.explain`);
- `jobs.py`: the asynchronous route's jobs; `metrics.py`: Prometheus' gauges and counters;
- `problems.py`: every error as `application/problem+json`, with its stable code; `limits.py`: the body's bounds.

Nothing here is imported by `import kerneljudge`: FastAPI, uvicorn, httpx and prometheus-client are the
`serve` extra's (`pip install 'kerneljudge[serve]'`). This package imports nothing of adapters/.
"""

import logging

# The library configures no logging of its own (kerneljudge/logs.py): `kerneljudge serve` does.
logging.getLogger("kerneljudge").addHandler(logging.NullHandler())
