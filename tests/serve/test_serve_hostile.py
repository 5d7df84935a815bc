"""`kerneljudge serve` against hostile clients: bodies too large, too long, too deep, not UTF-8, or too slow.

Bodies are refused by their size before anything parses them (413), long lists and objects of many keys by
their length before their elements are validated (422, one line), and slow senders are cut off: a body by
the app's middleware (408), a request's head by the server's protocol (the connection closed). No judgment
is ever started; the slow and large senders talk to a real uvicorn server on 127.0.0.1, in a thread.
"""

from __future__ import annotations

import contextlib
import json
import re
import select
import socket
import threading
import time

import pytest
from fastapi.testclient import TestClient

from kerneljudge.api.schema import MAX_ITEMS
from kerneljudge.config import JudgeConfig
from kerneljudge.runs.backends.local import LocalBackend
from kerneljudge.serve.app import create_app
from kerneljudge.serve.limits import MAX_BODY_BYTES, ServeLimits, uvicorn_config
from kerneljudge.serve.service import Service

CONFIG = JudgeConfig(device="cpu", timing=False, policy="practical")
SHORT = ServeLimits(body_timeout_s=1.5, header_timeout_s=1.5)
HUGE_BYTES = 50 * 1000 * 1000
RSS_GROWTH_BOUND_KIB = 100 * 1024
CHUNK = b"0," * 32 * 1024  # 64 KiB of a JSON list's elements, sent again and again


@pytest.fixture
def service(tmp_path):
    served = Service(LocalBackend([None]), tmp_path / "store.db", CONFIG, queue=4)
    yield served
    served.close()


@pytest.fixture
def client(service):
    return TestClient(create_app(service), raise_server_exceptions=False)


@contextlib.contextmanager
def real_server(service: Service, limits: ServeLimits = SHORT):
    """A uvicorn server on 127.0.0.1 (a free port) in a thread; yields its port."""
    import uvicorn

    server = uvicorn.Server(uvicorn_config(create_app(service, limits=limits), "127.0.0.1", 0, limits, "warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.05)
    assert server.started, "the server did not start"
    try:
        yield server.servers[0].sockets[0].getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(10)


def connect(port: int) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def head(length: int | None = None, path: str = "/v1/judge") -> bytes:
    sized = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return f"POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n{sized}\r\n\r\n".encode()


def response(sock: socket.socket, wait_s: float = 10.0) -> tuple[int, dict]:
    """The status and JSON body of the one response on `sock` (read until the server closes it)."""
    sock.settimeout(wait_s)
    data = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            data += chunk
    status_line, _, rest = data.partition(b"\r\n")
    return int(status_line.split()[1]), json.loads(rest.partition(b"\r\n\r\n")[2])


def kib(field: str) -> int:
    return int(re.search(rf"{field}:\s+(\d+) kB", open("/proc/self/status").read()).group(1))


@contextlib.contextmanager
def rss_growth_kib():
    """Yields a list that holds, on exit, how far this process's peak RSS rose above its RSS at entry."""
    with open("/proc/self/clear_refs", "w") as handle:  # resets VmHWM to the current RSS (Linux, own process)
        handle.write("5")
    start, grown = kib("VmRSS"), []
    yield grown
    grown.append(kib("VmHWM") - start)


def health(port: int) -> int:
    with connect(port) as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        return response(sock)[0]


def test_a_50_mb_body_is_refused_with_413_by_its_length_and_as_it_streams(service):
    with real_server(service) as port, rss_growth_kib() as grown:
        with connect(port) as sock:  # Content-Length says it: refused before a byte of the body is read
            sock.sendall(head(HUGE_BYTES))
            status, body = response(sock)
        assert status == 413 and body["code"] == "body_too_large"
        assert body["detail"].startswith(f"the body is {HUGE_BYTES} bytes, more than 16 MiB")
        with connect(port) as sock:  # chunked: counted as it arrives, refused once past the cap
            sock.sendall(head())
            sent, answered = 0, False
            while sent < HUGE_BYTES and not answered:
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    sock.sendall(b"%x\r\n%s\r\n" % (len(CHUNK), CHUNK))
                    sent += len(CHUNK)
                answered = bool(select.select([sock], [], [], 0)[0])
            status, body = response(sock)
        assert status == 413 and problem(body) == ("body_too_large", "the body is more than 16 MiB: send fewer items")
        assert MAX_BODY_BYTES <= sent < 2 * MAX_BODY_BYTES
        assert health(port) == 200
    assert grown[0] < RSS_GROWTH_BOUND_KIB, f"the server grew by {grown[0] // 1024} MiB"


def test_a_body_sent_slowly_is_cut_off_with_408(service):
    with real_server(service) as port, connect(port) as sock:
        sock.sendall(head(100))
        started = time.monotonic()
        for _ in range(20):  # a byte every 0.2 s: 4 s at most, the timeout is 1.5 s
            try:
                sock.sendall(b"[")
            except (BrokenPipeError, ConnectionResetError):
                break
            if select.select([sock], [], [], 0.2)[0]:
                break
        status, body = response(sock)
        assert status == 408 and problem(body) == ("body_timeout", "the body did not arrive within 1.5 s")
        assert time.monotonic() - started < 3.5


@pytest.mark.parametrize("prefix", [b"", b"POST /v1/judge HTTP/1.1\r\nHost: local"])
def test_a_request_head_sent_slowly_or_never_closes_the_connection(service, prefix):
    with real_server(service) as port, connect(port) as sock:
        started = time.monotonic()
        sock.sendall(prefix)
        closed = False
        for index in range(20):  # the rest of a header a byte every 0.2 s; the deadline is 1.5 s
            if select.select([sock], [], [], 0.2)[0]:
                try:
                    closed = sock.recv(100) == b""  # closed without an answer
                except ConnectionResetError:
                    closed = True
                break
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(b"xyzw"[index % 4 : index % 4 + 1])
        assert closed, "the connection was still open after 4 s"
        assert 1.4 < time.monotonic() - started < 3.5
        assert health(port) == 200  # the connection after it is served as ever


def read_response(sock: socket.socket) -> bytes:
    """One whole HTTP/1.1 response off a kept-alive connection: its head, then Content-Length bytes of body (the
    server may send the two in separate segments)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"the connection closed mid-response: {data[:200]!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "the connection closed mid-body"
        body += chunk
    assert len(body) == length, "more bytes than the response's length: a response answered twice"
    return head


def test_a_kept_alive_connection_is_served_again_past_the_head_deadline(service):
    with real_server(service) as port, connect(port) as sock:
        for _ in range(3):  # three requests over 3 s on one connection: each head arrives at once
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
            assert read_response(sock).startswith(b"HTTP/1.1 200")
            time.sleep(1.0)


def test_a_million_small_ints_are_refused_by_the_list_length_quickly_and_in_bounded_memory(client):
    body = json.dumps(list(range(10**6))).encode()
    assert len(body) < MAX_BODY_BYTES
    with rss_growth_kib() as grown:
        started = time.monotonic()
        answer = client.post("/v1/judge", content=body, headers={"content-type": "application/json"})
        elapsed_s = time.monotonic() - started
    assert answer.status_code == 422
    assert problem(answer.json()) == (
        "invalid_body",
        f"body: List should have at most {MAX_ITEMS} items after validation, not 1000000",
    )
    assert elapsed_s < 5 and grown[0] < RSS_GROWTH_BOUND_KIB


@pytest.mark.parametrize(
    "path, body, message",
    [
        ("/v1/jobs", [0] * 100_000, f"at most {MAX_ITEMS} items"),
        ("/get_reward", {"query": [""] * 100_000, "prompts": [], "labels": []}, f"at most {MAX_ITEMS} items"),
        ("/v1/judge", {f"k{i}": 0 for i in range(100_000)}, "100000 fields, more than the 5 known (unknown: 'k0'"),
        ("/v1/judge", {"task": "t", "candidate": "c", "options": {f"o{i}": 0 for i in range(100_000)}}, "options:"),
    ],
)
def test_long_lists_and_objects_of_many_keys_are_one_error_not_one_per_element(client, path, body, message):
    started = time.monotonic()
    answer = client.post(path, json=body)
    assert answer.status_code == 422 and message in answer.json()["detail"]
    assert "\n" not in answer.json()["detail"]
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    "body", [b"[" * 100_000, b"{" * 100_000, b'{"task": "builtin:x", "candidate": "\xff\xfe"}', b"\xef\xbb\xbf{"]
)
def test_deep_nesting_and_invalid_utf8_are_a_one_line_400_never_a_500(client, body):
    answer = client.post("/v1/judge", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == 400 and answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "malformed_json" and "\n" not in answer.json()["detail"]


def test_a_content_length_that_is_not_a_number_is_a_400(client):
    answer = client.post("/v1/judge", content=b"{}", headers={"content-length": "12x"})
    assert answer.status_code == 400
    assert problem(answer.json()) == ("bad_content_length", "Content-Length is not a number of bytes")


def problem(body: dict) -> tuple[str, str]:
    """A problem body's code and detail, after checking that its type and status go with its code."""
    assert body["type"] == f"urn:kerneljudge:problem:{body['code']}" and isinstance(body["status"], int)
    return body["code"], body["detail"]
