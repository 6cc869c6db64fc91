//! `rampart lint`: a static analyser for Python LLM applications that finds where the app
//! bypasses its own guardrail: untrusted input that reaches a model without a guard scan, a
//! guard whose decision nothing reads, prompts in logs, model output in `eval` / shell / SQL
//! / HTML / file paths, tools outside the tool policy or run without `check_tool_call`, and
//! secrets formatted into prompts. Rules are data (`rules.toml`, with examples that run as
//! tests); the analysis is described in DESIGN.md.
//!
//! ```
//! use rampart_lint::{Linter, LintConfig};
//!
//! let linter = Linter::new(LintConfig::default()).unwrap();
//! let src = concat!(
//!     "from openai import OpenAI\n",
//!     "def main():\n",
//!     "    q = input()\n",
//!     "    OpenAI().chat.completions.create(model='m', messages=[{'role': 'user', 'content': q}])\n",
//! );
//! let findings = linter.lint_source("app.py", src);
//! assert_eq!(findings[0].rule.as_str(), "RL001");
//! assert_eq!(findings[0].line, 4);
//! ```

mod analyze;
pub mod report;
pub mod rules;

pub use rules::{Rule, RuleId, Rules, Severity};

use analyze::{Analyzer, Module, dotted, entry_decorator, text};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use tree_sitter::{Node, Parser};

/// Python files larger than this are skipped with a note (generated or vendored code).
pub const MAX_FILE_BYTES: u64 = 2 * 1024 * 1024;
/// Rounds of summary propagation across a module's functions (calls this deep are followed).
const SUMMARY_ROUNDS: usize = 3;

/// One step of a finding's path: where, and what happened to the value there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Step {
    /// 1-based line.
    pub line: usize,
    /// What happened.
    pub note: String,
}

/// One finding in one file (the file is in [`FileFindings`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Rule.
    pub rule: RuleId,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// What was found.
    pub message: String,
    /// The value's path: source, steps, sink.
    pub path: Vec<Step>,
}

/// The `[lint]` section of a configuration file (`--config FILE`, or `[tool.rampart.lint]`
/// in `pyproject.toml`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LintConfig {
    /// The project's Rampart tool policy (RL005 checks tools against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_policy: Option<PathBuf>,
    /// Rules turned off.
    #[serde(default)]
    pub disable: Vec<RuleId>,
    /// Severity per rule, replacing the default.
    #[serde(default)]
    pub severity: BTreeMap<RuleId, Severity>,
    /// Paths (relative to the walk's root, `/`-separated) left out, by prefix.
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// Why linting could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LintError {
    /// The embedded rules do not read (a build problem).
    #[error("the embedded rules do not read: {0}")]
    Rules(String),
    /// The tool policy could not be read.
    #[error("tool policy {path}: {message}")]
    Policy {
        /// The file.
        path: PathBuf,
        /// Why.
        message: String,
    },
    /// The Python grammar did not load.
    #[error("the Python grammar does not load: {0}")]
    Grammar(String),
}

/// Findings of one file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileFindings {
    /// The file, as given or found by the walk.
    pub path: String,
    /// Its findings, by line.
    pub findings: Vec<Finding>,
}

/// A file that could not be linted, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The file.
    pub path: String,
    /// Why.
    pub reason: String,
}

/// The result of linting paths.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LintReport {
    /// Files linted.
    pub files: usize,
    /// Files with findings, by path.
    pub results: Vec<FileFindings>,
    /// Files left out (unreadable, too large, not UTF-8).
    pub skipped: Vec<Skipped>,
}

/// The linter: rules and configuration, built once, shared across threads.
#[derive(Debug, Clone)]
pub struct Linter {
    rules: Rules,
    config: LintConfig,
    /// Tool names of the policy, when one is configured.
    policy_tools: Option<BTreeSet<String>>,
    language: tree_sitter::Language,
}

impl Linter {
    /// Builds a linter: reads the rules and the tool policy.
    pub fn new(config: LintConfig) -> Result<Linter, LintError> {
        let rules = Rules::embedded().map_err(LintError::Rules)?;
        let policy_tools = match &config.tool_policy {
            None => None,
            Some(p) => {
                let src = std::fs::read_to_string(p).map_err(|e| LintError::Policy {
                    path: p.clone(),
                    message: e.to_string(),
                })?;
                let policy =
                    rampart_tools::Policy::from_toml(&src).map_err(|e| LintError::Policy {
                        path: p.clone(),
                        message: e.to_string(),
                    })?;
                Some(policy.tool_names().map(str::to_string).collect())
            }
        };
        let language: tree_sitter::Language = tree_sitter_python::LANGUAGE.into();
        Ok(Linter {
            rules,
            config,
            policy_tools,
            language,
        })
    }

    /// The same linter with the policy's tool list given directly (rule examples, tests).
    pub fn with_policy_tools(mut self, tools: Option<Vec<String>>) -> Linter {
        self.policy_tools = tools.map(|t| t.into_iter().collect());
        self
    }

    /// The rules.
    pub fn rules(&self) -> &Rules {
        &self.rules
    }

    /// A finding's severity under this configuration.
    pub fn severity(&self, rule: RuleId) -> Severity {
        self.config
            .severity
            .get(&rule)
            .copied()
            .or_else(|| self.rules.get(rule).map(|r| r.severity))
            .unwrap_or(Severity::Warning)
    }

    /// Lints one file's text. `path` names it in findings only.
    pub fn lint_source(&self, path: &str, src: &str) -> Vec<Finding> {
        let _ = path;
        let mut parser = Parser::new();
        if parser.set_language(&self.language).is_err() {
            return Vec::new();
        }
        let Some(tree) = parser.parse(src, None) else {
            return Vec::new();
        };
        let bytes = src.as_bytes();
        let root = tree.root_node();
        let mut findings = self.analyze_module(root, bytes);
        findings.extend(self.tool_findings(root, bytes));
        let mut findings = suppress(src, findings);
        findings.retain(|f| !self.config.disable.contains(&f.rule));
        findings.sort_by(|a, b| {
            (a.line, a.column, a.rule, &a.message).cmp(&(b.line, b.column, b.rule, &b.message))
        });
        findings.dedup_by(|b, a| a.line == b.line && a.rule == b.rule && a.message == b.message);
        findings
    }

    /// Lints files and folders (folders walked respecting `.gitignore`), in parallel.
    pub fn lint_paths(&self, paths: &[PathBuf]) -> LintReport {
        use rayon::prelude::*;
        let mut report = LintReport::default();
        let mut files: Vec<PathBuf> = Vec::new();
        for p in paths {
            if p.is_file() {
                files.push(p.clone());
                continue;
            }
            for entry in ignore::WalkBuilder::new(p).standard_filters(true).build() {
                match entry {
                    Ok(e) => {
                        let ep = e.path();
                        if e.file_type().is_some_and(|t| t.is_file())
                            && ep.extension().is_some_and(|x| x == "py")
                            && !self.excluded(p, ep)
                        {
                            files.push(ep.to_path_buf());
                        }
                    }
                    Err(err) => report.skipped.push(Skipped {
                        path: p.display().to_string(),
                        reason: err.to_string(),
                    }),
                }
            }
        }
        files.sort();
        files.dedup();
        let results: Vec<Result<FileFindings, Skipped>> = files
            .par_iter()
            .map(|f| {
                let name = f.display().to_string();
                let skip = |reason: String| Skipped {
                    path: name.clone(),
                    reason,
                };
                let meta = std::fs::metadata(f).map_err(|e| skip(e.to_string()))?;
                if meta.len() > MAX_FILE_BYTES {
                    return Err(skip(format!(
                        "larger than {MAX_FILE_BYTES} bytes (generated or vendored?)"
                    )));
                }
                let bytes = std::fs::read(f).map_err(|e| skip(e.to_string()))?;
                let src = String::from_utf8(bytes).map_err(|_| skip("not UTF-8".into()))?;
                Ok(FileFindings {
                    findings: self.lint_source(&name, &src),
                    path: name,
                })
            })
            .collect();
        for r in results {
            match r {
                Ok(ff) => {
                    report.files += 1;
                    if !ff.findings.is_empty() {
                        report.results.push(ff);
                    }
                }
                Err(s) => report.skipped.push(s),
            }
        }
        report
    }

    /// Whether a walked file is excluded: an `exclude` prefix matches the path relative to
    /// the walked folder or the path as the walk found it (`python/tests/` excludes
    /// `python/tests/x.py` when the walk starts at `python` or at `.`).
    fn excluded(&self, root: &Path, p: &Path) -> bool {
        let norm = |q: &Path| {
            q.to_string_lossy()
                .replace('\\', "/")
                .trim_start_matches("./")
                .to_string()
        };
        let rel = norm(p.strip_prefix(root).unwrap_or(p));
        let full = norm(p);
        self.config.exclude.iter().any(|x| {
            let x = x.trim_start_matches("./");
            rel.starts_with(x) || full.starts_with(x)
        })
    }

    /// The module's top level, then its functions: summaries first (rounds), findings last.
    fn analyze_module(&self, root: Node<'_>, src: &[u8]) -> Vec<Finding> {
        let llm_module = imports_any(root, src, analyze::LLM_LIBRARIES.as_slice());
        if !llm_module {
            // Every rule but RL005's tool definitions needs a model call, and model calls
            // are recognised only in modules that import an LLM client library.
            return Vec::new();
        }
        let funcs = functions(root, src);
        let mut module = Module {
            llm_module,
            ..Module::default()
        };
        let mut top = Analyzer::new(src, &module, None);
        top.run_top_level(root);
        let (globals, guarded, top_findings) = (top.globals_out, top.guarded_out, top.findings);
        module.globals = globals;
        module.guarded_clients = guarded;
        let mut stable = false;
        for round in 0..=SUMMARY_ROUNDS {
            // The last round reports; it comes early once the summaries stop changing.
            let last = round == SUMMARY_ROUNDS || stable;
            let mut summaries = BTreeMap::new();
            let mut attrs: BTreeMap<String, BTreeMap<String, Vec<analyze::Taint>>> =
                BTreeMap::new();
            let mut findings = Vec::new();
            for f in &funcs {
                let mut a = Analyzer::new(src, &module, f.class.clone());
                a.run_function(f.node, f.entry);
                summaries.insert(f.key.clone(), a.summary);
                if let Some(c) = &f.class {
                    let slot = attrs.entry(c.clone()).or_default();
                    for (k, v) in a.attrs_out {
                        slot.entry(k).or_default().extend(v);
                    }
                }
                if last {
                    findings.extend(a.findings);
                }
            }
            stable = summaries == module.summaries && attrs == module.attrs;
            module.summaries = summaries;
            module.attrs = attrs;
            if last {
                let mut all = top_findings;
                all.extend(findings);
                return all;
            }
        }
        top_findings
    }

    /// RL005: tool definitions the policy does not list.
    fn tool_findings(&self, root: Node<'_>, src: &[u8]) -> Vec<Finding> {
        let mut tools: Vec<(String, Node<'_>)> = Vec::new();
        collect_tools(root, src, &mut tools, 0);
        if imports_any(root, src, analyze::LLM_LIBRARIES.as_slice()) {
            collect_dispatch_tables(root, src, &mut tools);
        }
        let mut out = Vec::new();
        for (name, n) in tools {
            let listed = self
                .policy_tools
                .as_ref()
                .is_some_and(|t| t.contains(&name));
            if listed {
                continue;
            }
            let why = match &self.policy_tools {
                None => format!(
                    "tool `{name}` is exposed to a model and no Rampart tool policy is configured \
                     ([lint] tool_policy)"
                ),
                Some(_) => format!(
                    "tool `{name}` is exposed to a model and the tool policy does not list it"
                ),
            };
            let pos = n.start_position();
            out.push(Finding {
                rule: RuleId::RL005,
                line: pos.row + 1,
                column: pos.column + 1,
                message: why,
                path: vec![Step {
                    line: pos.row + 1,
                    note: format!("tool `{name}` defined"),
                }],
            });
        }
        out
    }
}

/// Web frameworks whose `Request` parameter carries client data.
const WEB_FRAMEWORKS: [&str; 8] = [
    "fastapi",
    "starlette",
    "django",
    "flask",
    "quart",
    "sanic",
    "aiohttp",
    "litestar",
];

/// Whether the module imports one of `libs` (top-level or inside functions).
fn imports_any(root: Node<'_>, src: &[u8], libs: &[&str]) -> bool {
    fn walk(n: Node<'_>, src: &[u8], libs: &[&str], depth: usize) -> bool {
        if depth > 12 {
            return false;
        }
        if matches!(n.kind(), "import_statement" | "import_from_statement") {
            let t = text(n, src);
            let module = t
                .trim_start_matches("from ")
                .trim_start_matches("import ")
                .split(|c: char| c.is_whitespace() || c == ',')
                .next()
                .unwrap_or("");
            return libs.iter().any(|l| {
                module == *l
                    || module.starts_with(&format!("{l}."))
                    || module.starts_with(&format!("{l}_"))
            });
        }
        let mut c = n.walk();
        n.named_children(&mut c)
            .any(|ch| walk(ch, src, libs, depth + 1))
    }
    walk(root, src, libs, 0)
}

/// A function to analyze.
struct Func<'t> {
    node: Node<'t>,
    /// Summary key: `name`, or `Class.name` for methods.
    key: String,
    class: Option<String>,
    /// A route or command handler: its parameters are untrusted.
    entry: bool,
}

fn functions<'t>(root: Node<'t>, src: &[u8]) -> Vec<Func<'t>> {
    let mut out = Vec::new();
    let web = imports_any(root, src, WEB_FRAMEWORKS.as_slice());
    let mut c = root.walk();
    for st in root.named_children(&mut c) {
        push_def(st, src, None, web, &mut out);
    }
    out
}

fn push_def<'t>(st: Node<'t>, src: &[u8], class: Option<&str>, web: bool, out: &mut Vec<Func<'t>>) {
    let (def, decorators) = match st.kind() {
        "decorated_definition" => {
            let mut decos = Vec::new();
            let mut c = st.walk();
            for ch in st.named_children(&mut c) {
                if ch.kind() == "decorator"
                    && let Some(e) = ch.named_child(0)
                    && let Some(d) = dotted(e, src)
                {
                    decos.push(d);
                }
            }
            match st.child_by_field_name("definition") {
                Some(d) => (d, decos),
                None => return,
            }
        }
        _ => (st, Vec::new()),
    };
    match def.kind() {
        "function_definition" => {
            let Some(name) = def
                .child_by_field_name("name")
                .map(|n| text(n, src).to_string())
            else {
                return;
            };
            let entry = decorators.iter().any(|d| entry_decorator(d))
                || (web && has_request_param(def, src));
            out.push(Func {
                node: def,
                key: class.map_or_else(|| name.clone(), |c| format!("{c}.{name}")),
                class: class.map(str::to_string),
                entry,
            });
        }
        "class_definition" => {
            let Some(name) = def
                .child_by_field_name("name")
                .map(|n| text(n, src).to_string())
            else {
                return;
            };
            if let Some(body) = def.child_by_field_name("body") {
                let mut c = body.walk();
                for m in body.named_children(&mut c) {
                    push_def(m, src, Some(&name), web, out);
                }
            }
        }
        _ => {}
    }
}

/// A parameter annotated `Request` / `HttpRequest` (FastAPI, Starlette, Django).
fn has_request_param(def: Node<'_>, src: &[u8]) -> bool {
    let Some(params) = def.child_by_field_name("parameters") else {
        return false;
    };
    let mut c = params.walk();
    params.named_children(&mut c).any(|p| {
        p.child_by_field_name("type")
            .is_some_and(|t| matches!(text(t, src), "Request" | "HttpRequest" | "WSGIRequest"))
    })
}

/// Function-calling dispatch tables, in a module that talks to a model: a dict literal of
/// string keys bound to a name that the module calls through a subscript whose key reads
/// like a tool call's name (`HANDLERS[call.function.name](**args)`, `TOOLS[tool_name](…)`):
/// its keys are tools. (Other dispatch maps, `FORMATTERS[fmt](data)`, are not.)
fn collect_dispatch_tables<'t>(root: Node<'t>, src: &[u8], out: &mut Vec<(String, Node<'t>)>) {
    fn dispatched(n: Node<'_>, src: &[u8], names: &mut BTreeSet<String>, depth: usize) {
        if depth > 200 {
            return;
        }
        if n.kind() == "call"
            && let Some(f) = n.child_by_field_name("function")
            && f.kind() == "subscript"
            && let Some(v) = f.child_by_field_name("value")
            && let Some(d) = dotted(v, src)
            && f.child_by_field_name("subscript").is_some_and(|k| {
                let k = text(k, src).to_ascii_lowercase();
                k.contains("tool") || k.contains("function") || k.contains("call")
            })
        {
            names.insert(d);
        }
        let mut c = n.walk();
        for ch in n.named_children(&mut c) {
            dispatched(ch, src, names, depth + 1);
        }
    }
    fn tables<'t>(
        n: Node<'t>,
        src: &[u8],
        names: &BTreeSet<String>,
        out: &mut Vec<(String, Node<'t>)>,
        depth: usize,
    ) {
        if depth > 200 {
            return;
        }
        if n.kind() == "assignment"
            && let (Some(l), Some(r)) = (
                n.child_by_field_name("left"),
                n.child_by_field_name("right"),
            )
            && r.kind() == "dictionary"
            && dotted(l, src).is_some_and(|d| names.contains(&d))
        {
            for (key, _) in dict_pairs(r, src) {
                out.push((key, r));
            }
        }
        let mut c = n.walk();
        for ch in n.named_children(&mut c) {
            tables(ch, src, names, out, depth + 1);
        }
    }
    let mut names = BTreeSet::new();
    dispatched(root, src, &mut names, 0);
    if !names.is_empty() {
        tables(root, src, &names, out, 0);
    }
}

/// Tool definitions: OpenAI (`{"type": "function", "function": {"name": …}}` and the flat
/// Responses shape), Anthropic (`{"name": …, "input_schema": …}`), and functions decorated
/// `@tool` / `@function_tool` (LangChain, OpenAI Agents).
fn collect_tools<'t>(n: Node<'t>, src: &[u8], out: &mut Vec<(String, Node<'t>)>, depth: usize) {
    if depth > 200 {
        return;
    }
    match n.kind() {
        "dictionary" => {
            let pairs = dict_pairs(n, src);
            let get = |k: &str| pairs.iter().find(|(key, _)| key == k).map(|(_, v)| *v);
            let is_function =
                get("type").is_some_and(|v| string_value(v, src).as_deref() == Some("function"));
            if is_function {
                if let Some(f) = get("function").filter(|f| f.kind() == "dictionary") {
                    let inner = dict_pairs(f, src);
                    if let Some((_, v)) = inner.iter().find(|(k, _)| k == "name")
                        && let Some(name) = string_value(*v, src)
                    {
                        out.push((name, n));
                    }
                } else if let Some(name) = get("name").and_then(|v| string_value(v, src))
                    && get("parameters").is_some()
                {
                    out.push((name, n));
                }
            } else if get("input_schema").is_some()
                && let Some(name) = get("name").and_then(|v| string_value(v, src))
            {
                out.push((name, n));
            }
        }
        "decorated_definition" => {
            let mut c = n.walk();
            let tool = n.named_children(&mut c).any(|ch| {
                ch.kind() == "decorator"
                    && ch
                        .named_child(0)
                        .and_then(|e| dotted(e, src))
                        .is_some_and(|d| {
                            matches!(
                                d.as_str(),
                                "tool" | "function_tool" | "langchain.tools.tool"
                            )
                        })
            });
            if tool
                && let Some(def) = n.child_by_field_name("definition")
                && let Some(name) = def.child_by_field_name("name")
            {
                out.push((text(name, src).to_string(), n));
            }
        }
        _ => {}
    }
    let mut c = n.walk();
    for ch in n.named_children(&mut c) {
        collect_tools(ch, src, out, depth + 1);
    }
}

fn dict_pairs<'t>(n: Node<'t>, src: &[u8]) -> Vec<(String, Node<'t>)> {
    let mut out = Vec::new();
    let mut c = n.walk();
    for p in n.named_children(&mut c) {
        if p.kind() == "pair"
            && let (Some(k), Some(v)) =
                (p.child_by_field_name("key"), p.child_by_field_name("value"))
            && let Some(key) = string_value(k, src)
        {
            out.push((key, v));
        }
    }
    out
}

/// A plain string literal's value (no interpolation).
fn string_value(n: Node<'_>, src: &[u8]) -> Option<String> {
    if n.kind() != "string" {
        return None;
    }
    let mut c = n.walk();
    if n.named_children(&mut c)
        .any(|ch| ch.kind() == "interpolation")
    {
        return None;
    }
    let t = text(n, src);
    let t = t.trim_start_matches(|c: char| c.is_ascii_alphabetic());
    let q = t.chars().next()?;
    Some(t.trim_matches(q).to_string())
}

/// Applies `# rampart: ignore[RLxxx, …] -- reason` comments (on the finding's line or the
/// line above); a suppression without a reason suppresses nothing and is an RL000 finding.
fn suppress(src: &str, findings: Vec<Finding>) -> Vec<Finding> {
    let lines: Vec<&str> = src.lines().collect();
    let mut out = Vec::new();
    let mut bad: BTreeSet<usize> = BTreeSet::new();
    let parsed: Vec<Option<(Vec<RuleId>, bool)>> =
        lines.iter().map(|l| parse_suppression(l)).collect();
    for (i, p) in parsed.iter().enumerate() {
        if let Some((_, false)) = p {
            bad.insert(i + 1);
        }
    }
    for f in findings {
        let covers = |line: usize| {
            line.checked_sub(1)
                .and_then(|i| parsed.get(i))
                .and_then(|p| p.as_ref())
                .is_some_and(|(ids, reason)| *reason && ids.contains(&f.rule))
        };
        if covers(f.line) || covers(f.line.saturating_sub(1)) {
            continue;
        }
        out.push(f);
    }
    for l in bad {
        out.push(Finding {
            rule: RuleId::RL000,
            line: l,
            column: 1,
            message: "suppression without a reason (write `-- why` after the rule ids)".into(),
            path: Vec::new(),
        });
    }
    out
}

/// `(rule ids, has a reason)` of a suppression comment on this line.
fn parse_suppression(line: &str) -> Option<(Vec<RuleId>, bool)> {
    let at = line.find("# rampart: ignore[")?;
    let rest = &line[at + "# rampart: ignore[".len()..];
    let close = rest.find(']')?;
    let ids: Vec<RuleId> = rest[..close].split(',').filter_map(RuleId::parse).collect();
    let after = rest[close + 1..].trim();
    let reason = after
        .strip_prefix("--")
        .is_some_and(|r| r.trim().chars().filter(|c| c.is_alphanumeric()).count() >= 3);
    Some((ids, reason))
}
