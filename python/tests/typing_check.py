"""Type-checked with `mypy --strict` (scripts/ci/python_check.sh): the public API as a user
writes it. Not a test module (pytest does not collect it)."""

from typing import List

import rampart


def first_rules(fw: rampart.Firewall, texts: List[str]) -> List[str]:
    out: List[str] = []
    for d in fw.scan_batch(texts):
        if d.blocked:
            out.extend(f.rule for f in d.findings)
    return out


def decide(fw: rampart.Firewall) -> str:
    d: rampart.ToolDecision = fw.check_tool_call("read_file", {"path": "/x"}, messages=[])
    return d.action
