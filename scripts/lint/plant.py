#!/usr/bin/env python3
"""Writes a seeded set of small Python LLM applications, each with one planted guardrail bypass
(the six rules of `rampart lint`), and measures how many `rampart lint` finds.

    python3 -m scripts.lint.plant --out target/lint-planted [--seed 39] [--n 120]
        [--rampart target/release/rampart] [--min-recall 0.9]

Each file combines, drawn by `random.Random(seed)`: where the input comes from (Flask, FastAPI,
Django, argparse, sys.argv, input(), a file, an HTTP response), which client sends it (OpenAI
chat and Responses, Anthropic, LiteLLM, a LangChain model), how the value travels (directly,
through an f-string prompt, a helper function's return value, a `self` attribute, a messages
list), and the planted hole (its line carries `# PLANTED RLxxx`). A planted line counts as
found when `rampart lint` reports that rule on that line. Standard library only; the same seed
gives the same files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys

SOURCES = {
    "flask": ("from flask import Flask, request\napp = Flask(__name__)\n",
              '@app.post("/ask")\ndef handler():\n', '    user_text = request.json["text"]\n'),
    "fastapi": ("from fastapi import FastAPI\napp = FastAPI()\n",
                '@app.post("/ask")\ndef handler(user_text: str):\n', ""),
    "django": ("from django.http import JsonResponse\n",
               "def handler(request):\n", '    user_text = request.POST["text"]\n'),
    "argparse": ("import argparse\n",
                 "def handler():\n",
                 '    parser = argparse.ArgumentParser()\n    parser.add_argument("text")\n'
                 "    args = parser.parse_args()\n    user_text = args.text\n"),
    "argv": ("import sys\n", "def handler():\n", "    user_text = sys.argv[1]\n"),
    "input": ("", "def handler():\n", '    user_text = input("> ")\n'),
    "file": ("", "def handler():\n", '    user_text = open("ticket.txt").read()\n'),
    "http": ("import requests\n", "def handler():\n",
             '    user_text = requests.get("https://example.com/page").text\n'),
}

CLIENTS = {
    "openai": ("from openai import OpenAI\nclient = OpenAI()\n",
               'client.chat.completions.create(model="gpt-4o", messages={msgs})',
               "{r}.choices[0].message.content"),
    "responses": ("from openai import OpenAI\nclient = OpenAI()\n",
                  'client.responses.create(model="gpt-4o", input={msgs})', "{r}.output_text"),
    "anthropic": ("import anthropic\nclient = anthropic.Anthropic()\n",
                  'client.messages.create(model="claude", max_tokens=512, messages={msgs})',
                  "{r}.content[0].text"),
    "litellm": ("import litellm\n", 'litellm.completion(model="gpt-4o", messages={msgs})',
                "{r}.choices[0].message.content"),
    "langchain": ("from langchain_openai import ChatOpenAI\nllm = ChatOpenAI()\n",
                  "llm.invoke({msgs})", "{r}.content"),
}

RULES = ["RL001", "RL002", "RL003", "RL004", "RL005", "RL006"]


def msgs(var: str, client: str) -> str:
    if client == "langchain":
        return var
    return f'[{{"role": "user", "content": {var}}}]'


def build(rng: random.Random, rule: str) -> tuple[str, int]:
    """One file with `rule` planted; returns (source, planted line)."""
    src_name = rng.choice(list(SOURCES))
    client_name = rng.choice(list(CLIENTS))
    imp_s, head, read = SOURCES[src_name]
    imp_c, call, answer = CLIENTS[client_name]
    imports = "import logging\nimport os\nimport json\nimport subprocess\nimport rampart\n" + imp_s + imp_c
    imports += "log = logging.getLogger(__name__)\nfw = rampart.Firewall()\n"
    via = rng.choice(["direct", "fstring", "helper", "messages"])
    lines: list[str] = []
    helpers: list[str] = []
    planted = "  # PLANTED " + rule

    def guard(var: str) -> list[str]:
        return [f"    d = fw.scan({var})", "    if d.blocked:", '        return "refused"']

    body = [l for l in read.rstrip("\n").split("\n") if l]
    prompt_var = "user_text"
    if via == "fstring":
        body.append('    prompt = f"Answer briefly: {user_text}"')
        prompt_var = "prompt"
    elif via == "messages":
        body.append('    history = [{"role": "user", "content": user_text}]')
    elif via == "helper":
        helpers.append('def make_prompt(text):\n    return "Summarize this: " + text.strip()\n')
        body.append("    prompt = make_prompt(user_text)")
        prompt_var = "prompt"

    def call_line(var: str) -> str:
        if via == "messages":
            return "    r = " + call.replace("{msgs}", "history" if client_name != "langchain" else "history")
        return "    r = " + call.replace("{msgs}", msgs(var, client_name))

    ans = answer.replace("{r}", "r")
    if rule == "RL001":
        body.append(call_line(prompt_var) + planted)
        body.append(f"    return {ans}")
    elif rule == "RL002":
        kind = rng.choice(["after", "ignored"])
        if kind == "after":
            body.append(call_line(prompt_var))
            body.append(f"    fw.scan({prompt_var})" + planted)
        else:
            body.append(f"    fw.scan({prompt_var})" + planted)
            body.append(call_line(prompt_var))
        body.append(f"    return {ans}")
    elif rule == "RL003":
        body += guard(prompt_var)
        body.append(call_line(prompt_var))
        what = rng.choice(["answer", "prompt"])
        logger = rng.choice(["log.info", "log.warning", "logging.debug"])
        if what == "answer":
            body.append(f"    answer = {ans}")
            body.append(f'    {logger}("answer: %s", answer)' + planted)
            body.append("    return answer")
        else:
            # The prompt itself, logged after the guard.
            body[-1:-1] = [f'    {logger}("prompt: %s", {prompt_var})' + planted]
            body.append(f"    return {ans}")
    elif rule == "RL004":
        body += guard(prompt_var)
        body.append(call_line(prompt_var))
        body.append(f"    out = {ans}")
        sink = rng.choice([
            "    subprocess.run(out, shell=True)",
            "    os.system(out)",
            "    eval(out)",
            '    db.execute(f"SELECT * FROM notes WHERE title = \'{out}\'")',
            '    open(out, "w").write("done")',
        ])
        if "db." in sink:
            imports += "import sqlite3\ndb = sqlite3.connect(\"app.db\")\n"
        body.append(sink + planted)
        body.append('    return "ok"')
    elif rule == "RL005":
        tool = rng.choice(["send_email", "delete_file", "transfer_money", "run_shell"])
        imports += (
            'TOOLS = [\n    {"type": "function", "function": {"name": "search", "parameters": {}}},\n'
            f'    {{"type": "function", "function": {{"name": "{tool}", "parameters": {{}}}}}},' + planted
            + "\n]\n"
        )
        body += guard(prompt_var)
        body.append(call_line(prompt_var))
        body.append(f"    return {ans}")
    elif rule == "RL006":
        secret = rng.choice(["OPENAI_API_KEY", "DB_PASSWORD", "ADMIN_TOKEN", "STRIPE_SECRET"])
        body += guard(prompt_var)
        body.append(f'    system = "You are a helpful assistant. Internal key: " + os.environ["{secret}"]')
        if client_name == "langchain":
            body.append("    r = llm.invoke(system + " + prompt_var + ")" + planted)
        elif client_name == "responses":
            body.append('    r = client.responses.create(model="gpt-4o", instructions=system, input=' + prompt_var + ")" + planted)
        else:
            call_sys = call.replace(
                "{msgs}", '[{"role": "system", "content": system}, {"role": "user", "content": ' + prompt_var + "}]"
            )
            body.append("    r = " + call_sys + planted)
        body.append(f"    return {ans}")
    if via == "messages" and rule != "RL006":
        # The messages list carries the (possibly checked) text.
        pass
    text = imports + "\n\n" + "\n".join(helpers) + "\n" + head + "\n".join(body) + "\n"
    lines = text.split("\n")
    line = next(i + 1 for i, l in enumerate(lines) if "# PLANTED" in l)
    return text, line


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--n", type=int, default=120)
    ap.add_argument("--rampart", default="target/release/rampart")
    ap.add_argument("--min-recall", type=float, default=None,
                    help="exit 1 when the share of planted holes found is below this (CI)")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    os.makedirs(a.out, exist_ok=True)
    expected = {}
    for i in range(a.n):
        rule = RULES[i % len(RULES)]
        src, line = build(rng, rule)
        name = f"app_{i:03d}_{rule}.py"
        with open(os.path.join(a.out, name), "w", encoding="utf-8") as f:
            f.write(src)
        expected[name] = (rule, line)
    # The project's tool policy lists `search` (every file's harmless tool) only.
    policy = os.path.join(a.out, "tools_policy.toml")
    with open(policy, "w", encoding="utf-8") as f:
        f.write('version = 1\ndefault = "block"\n\n[[tools]]\nname = "search"\nrisk = "low"\naction = "allow"\n')
    out = subprocess.run(
        [a.rampart, "lint", "--format", "json", "--fail-on", "never", "--tool-policy", policy, a.out],
        capture_output=True, text=True, check=False,
    )
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return 1
    found = json.loads(out.stdout)["findings"]
    hits = {(os.path.basename(f["path"]), f["rule"], f["line"]) for f in found}
    per_rule: dict[str, list[int]] = {r: [0, 0] for r in RULES}
    missed = []
    for name, (rule, line) in sorted(expected.items()):
        per_rule[rule][1] += 1
        if (name, rule, line) in hits:
            per_rule[rule][0] += 1
        else:
            missed.append(f"{name}:{line} {rule}")
    total = sum(v[0] for v in per_rule.values())
    print(f"planted: {len(expected)} files (seed {a.seed}); found {total} "
          f"({100.0 * total / len(expected):.1f}%)")
    for r, (f, n) in per_rule.items():
        print(f"  {r}: {f}/{n}")
    extra = [f for f in found if (os.path.basename(f["path"]), f["rule"], f["line"]) not in
             {(n, r, l) for n, (r, l) in expected.items()}]
    print(f"other findings: {len(extra)}")
    for m in missed[:20]:
        print("  missed", m)
    if a.min_recall is not None and total < a.min_recall * len(expected):
        print(f"recall below the floor {a.min_recall}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
