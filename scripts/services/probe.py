"""Readiness probes of the service scripts (standard library only).

    probe.py free-port          prints a TCP port on 127.0.0.1 that nothing listens on
    probe.py kafka HOST:PORT    succeeds when a Kafka broker answers an ApiVersions request
    probe.py http URL           succeeds when URL answers GET with a 2xx status
    probe.py registry URL       succeeds when the karapace registry at URL is the primary and has
                                read its schemas topic (GET URL/_health)
"""

from __future__ import annotations

import json
import socket
import struct
import sys
import urllib.request


def free_port() -> int:
    """A port that the system would give to a new listener on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kafka_answers(address: str, timeout: float = 5.0) -> bool:
    """True when the broker at HOST:PORT answers ApiVersions (v0) with error code 0."""
    host, port = address.rsplit(":", 1)
    client = b"lakecdc-probe"
    body = struct.pack(">hhih", 18, 0, 7, len(client)) + client
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        head = _read(s, 4)
        answer = _read(s, struct.unpack(">i", head)[0])
    correlation, error = struct.unpack(">ih", answer[:6])
    return correlation == 7 and error == 0


def _read(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the connection closed before the whole answer")
        data += chunk
    return data


def http_answers(url: str, timeout: float = 5.0) -> bool:
    """True when GET url answers with a 2xx status."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return 200 <= r.status < 300


def registry_ready(url: str, timeout: float = 5.0) -> bool:
    """True when karapace's health report says it has read its schemas and is the primary."""
    with urllib.request.urlopen(url.rstrip("/") + "/_health", timeout=timeout) as r:
        status = json.load(r).get("status") or {}
    return bool(status.get("schema_registry_ready") and status.get("schema_registry_is_primary"))


PROBES = {"kafka": kafka_answers, "http": http_answers, "registry": registry_ready}


def main(argv: list[str]) -> int:
    if argv[:1] == ["free-port"]:
        print(free_port())
        return 0
    if len(argv) == 2 and argv[0] in PROBES:
        try:
            ok = PROBES[argv[0]](argv[1])
        except (OSError, ValueError) as e:
            print(f"{argv[1]}: {e}", file=sys.stderr)
            return 1
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
