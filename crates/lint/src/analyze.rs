//! The analysis of one Python module: taint from sources (web requests, command-line input,
//! files, HTTP responses, model answers, environment secrets) through assignments, calls,
//! returns and `self` attributes to sinks (model calls, dangerous APIs, logs), with Rampart's
//! guard calls as the checks that clear untrusted input. See DESIGN.md for the model.

use crate::rules::RuleId;
use crate::{Finding, Step};
use std::collections::{BTreeMap, BTreeSet};
use tree_sitter::Node;

/// What a value carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// Data from outside: a request, the command line, a file, an HTTP response.
    Untrusted,
    /// A model's answer or tool-call arguments.
    ModelOut,
    /// A secret from the environment or a key-shaped literal.
    Secret,
    /// The function's parameter of that position (summaries).
    Param(usize),
}

/// A value's taint: its kind and the steps from its source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taint {
    pub kind: Kind,
    pub steps: Vec<Step>,
}

/// Steps kept per taint (the source, the last steps before the sink).
const MAX_STEPS: usize = 8;
/// Taints kept per value.
const MAX_TAINTS: usize = 8;
/// Expression nesting followed at most (deeper parts are treated as clean: bounded work on
/// adversarial input).
const MAX_DEPTH: usize = 64;

impl Taint {
    fn new(kind: Kind, line: usize, note: String) -> Taint {
        Taint {
            kind,
            steps: vec![Step { line, note }],
        }
    }

    /// The steps of this taint followed by one more (a finding's or a summary's path).
    fn path_to(&self, line: usize, note: String) -> Vec<Step> {
        let mut path = self.steps.clone();
        path.push(Step { line, note });
        path
    }

    /// Where it came from, in words (its first step's note).
    fn origin(&self) -> String {
        self.steps.first().map_or(String::new(), |s| s.note.clone())
    }

    fn then(&self, line: usize, note: String) -> Taint {
        let mut t = self.clone();
        match t.steps.last_mut() {
            // Same line: one step, its notes joined (`request.json` (request data), assigned
            // to `text`).
            Some(last) if last.line == line => {
                if !last.note.ends_with(&note) && last.note.len() < 240 {
                    last.note.push_str(", ");
                    last.note.push_str(&note);
                }
            }
            _ => {
                if t.steps.len() >= MAX_STEPS {
                    t.steps.remove(1);
                }
                t.steps.push(Step { line, note });
            }
        }
        t
    }
}

fn merge(into: &mut Vec<Taint>, from: impl IntoIterator<Item = Taint>) {
    for t in from {
        let key = (t.kind, t.steps.first().map(|s| s.line));
        if !into
            .iter()
            .any(|x| (x.kind, x.steps.first().map(|s| s.line)) == key)
            && into.len() < MAX_TAINTS
        {
            into.push(t);
        }
    }
}

/// What a module-level function does with its parameters, for its callers.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Summary {
    /// Number of positional parameters (without `self`).
    pub params: usize,
    /// Their names, in order (keyword arguments are matched by name).
    pub names: Vec<String>,
    /// What its return value carries (parameters as [`Kind::Param`]).
    pub returns: Vec<Taint>,
    /// Parameters that reach a sink inside: (parameter, rule, the steps inside).
    pub sinks: Vec<(usize, RuleId, Vec<Step>)>,
    /// Parameters whose value the function scans with a guard and branches on.
    pub guards: BTreeSet<usize>,
    /// It returns or yields a value somewhere. One that never does (`raise
    /// NotImplementedError`, `...`) is an abstract method: what an override returns is
    /// unknown, so its callers pass their arguments through as for an unknown call.
    pub returns_value: bool,
}

/// Module-wide facts shared by every function.
#[derive(Debug, Default)]
pub(crate) struct Module {
    /// Module-level names' taints.
    pub globals: BTreeMap<String, Vec<Taint>>,
    /// Names bound to a guarded client (`rampart.openai.guard(...)`) or a firewall.
    pub guarded_clients: BTreeSet<String>,
    /// Summaries by function name (`name` for module functions, `Class.name` for methods).
    pub summaries: BTreeMap<String, Summary>,
    /// `self` attribute taints per class.
    pub attrs: BTreeMap<String, BTreeMap<String, Vec<Taint>>>,
    /// The module imports an LLM client library.
    pub llm_module: bool,
    /// Summaries of other project modules' functions, by the name this module calls them.
    pub imported: BTreeMap<String, Summary>,
}

/// A guard call seen in a function.
#[derive(Debug)]
struct Guard {
    line: usize,
    /// Root names of what it scanned.
    scanned: BTreeSet<String>,
    /// Root names scanned only through their first element (`messages[0]`).
    first_only: BTreeSet<String>,
    /// The variable its decision was bound to.
    decision: Option<String>,
    /// Its decision was read by a condition (or returned, or passed on).
    used: bool,
}

/// One model call seen in a function.
#[derive(Debug)]
struct ModelCall {
    line: usize,
    /// Root names in its arguments.
    names: BTreeSet<String>,
}

pub(crate) struct Analyzer<'a> {
    pub src: &'a [u8],
    /// The module imports an LLM client library ([`LLM_LIBRARIES`]).
    pub llm_module: bool,
    pub module: &'a Module,
    /// The class whose method this is.
    class: Option<String>,
    /// Local names.
    env: BTreeMap<String, Vec<Taint>>,
    /// Names that flow into a model call (computed before the pass).
    prompt_names: BTreeSet<String>,
    guards: Vec<Guard>,
    model_calls: Vec<ModelCall>,
    tool_checked: bool,
    local_guarded: BTreeSet<String>,
    in_condition: bool,
    pub findings: Vec<Finding>,
    pub summary: Summary,
    pub attrs_out: BTreeMap<String, Vec<Taint>>,
    pub globals_out: BTreeMap<String, Vec<Taint>>,
    pub guarded_out: BTreeSet<String>,
    /// Whether this is the module's top level (assignments are globals).
    top_level: bool,
}

/// Text of a node.
pub(crate) fn text<'s>(n: Node<'_>, src: &'s [u8]) -> &'s str {
    n.utf8_text(src).unwrap_or("")
}

fn line(n: Node<'_>) -> usize {
    n.start_position().row + 1
}

/// The dotted name of a callee or attribute chain (`client.chat.completions.create`), with
/// call and subscript parts elided (`OpenAI().chat` → `OpenAI.chat`); `None` when it is not
/// a plain chain.
pub(crate) fn dotted(n: Node<'_>, src: &[u8]) -> Option<String> {
    dotted_at(n, src, 0)
}

fn dotted_at(n: Node<'_>, src: &[u8], depth: usize) -> Option<String> {
    if depth > MAX_DEPTH {
        return None;
    }
    match n.kind() {
        "identifier" => Some(text(n, src).to_string()),
        "attribute" => {
            let obj = n.child_by_field_name("object")?;
            let attr = n.child_by_field_name("attribute")?;
            Some(format!(
                "{}.{}",
                dotted_at(obj, src, depth + 1)?,
                text(attr, src)
            ))
        }
        "call" => dotted_at(n.child_by_field_name("function")?, src, depth + 1),
        "subscript" => dotted_at(n.child_by_field_name("value")?, src, depth + 1),
        "await" | "parenthesized_expression" => dotted_at(n.named_child(0)?, src, depth + 1),
        _ => None,
    }
}

/// The root name of an expression (`messages` for `messages[0]["content"]`, `self.x` for
/// `self.x.y`).
fn root(n: Node<'_>, src: &[u8]) -> Option<String> {
    let d = dotted(n, src)?;
    let mut parts = d.split('.');
    let first = parts.next()?;
    if first == "self" {
        return parts.next().map(|p| format!("self.{p}"));
    }
    Some(first.to_string())
}

/// Every identifier (and `self.x` attribute) an expression mentions.
fn names_in(n: Node<'_>, src: &[u8], out: &mut BTreeSet<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match n.kind() {
        "identifier" => {
            out.insert(text(n, src).to_string());
        }
        "attribute" => {
            // `self.messages` is the name, not `self` (a bare `self` would make every
            // attribute of the object a prompt).
            match root(n, src) {
                Some(r) => {
                    out.insert(r);
                }
                None => {
                    if let Some(o) = n.child_by_field_name("object") {
                        names_in(o, src, out, depth + 1);
                    }
                }
            }
        }
        "keyword_argument" => {
            if let Some(v) = n.child_by_field_name("value") {
                names_in(v, src, out, depth + 1);
            }
        }
        "lambda" => {}
        _ => {
            let mut c = n.walk();
            for ch in n.named_children(&mut c) {
                names_in(ch, src, out, depth + 1);
            }
        }
    }
}

/// [`names_in`], leaving out what sits inside a sanitizer call (`len(question)` logs a number).
fn names_unsanitized(n: Node<'_>, src: &[u8], out: &mut BTreeSet<String>, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    if n.kind() == "call"
        && n.child_by_field_name("function")
            .and_then(|f| dotted(f, src))
            .is_some_and(|c| is_sanitizer(&c))
    {
        return;
    }
    match n.kind() {
        "identifier" | "attribute" => names_in(n, src, out, depth),
        _ => {
            let mut c = n.walk();
            for ch in n.named_children(&mut c) {
                names_unsanitized(ch, src, out, depth + 1);
            }
        }
    }
}

/// Attributes of a model answer that carry no text of it: counts, ids, reasons, timings.
/// A tool call's `name` is one of the application's own tool names (the model picks it from
/// the list the application sent), so logging it shows no text.
const METADATA_ATTRS: [&str; 16] = [
    "usage",
    "finish_reason",
    "stop_reason",
    "id",
    "model",
    "created",
    "object",
    "type",
    "status_code",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "index",
    "role",
    "name",
    "sid",
];

/// Keyword arguments of a model call that configure it rather than carry the prompt.
const MODEL_SETTINGS: [&str; 18] = [
    "model",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "stop",
    "n",
    "seed",
    "timeout",
    "stream",
    "response_format",
    "tool_choice",
    "tools",
    "functions",
    "user",
    "api_key",
    "base_url",
    "extra_headers",
];

/// Request attributes of Flask and Django that carry client data.
const REQUEST_ATTRS: [&str; 14] = [
    "args",
    "form",
    "json",
    "get_json",
    "data",
    "values",
    "files",
    "cookies",
    "headers",
    "GET",
    "POST",
    "body",
    "query_params",
    "path_params",
];

/// Route decorators (FastAPI, Flask, Starlette, Django REST) and CLI commands (click, typer).
pub(crate) fn entry_decorator(d: &str) -> bool {
    let last = d.rsplit('.').next().unwrap_or(d);
    matches!(
        last,
        "get"
            | "post"
            | "put"
            | "patch"
            | "delete"
            | "route"
            | "websocket"
            | "api_view"
            | "command"
            | "callback"
    ) && d.contains('.')
        || matches!(d, "click.command" | "api_view" | "tool_handler")
}

/// LLM client libraries: a module that imports none of them makes no model call through a
/// method path that other libraries share (`messages.create` is also Twilio's,
/// `index.query` a vector store's, `model.run` an ONNX session's).
pub(crate) const LLM_LIBRARIES: [&str; 24] = [
    "openai",
    "anthropic",
    "litellm",
    "langchain",
    "langchain_core",
    "langchain_openai",
    "langchain_anthropic",
    "langchain_community",
    "llama_index",
    "google.generativeai",
    "google.genai",
    "vertexai",
    "mistralai",
    "groq",
    "cohere",
    "ollama",
    "together",
    "huggingface_hub",
    "transformers",
    "dspy",
    "instructor",
    "crewai",
    "autogen",
    "boto3",
];

/// Whether a callee is a model call, by its dotted name.
fn is_model_call(callee: &str) -> bool {
    const EXACT_SUFFIX: [&str; 9] = [
        "chat.completions.create",
        "chat.completions.parse",
        "chat.completions.stream",
        "completions.create",
        "responses.create",
        "responses.stream",
        "messages.create",
        "messages.stream",
        "generate_content",
    ];
    if EXACT_SUFFIX.iter().any(|s| callee.ends_with(s)) {
        return true;
    }
    if matches!(
        callee,
        "litellm.completion" | "litellm.acompletion" | "completion" | "acompletion"
    ) {
        return true;
    }
    // LangChain / LlamaIndex style methods, on receivers named like a model, chain or agent.
    let mut parts = callee.rsplitn(2, '.');
    let (Some(method), Some(recv)) = (parts.next(), parts.next()) else {
        return false;
    };
    let recv = recv.rsplit('.').next().unwrap_or(recv).to_ascii_lowercase();
    let modelish = [
        "llm", "chat", "model", "chain", "agent", "engine", "bot", "index", "gpt",
    ]
    .iter()
    .any(|w| recv.contains(w));
    modelish
        && matches!(
            method,
            "invoke"
                | "ainvoke"
                | "stream"
                | "astream"
                | "predict"
                | "run"
                | "arun"
                | "query"
                | "aquery"
                | "complete"
                | "acomplete"
                | "chat"
                | "achat"
                | "generate"
        )
}

/// Whether a callee is a Rampart guard scan, and whether it is the output scan.
fn is_guard_call(callee: &str) -> bool {
    let mut parts = callee.rsplitn(2, '.');
    let (Some(method), Some(recv)) = (parts.next(), parts.next()) else {
        return false;
    };
    let recv = recv.to_ascii_lowercase();
    matches!(
        method,
        "scan" | "scan_batch" | "scan_async" | "scan_batch_async" | "check"
    ) && (recv.contains("fw")
        || recv.contains("firewall")
        || recv.contains("rampart")
        || recv.contains("guard"))
}

/// Rampart's HTTP API as the guard: a POST to `…/v1/scan` (or `/v1/scan/batch`) with
/// `requests`, `httpx` or a session.
fn is_http_guard(callee: &str, positional: &[(Node<'_>, Vec<Taint>)], src: &[u8]) -> bool {
    let post = callee.rsplit('.').next() == Some("post");
    post && positional
        .first()
        .is_some_and(|(url, _)| text(*url, src).contains("/v1/scan"))
}

/// Calls whose result carries nothing of their arguments.
fn is_sanitizer(callee: &str) -> bool {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    matches!(
        last,
        "len"
            | "hash"
            | "int"
            | "float"
            | "bool"
            | "isinstance"
            | "basename"
            | "secure_filename"
            | "escape"
            | "quote"
            | "clean"
            | "sha256"
            | "md5"
            | "hexdigest"
            | "type"
            | "id"
            | "count"
            | "startswith"
            | "endswith"
            | "encode_hash"
    )
}

/// Untrusted-source calls.
fn is_source_call(callee: &str) -> bool {
    matches!(
        callee,
        "input"
            | "open"
            | "requests.get"
            | "requests.post"
            | "requests.request"
            | "httpx.get"
            | "httpx.post"
            | "urllib.request.urlopen"
            | "urlopen"
            | "parser.parse_args"
            | "sys.stdin.read"
    ) || callee.ends_with(".parse_args")
        || callee.ends_with("read_text")
        || callee.ends_with(".get_json")
        || callee.ends_with("stdin.readline")
}

/// Names of environment keys that hold secrets.
fn secret_name(key: &str) -> bool {
    let k = key.to_ascii_uppercase();
    [
        "KEY",
        "SECRET",
        "TOKEN",
        "PASSWORD",
        "PASSWD",
        "CREDENTIAL",
        "PRIVATE",
    ]
    .iter()
    .any(|w| k.contains(w))
}

/// Literals shaped like credentials.
fn secret_literal(s: &str) -> bool {
    let t = s.trim_matches(|c| c == '"' || c == '\'');
    let run = |prefix: &str, min: usize| {
        t.find(prefix).is_some_and(|i| {
            t[i + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
                .count()
                >= min
        })
    };
    run("sk-", 20) || run("AKIA", 16) || run("ghp_", 30) || run("xoxb-", 20) || run("AIza", 30)
}

/// Dangerous sinks for model output: the rule's words for each, when the call is one.
fn dangerous_sink(callee: &str, shell: bool) -> Option<&'static str> {
    let last = callee.rsplit('.').next().unwrap_or(callee);
    match callee {
        "eval" | "exec" | "compile" => return Some("runs it as Python code"),
        "os.system" | "os.popen" => return Some("runs it as a shell command"),
        "pickle.loads" | "pickle.load" | "marshal.loads" | "dill.loads" | "yaml.load"
        | "yaml.unsafe_load" => return Some("deserializes it"),
        "open" | "os.remove" | "os.unlink" | "shutil.rmtree" | "shutil.copy" | "shutil.move" => {
            return Some("uses it as a file path");
        }
        "Markup"
        | "mark_safe"
        | "render_template_string"
        | "HTMLResponse"
        | "markupsafe.Markup" => {
            return Some("renders it as HTML without escaping");
        }
        _ => {}
    }
    if callee.starts_with("subprocess.") {
        // With `shell=True` a shell parses it; without, the model still picks the program
        // and its arguments.
        return Some(if shell {
            "runs it in a shell"
        } else {
            "runs it as a command"
        });
    }
    if matches!(last, "execute" | "executemany" | "executescript") {
        return Some("runs it as SQL");
    }
    None
}

/// Log-like sinks.
fn is_log_sink(callee: &str) -> bool {
    if callee == "print" || callee.starts_with("logging.") || callee.starts_with("sentry_sdk.") {
        return true;
    }
    let mut parts = callee.rsplitn(2, '.');
    let (Some(method), Some(recv)) = (parts.next(), parts.next()) else {
        return false;
    };
    let recv = recv.to_ascii_lowercase();
    (recv.contains("log")
        && matches!(
            method,
            "debug" | "info" | "warning" | "warn" | "error" | "exception" | "critical" | "log"
        ))
        || ((recv.contains("analytics") || recv.contains("posthog") || recv.contains("segment"))
            && matches!(method, "track" | "capture" | "identify"))
}

impl<'a> Analyzer<'a> {
    pub(crate) fn new(src: &'a [u8], module: &'a Module, class: Option<String>) -> Self {
        Analyzer {
            src,
            llm_module: module.llm_module,
            module,
            class,
            env: BTreeMap::new(),
            prompt_names: BTreeSet::new(),
            guards: Vec::new(),
            model_calls: Vec::new(),
            tool_checked: false,
            local_guarded: BTreeSet::new(),
            in_condition: false,
            findings: Vec::new(),
            summary: Summary::default(),
            attrs_out: BTreeMap::new(),
            globals_out: BTreeMap::new(),
            guarded_out: BTreeSet::new(),
            top_level: false,
        }
    }

    fn finding(&mut self, rule: RuleId, n: Node<'_>, message: String, path: Vec<Step>) {
        let pos = n.start_position();
        self.findings.push(Finding {
            rule,
            line: pos.row + 1,
            column: pos.column + 1,
            message,
            path,
        });
    }

    /// Analyzes the module's top level (not its function bodies).
    pub(crate) fn run_top_level(&mut self, root_node: Node<'_>) {
        self.top_level = true;
        self.prepass(root_node);
        let mut c = root_node.walk();
        for st in root_node.named_children(&mut c) {
            if matches!(
                st.kind(),
                "function_definition" | "class_definition" | "decorated_definition"
            ) {
                continue;
            }
            self.statement(st, 0);
        }
        self.finish();
    }

    /// Analyzes one function. `entry`: its parameters are untrusted (a route or a command).
    pub(crate) fn run_function(&mut self, f: Node<'_>, entry: bool) {
        let Some(params) = f.child_by_field_name("parameters") else {
            return;
        };
        let mut i = 0usize;
        let mut c = params.walk();
        for p in params.named_children(&mut c) {
            let name_node = match p.kind() {
                "identifier" => Some(p),
                "typed_parameter" => p.named_child(0),
                "default_parameter" | "typed_default_parameter" => p.child_by_field_name("name"),
                _ => None,
            };
            let Some(nn) = name_node else { continue };
            let name = text(nn, self.src).to_string();
            if name == "self" || name == "cls" {
                continue;
            }
            let l = line(p);
            let t = if entry {
                Taint::new(
                    Kind::Untrusted,
                    l,
                    format!("parameter `{name}` of a request or command handler"),
                )
            } else {
                Taint::new(Kind::Param(i), l, format!("parameter `{name}`"))
            };
            self.summary.names.push(name.clone());
            self.env.insert(name, vec![t]);
            i += 1;
        }
        self.summary.params = i;
        if let Some(body) = f.child_by_field_name("body") {
            self.prepass(body);
            self.block(body, 0);
        }
        self.finish();
    }

    /// Which names flow into a model call: the names in model-call arguments, closed over
    /// the function's assignments (`prompt = f"...{question}"` makes `question` one).
    fn prepass(&mut self, body: Node<'_>) {
        let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut seeds: BTreeSet<String> = BTreeSet::new();
        self.collect(body, &mut deps, &mut seeds, 0);
        let mut todo: Vec<String> = seeds.iter().cloned().collect();
        while let Some(n) = todo.pop() {
            if let Some(ds) = deps.get(&n) {
                for d in ds {
                    if seeds.insert(d.clone()) {
                        todo.push(d.clone());
                    }
                }
            }
        }
        self.prompt_names = seeds;
    }

    fn collect(
        &self,
        n: Node<'_>,
        deps: &mut BTreeMap<String, BTreeSet<String>>,
        seeds: &mut BTreeSet<String>,
        depth: usize,
    ) {
        if depth > MAX_DEPTH {
            return;
        }
        match n.kind() {
            "assignment" | "augmented_assignment" => {
                if let (Some(l), Some(r)) = (
                    n.child_by_field_name("left"),
                    n.child_by_field_name("right"),
                ) {
                    let mut targets = BTreeSet::new();
                    names_in(l, self.src, &mut targets, 0);
                    let mut used = BTreeSet::new();
                    names_in(r, self.src, &mut used, 0);
                    for t in targets {
                        deps.entry(t).or_default().extend(used.iter().cloned());
                    }
                }
            }
            "call" => {
                if self.llm_module
                    && let Some(f) = n.child_by_field_name("function")
                    && dotted(f, self.src).is_some_and(|c| is_model_call(&c))
                    && let Some(args) = n.child_by_field_name("arguments")
                {
                    // What the model reads; not its settings (`model=model_name`).
                    let mut c = args.walk();
                    for a in args.named_children(&mut c) {
                        let setting = a.kind() == "keyword_argument"
                            && a.child_by_field_name("name")
                                .is_some_and(|k| MODEL_SETTINGS.contains(&text(k, self.src)));
                        if !setting {
                            names_in(a, self.src, seeds, 0);
                        }
                    }
                }
            }
            "function_definition" | "class_definition" => return,
            _ => {}
        }
        let mut c = n.walk();
        for ch in n.named_children(&mut c) {
            self.collect(ch, deps, seeds, depth + 1);
        }
    }

    fn block(&mut self, n: Node<'_>, depth: usize) {
        let mut c = n.walk();
        for st in n.named_children(&mut c) {
            self.statement(st, depth);
        }
    }

    fn statement(&mut self, st: Node<'_>, depth: usize) {
        if depth > MAX_DEPTH {
            return;
        }
        match st.kind() {
            "expression_statement" => {
                let mut c = st.walk();
                for e in st.named_children(&mut c) {
                    self.expr(e, 0);
                }
            }
            "return_statement" => {
                if let Some(e) = st.named_child(0) {
                    self.summary.returns_value = true;
                    // A returned decision is the caller's to read.
                    self.mark_used(e);
                    let t = self.expr(e, 0);
                    let l = line(st);
                    for g in &mut self.guards {
                        if g.line >= l && g.line <= e.end_position().row + 1 {
                            g.used = true;
                        }
                    }
                    let t: Vec<Taint> = t.iter().map(|x| x.then(l, "returned".into())).collect();
                    merge(&mut self.summary.returns, t);
                }
            }
            "if_statement" | "elif_clause" | "while_statement" => {
                if let Some(cond) = st.child_by_field_name("condition") {
                    self.condition(cond);
                }
                // Each branch starts from the state before it; afterwards a value carries
                // what any branch (or none) left in it.
                let before = self.env.clone();
                let mut merged = before.clone();
                let mut c = st.walk();
                for ch in st.named_children(&mut c) {
                    if !matches!(ch.kind(), "block" | "elif_clause" | "else_clause") {
                        continue;
                    }
                    self.env = before.clone();
                    if ch.kind() == "block" {
                        self.block(ch, depth + 1);
                        if st.kind() == "while_statement" {
                            self.block(ch, depth + 1);
                        }
                    } else {
                        self.statement(ch, depth + 1);
                    }
                    for (k, v) in std::mem::take(&mut self.env) {
                        merge(merged.entry(k).or_default(), v);
                    }
                }
                self.env = merged;
            }
            "assert_statement" => {
                if let Some(cond) = st.named_child(0) {
                    self.condition(cond);
                }
            }
            "for_statement" => {
                let taints = st
                    .child_by_field_name("right")
                    .map(|r| self.expr(r, 0))
                    .unwrap_or_default();
                if let Some(l) = st.child_by_field_name("left") {
                    self.bind(l, &taints, line(st));
                }
                if let Some(b) = st.child_by_field_name("body") {
                    self.block(b, depth + 1);
                    self.block(b, depth + 1);
                }
                if let Some(a) = st.child_by_field_name("alternative") {
                    self.statement(a, depth + 1);
                }
            }
            "with_statement" => {
                let mut c = st.walk();
                for ch in st.named_children(&mut c) {
                    if ch.kind() == "with_clause" {
                        let mut c2 = ch.walk();
                        for item in ch.named_children(&mut c2) {
                            let Some(v) = item.child_by_field_name("value") else {
                                continue;
                            };
                            if v.kind() == "as_pattern" {
                                let val = v.named_child(0);
                                let alias = v.child_by_field_name("alias");
                                if let Some(val) = val {
                                    let t = self.expr(val, 0);
                                    if let Some(a) = alias {
                                        self.bind(a, &t, line(item));
                                    }
                                }
                            } else {
                                self.expr(v, 0);
                            }
                        }
                    } else if ch.kind() == "block" {
                        self.block(ch, depth + 1);
                    }
                }
            }
            "try_statement" | "else_clause" | "finally_clause" | "except_clause" | "block" => {
                let mut c = st.walk();
                for ch in st.named_children(&mut c) {
                    if ch.kind() == "block" {
                        self.block(ch, depth + 1);
                    } else {
                        self.statement(ch, depth + 1);
                    }
                }
            }
            "raise_statement" => {
                if let Some(e) = st.named_child(0) {
                    let t = self.expr(e, 0);
                    self.log_check(e, &t, "an exception message");
                }
            }
            "decorated_definition" | "function_definition" | "class_definition" => {}
            _ => {
                let mut c = st.walk();
                for ch in st.named_children(&mut c) {
                    self.expr(ch, 0);
                }
            }
        }
    }

    /// A condition: guards inside it, and guard decisions it reads, count as branched on.
    fn condition(&mut self, cond: Node<'_>) {
        let was = self.in_condition;
        self.in_condition = true;
        self.expr(cond, 0);
        self.in_condition = was;
        self.mark_used(cond);
    }

    /// Marks guard decisions mentioned in `n` as read; a read guard clears what it scanned.
    fn mark_used(&mut self, n: Node<'_>) {
        let mut names = BTreeSet::new();
        names_in(n, self.src, &mut names, 0);
        let mut cleared = BTreeSet::new();
        for g in &mut self.guards {
            if !g.used && g.decision.as_ref().is_some_and(|d| names.contains(d)) {
                g.used = true;
                cleared.extend(g.scanned.iter().cloned());
            }
        }
        for name in cleared {
            self.clear(&name);
        }
    }

    /// Drops what makes a scanned value untrusted (it was checked), in it and in every value
    /// built from it before the check (`history = [{"content": text}]`, then `fw.scan(text)`).
    fn clear(&mut self, name: &str) {
        let mark = format!("`{name}`");
        for ts in self.env.values_mut() {
            ts.retain(|t| {
                !(matches!(t.kind, Kind::Untrusted | Kind::Param(_))
                    && t.steps.iter().any(|s| s.note.contains(&mark)))
            });
        }
        self.clear_own(name);
    }

    fn clear_own(&mut self, name: &str) {
        if let Some(ts) = self.env.get_mut(name) {
            for t in ts.iter() {
                if let Kind::Param(i) = t.kind {
                    self.summary.guards.insert(i);
                }
            }
            ts.retain(|t| !matches!(t.kind, Kind::Untrusted | Kind::Param(_)));
        } else if let Some(g) = self.module.globals.get(name) {
            let kept: Vec<Taint> = g
                .iter()
                .filter(|t| !matches!(t.kind, Kind::Untrusted | Kind::Param(_)))
                .cloned()
                .collect();
            self.env.insert(name.to_string(), kept);
        }
    }

    fn lookup(&self, name: &str) -> Vec<Taint> {
        if let Some(t) = self.env.get(name) {
            return t.clone();
        }
        if let Some(attr) = name.strip_prefix("self.")
            && let Some(class) = &self.class
            && let Some(t) = self.module.attrs.get(class).and_then(|a| a.get(attr))
        {
            return t.clone();
        }
        self.module.globals.get(name).cloned().unwrap_or_default()
    }

    fn is_guarded_client(&self, name: &str) -> bool {
        self.local_guarded.contains(name) || self.module.guarded_clients.contains(name)
    }

    /// Binds a target (name, tuple, attribute, subscript) to taints.
    fn bind(&mut self, target: Node<'_>, taints: &[Taint], l: usize) {
        match target.kind() {
            "identifier" => {
                let name = text(target, self.src).to_string();
                let t: Vec<Taint> = taints
                    .iter()
                    .map(|x| x.then(l, format!("assigned to `{name}`")))
                    .collect();
                if self.top_level {
                    self.globals_out.insert(name.clone(), t.clone());
                }
                self.env.insert(name, t);
            }
            "attribute" => {
                let Some(d) = dotted(target, self.src) else {
                    return;
                };
                let t: Vec<Taint> = taints
                    .iter()
                    .map(|x| x.then(l, format!("assigned to `{d}`")))
                    .collect();
                if let Some(attr) = d.strip_prefix("self.") {
                    merge(
                        self.attrs_out.entry(attr.to_string()).or_default(),
                        t.clone(),
                    );
                }
                merge(self.env.entry(d).or_default(), t);
            }
            "subscript" => {
                // `d["k"] = v` taints `d`.
                if let Some(r) = root(target, self.src) {
                    let t: Vec<Taint> = taints
                        .iter()
                        .map(|x| x.then(l, format!("stored in `{r}`")))
                        .collect();
                    let mut cur = self.lookup(&r);
                    merge(&mut cur, t);
                    self.env.insert(r, cur);
                }
            }
            _ => {
                let mut c = target.walk();
                for ch in target.named_children(&mut c) {
                    self.bind(ch, taints, l);
                }
            }
        }
    }

    fn expr(&mut self, n: Node<'_>, depth: usize) -> Vec<Taint> {
        if depth > MAX_DEPTH {
            return Vec::new();
        }
        let src = self.src;
        match n.kind() {
            "identifier" => self.lookup(text(n, src)),
            "attribute" => self.attribute(n, depth),
            "subscript" => self.subscript(n, depth),
            "call" => self.call(n, depth),
            "assignment" | "augmented_assignment" => {
                let r = n.child_by_field_name("right");
                let l = n.child_by_field_name("left");
                let mut t = r.map(|r| self.expr(r, depth + 1)).unwrap_or_default();
                if n.kind() == "augmented_assignment"
                    && let Some(l) = l
                {
                    merge(&mut t, self.expr(l, depth + 1));
                }
                if let (Some(l), Some(r)) = (l, r) {
                    self.guard_binding(l, r);
                    self.client_binding(l, r);
                    self.bind(l, &t, line(n));
                }
                t
            }
            "string" | "concatenated_string" => {
                let mut out = Vec::new();
                if n.kind() == "string" && secret_literal(text(n, src)) {
                    out.push(Taint::new(
                        Kind::Secret,
                        line(n),
                        "a key-shaped literal".into(),
                    ));
                }
                let mut c = n.walk();
                for ch in n.named_children(&mut c) {
                    if matches!(ch.kind(), "interpolation" | "string") {
                        merge(&mut out, self.expr(ch, depth + 1));
                    }
                }
                out
            }
            "yield" => {
                self.summary.returns_value = true;
                // A generator's values leave it like a return value.
                let t = n
                    .named_child(0)
                    .map(|e| self.expr(e, depth + 1))
                    .unwrap_or_default();
                let l = line(n);
                let t: Vec<Taint> = t.iter().map(|x| x.then(l, "yielded".into())).collect();
                merge(&mut self.summary.returns, t);
                Vec::new()
            }
            "interpolation" => n
                .named_child(0)
                .map(|e| self.expr(e, depth + 1))
                .unwrap_or_default(),
            "lambda" | "integer" | "float" | "true" | "false" | "none" | "comment" => Vec::new(),
            "conditional_expression" => {
                // `a if cond else b`: the value is `a` or `b`, never `cond`.
                let mut out = Vec::new();
                let mut c = n.walk();
                let parts: Vec<Node<'_>> = n.named_children(&mut c).collect();
                for (i, ch) in parts.into_iter().enumerate() {
                    if i == 1 {
                        self.expr(ch, depth + 1);
                    } else {
                        merge(&mut out, self.expr(ch, depth + 1));
                    }
                }
                out
            }
            "keyword_argument" => n
                .child_by_field_name("value")
                .map(|v| self.expr(v, depth + 1))
                .unwrap_or_default(),
            "pair" => n
                .child_by_field_name("value")
                .map(|v| self.expr(v, depth + 1))
                .unwrap_or_default(),
            _ => {
                let mut out = Vec::new();
                let mut c = n.walk();
                let children: Vec<Node<'_>> = n.named_children(&mut c).collect();
                for ch in children {
                    merge(&mut out, self.expr(ch, depth + 1));
                }
                out
            }
        }
    }

    fn attribute(&mut self, n: Node<'_>, depth: usize) -> Vec<Taint> {
        let Some(d) = dotted(n, self.src) else {
            return n
                .child_by_field_name("object")
                .map(|o| self.expr(o, depth + 1))
                .unwrap_or_default();
        };
        let l = line(n);
        if d == "sys.argv" {
            return vec![Taint::new(Kind::Untrusted, l, "`sys.argv`".into())];
        }
        if let Some(rest) = d.strip_prefix("request.")
            && REQUEST_ATTRS.contains(&rest.split('.').next().unwrap_or(""))
        {
            return vec![Taint::new(
                Kind::Untrusted,
                l,
                format!("`{d}` (request data)"),
            )];
        }
        let own = self.lookup(&d);
        if !own.is_empty() {
            return own;
        }
        let last = d.rsplit('.').next().unwrap_or("");
        if METADATA_ATTRS.contains(&last) {
            return Vec::new();
        }
        n.child_by_field_name("object")
            .map(|o| self.expr(o, depth + 1))
            .unwrap_or_default()
    }

    fn subscript(&mut self, n: Node<'_>, depth: usize) -> Vec<Taint> {
        let l = line(n);
        let value = n.child_by_field_name("value");
        if let Some(v) = value
            && dotted(v, self.src).as_deref() == Some("os.environ")
            && let Some(k) = n.child_by_field_name("subscript")
        {
            let key = if k.kind() == "string" {
                text(k, self.src).trim_matches(|c| c == '"' || c == '\'')
            } else {
                ""
            };
            if secret_name(key) {
                return vec![Taint::new(
                    Kind::Secret,
                    l,
                    format!("environment secret `{key}`"),
                )];
            }
            return Vec::new();
        }
        if let Some(k) = n.child_by_field_name("subscript")
            && k.kind() == "string"
        {
            let key = text(k, self.src).trim_matches(|c| c == '"' || c == '\'');
            if METADATA_ATTRS.contains(&key) {
                return Vec::new();
            }
        }
        value.map(|v| self.expr(v, depth + 1)).unwrap_or_default()
    }

    /// `d = fw.scan(x)` (or `v = requests.post(".../v1/scan", ...).json()`): remembers which
    /// variable holds the decision of the guard call made on this line.
    fn guard_binding(&mut self, left: Node<'_>, right: Node<'_>) {
        if left.kind() != "identifier" {
            return;
        }
        let name = text(left, self.src).to_string();
        let (from, to) = (line(right), right.end_position().row + 1);
        if let Some(g) = self
            .guards
            .iter_mut()
            .rev()
            .find(|g| g.line >= from && g.line <= to && g.decision.is_none() && !g.used)
        {
            g.decision = Some(name);
        }
    }

    /// `client = rampart.openai.guard(OpenAI(), fw)`: calls through `client` are guarded.
    fn client_binding(&mut self, left: Node<'_>, right: Node<'_>) {
        let Some(callee) = dotted(right, self.src) else {
            return;
        };
        let guarded = callee.starts_with("rampart.") && callee.ends_with(".guard")
            || callee == "guard"
            || callee.ends_with("GuardedClient");
        if guarded && left.kind() == "identifier" {
            let name = text(left, self.src).to_string();
            self.local_guarded.insert(name.clone());
            if self.top_level {
                self.guarded_out.insert(name);
            }
        }
    }

    fn call(&mut self, n: Node<'_>, depth: usize) -> Vec<Taint> {
        let src = self.src;
        let l = line(n);
        let func = n.child_by_field_name("function");
        let callee = func.and_then(|f| dotted(f, src)).unwrap_or_default();
        let args_node = n.child_by_field_name("arguments");
        // Arguments: positional taints, keyword taints, and whether `shell=True`.
        let mut positional: Vec<(Node<'_>, Vec<Taint>)> = Vec::new();
        let mut keywords: Vec<(String, Node<'_>, Vec<Taint>)> = Vec::new();
        let mut shell = false;
        if let Some(a) = args_node {
            let mut c = a.walk();
            let children: Vec<Node<'_>> = a.named_children(&mut c).collect();
            for ch in children {
                if ch.kind() == "keyword_argument" {
                    let name = ch
                        .child_by_field_name("name")
                        .map(|x| text(x, src).to_string())
                        .unwrap_or_default();
                    let v = ch.child_by_field_name("value");
                    if name == "shell" && v.is_some_and(|v| text(v, src) == "True") {
                        shell = true;
                    }
                    let t = v.map(|v| self.expr(v, depth + 1)).unwrap_or_default();
                    keywords.push((name, ch, t));
                } else if ch.kind() != "comment" {
                    let t = self.expr(ch, depth + 1);
                    positional.push((ch, t));
                }
            }
        }
        let receiver = func
            .filter(|f| f.kind() == "attribute")
            .and_then(|f| f.child_by_field_name("object"));
        let recv_taint = receiver
            .map(|r| self.expr(r, depth + 1))
            .unwrap_or_default();
        let mut all: Vec<Taint> = Vec::new();
        for (_, t) in &positional {
            merge(&mut all, t.iter().cloned());
        }
        for (_, _, t) in &keywords {
            merge(&mut all, t.iter().cloned());
        }

        if is_guard_call(&callee) || is_http_guard(&callee, &positional, src) {
            self.record_guard(n, args_node);
            // A decision: nothing of the text.
            return Vec::new();
        }
        if callee.ends_with("check_tool_call") {
            self.tool_checked = true;
            return Vec::new();
        }
        if callee == "os.getenv" || callee == "os.environ.get" || callee == "getenv" {
            let key = positional
                .first()
                .filter(|(k, _)| k.kind() == "string")
                .map(|(k, _)| text(*k, src).trim_matches(|c| c == '"' || c == '\''))
                .unwrap_or("");
            if secret_name(key) {
                return vec![Taint::new(
                    Kind::Secret,
                    l,
                    format!("environment secret `{key}`"),
                )];
            }
            return Vec::new();
        }
        if self.llm_module && is_model_call(&callee) {
            // What the model reads, not its settings (`temperature=t`).
            let mut read: Vec<Taint> = Vec::new();
            for (_, t) in &positional {
                merge(&mut read, t.iter().cloned());
            }
            for (k, _, t) in &keywords {
                if !MODEL_SETTINGS.contains(&k.as_str()) {
                    merge(&mut read, t.iter().cloned());
                }
            }
            return self.model_call(n, &callee, args_node, &read);
        }
        if let Some(what) = dangerous_sink(&callee, shell) {
            self.sink_check(n, &callee, what, &positional, &all);
        }
        let to_stderr = keywords.iter().any(|(k, v, _)| {
            k == "file"
                && v.child_by_field_name("value")
                    .is_some_and(|x| text(x, src).ends_with("stderr"))
        });
        if is_log_sink(&callee) && (callee != "print" || to_stderr) {
            self.log_check_args(n, &callee, &positional, &keywords);
        }
        self.tool_dispatch_check(n, func, &all);
        if is_sanitizer(&callee) {
            return Vec::new();
        }
        if let Some(summary) = self.summary_of(&callee)
            && (summary.returns_value || !summary.sinks.is_empty())
        {
            return self.apply_summary(n, &callee, &summary, &positional, &keywords);
        }
        if is_source_call(&callee) {
            let mut t = vec![Taint::new(
                Kind::Untrusted,
                l,
                format!("`{callee}(…)` (outside data)"),
            )];
            merge(&mut t, all);
            return t;
        }
        // Anything else: what went in comes out (`str(x)`, `x.strip()`, `json.loads(x)`).
        let mut out = recv_taint;
        merge(&mut out, all);
        out
    }

    fn record_guard(&mut self, n: Node<'_>, args: Option<Node<'_>>) {
        let src = self.src;
        let mut scanned = BTreeSet::new();
        let mut first_only = BTreeSet::new();
        if let Some(a) = args {
            let mut c = a.walk();
            for arg in a.named_children(&mut c) {
                let ch = if arg.kind() == "keyword_argument" {
                    let name = arg.child_by_field_name("name").map(|n| text(n, src));
                    match (name, arg.child_by_field_name("value")) {
                        (
                            Some("messages" | "segments" | "text" | "texts" | "prompt" | "json"),
                            Some(v),
                        ) => v,
                        _ => continue,
                    }
                } else {
                    arg
                };
                if let Some(r) = root(ch, src) {
                    if ch.kind() == "subscript" && first_index(ch, src) {
                        first_only.insert(r.clone());
                    }
                    scanned.insert(r);
                } else {
                    names_in(ch, src, &mut scanned, 0);
                }
            }
        }
        let l = line(n);
        // Scanned after a model call already read the same value.
        // (A model call before it that read the value, or something built from it.)
        let feeds_model = !self.prompt_names.is_disjoint(&scanned);
        if let Some(mc) = self
            .model_calls
            .iter()
            .find(|mc| mc.line < l && (!mc.names.is_disjoint(&scanned) || feeds_model))
        {
            let what = scanned.iter().cloned().collect::<Vec<_>>().join(", ");
            let msg = format!(
                "`{what}` is scanned on line {l}, after the model call on line {} already read it",
                mc.line
            );
            let path = vec![
                Step {
                    line: mc.line,
                    note: "model call".into(),
                },
                Step {
                    line: l,
                    note: "guard scan".into(),
                },
            ];
            self.finding(RuleId::RL002, n, msg, path);
        }
        let used = self.in_condition;
        self.guards.push(Guard {
            line: l,
            scanned: scanned.clone(),
            first_only,
            decision: None,
            used,
        });
        if used {
            for s in scanned {
                self.clear(&s);
            }
        }
    }

    fn model_call(
        &mut self,
        n: Node<'_>,
        callee: &str,
        args: Option<Node<'_>>,
        all: &[Taint],
    ) -> Vec<Taint> {
        let src = self.src;
        let l = line(n);
        let mut names = BTreeSet::new();
        if let Some(a) = args {
            names_in(a, src, &mut names, 0);
        }
        let client = callee.split('.').next().unwrap_or("").to_string();
        let guarded = self.is_guarded_client(&client);
        // Only the first message was scanned, and the whole list is sent.
        let partial: Vec<(usize, String)> = self
            .guards
            .iter()
            .filter(|g| g.line < l)
            .flat_map(|g| g.first_only.iter().map(move |r| (g.line, r.clone())))
            .filter(|(_, r)| names.contains(r))
            .collect();
        for (gl, r) in partial {
            let msg = format!(
                "only the first element of `{r}` was scanned (line {gl}); the model call sends all of it"
            );
            let path = vec![
                Step {
                    line: gl,
                    note: format!("guard scans `{r}[0]`"),
                },
                Step {
                    line: l,
                    note: format!("`{callee}` sends `{r}`"),
                },
            ];
            self.finding(RuleId::RL002, n, msg, path);
        }
        for t in all {
            match t.kind {
                Kind::Untrusted if !guarded => {
                    let path = t.path_to(l, format!("sent to the model by `{callee}`"));
                    let origin = t.origin();
                    self.finding(
                        RuleId::RL001,
                        n,
                        format!("{origin} reaches the model call `{callee}` without a guard scan"),
                        path,
                    );
                }
                Kind::Param(i) if !guarded => {
                    let steps = t.path_to(l, format!("sent to the model by `{callee}`"));
                    self.summary.sinks.push((i, RuleId::RL001, steps));
                }
                Kind::Secret => {
                    let path = t.path_to(l, format!("sent to the model by `{callee}`"));
                    let origin = t.origin();
                    self.finding(
                        RuleId::RL006,
                        n,
                        format!("{origin} is formatted into the prompt of `{callee}`"),
                        path,
                    );
                }
                _ => {}
            }
        }
        self.model_calls.push(ModelCall { line: l, names });
        vec![Taint::new(
            Kind::ModelOut,
            l,
            format!("the answer of `{callee}`"),
        )]
    }

    fn sink_check(
        &mut self,
        n: Node<'_>,
        callee: &str,
        what: &str,
        positional: &[(Node<'_>, Vec<Taint>)],
        all: &[Taint],
    ) {
        let l = line(n);
        // SQL, commands and paths: only the first argument (the query text, the command, the
        // path) counts: query parameters passed apart are what the fix asks for.
        let first_only =
            what.contains("SQL") || callee.starts_with("subprocess.") || callee == "open";
        let relevant: Vec<Taint> = if first_only {
            positional
                .first()
                .map(|(_, t)| t.clone())
                .unwrap_or_default()
        } else {
            all.to_vec()
        };
        for t in relevant {
            match t.kind {
                Kind::ModelOut => {
                    let path = t.path_to(l, format!("`{callee}` {what}"));
                    let origin = t.origin();
                    self.finding(
                        RuleId::RL004,
                        n,
                        format!("{origin} reaches `{callee}`, which {what}"),
                        path,
                    );
                }
                Kind::Param(i) => {
                    let steps = t.path_to(l, format!("`{callee}` {what}"));
                    self.summary.sinks.push((i, RuleId::RL004, steps));
                }
                _ => {}
            }
        }
    }

    fn log_check_args(
        &mut self,
        n: Node<'_>,
        callee: &str,
        positional: &[(Node<'_>, Vec<Taint>)],
        keywords: &[(String, Node<'_>, Vec<Taint>)],
    ) {
        let mut taints = Vec::new();
        let mut prompt_name = None;
        for (a, t) in positional {
            merge(&mut taints, t.iter().cloned());
            let mut names = BTreeSet::new();
            names_unsanitized(*a, self.src, &mut names, 0);
            if let Some(p) = names.intersection(&self.prompt_names).next() {
                prompt_name.get_or_insert_with(|| p.clone());
            }
        }
        for (k, _, t) in keywords {
            if k == "extra" {
                merge(&mut taints, t.iter().cloned());
            }
        }
        let l = line(n);
        if let Some(t) = taints.iter().find(|t| t.kind == Kind::ModelOut) {
            let path = t.path_to(l, format!("written by `{callee}`"));
            let origin = t.origin();
            self.finding(
                RuleId::RL003,
                n,
                format!("{origin} is written to a log by `{callee}`"),
                path,
            );
        } else if let Some(p) = prompt_name {
            let path = vec![Step {
                line: l,
                note: format!("`{p}`, part of a prompt, written by `{callee}`"),
            }];
            self.finding(
                RuleId::RL003,
                n,
                format!(
                    "`{p}` is sent to a model in this function and written to a log by `{callee}`"
                ),
                path,
            );
        }
    }

    /// `raise X(f"...{answer}")`.
    fn log_check(&mut self, n: Node<'_>, taints: &[Taint], what: &str) {
        if let Some(t) = taints.iter().find(|t| t.kind == Kind::ModelOut) {
            let l = line(n);
            let path = t.path_to(l, format!("put into {what}"));
            let origin = t.origin();
            self.finding(
                RuleId::RL003,
                n,
                format!("{origin} is put into {what}"),
                path,
            );
        }
    }

    /// `HANDLERS[name](**args)` / `getattr(mod, name)(**args)` with model-chosen arguments,
    /// and no `check_tool_call` before it in this function.
    fn tool_dispatch_check(&mut self, n: Node<'_>, func: Option<Node<'_>>, all: &[Taint]) {
        let Some(f) = func else { return };
        let dynamic = f.kind() == "subscript"
            || (f.kind() == "call"
                && f.child_by_field_name("function")
                    .is_some_and(|g| text(g, self.src) == "getattr"));
        if !dynamic || self.tool_checked {
            return;
        }
        if let Some(t) = all.iter().find(|t| t.kind == Kind::ModelOut) {
            let l = line(n);
            let path = t.path_to(l, "a tool runs with these arguments".into());
            self.finding(
                RuleId::RL005,
                n,
                "a tool call chosen by the model runs without `check_tool_call`".into(),
                path,
            );
        }
    }

    fn summary_of(&self, callee: &str) -> Option<Summary> {
        if let Some(m) = callee.strip_prefix("self.")
            && let Some(class) = &self.class
        {
            return self.module.summaries.get(&format!("{class}.{m}")).cloned();
        }
        self.module
            .summaries
            .get(callee)
            .or_else(|| self.module.imported.get(callee))
            .cloned()
    }

    fn apply_summary(
        &mut self,
        n: Node<'_>,
        callee: &str,
        s: &Summary,
        positional: &[(Node<'_>, Vec<Taint>)],
        keywords: &[(String, Node<'_>, Vec<Taint>)],
    ) -> Vec<Taint> {
        let l = line(n);
        let arg = |i: usize| {
            positional
                .get(i)
                .map(|(_, t)| t.clone())
                .or_else(|| {
                    let name = s.names.get(i)?;
                    keywords
                        .iter()
                        .find(|(k, _, _)| k == name)
                        .map(|(_, _, t)| t.clone())
                })
                .unwrap_or_default()
        };
        // Sinks inside the callee reached through an argument.
        for (i, rule, inner) in &s.sinks {
            for t in arg(*i) {
                let hit = match rule {
                    RuleId::RL001 => t.kind == Kind::Untrusted,
                    RuleId::RL004 => t.kind == Kind::ModelOut,
                    _ => false,
                };
                if hit {
                    let mut path = t.path_to(l, format!("passed to `{callee}`"));
                    path.extend(inner.iter().skip(1).cloned());
                    let origin = t.origin();
                    let last = inner.last().map_or(String::new(), |s| s.note.clone());
                    self.finding(
                        *rule,
                        n,
                        format!("{origin} is passed to `{callee}`, where it is {last}"),
                        path,
                    );
                } else if let Kind::Param(j) = t.kind {
                    let mut steps = t.path_to(l, format!("passed to `{callee}`"));
                    steps.extend(inner.iter().skip(1).cloned());
                    self.summary.sinks.push((j, *rule, steps));
                }
            }
        }
        let mut out = Vec::new();
        for r in &s.returns {
            match r.kind {
                Kind::Param(i) => {
                    if s.guards.contains(&i) {
                        continue;
                    }
                    for t in arg(i) {
                        merge(&mut out, [t.then(l, format!("through `{callee}`"))]);
                    }
                }
                _ => merge(&mut out, [r.then(l, format!("returned by `{callee}`"))]),
            }
        }
        out
    }

    /// End of the function: guards whose decision nothing read, on a value that a model
    /// call then reads (a scan whose decision is only logged or measured protects nothing,
    /// but guards nothing either: not a finding).
    fn finish(&mut self) {
        let unread: Vec<(usize, String, usize)> =
            self.guards
                .iter()
                .filter(|g| !g.used)
                .filter_map(|g| {
                    let feeds = !self.prompt_names.is_disjoint(&g.scanned);
                    let mc = self.model_calls.iter().find(|mc| {
                        mc.line > g.line && (!mc.names.is_disjoint(&g.scanned) || feeds)
                    })?;
                    Some((
                        g.line,
                        g.scanned.iter().cloned().collect::<Vec<_>>().join(", "),
                        mc.line,
                    ))
                })
                .collect();
        for (l, what, ml) in unread {
            self.findings.push(Finding {
                rule: RuleId::RL002,
                line: l,
                column: 1,
                message: format!(
                    "the guard's decision on `{what}` is never read, and the model call on line \
                     {ml} sends it anyway"
                ),
                path: vec![
                    Step {
                        line: l,
                        note: "guard scan, decision dropped".into(),
                    },
                    Step {
                        line: ml,
                        note: "model call".into(),
                    },
                ],
            });
        }
    }
}

/// `x[0]` or `x[0]["content"]`.
fn first_index(n: Node<'_>, src: &[u8]) -> bool {
    let mut cur = n;
    loop {
        let Some(v) = cur.child_by_field_name("value") else {
            return false;
        };
        if v.kind() != "subscript" {
            return cur
                .child_by_field_name("subscript")
                .is_some_and(|i| text(i, src) == "0");
        }
        cur = v;
    }
}
