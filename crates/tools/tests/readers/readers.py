"""How Python, and curl, read the values Rampart's tool predicates check (issue 35).

Reads JSON lines `{"i": N, "kind": "path" | "url" | "email", "value": "..."}` on stdin and
writes one JSON line per (value, reader): `{"i": N, "reader": NAME, "readings": [...]}`,
where a reading is what that program would act on: the normalized path it opens, the host
it connects to, the addresses it sends to. A reader that refuses the value (raises, exits
with an error) gives no reading. The Rust test (`tests/differential.rs`) decides whether a
reading is inside the policy.

curl is run with a local HTTP proxy that records the request line: the host in
`GET http://HOST/...` or `CONNECT HOST:443` is where curl would have connected.
"""

import json
import ntpath
import os.path
import posixpath
import shutil
import socket
import subprocess
import sys
import threading
import unicodedata
import urllib.parse
from email import message_from_string
from email import policy as email_policy
from email.utils import getaddresses


def path_readings(v):
    out = []
    for name, f in (
        ("python.os.path.normpath", posixpath.normpath),
        ("python.os.path.realpath", os.path.realpath),
        ("python.unquote+normpath", lambda s: posixpath.normpath(urllib.parse.unquote(s))),
        ("python.nfkc+normpath", lambda s: posixpath.normpath(unicodedata.normalize("NFKC", s))),
        ("python.ntpath.normpath", lambda s: ntpath.normpath(s).replace("\\", "/")),
    ):
        try:
            out.append((name, [f(v)]))
        except (ValueError, TypeError, OSError):
            out.append((name, []))
    return out


def url_readings(v):
    out = []
    try:
        h = urllib.parse.urlsplit(v).hostname
        out.append(("python.urllib.urlsplit", [h] if h else []))
    except ValueError:
        out.append(("python.urllib.urlsplit", []))
    return out


def email_readings(v):
    out = []
    try:
        addrs = [a for _, a in getaddresses([v])]
        out.append(("python.email.utils.getaddresses", addrs))
    except (ValueError, TypeError, IndexError):
        out.append(("python.email.utils.getaddresses", []))
    try:
        msg = message_from_string(f"To: {v}\n\n", policy=email_policy.default)
        header = msg["to"]
        addrs = [a.addr_spec for a in header.addresses] if header is not None else []
        out.append(("python.email.headerregistry", addrs))
    except Exception:  # the header parser raises many kinds; any refusal is no reading
        out.append(("python.email.headerregistry", []))
    return out


class Proxy:
    """A one-request-at-a-time HTTP proxy that records the first request line."""

    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.lines = []
        self.stop = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        while not self.stop:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            with conn:
                conn.settimeout(2)
                data = b""
                try:
                    while b"\r\n" not in data and len(data) < 65536:
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                    self.lines.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    pass


def host_of_request_line(line):
    parts = line.split(" ")
    if len(parts) < 2:
        return None
    method, target = parts[0], parts[1]
    if method == "CONNECT":
        return target.rsplit(":", 1)[0]
    return urllib.parse.urlsplit(target).hostname


def curl_readings(proxy, v):
    before = len(proxy.lines)
    try:
        subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "--max-time", "3", "-x", f"http://127.0.0.1:{proxy.port}", "--url", v],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=10,
            check=False,
        )
    except (subprocess.TimeoutExpired, ValueError):
        return []
    hosts = []
    for line in proxy.lines[before:]:
        h = host_of_request_line(line)
        if h:
            hosts.append(h)
    return hosts


def main():
    with_curl = "--curl" in sys.argv
    if with_curl and shutil.which("curl") is None:
        print("curl is not installed", file=sys.stderr)
        sys.exit(2)
    proxy = Proxy() if with_curl else None
    for line in sys.stdin:
        item = json.loads(line)
        i, kind, v = item["i"], item["kind"], item["value"]
        if kind == "path":
            rows = path_readings(v)
        elif kind == "url":
            rows = url_readings(v)
            if proxy is not None and item.get("curl"):
                rows.append(("curl", curl_readings(proxy, v)))
        elif kind == "email":
            rows = email_readings(v)
        else:
            raise SystemExit(f"unknown kind {kind!r}")
        for name, readings in rows:
            print(json.dumps({"i": i, "reader": name, "readings": [r for r in readings if r is not None]}))
    if proxy is not None:
        proxy.stop = True


if __name__ == "__main__":
    main()
