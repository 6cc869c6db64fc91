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
/// Passes across the project's modules (imported calls this deep are followed).
const PROJECT_ROUNDS: usize = 3;

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
        let Some(tree) = self.parse(src) else {
            return Vec::new();
        };
        self.lint_tree(&tree, src, &BTreeMap::new()).0
    }

    fn parse(&self, src: &str) -> Option<tree_sitter::Tree> {
        let mut parser = Parser::new();
        parser.set_language(&self.language).ok()?;
        parser.parse(src, None)
    }

    /// Lints a parsed module with the summaries it imports; returns its findings and its
    /// own summaries.
    fn lint_tree(
        &self,
        tree: &tree_sitter::Tree,
        src: &str,
        imported: &BTreeMap<String, analyze::Summary>,
    ) -> (Vec<Finding>, BTreeMap<String, analyze::Summary>) {
        let bytes = src.as_bytes();
        let root = tree.root_node();
        // Whether the module talks to a model: read once, used by both passes below.
        let llm_module = imports_any(root, bytes, analyze::LLM_LIBRARIES.as_slice());
        let (mut findings, summaries) = self.analyze_module(root, bytes, llm_module, imported);
        findings.extend(self.tool_findings(root, bytes, llm_module));
        let mut findings = suppress(src, findings);
        findings.retain(|f| !self.config.disable.contains(&f.rule));
        findings.sort_by(|a, b| {
            (a.line, a.column, a.rule, &a.message).cmp(&(b.line, b.column, b.rule, &b.message))
        });
        // One finding per rule and place: a sink that several sources reach is one thing to
        // fix (the first path is shown, the others counted).
        let mut out: Vec<Finding> = Vec::with_capacity(findings.len());
        let mut more: Vec<usize> = Vec::new();
        for f in findings {
            match out
                .iter()
                .position(|o| (o.line, o.column, o.rule) == (f.line, f.column, f.rule))
            {
                Some(i) => more[i] += 1,
                None => {
                    out.push(f);
                    more.push(0);
                }
            }
        }
        for (f, n) in out.iter_mut().zip(more) {
            if n > 0 {
                f.message
                    .push_str(&format!(" (and {n} more source(s) reach the same place)"));
            }
        }
        (out, summaries)
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
        let read: Vec<Result<(PathBuf, String), Skipped>> = files
            .par_iter()
            .map(|f| read_source(f).map(|src| (f.clone(), src)))
            .collect();
        let mut sources = Vec::new();
        for r in read {
            match r {
                Ok(x) => sources.push(x),
                Err(s) => report.skipped.push(s),
            }
        }
        let roots: Vec<PathBuf> = paths.iter().filter(|p| p.is_dir()).cloned().collect();
        let parsed: Vec<Parsed> = sources
            .into_par_iter()
            .filter_map(|(path, src)| {
                let tree = self.parse(&src)?;
                let (module, package) = module_name(&roots, &path);
                let imports = imports_of(tree.root_node(), src.as_bytes(), &package);
                let bases = class_bases(tree.root_node(), src.as_bytes());
                Some(Parsed {
                    path,
                    module,
                    src,
                    tree,
                    imports,
                    bases,
                })
            })
            .collect();
        report.files = parsed.len();
        let results = self.lint_project(&parsed);
        for (p, findings) in parsed.iter().zip(results) {
            if !findings.is_empty() {
                report.results.push(FileFindings {
                    path: p.path.display().to_string(),
                    findings,
                });
            }
        }
        report
    }

    /// Lints parsed modules with each other's summaries: a first pass without imports, then
    /// passes in which each module sees the summaries of the project modules it imports
    /// (chains of calls across files as deep as the passes), reusing a module's result when
    /// it imports nothing of the project.
    fn lint_project(&self, parsed: &[Parsed]) -> Vec<Vec<Finding>> {
        use rayon::prelude::*;
        let empty = BTreeMap::new();
        let mut results: Vec<ModuleResult> = parsed
            .par_iter()
            .map(|p| self.lint_tree(&p.tree, &p.src, &empty))
            .collect();
        // What each module saw last time: a module is analysed again only when it changed.
        let mut seen: Vec<BTreeMap<String, analyze::Summary>> = vec![BTreeMap::new(); parsed.len()];
        let modules: BTreeMap<&str, &Parsed> =
            parsed.iter().map(|p| (p.module.as_str(), p)).collect();
        for _ in 0..PROJECT_ROUNDS {
            let by_module: BTreeMap<&str, &BTreeMap<String, analyze::Summary>> = parsed
                .iter()
                .zip(&results)
                .map(|(p, (_, s))| (p.module.as_str(), s))
                .collect();
            let next: Vec<Option<(BTreeMap<String, analyze::Summary>, ModuleResult)>> = parsed
                .par_iter()
                .zip(&seen)
                .map(|(p, before)| {
                    let imported = imported_summaries(p, &by_module, &modules);
                    if imported == *before {
                        return None;
                    }
                    let r = self.lint_tree(&p.tree, &p.src, &imported);
                    Some((imported, r))
                })
                .collect();
            let mut changed = false;
            for ((slot, before), n) in results.iter_mut().zip(seen.iter_mut()).zip(next) {
                if let Some((imported, n)) = n {
                    *before = imported;
                    if *slot != n {
                        *slot = n;
                        changed = true;
                    }
                }
            }
            if !changed {
                break;
            }
        }
        results.into_iter().map(|(f, _)| f).collect()
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
    /// The module's top level, then its functions: summaries first (rounds), findings last.
    /// `imported`: summaries of the project's other modules, by the name this module calls
    /// them (`run_command`, `DefaultHandler.handle`, `utils.run_command`). Returns the
    /// findings and this module's own summaries.
    fn analyze_module(
        &self,
        root: Node<'_>,
        src: &[u8],
        llm_module: bool,
        imported: &BTreeMap<String, analyze::Summary>,
    ) -> (Vec<Finding>, BTreeMap<String, analyze::Summary>) {
        // Every rule but RL005's tool definitions needs a model call, made here (only
        // modules that import an LLM client library) or inside a function of another module
        // this one imports. A module with neither can still matter to its importers (a
        // helper that runs its parameter in a shell): it gets one summary round.
        let rounds = if llm_module || !imported.is_empty() {
            SUMMARY_ROUNDS
        } else {
            1
        };
        let funcs = functions(root, src);
        let mut module = Module {
            llm_module,
            imported: imported.clone(),
            ..Module::default()
        };
        let mut top = Analyzer::new(src, &module, None);
        top.run_top_level(root);
        let (globals, guarded, top_findings) = (top.globals_out, top.guarded_out, top.findings);
        module.globals = globals;
        module.guarded_clients = guarded;
        let mut stable = false;
        for round in 0..=rounds {
            // The last round reports; it comes early once the summaries stop changing.
            let last = round == rounds || stable;
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
                return (all, module.summaries);
            }
        }
        (top_findings, module.summaries)
    }

    /// RL005: tool definitions the policy does not list (dispatch tables only in a module
    /// that talks to a model, `llm_module`).
    fn tool_findings(&self, root: Node<'_>, src: &[u8], llm_module: bool) -> Vec<Finding> {
        let mut tools: Vec<(String, Node<'_>)> = Vec::new();
        collect_tools(root, src, &mut tools, 0);
        if llm_module {
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
        // Imports are statements: only statement containers are entered (expressions are
        // most of a tree, and walking them was a tenth of the linter's time).
        if !matches!(
            n.kind(),
            "module"
                | "block"
                | "if_statement"
                | "elif_clause"
                | "else_clause"
                | "try_statement"
                | "except_clause"
                | "finally_clause"
                | "with_statement"
                | "function_definition"
                | "class_definition"
                | "decorated_definition"
        ) {
            return false;
        }
        let mut c = n.walk();
        n.named_children(&mut c)
            .any(|ch| walk(ch, src, libs, depth + 1))
    }
    walk(root, src, libs, 0)
}

/// A module's findings and its functions' summaries.
type ModuleResult = (Vec<Finding>, BTreeMap<String, analyze::Summary>);

/// A module read and parsed.
struct Parsed {
    path: PathBuf,
    /// Dotted module name (`sgpt.handlers.default_handler`).
    module: String,
    src: String,
    tree: tree_sitter::Tree,
    imports: Vec<Import>,
    /// Base classes of each class, as written (`Handler` in `class DefaultHandler(Handler)`).
    bases: BTreeMap<String, Vec<String>>,
}

/// `from MODULE import ITEM as LOCAL` (item `None`: `import MODULE as LOCAL`).
#[derive(Debug, Clone)]
struct Import {
    local: String,
    module: String,
    item: Option<String>,
}

fn read_source(f: &Path) -> Result<String, Skipped> {
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
    String::from_utf8(bytes).map_err(|_| skip("not UTF-8".into()))
}

/// The dotted module name of a file under one of the walked folders, and its package.
fn module_name(roots: &[PathBuf], file: &Path) -> (String, String) {
    let rel = roots
        .iter()
        .find_map(|r| file.strip_prefix(r).ok())
        .unwrap_or(file);
    let mut parts: Vec<String> = rel
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect();
    if let Some(last) = parts.last_mut()
        && let Some(stem) = last.strip_suffix(".py")
    {
        *last = stem.to_string();
    }
    let is_init = parts.last().is_some_and(|l| l == "__init__");
    if is_init {
        parts.pop();
    }
    let module = parts.join(".");
    let package = if is_init {
        module.clone()
    } else {
        parts[..parts.len().saturating_sub(1)].join(".")
    };
    (module, package)
}

/// The module's imports, relative ones resolved against its package.
fn imports_of(root: Node<'_>, src: &[u8], package: &str) -> Vec<Import> {
    let mut out = Vec::new();
    let mut c = root.walk();
    for st in root.named_children(&mut c) {
        match st.kind() {
            "import_statement" => {
                let mut c2 = st.walk();
                for n in st.named_children(&mut c2) {
                    let Some((name, alias)) = imported_name(n, src) else {
                        continue;
                    };
                    let local = alias.unwrap_or_else(|| name.clone());
                    out.push(Import {
                        local,
                        module: name,
                        item: None,
                    });
                }
            }
            "import_from_statement" => {
                let Some(m) = st.child_by_field_name("module_name") else {
                    continue;
                };
                let module = resolve_relative(text(m, src), package);
                let mut c2 = st.walk();
                for n in st.children_by_field_name("name", &mut c2) {
                    let Some((name, alias)) = imported_name(n, src) else {
                        continue;
                    };
                    out.push(Import {
                        local: alias.unwrap_or_else(|| name.clone()),
                        module: module.clone(),
                        item: Some(name),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// The name an import names and its alias: `a.b` or `a.b as c`.
fn imported_name(n: Node<'_>, src: &[u8]) -> Option<(String, Option<String>)> {
    match n.kind() {
        "dotted_name" => Some((text(n, src).to_string(), None)),
        "aliased_import" => Some((
            n.child_by_field_name("name")
                .map(|x| text(x, src).to_string())
                .unwrap_or_default(),
            n.child_by_field_name("alias")
                .map(|x| text(x, src).to_string()),
        )),
        _ => None,
    }
}

/// `.utils` in package `sgpt.handlers` is `sgpt.handlers.utils`; `..utils` is `sgpt.utils`.
fn resolve_relative(spec: &str, package: &str) -> String {
    let dots = spec.chars().take_while(|c| *c == '.').count();
    if dots == 0 {
        return spec.to_string();
    }
    let mut base: Vec<&str> = if package.is_empty() {
        Vec::new()
    } else {
        package.split('.').collect()
    };
    for _ in 1..dots {
        base.pop();
    }
    let rest = &spec[dots..];
    if !rest.is_empty() {
        base.push(rest);
    }
    base.join(".")
}

/// The summaries a module sees from the project's other modules, by the names it calls them:
/// `from m import f` → `f`; `from m import C` → `C.method`; `import m as x` → `x.f`. Their
/// steps name the module they happen in.
fn imported_summaries(
    p: &Parsed,
    by_module: &BTreeMap<&str, &BTreeMap<String, analyze::Summary>>,
    modules: &BTreeMap<&str, &Parsed>,
) -> BTreeMap<String, analyze::Summary> {
    let mut out = BTreeMap::new();
    for imp in &p.imports {
        match &imp.item {
            Some(item) => {
                // `from pkg import module` imports a module; else an item of the module.
                let sub = format!("{}.{item}", imp.module);
                if let Some(sums) = by_module.get(sub.as_str()) {
                    for (k, s) in sums.iter().filter(|(_, s)| interesting(s)) {
                        out.insert(format!("{}.{k}", imp.local), tagged(s, &sub));
                    }
                } else {
                    for (k, s) in item_summaries(&imp.module, item, by_module, modules, 0) {
                        let key = if k.is_empty() {
                            imp.local.clone()
                        } else {
                            format!("{}.{k}", imp.local)
                        };
                        out.entry(key).or_insert(s);
                    }
                }
            }
            None => {
                if let Some(sums) = by_module.get(imp.module.as_str()) {
                    for (k, s) in sums.iter().filter(|(_, s)| interesting(s)) {
                        out.insert(format!("{}.{k}", imp.local), tagged(s, &imp.module));
                    }
                }
            }
        }
    }
    out
}

/// A summary that changes what a caller sees beyond an unknown call (which passes its
/// arguments through): a sink inside, a source or model answer returned, a guard.
fn interesting(s: &analyze::Summary) -> bool {
    !s.sinks.is_empty()
        || !s.guards.is_empty()
        || s.returns
            .iter()
            .any(|t| !matches!(t.kind, analyze::Kind::Param(_)))
}

/// The summaries of `item` in `module`: the function itself (key ""), or a class's methods
/// (key "method"), with the methods it inherits from base classes imported into that module
/// (three levels at most).
fn item_summaries(
    module: &str,
    item: &str,
    by_module: &BTreeMap<&str, &BTreeMap<String, analyze::Summary>>,
    modules: &BTreeMap<&str, &Parsed>,
    depth: usize,
) -> BTreeMap<String, analyze::Summary> {
    let mut out = BTreeMap::new();
    if depth > 3 {
        return out;
    }
    if let Some(sums) = by_module.get(module) {
        for (k, s) in sums.iter().filter(|(_, s)| interesting(s)) {
            if k == item {
                out.insert(String::new(), tagged(s, module));
            } else if let Some(rest) = k.strip_prefix(&format!("{item}.")) {
                out.insert(rest.to_string(), tagged(s, module));
            }
        }
    }
    let Some(m) = modules.get(module) else {
        return out;
    };
    for base in m.bases.get(item).into_iter().flatten() {
        // A base defined in the same module, or imported into it.
        let (bm, bi) = match m.imports.iter().find(|i| &i.local == base) {
            Some(Import {
                module: im,
                item: Some(it),
                ..
            }) => (im.clone(), it.clone()),
            _ => (module.to_string(), base.clone()),
        };
        if bm == module && bi == item {
            continue;
        }
        for (k, s) in item_summaries(&bm, &bi, by_module, modules, depth + 1) {
            if !k.is_empty() {
                out.entry(k).or_insert(s);
            }
        }
    }
    out
}

/// Base classes of the module's top-level classes, as written.
fn class_bases(root: Node<'_>, src: &[u8]) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let mut c = root.walk();
    for st in root.named_children(&mut c) {
        let def = if st.kind() == "decorated_definition" {
            st.child_by_field_name("definition")
        } else {
            Some(st)
        };
        let Some(def) = def.filter(|d| d.kind() == "class_definition") else {
            continue;
        };
        let (Some(name), Some(sup)) = (
            def.child_by_field_name("name"),
            def.child_by_field_name("superclasses"),
        ) else {
            continue;
        };
        let mut c2 = sup.walk();
        let bases: Vec<String> = sup
            .named_children(&mut c2)
            .filter_map(|b| dotted(b, src))
            .collect();
        out.insert(text(name, src).to_string(), bases);
    }
    out
}

/// A summary from another module, its steps prefixed with that module's name.
fn tagged(s: &analyze::Summary, module: &str) -> analyze::Summary {
    let tag = |steps: &[Step]| -> Vec<Step> {
        steps
            .iter()
            .map(|st| Step {
                line: st.line,
                note: if st.note.starts_with("in `") {
                    st.note.clone()
                } else {
                    format!("in `{module}`: {}", st.note)
                },
            })
            .collect()
    };
    analyze::Summary {
        params: s.params,
        names: s.names.clone(),
        returns: s
            .returns
            .iter()
            .map(|t| analyze::Taint {
                kind: t.kind,
                steps: tag(&t.steps),
            })
            .collect(),
        sinks: s.sinks.iter().map(|(i, r, st)| (*i, *r, tag(st))).collect(),
        guards: s.guards.clone(),
        returns_value: s.returns_value,
    }
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
                || (web && has_request_param(def, src))
                || has_cli_param(def, src);
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

/// A parameter whose default is `typer.Argument(…)` / `typer.Option(…)` (a typer command,
/// whether decorated or passed to `typer.run`).
fn has_cli_param(def: Node<'_>, src: &[u8]) -> bool {
    let Some(params) = def.child_by_field_name("parameters") else {
        return false;
    };
    let mut c = params.walk();
    params.named_children(&mut c).any(|p| {
        p.child_by_field_name("value")
            .and_then(|v| dotted(v, src))
            .is_some_and(|d| {
                matches!(
                    d.as_str(),
                    "typer.Argument" | "typer.Option" | "Argument" | "Option"
                )
            })
    })
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
