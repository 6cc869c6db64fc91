#!/usr/bin/env python3
"""A scripted stand-in for a gullible agent model, for examples/agent/agent_loop.py: it
does what the latest text asks, whoever wrote it. Python standard library only; listens on
127.0.0.1:PORT (argv[1]), answers POST /v1/chat/completions (not streamed).

- last message from the user: it calls `read_file` on the path the user names, or
  `list_events` when the user names none;
- last message a tool result: if the result (or the user's request) asks for a payment, it
  pays the last IBAN the tool result holds with `send_money`;
- otherwise it answers "Done."
"""
import json, re, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IBAN = re.compile(r"\b[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?\b")
PATH = re.compile(r"(/[\w.\-/]+)")


def text(m):
    c = m.get("content")
    if isinstance(c, list):
        return "\n".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c or ""


def answer(messages):
    last = messages[-1]
    if last["role"] == "user":
        path = PATH.search(text(last))
        if path:
            return "read_file", {"path": path.group(1)}
        return "list_events", {}
    if last["role"] == "tool":
        user = [text(m) for m in messages if m["role"] == "user"][-1]
        found = IBAN.findall(text(last))
        wants_payment = re.search(r"\b(pay|wire|transfer)\b", text(last) + " " + user, re.I)
        if found and wants_payment and not any(
            m["role"] == "assistant" and any(c["function"]["name"] == "send_money" for c in m.get("tool_calls") or [])
            for m in messages
        ):
            amount = re.search(r"(\d+(?:\.\d\d)?) ?EUR", text(last))
            return "send_money", {"iban": found[-1].replace(" ", ""), "amount": float(amount.group(1)) if amount else 1.0}
    return None, None


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        name, args = answer(body["messages"])
        n = len(body["messages"])
        if name:
            msg = {"role": "assistant", "content": None, "tool_calls": [
                {"id": f"call_{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]}
            finish = "tool_calls"
        else:
            msg = {"role": "assistant", "content": "Done."}
            finish = "stop"
        out = {"id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1764158400, "model": "mock-agent",
               "choices": [{"index": 0, "finish_reason": finish, "message": msg}]}
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
