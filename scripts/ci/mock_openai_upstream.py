#!/usr/bin/env python3
"""A tiny OpenAI-compatible upstream for tests and examples (Python standard library only).

Answers POST /v1/chat/completions (plain JSON, or SSE when "stream": true) and
POST /v1/completions with a canned reply that echoes the last user message's length, so
the caller can tell its request went through. Listens on 127.0.0.1 only.

    python3 -m scripts.ci.mock_openai_upstream --port 0 --port-file /tmp/port

With --port 0 the chosen port is printed ("listening on 127.0.0.1:PORT") and written to
--port-file when given. Every request it receives is appended as one JSON line to
--log when given (so a test can check what Rampart forwarded).
"""

import argparse
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "mock-gpt"


def reply_text(body):
    msgs = body.get("messages") or []
    last = ""
    for m in msgs:
        if m.get("role") == "user":
            c = m.get("content")
            if isinstance(c, list):
                c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
            last = c or ""
    if "prompt" in body:
        p = body["prompt"]
        last = p if isinstance(p, str) else " ".join(map(str, p))
    return f"Hello from the mock upstream. Your message had {len(last)} characters."


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "mock-openai/1"
    log_path = None

    def log_message(self, fmt, *args):  # quiet
        pass

    def _json(self, status, obj):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path in ("/v1/models", "/models"):
            self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            self._json(400, {"error": {"message": "bad json", "type": "invalid_request_error"}})
            return
        if Handler.log_path:
            with open(Handler.log_path, "a", encoding="utf-8") as f:
                f.write(json.dumps({"path": self.path, "body": body}) + "\n")
        now = int(time.time())
        text = reply_text(body)
        if self.path.endswith("/chat/completions"):
            if body.get("stream"):
                self._stream_chat(text, now)
                return
            self._json(200, {
                "id": "chatcmpl-mock",
                "object": "chat.completion",
                "created": now,
                "model": body.get("model", MODEL),
                "choices": [{
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }],
                "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
            })
        elif self.path.endswith("/completions"):
            self._json(200, {
                "id": "cmpl-mock",
                "object": "text_completion",
                "created": now,
                "model": body.get("model", MODEL),
                "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 12, "total_tokens": 22},
            })
        else:
            self._json(404, {"error": {"message": "not found", "type": "invalid_request_error"}})

    def _stream_chat(self, text, now):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        words = text.split(" ")
        pieces = [w + (" " if i < len(words) - 1 else "") for i, w in enumerate(words)]

        def chunk(delta, finish=None):
            ev = {
                "id": "chatcmpl-mock",
                "object": "chat.completion.chunk",
                "created": now,
                "model": MODEL,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
            self.wfile.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
            self.wfile.flush()

        chunk({"role": "assistant", "content": ""})
        for p in pieces:
            chunk({"content": p})
        chunk({}, "stop")
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--port-file")
    ap.add_argument("--log")
    a = ap.parse_args()
    Handler.log_path = a.log
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        import os
        os.replace(a.port_file + ".tmp", a.port_file)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
