"""Rampart in LangChain: a runnable guard for LCEL chains, and a callback handler that scans
tool outputs in an agent. Needs `langchain-core`.

    from rampart.langchain import RampartGuard, RampartToolOutputHandler
    guard = RampartGuard(rampart.Firewall())
    chain = guard | prompt | model | guard.output()     # scan what goes in and what comes out

    agent_executor.invoke(inputs, config={"callbacks": [RampartToolOutputHandler(fw)]})

`RampartGuard` passes its input through unchanged when it is allowed (a string, a list of
messages, a prompt value, a message), hands on the sanitized text on SANITIZE
(`on_sanitize="forward"`, strings only) and raises `rampart.Blocked` on BLOCK. `.output()`
is the same guard for model answers (`scan_output`: secrets, leaked prompts). The callback
handler scans each tool's output as untrusted data before the agent reads it and raises
`rampart.Blocked` on BLOCK (LangChain stops the run). LlamaIndex fits the same way: scan the
query before `query_engine.query`, and tool outputs in a `FunctionTool` wrapper or a callback
on `CBEventType.FUNCTION_CALL`.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, messages_to_dict
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import RunnableConfig, RunnableSerializable

from . import Blocked, Decision, Firewall

__all__ = ["RampartGuard", "RampartToolOutputHandler"]

_ROLES = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool", "function": "tool"}


def _messages(msgs: List[BaseMessage]) -> List[Dict[str, Any]]:
    out = []
    for d in messages_to_dict(msgs):
        data = d.get("data", {})
        content = data.get("content", "")
        if not isinstance(content, str):
            content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
        out.append({"role": _ROLES.get(d.get("type", ""), "user"), "content": content})
    return out


class RampartGuard(RunnableSerializable[Any, Any]):
    """A runnable that scans what passes through it and raises `rampart.Blocked` on BLOCK."""

    firewall: Any
    on_sanitize: str = "forward"
    answers: bool = False

    def __init__(self, firewall: Optional[Firewall] = None, **kw: Any) -> None:
        # Pydantic generates the fields' initializer; mypy sees only the base class's.
        super().__init__(firewall=firewall or Firewall(), **kw)  # type: ignore[call-arg]

    def output(self) -> "RampartGuard":
        """The same guard for model answers (output scan)."""
        return RampartGuard(self.firewall, on_sanitize=self.on_sanitize, answers=True)

    def _decide(self, value: Any) -> Decision:
        fw: Firewall = self.firewall
        if self.answers:
            text = value.content if isinstance(value, BaseMessage) else str(value)
            return fw.scan_output(text if isinstance(text, str) else str(text))
        if isinstance(value, str):
            return fw.scan(value, sanitize=True)
        if isinstance(value, PromptValue):
            return fw.scan(messages=_messages(value.to_messages()))
        if isinstance(value, BaseMessage):
            return fw.scan(messages=_messages([value]))
        if isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value):
            return fw.scan(messages=_messages(value))
        if isinstance(value, dict):
            return fw.scan(segments=[("user", str(v)) for v in value.values() if isinstance(v, str)] or [("user", "")])
        return fw.scan(str(value))

    def invoke(self, input: Any, config: Optional[RunnableConfig] = None, **kwargs: Any) -> Any:
        d = self._decide(input)
        if d.blocked or (d.action == "SANITIZE" and self.on_sanitize == "raise"):
            raise Blocked(d)
        if d.action == "SANITIZE" and isinstance(input, str) and d.sanitized:
            return d.sanitized[0]["text"]
        return input


class RampartToolOutputHandler(BaseCallbackHandler):
    """Scans each tool's output as untrusted data; a BLOCK raises `rampart.Blocked`."""

    raise_error = True

    def __init__(self, firewall: Optional[Firewall] = None) -> None:
        self.firewall = firewall or Firewall()
        self.decisions: List[Decision] = []

    def on_tool_end(self, output: Any, **kwargs: Any) -> None:
        text = getattr(output, "content", output)
        d = self.firewall.scan(segments=[("tool", str(text))])
        self.decisions.append(d)
        if d.blocked:
            raise Blocked(d)
