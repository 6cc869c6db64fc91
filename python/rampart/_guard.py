"""What the guarded clients share: the settings, the refusal of a tool call, and the checks
of a request (scan up, canary) and of an answer (output scan, tool calls). Every decision is
the binding's."""

from __future__ import annotations

import inspect
import json
from typing import Any, AsyncIterator, Dict, Iterator, List, Optional, Tuple

from . import Blocked, Decision, Firewall, RampartError, ToolDecision, _jsonable, _messages_json


class ToolCallRefused(RampartError):
    """A tool call of the model's answer that the policy did not allow."""

    def __init__(self, decision: ToolDecision) -> None:
        super().__init__(f"tool call refused by Rampart: {decision.action} ({', '.join(decision.rules)})")
        self.decision = decision


class Settings:
    def __init__(self, fw: Firewall, on_sanitize: str, tool_calls: str, canary: bool, holdback: int) -> None:
        if on_sanitize not in ("forward", "raise"):
            raise ValueError("on_sanitize is 'forward' or 'raise'")
        if tool_calls not in ("raise", "remove"):
            raise ValueError("tool_calls is 'raise' or 'remove'")
        self.fw = fw
        self.on_sanitize = on_sanitize
        self.tool_calls = tool_calls
        self.canary = canary
        self.holdback = holdback




class Checks:
    """A request scanned up (BLOCK raises; SANITIZE forwards the sanitized messages or raises),
    with the canary planted; then the checks of its answer."""

    def __init__(self, s: Settings, messages: List[Any], system: Optional[str] = None) -> None:
        self.s = s
        self.original: List[Any] = [_jsonable(m) for m in messages]
        if system is not None:
            self.original.insert(0, {"role": "system", "content": system})
        native, sanitized = s.fw._native.sanitize_messages(_messages_json(self.original))
        self.decision = Decision(native)
        if self.decision.blocked or (self.decision.action == "SANITIZE" and s.on_sanitize == "raise"):
            raise Blocked(self.decision)
        self.messages: List[Dict[str, Any]] = json.loads(sanitized)
        self.system_prompt: Optional[str] = None
        self.canaries: List[str] = []
        for m in self.messages:
            if m.get("role") in ("system", "developer") and isinstance(m.get("content"), str):
                self.system_prompt = (self.system_prompt or "") + m["content"]
                if s.canary and not self.canaries:
                    c = s.fw._native.generate_canary()
                    m["content"] = m["content"] + f"\n\n[{c}]"
                    self.canaries.append(c)

    def split_system(self) -> Tuple[Optional[str], List[Dict[str, Any]]]:
        """For Anthropic: the (sanitized, canaried) system prompt apart from the messages."""
        if self.messages and self.messages[0].get("role") == "system" and self.original and self.original[0].get("role") == "system":
            return str(self.messages[0]["content"]), self.messages[1:]
        return None, self.messages

    def check_text(self, text: str) -> None:
        """An answer's text: a BLOCK of the output scan raises `Blocked`."""
        if not text:
            return
        d = Decision(self.s.fw._native.scan_output(text, self.system_prompt, self.canaries))
        if d.blocked:
            raise Blocked(d)

    def check_calls(self, calls: List[Tuple[str, Any]]) -> List[ToolDecision]:
        """The decisions of an answer's tool calls (name, arguments); a refused one raises
        `ToolCallRefused` when `tool_calls="raise"`. Empty without a tool policy."""
        if not self.s.fw.has_tools or not calls:
            return []
        out = []
        for name, args in calls:
            d = self.s.fw.check_tool_call(name, args if args else "{}", messages=self.original)
            if not d.allowed and self.s.tool_calls == "raise":
                raise ToolCallRefused(d)
            out.append(d)
        return out


class Wrapped:
    """Everything it does not define is the wrapped client object's own."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class GuardedCreate(Wrapped):
    """A client's `create` guarded: the request prepared (`prepare`: scanned up, canary
    planted), sent, and the answer gated (`gate`) or, streamed, held and scanned as it grows by
    a holder (`holder`: `push(event)` gives the events to yield, `finish()` the rest); sync or
    async as the wrapped client is. The clients differ only in those three."""

    def __init__(self, inner: Any, s: Settings) -> None:
        super().__init__(inner)
        self._s = s

    def prepare(self, kwargs: Dict[str, Any]) -> Tuple[Checks, Dict[str, Any]]:
        raise NotImplementedError

    def gate(self, req: Checks, answer: Any) -> Any:
        raise NotImplementedError

    def holder(self, req: Checks) -> Any:
        raise NotImplementedError

    def create(self, **kwargs: Any) -> Any:
        req, sent = self.prepare(kwargs)
        result = self._inner.create(**sent)
        if inspect.isawaitable(result):
            return self._acreate(req, result, kwargs.get("stream", False))
        if kwargs.get("stream"):
            return self._stream(req, result)
        return self.gate(req, result)

    def _stream(self, req: Checks, result: Any) -> Iterator[Any]:
        held = self.holder(req)
        for event in result:
            yield from held.push(event)
        yield from held.finish()

    async def _acreate(self, req: Checks, result: Any, stream: bool) -> Any:
        answer = await result
        if stream:
            return self._astream(req, answer)
        return self.gate(req, answer)

    async def _astream(self, req: Checks, result: Any) -> AsyncIterator[Any]:
        held = self.holder(req)
        async for event in result:
            for e in held.push(event):
                yield e
        for e in held.finish():
            yield e
