"""`kerneljudge serve`: the judge as a reward service for trainers on other machines (docs/serve.md).

One module per part:

- `schema`: the items sent and the answers given (plain pydantic), shared by the server and its clients;
- `catalog`: the task ids a server knows (the built-in suite, `--tasks DIR`) and a task's own text;
- `service`: admission, idempotency (a judgment per content, shared in flight, kept in the store) and the
  bounded queue, over any `kerneljudge.runs.backends.Backend`;
- `ledger`: the results store and the server's record-id and request-id tables in the same SQLite file;
- `answers`: an answer from a record (reward, failure, metrics, `kerneljudge.results.explain`);
- `jobs`: the asynchronous route's jobs; `metrics`: Prometheus' gauges and counters;
- `problems`: every error as `application/problem+json`, with its stable code; `limits`: the body's bounds;
- `app`: the HTTP routes (FastAPI); `client`: `RemoteJudge` (HTTP, httpx) and `LocalJudge` (in process).

Nothing here is imported by `import kerneljudge`: FastAPI, uvicorn, httpx and prometheus-client are the
`serve` extra's (`pip install 'kerneljudge[serve]'`).
"""

import logging

# The library configures no logging of its own (kerneljudge/logs.py): `kerneljudge serve` does.
logging.getLogger("kerneljudge").addHandler(logging.NullHandler())
