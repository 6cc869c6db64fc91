//! Integration tests of `rampart lint`'s engine: every rule's examples (rules.toml), the
//! suppressions, the walk, and the output formats.

use rampart_lint::{LintConfig, Linter, RuleId, report};
use std::path::PathBuf;

fn linter() -> Linter {
    Linter::new(LintConfig::default()).expect("linter builds")
}

#[test]
fn every_rule_fires_on_its_examples_and_only_there() {
    let base = linter();
    let mut failures = Vec::new();
    let mut checked = 0;
    for rule in base.rules().all() {
        for (i, ex) in rule.examples.iter().enumerate() {
            let l = base.clone().with_policy_tools(ex.policy_tools.clone());
            let found = l.lint_source("example.py", &ex.code);
            let fired = found.iter().any(|f| f.rule == rule.id);
            checked += 1;
            if fired != ex.fires {
                failures.push(format!(
                    "{} example {}: expected {}, got {:?}",
                    rule.id,
                    i + 1,
                    if ex.fires { "a finding" } else { "none" },
                    found
                        .iter()
                        .map(|f| format!("{} line {}: {}", f.rule, f.line, f.message))
                        .collect::<Vec<_>>()
                ));
            }
        }
    }
    assert!(checked >= 20, "{checked} examples");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_rule_has_examples_both_ways() {
    for rule in linter().rules().all() {
        if rule.id == RuleId::RL000 {
            continue;
        }
        assert!(rule.examples.iter().any(|e| e.fires), "{}", rule.id);
        assert!(rule.examples.iter().any(|e| !e.fires), "{}", rule.id);
    }
}

const UNGUARDED: &str = concat!(
    "from openai import OpenAI\n",
    "def main():\n",
    "    q = input()\n",
    "    OpenAI().chat.completions.create(model='m', messages=[{'role': 'user', 'content': q}])\n",
);

#[test]
fn a_suppression_needs_a_reason() {
    let with_reason = UNGUARDED.replace(
        "    OpenAI()",
        "    # rampart: ignore[RL001] -- a local demo, the user is the operator\n    OpenAI()",
    );
    let found = linter().lint_source("a.py", &with_reason);
    assert!(found.is_empty(), "{found:?}");

    let no_reason = UNGUARDED.replace("    OpenAI()", "    # rampart: ignore[RL001]\n    OpenAI()");
    let found = linter().lint_source("a.py", &no_reason);
    let rules: Vec<RuleId> = found.iter().map(|f| f.rule).collect();
    assert!(rules.contains(&RuleId::RL000), "{found:?}");
    assert!(
        rules.contains(&RuleId::RL001),
        "a reasonless suppression suppresses nothing"
    );

    let other_rule = UNGUARDED.replace(
        "    OpenAI()",
        "    # rampart: ignore[RL003] -- not this rule\n    OpenAI()",
    );
    assert!(
        linter()
            .lint_source("a.py", &other_rule)
            .iter()
            .any(|f| f.rule == RuleId::RL001)
    );
}

#[test]
fn a_finding_carries_the_path_from_source_to_sink() {
    let found = linter().lint_source("a.py", UNGUARDED);
    let f = found
        .iter()
        .find(|f| f.rule == RuleId::RL001)
        .expect("RL001");
    assert_eq!(f.path.first().map(|s| s.line), Some(3), "{f:?}");
    assert_eq!(f.path.last().map(|s| s.line), Some(4), "{f:?}");
}

#[test]
fn the_walk_respects_gitignore_and_reads_only_python() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    std::fs::create_dir_all(root.join(".git")).expect("git dir");
    std::fs::write(root.join(".gitignore"), "build/\n").expect("write");
    std::fs::create_dir_all(root.join("build")).expect("mkdir");
    std::fs::write(root.join("app.py"), UNGUARDED).expect("write");
    std::fs::write(root.join("build/copy.py"), UNGUARDED).expect("write");
    std::fs::write(root.join("notes.txt"), UNGUARDED).expect("write");
    std::fs::write(
        root.join("latin1.py"),
        [0x63u8, 0x3d, 0x27, 0xe9, 0x27, 0x0a],
    )
    .expect("write");
    let report = linter().lint_paths(&[PathBuf::from(root)]);
    assert_eq!(report.files, 1, "{report:?}");
    assert_eq!(report.results.len(), 1);
    assert!(report.results[0].path.ends_with("app.py"));
    assert_eq!(
        report.skipped.len(),
        1,
        "the non-UTF-8 file is named, not lost"
    );
    assert!(report.skipped[0].reason.contains("UTF-8"));
}

#[test]
fn sarif_has_what_code_scanning_reads() {
    let l = linter();
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("app.py"), UNGUARDED).expect("write");
    let r = l.lint_paths(&[dir.path().to_path_buf()]);
    let s = report::sarif(&l, &r);
    assert_eq!(s["version"], "2.1.0");
    let run = &s["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "rampart-lint");
    let rules = run["tool"]["driver"]["rules"].as_array().expect("rules");
    assert!(rules.iter().any(|r| r["id"] == "RL001"));
    let res = &run["results"][0];
    assert_eq!(res["ruleId"], "RL001");
    assert_eq!(res["level"], "error");
    assert!(
        res["message"]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty())
    );
    let loc = &res["locations"][0]["physicalLocation"];
    assert!(
        loc["artifactLocation"]["uri"]
            .as_str()
            .is_some_and(|u| u.ends_with("app.py"))
    );
    assert_eq!(loc["region"]["startLine"], 4);
    let flow = &res["codeFlows"][0]["threadFlows"][0]["locations"];
    assert!(flow.as_array().is_some_and(|a| a.len() >= 2));
    let idx = res["ruleIndex"].as_u64().expect("ruleIndex") as usize;
    assert_eq!(rules[idx]["id"], "RL001");
}

#[test]
fn malformed_python_is_linted_as_far_as_it_parses() {
    let src = format!("def broken(:\n    pass\n{UNGUARDED}");
    let found = linter().lint_source("b.py", &src);
    assert!(found.iter().any(|f| f.rule == RuleId::RL001), "{found:?}");
}

#[test]
fn deep_nesting_is_bounded() {
    let deep = format!("x = {}1{}\n", "(".repeat(5000), ")".repeat(5000));
    let _ = linter().lint_source("deep.py", &deep);
}

#[test]
fn the_rules_document_is_current() {
    let want = linter().rules().markdown();
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/LINTER_RULES.md");
    if std::env::var_os("RAMPART_BLESS_DOCS").is_some() {
        std::fs::write(&path, &want).expect("write docs/LINTER_RULES.md");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        have == want,
        "docs/LINTER_RULES.md is stale: run `RAMPART_BLESS_DOCS=1 cargo test -p rampart-lint`"
    );
}

#[test]
fn regression_a_non_llm_client_with_an_llm_method_path_is_not_a_model_call() {
    // Twilio's `client.messages.create` and a vector store's `index.query` share method
    // paths with Anthropic and LlamaIndex; in a module that imports no LLM library they are
    // neither model calls nor sources of model answers.
    let src = concat!(
        "import logging\n",
        "from flask import request\n",
        "from twilio.rest import Client\n",
        "log = logging.getLogger(__name__)\n",
        "def send():\n",
        "    body = request.json['body']\n",
        "    m = Client().messages.create(to='+1', body=body)\n",
        "    log.info('sent %s', m)\n",
    );
    let found = linter().lint_source("sms.py", src);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn regression_a_logged_length_or_tool_name_is_not_a_prompt_in_a_log() {
    let src = concat!(
        "import logging\n",
        "from openai import OpenAI\n",
        "log = logging.getLogger(__name__)\n",
        "def ask(q):\n",
        "    r = OpenAI().chat.completions.create(model='m', messages=[{'role': 'user', 'content': q}])\n",
        "    text = r.choices[0].message.content\n",
        "    log.info(f'answer of {len(text) if text else 0} chars')\n",
        "    for call in r.choices[0].message.tool_calls or []:\n",
        "        log.info('tool called: %s', call.function.name)\n",
        "    return text\n",
    );
    let found = linter().lint_source("a.py", src);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn values_are_followed_across_the_projects_modules_and_base_classes() {
    // A command-line prompt passed to a handler whose base class (another module) sends it to
    // the model, and the answer passed to a helper (a third module) that shells out.
    let dir = tempfile::tempdir().expect("tempdir");
    let pkg = dir.path().join("pkg");
    std::fs::create_dir_all(&pkg).expect("mkdir");
    let write = |name: &str, src: &str| std::fs::write(pkg.join(name), src).expect("write");
    write(
        "app.py",
        concat!(
            "import typer\n",
            "from pkg.default import DefaultHandler\n",
            "from pkg.utils import run_command\n",
            "def main(prompt: str = typer.Argument('')):\n",
            "    out = DefaultHandler(1).handle(prompt=prompt)\n",
            "    run_command(out)\n",
            "typer.run(main)\n",
        ),
    );
    write(
        "base.py",
        concat!(
            "from openai import OpenAI\n",
            "completion = OpenAI().chat.completions.create\n",
            "class Handler:\n",
            "    def make_messages(self, prompt):\n",
            "        raise NotImplementedError\n",
            "    def get_completion(self, messages):\n",
            "        for chunk in completion(model='m', messages=messages, stream=True):\n",
            "            yield chunk.choices[0].delta.content\n",
            "    def handle(self, prompt):\n",
            "        return ''.join(self.get_completion(messages=self.make_messages(prompt)))\n",
        ),
    );
    write(
        "default.py",
        concat!(
            "from .base import Handler\n",
            "class DefaultHandler(Handler):\n",
            "    def make_messages(self, prompt):\n",
            "        return [{'role': 'user', 'content': prompt}]\n",
        ),
    );
    write(
        "utils.py",
        "import os\ndef run_command(command):\n    os.system(f'bash -c {command}')\n",
    );
    let report = linter().lint_paths(&[dir.path().to_path_buf()]);
    let app = report
        .results
        .iter()
        .find(|f| f.path.ends_with("app.py"))
        .expect("findings in app.py");
    let rules: Vec<(RuleId, usize)> = app.findings.iter().map(|f| (f.rule, f.line)).collect();
    assert!(rules.contains(&(RuleId::RL001, 5)), "{:?}", app.findings);
    assert!(rules.contains(&(RuleId::RL004, 6)), "{:?}", app.findings);
    let rl004 = app
        .findings
        .iter()
        .find(|f| f.rule == RuleId::RL004)
        .expect("RL004");
    assert!(
        rl004.path.iter().any(|s| s.note.contains("`pkg.utils`")),
        "the path names the module where the sink is: {:?}",
        rl004.path
    );
}
