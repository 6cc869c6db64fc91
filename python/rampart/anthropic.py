"""The official Anthropic client, guarded in one line.

    from anthropic import Anthropic
    import rampart.anthropic
    client = rampart.anthropic.guard(Anthropic(), firewall=rampart.Firewall(tools_policy="policy.toml"))

`client.messages.create(...)` then does what `rampart.openai.guard` does (see there): the
messages and the `system` prompt scanned going up (BLOCK raises `rampart.Blocked`, SANITIZE
forwards the sanitized texts or raises), a canary planted in the system prompt, the answer's
text scanned (streamed: held back by `holdback` characters), and each `tool_use` block
decided by the firewall's tool policy against the conversation as sent (a refused call raises
`rampart.ToolCallRefused`, or its block is removed with `tool_calls="remove"`; the decisions
are in `answer.rampart_tool_decisions`). Works with `Anthropic` and `AsyncAnthropic`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from . import Firewall, ToolDecision
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
    """Wraps an `Anthropic` or `AsyncAnthropic` client; everything but `messages.create` is
    the client's own."""
    return _Client(client, Settings(firewall or Firewall(), on_sanitize, tool_calls, canary, holdback))


class _Client(Wrapped):
    def __init__(self, inner: Any, s: Settings) -> None:
        super().__init__(inner)
        self.messages = _Messages(inner.messages, s)


def _system_text(system: Any) -> Optional[str]:
    if system is None or isinstance(system, str):
        return system
    return "\n".join(b.get("text", "") if isinstance(b, dict) else getattr(b, "text", "") for b in system)


def _gate_answer(req: Checks, answer: Any) -> Any:
    req.check_text("".join(b.text for b in answer.content if b.type == "text"))
    uses = [b for b in answer.content if b.type == "tool_use"]
    decisions = req.check_calls([(b.name, b.input) for b in uses])
    if decisions:
        refused = {id(b) for b, d in zip(uses, decisions) if not d.allowed}
        answer.content = [b for b in answer.content if id(b) not in refused]
        if len(refused) == len(uses) and answer.stop_reason == "tool_use":
            answer.stop_reason = "end_turn"
        answer.rampart_tool_decisions = [d.to_dict() for d in decisions]
    return answer


class _Stream:
    """Stream events, text held back and scanned as it grows; `tool_use` blocks held until the
    message's end, then decided."""

    def __init__(self, s: Settings, req: Checks) -> None:
        self.s = s
        self.req = req
        self.text = ""
        self.released = 0
        self.pending: List[Any] = []
        self.tools: Dict[int, Dict[str, Any]] = {}
        self.done = False
        self.all_removed = False

    def push(self, ev: Any) -> List[Any]:
        t = ev.type
        if t == "content_block_start" and ev.content_block.type == "tool_use":
            self.tools[ev.index] = {"name": ev.content_block.name, "json": "", "events": [ev]}
            return []
        if t in ("content_block_delta", "content_block_stop") and ev.index in self.tools:
            if t == "content_block_delta" and ev.delta.type == "input_json_delta":
                self.tools[ev.index]["json"] += ev.delta.partial_json
            self.tools[ev.index]["events"].append(ev)
            return []
        if t in ("message_delta", "message_stop"):
            out = self.finish()
            if t == "message_delta" and self.all_removed and ev.delta.stop_reason == "tool_use":
                ev.delta.stop_reason = "end_turn"
            return out + [ev]
        if t == "content_block_delta" and ev.delta.type == "text_delta":
            self.text += ev.delta.text
        self.pending.append(ev)
        if len(self.text) - self.released <= self.s.holdback:
            return []
        self.req.check_text(self.text)
        self.released = len(self.text)
        out, self.pending = self.pending, []
        return out

    def finish(self) -> List[Any]:
        if self.done:
            return []
        self.done = True
        self.req.check_text(self.text)
        blocks = sorted(self.tools.items())
        decisions = self.req.check_calls([(b["name"], b["json"] or "{}") for _, b in blocks])
        out, self.pending = self.pending, []
        kept = 0
        # Without a tool policy there are no decisions: every block is kept.
        ds: List[Optional[ToolDecision]] = list(decisions) if decisions else [None] * len(blocks)
        for (_, b), d in zip(blocks, ds):
            if d is None or d.allowed:
                out.extend(b["events"])
                kept += 1
        self.all_removed = bool(blocks) and kept == 0
        return out


class _Messages(GuardedCreate):
    def prepare(self, kwargs: Dict[str, Any]) -> Tuple[Checks, Dict[str, Any]]:
        req = Checks(self._s, kwargs.get("messages", []), system=_system_text(kwargs.get("system")))
        system, messages = req.split_system()
        sent = dict(kwargs, messages=messages)
        if system is not None:
            sent["system"] = system
        return req, sent

    def gate(self, req: Checks, answer: Any) -> Any:
        return _gate_answer(req, answer)

    def holder(self, req: Checks) -> "_Stream":
        return _Stream(self._s, req)
