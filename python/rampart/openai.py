"""The official OpenAI client, guarded in one line.

    from openai import OpenAI
    import rampart.openai
    client = rampart.openai.guard(OpenAI(), firewall=rampart.Firewall(tools_policy="policy.toml"))

`client.chat.completions.create(...)` then:

1. scans the messages going up: BLOCK raises `rampart.Blocked`; SANITIZE forwards the
   sanitized messages (`on_sanitize="forward"`, the default) or raises (`"raise"`);
2. plants a canary in the system prompt when there is one (`canary=True`);
3. scans what comes back (credentials, the canary, the system prompt leaked): a BLOCK raises
   `rampart.Blocked`; a streamed answer is scanned as it grows and its chunks are yielded
   only once the text is more than `holdback` characters past them (as the proxy does): a
   leak found while its start is still held back is never yielded;
4. decides each tool call of the answer with the firewall's tool policy (when it has one),
   against the messages as the caller sent them (provenance): a call that is not allowed raises
   `rampart.ToolCallRefused` with the decision (`tool_calls="raise"`, the default), or is
   removed from the answer (`"remove"`; the decisions are in `answer.rampart_tool_decisions`).

Works with `OpenAI` and `AsyncOpenAI`. Every decision is the Rust library's.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import Firewall
from ._guard import Checks, GuardedCreate, Settings, ToolCallRefused, Wrapped

__all__ = ["guard", "ToolCallRefused"]


def guard(
    client: Any,
    *,
    firewall: Optional[Firewall] = None,
    on_sanitize: str = "forward",
    tool_calls: str = "raise",
    canary: bool = True,
    holdback: int = 256,
) -> Any:
    """Wraps an `OpenAI` or `AsyncOpenAI` client; everything but
    `chat.completions.create` is the client's own."""
    s = Settings(firewall or Firewall(), on_sanitize, tool_calls, canary, holdback)
    return _Client(client, s)


class _Client(Wrapped):
    def __init__(self, inner: Any, s: Settings) -> None:
        super().__init__(inner)
        self.chat = _Chat(inner.chat, s)


class _Chat(Wrapped):
    def __init__(self, inner: Any, s: Settings) -> None:
        super().__init__(inner)
        self.completions = _Completions(inner.completions, s)


def _gate_answer(req: Checks, answer: Any) -> Any:
    for choice in answer.choices:
        msg = choice.message
        req.check_text(msg.content or "")
        calls = list(msg.tool_calls or [])
        decisions = req.check_calls([(c.function.name, c.function.arguments) for c in calls])
        if decisions:
            kept = [c for c, d in zip(calls, decisions) if d.allowed]
            msg.tool_calls = kept or None
            if not kept and choice.finish_reason == "tool_calls":
                choice.finish_reason = "stop"
            answer.rampart_tool_decisions = [d.to_dict() for d in decisions]
    return answer


class _Stream:
    """A streamed answer, held back and scanned as it grows; tool-call deltas are held until
    the stream ends, then decided (a refused call raises, or is dropped)."""

    def __init__(self, s: Settings, req: Checks) -> None:
        self.s = s
        self.req = req
        self.text = ""
        self.released = 0
        self.pending: List[Any] = []
        self.calls: Dict[int, Dict[str, Any]] = {}

    def push(self, chunk: Any) -> List[Any]:
        for choice in chunk.choices or []:
            delta = choice.delta
            self.text += delta.content or ""
            for tc in delta.tool_calls or []:
                c = self.calls.setdefault(tc.index, {"id": None, "function": {"name": "", "arguments": ""}, "chunks": []})
                c["id"] = tc.id or c["id"]
                if tc.function is not None:
                    c["function"]["name"] += tc.function.name or ""
                    c["function"]["arguments"] += tc.function.arguments or ""
        self.pending.append(chunk)
        if len(self.text) - self.released <= self.s.holdback:
            return []
        self.req.check_text(self.text)
        self.released = len(self.text)
        out, self.pending = self.pending, []
        return [c for c in out if not _only_tool_calls(c)]

    def finish(self) -> List[Any]:
        self.req.check_text(self.text)
        calls = [(c["function"]["name"], c["function"]["arguments"]) for _, c in sorted(self.calls.items())]
        decisions = self.req.check_calls(calls)
        allowed = {i for (i, _), d in zip(sorted(self.calls.items()), decisions) if d.allowed} if decisions else set(self.calls)
        out = []
        for c in self.pending:
            if _only_tool_calls(c):
                for choice in c.choices:
                    choice.delta.tool_calls = [t for t in choice.delta.tool_calls if t.index in allowed] or None
            out.append(c)
        self.pending = []
        return out


def _only_tool_calls(chunk: Any) -> bool:
    return any(ch.delta.tool_calls for ch in (chunk.choices or []))


class _Completions(GuardedCreate):
    def prepare(self, kwargs: Dict[str, Any]) -> Tuple[Checks, Dict[str, Any]]:
        req = Checks(self._s, kwargs.get("messages", []))
        return req, dict(kwargs, messages=req.messages)

    def gate(self, req: Checks, answer: Any) -> Any:
        return _gate_answer(req, answer)

    def holder(self, req: Checks) -> "_Stream":
        return _Stream(self._s, req)
