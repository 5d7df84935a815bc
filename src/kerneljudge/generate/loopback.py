"""A small OpenAI-compatible server on loopback that answers from a ResponseBook: the tests drive the real
client against it, and the GPU check serves the recorded responses of examples/responses/ with it, since no
model weights can be fetched on the project's machines (docs/generate.md).

It serves `POST /v1/chat/completions` and `GET /v1/models` (http.server, one thread a request). A request's
task is the book's task whose key appears in its first user message, its round one more than the assistant
messages it carries, its sample the request's `seed` where it sends one (`generate --seed 0` sends sample S
seed S: the same answers whatever the concurrency), else the count of earlier requests for that task and
round, so that the answers come in the book's order. For the tests it can answer the first requests with
given error statuses (`faults`: 429 with a Retry-After, 5xx, ...), check the bearer key, and stop answering
after some requests (`hold_after`: the request is held until the server stops) to stand for a server that
dies mid-run.

    python -m kerneljudge.generate.loopback RESPONSES [--port N] [--url-file PATH]
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from kerneljudge.generate.offline import ResponseBook

RETRY_AFTER_S = "2"  # what a 429 fault asks the client to wait


class ReplayServer:
    """The server; `with ReplayServer(book) as server:` serves at `server.url` on a background thread."""

    def __init__(
        self,
        book: ResponseBook,
        port: int = 0,
        faults: Sequence[int] = (),
        hold_after: int | None = None,
        api_key: str | None = None,
    ) -> None:
        self.book, self.faults, self.hold_after, self.api_key = book, list(faults), hold_after, api_key
        self.lock, self.released = threading.Lock(), threading.Event()
        self.counts: Counter[tuple[str, int]] = Counter()
        self.answered = 0
        self.statuses: list[int] = []
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), self.handler())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ReplayServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self.released.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def answer(self, body: dict[str, Any], key: str | None) -> tuple[int, dict[str, Any], dict[str, str]]:
        """The status, JSON body and headers for one chat request."""
        with self.lock:
            if self.api_key is not None and key != self.api_key:
                return error(401, "invalid API key")
            if self.faults:
                status = self.faults.pop(0)
                return error(status, f"fault injected for the test: {status}", status == 429)
            hold = self.hold_after is not None and self.answered >= self.hold_after
        if hold:  # a server that stopped answering: the client's timeout or a kill ends the wait
            self.released.wait()
            return error(503, "the server is shutting down")
        messages = body.get("messages") or []
        first = next((m.get("content", "") for m in messages if m.get("role") == "user"), "")
        task = self.book.task_in(first if isinstance(first, str) else "")
        if task is None:
            return error(400, f"no response in {self.book.origin} matches this prompt")
        round_ = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        with self.lock:
            sample = self.counts[(task, round_)]
            self.counts[(task, round_)] += 1
            self.answered += 1
        seed = body.get("seed")
        if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0:
            sample = seed
        canned = self.book.pick(task, round_, sample)
        if canned is None:
            return error(400, f"no response for task {task} round {round_} in {self.book.origin}")
        words = sum(len(str(m.get("content", "")).split()) for m in messages)
        return 200, completion(canned.text, canned.model, f"{task}-{round_}-{sample}", words), {}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    self.reply(200, {"object": "list", "data": [{"id": "replay", "object": "model"}]}, {})
                else:
                    self.reply(*error(404, f"no route {self.path}"))

            def do_POST(self) -> None:
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self.reply(*error(404, f"no route {self.path}"))
                    return
                try:
                    body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                except (ValueError, json.JSONDecodeError):
                    self.reply(*error(400, "the body is not JSON"))
                    return
                key = (self.headers.get("Authorization") or "").removeprefix("Bearer ") or None
                self.reply(*server.answer(body if isinstance(body, dict) else {}, key))

            def reply(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
                with server.lock:
                    server.statuses.append(status)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client went away (a test killed it)
                    pass

            def log_message(self, format: str, *args: Any) -> None:  # quiet: the tests read statuses instead
                pass

        return Handler


def error(status: int, message: str, retry_after: bool = False) -> tuple[int, dict[str, Any], dict[str, str]]:
    headers = {"Retry-After": RETRY_AFTER_S} if retry_after else {}
    return status, {"error": {"message": message, "type": "replay_error", "code": status}}, headers


def completion(text: str, model: str, ident: str, prompt_words: int) -> dict[str, Any]:
    """A chat completion as OpenAI's API writes one (token counts are word counts: a replay has no tokenizer)."""
    return {
        "id": f"chatcmpl-replay-{ident}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt_words,
            "completion_tokens": len(text.split()),
            "total_tokens": prompt_words + len(text.split()),
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kerneljudge.generate.loopback", description=__doc__.split("\n")[0])
    parser.add_argument("responses", type=Path, help="a responses JSONL file, or a folder holding responses.jsonl")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    parser.add_argument("--url-file", type=Path, help="write the base URL there once serving")
    args = parser.parse_args(argv)
    with ReplayServer(ResponseBook.load(args.responses), port=args.port) as server:
        if args.url_file is not None:
            args.url_file.write_text(server.url + "\n")
        print(f"serving {args.responses} at {server.url}", flush=True)
        try:
            server.thread.join()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
