#!/usr/bin/env python3
"""A stand-in for a model, for examples/tools_demo.sh: answers every chat completion with the
tool call written in the last user message as `CALL <tool> <json arguments>` (plain JSON, or
SSE when streamed). Python standard library only; listens on 127.0.0.1:PORT (argv[1])."""
import json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        last = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
        _, name, args = last[last.index("CALL "):].split(" ", 2)
        call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": args}}
        head = {"id": "chatcmpl-1", "created": 1764158400, "model": "mock-model"}
        if not body.get("stream"):
            out = dict(head, object="chat.completion", choices=[{"index": 0, "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": [call]}}])
            data = json.dumps(out).encode()
            self.send_response(200); self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
            return
        self.send_response(200); self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked"); self.end_headers()
        def ev(delta, finish=None):
            d = dict(head, object="chat.completion.chunk", choices=[{"index": 0, "delta": delta, "finish_reason": finish}])
            b = ("data: " + json.dumps(d) + "\n\n").encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(b), b))
        ev({"role": "assistant", "tool_calls": [dict(call, index=0, function={"name": name, "arguments": ""})]})
        for i in range(0, len(args), 8):
            ev({"tool_calls": [{"index": 0, "function": {"arguments": args[i:i+8]}}]})
        ev({}, "tool_calls")
        b = b"data: [DONE]\n\n"; self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(b), b))

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
