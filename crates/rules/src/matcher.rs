//! Compiling packs into an immutable [`Matcher`], and scanning normalized text with it.
//!
//! Compile once, scan many: [`MatcherBuilder::build`] folds every literal the way the
//! normalizer folds text, and builds two Aho-Corasick automata (folded views / cased views). Each regex contributes its
//! *anchors* (literal prefixes every match starts with, from `regex-syntax`) to the same
//! automaton. A scan is one automaton pass per view; a regex runs only on views where one of
//! its anchors occurred (regexes without usable anchors run on every view of their family).

use crate::anchors::AnchorPlan;
use crate::error::CompileError;
use crate::plans::{Compile, Plans, RegexPlan};
use crate::schema::{Rule, RuleMatch, RulePack};
use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use rampart_core::Location;
use rampart_normalize::{Normalized, View, ViewKind, fold_pattern};
use regex_automata::meta::Regex as MetaRegex;
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::{Anchored, Input};
use regex_syntax::hir::Hir;
use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::{Arc, OnceLock};

/// Default compiled-size limit for one regex (bytes of compiled program).
pub const DEFAULT_REGEX_SIZE_LIMIT: usize = 1 << 20;
/// Default cap on hits reported per rule per scanned input.
pub const DEFAULT_MAX_HITS_PER_RULE: usize = 16;

/// Collects packs and limits, then builds a [`Matcher`].
#[derive(Debug, Clone)]
pub struct MatcherBuilder {
    packs: Vec<RulePack>,
    regex_size_limit: usize,
    max_hits_per_rule: usize,
    raw_gate: bool,
    anchors: bool,
    plans: Plans,
    compile: Compile,
}

impl Default for MatcherBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl MatcherBuilder {
    /// An empty builder with default limits.
    pub fn new() -> Self {
        Self {
            packs: Vec::new(),
            regex_size_limit: DEFAULT_REGEX_SIZE_LIMIT,
            max_hits_per_rule: DEFAULT_MAX_HITS_PER_RULE,
            raw_gate: true,
            anchors: true,
            plans: Plans::default(),
            compile: Compile::AtBuild,
        }
    }

    /// Plans computed ahead for some regexes ([`Plans`]): with [`Compile::FirstUse`],
    /// a regex whose exact pattern has one is neither parsed nor compiled by `build`.
    pub fn plans(mut self, plans: Plans) -> Self {
        self.plans.extend(plans);
        self
    }

    /// When the regexes that have a plan compile (default [`Compile::AtBuild`]). Deferring
    /// needs the default anchors, raw-view gates and size limit (the plans assume them).
    pub fn compile(mut self, when: Compile) -> Self {
        self.compile = when;
        self
    }

    /// Whether regexes run only where their anchors occur (default true). Off, every regex
    /// searches every view of its family: slower, the same rules hit (a differential test
    /// checks it).
    pub fn anchors(mut self, yes: bool) -> Self {
        self.anchors = yes;
        self
    }

    /// Whether to skip the raw view when the folded view proves it cannot match (default
    /// true; the result is the same either way, see `Matcher::scan`).
    pub fn raw_gate(mut self, yes: bool) -> Self {
        self.raw_gate = yes;
        self
    }

    /// Adds a pack. Rule IDs must be unique across all packs.
    pub fn add_pack(mut self, pack: RulePack) -> Self {
        self.packs.push(pack);
        self
    }

    /// Sets the compiled-size limit for each regex.
    pub fn regex_size_limit(mut self, bytes: usize) -> Self {
        self.regex_size_limit = bytes;
        self
    }

    /// Sets the cap on hits reported per rule per input.
    pub fn max_hits_per_rule(mut self, n: usize) -> Self {
        self.max_hits_per_rule = n.max(1);
        self
    }

    /// Compiles everything. Reports every error found, not just the first.
    ///
    /// Start-up runs in phases: the rules are gathered and sorted; each regex is parsed
    /// (in parallel) into what the automata need, its anchor plan and raw-view gates;
    /// literals, keywords and anchors fill the two literal tables; the cased rules get
    /// their raw-view gates; then the two automata and every regex NFA, all independent,
    /// are built in parallel (see `run_jobs`). Regex compilation is most of the start-up
    /// time.
    pub fn build(self) -> Result<Matcher, Vec<CompileError>> {
        let (rules, mut errors) = gather_rules(self.packs);
        let deferring = self.compile == Compile::FirstUse
            && self.anchors
            && self.raw_gate
            && self.regex_size_limit == DEFAULT_REGEX_SIZE_LIMIT;
        let plans = deferring.then_some(&self.plans);
        let prepared = prepare_regexes(&rules, self.anchors, self.raw_gate, plans);
        let mut index = Index::default();
        index.add_rules(&rules, prepared, &mut errors);
        if !errors.is_empty() {
            return Err(errors);
        }
        let gates = RawGates::new(&rules, self.raw_gate, &mut index);
        let (folded, cased) = build_engines(index, &rules, self.regex_size_limit, self.compile)?;
        Ok(Matcher {
            folded,
            cased,
            rules,
            gated: gates.gated,
            gate_of_rule: gates.gate_of_rule,
            gate_masks: gates.gate_masks,
            max_hits_per_rule: self.max_hits_per_rule,
            regex_size_limit: self.regex_size_limit,
        })
    }
}

/// The rules of all packs with their pack's name, sorted by ID so that output never
/// depends on pack order, and an error for every repeated ID (its rule is left out).
fn gather_rules(packs: Vec<RulePack>) -> (Vec<CompiledRule>, Vec<CompileError>) {
    let mut errors = Vec::new();
    let mut rules: Vec<CompiledRule> = Vec::new();
    let mut first_seen: HashMap<String, Location> = HashMap::new();
    for pack in packs {
        for rule in pack.rules {
            if let Some(first) = first_seen.get(&rule.id) {
                errors.push(CompileError::DuplicateId {
                    location: rule.location.clone(),
                    rule_id: rule.id.clone(),
                    first: first.clone(),
                });
                continue;
            }
            first_seen.insert(rule.id.clone(), rule.location.clone());
            rules.push(CompiledRule {
                pack: pack.name.clone(),
                rule,
            });
        }
    }
    rules.sort_by(|a, b| a.rule.id.cmp(&b.rule.id));
    (rules, errors)
}

/// Phase one, in parallel: every regex rule's [`PreparedRegex`], in rule order.
fn prepare_regexes(
    rules: &[CompiledRule],
    anchors: bool,
    raw_gate: bool,
    plans: Option<&Plans>,
) -> Vec<Result<PreparedRegex, String>> {
    let jobs: Vec<Job<'_, Result<PreparedRegex, String>>> = rules
        .iter()
        .filter_map(|cr| match &cr.rule.matcher {
            RuleMatch::Regex { pattern } => {
                let cs = cr.rule.case_sensitive;
                let job: Job<'_, _> = match plans.and_then(|p| p.get(pattern, cs)) {
                    Some(plan) => {
                        Box::new(move || Ok(PreparedRegex::from_plan(None, plan.clone())))
                    }
                    None => Box::new(move || prepare_regex(pattern, cs, anchors, raw_gate)),
                };
                Some(job)
            }
            _ => None,
        })
        .collect();
    run_jobs(jobs)
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("regex compilation panicked".to_string())))
        .collect()
}

/// What the automata and the regex engines are built from: the literal table of each
/// family of views and the regexes waiting for their NFA.
#[derive(Default)]
struct Index {
    /// Literals, keywords and anchors searched in the folded views.
    folded: LiteralTable,
    /// Those searched in the cased views (case-sensitive rules).
    cased: LiteralTable,
    /// The regexes, in rule order.
    pending: Vec<PendingRegex>,
    /// The raw-view gate groups of the cased regexes, by rule index.
    regex_raw_gates: HashMap<usize, Vec<Vec<String>>>,
}

impl Index {
    /// The literal table of the cased or the folded family.
    fn table(&mut self, cased: bool) -> &mut LiteralTable {
        if cased {
            &mut self.cased
        } else {
            &mut self.folded
        }
    }

    /// Adds every rule: literals and keywords as they are matched, regexes with their
    /// anchors (`prepared` holds the regex rules' phase-one results, in rule order).
    fn add_rules(
        &mut self,
        rules: &[CompiledRule],
        prepared: Vec<Result<PreparedRegex, String>>,
        errors: &mut Vec<CompileError>,
    ) {
        let mut prepared = prepared.into_iter();
        for (idx, cr) in rules.iter().enumerate() {
            let rule = &cr.rule;
            if !matches!(rule.matcher, RuleMatch::Regex { .. }) {
                self.add_literals(idx, rule, errors);
                continue;
            }
            let Some(result) = prepared.next() else {
                continue;
            };
            match result {
                Ok(prep) => self.add_regex(idx, rule.case_sensitive, prep),
                Err(message) => errors.push(CompileError::Regex {
                    location: rule.location.clone(),
                    rule_id: rule.id.clone(),
                    message,
                }),
            }
        }
    }

    /// A literal rule's patterns or a keyword set's keywords, in their matched form.
    fn add_literals(&mut self, idx: usize, rule: &Rule, errors: &mut Vec<CompileError>) {
        // A keyword set tells its keywords apart; a literal rule's alternatives are one.
        let keyword_set = matches!(rule.matcher, RuleMatch::KeywordSet { .. });
        let table = self.table(rule.case_sensitive);
        for (k, (written, text)) in rule.matched_literals().enumerate() {
            if text.is_empty() {
                errors.push(CompileError::EmptyPattern {
                    location: rule.location.clone(),
                    rule_id: rule.id.clone(),
                    pattern: written.to_string(),
                });
                continue;
            }
            table.add(text, idx, if keyword_set { k } else { 0 });
        }
    }

    /// A regex rule: its anchors into its family's table, itself into `pending`.
    fn add_regex(&mut self, idx: usize, cased: bool, prep: PreparedRegex) {
        // The regex's index in its engine, counted over this family's regexes in rule
        // order (as `pending` is filled).
        let slot = self.pending.iter().filter(|p| p.cased == cased).count();
        let groups = &prep.plan.groups;
        let table = self.table(cased);
        for (g, group) in groups.iter().enumerate() {
            for a in group {
                table.add_entry(
                    a.clone(),
                    LitEntry {
                        rule: idx,
                        keyword: slot,
                        anchor: true,
                        group: g as u8,
                        gate: false,
                    },
                );
            }
        }
        if cased {
            self.regex_raw_gates.insert(idx, prep.raw_gates);
        }
        self.pending.push(PendingRegex {
            rule: idx,
            cased,
            hir: prep.hir,
            anchored: !groups.is_empty(),
            all_groups: (1u8 << groups.len()) - 1,
            prefix: prep.plan.prefix,
            reach: prep.max_len.unwrap_or(UNBOUNDED_REACH),
        });
    }
}

/// Raw-view gates: every occurrence of a cased-family rule in the raw text leaves its
/// folded form in the folded view (folding keeps printable ASCII, lower-cases it and
/// collapses whitespace the same way in pattern and text). So each cased rule gets gate
/// groups, in folded terms, of which the folded view must show one literal each for the
/// rule to be able to match the raw view: its literals or keywords (one group), or for a
/// regex the anchor groups of the regex taken case-insensitively with whitespace as one
/// space (`anchors::raw_gate_groups`). The raw view is scanned only when some cased rule's
/// gates all occurred, and then only for those rules. A rule without gates (non-ASCII
/// literals, a regex without usable groups) turns gating off.
struct RawGates {
    /// Whether the raw view is gated at all.
    gated: bool,
    /// For each rule, its gate (cased rules, when gated).
    gate_of_rule: Vec<Option<usize>>,
    /// For each gate, the mask of all its groups.
    gate_masks: Vec<u8>,
}

impl RawGates {
    /// The gates of the cased rules (when `enabled`); their literals go into the folded
    /// table.
    fn new(rules: &[CompiledRule], enabled: bool, index: &mut Index) -> RawGates {
        let mut raw_gates: Vec<(usize, Vec<Vec<String>>)> = Vec::new();
        let mut gated = enabled;
        for (idx, cr) in rules.iter().enumerate() {
            if !gated || !cr.rule.case_sensitive {
                continue;
            }
            let groups = match &cr.rule.matcher {
                RuleMatch::Regex { .. } => index.regex_raw_gates.remove(&idx).unwrap_or_default(),
                m => gate_group(m.literals()).into_iter().collect(),
            };
            if groups.is_empty() || groups.len() > 8 {
                gated = false;
            }
            raw_gates.push((idx, groups));
        }
        let mut gates = RawGates {
            gated,
            gate_of_rule: vec![None; rules.len()],
            gate_masks: Vec::new(),
        };
        if !gated {
            return gates;
        }
        for (gi, (idx, groups)) in raw_gates.iter().enumerate() {
            gates.gate_of_rule[*idx] = Some(gi);
            gates.gate_masks.push(((1u16 << groups.len()) - 1) as u8);
            for (g, group) in groups.iter().enumerate() {
                for lit in group {
                    index.folded.add_entry(
                        lit.clone(),
                        LitEntry {
                            rule: gi,
                            keyword: 0,
                            anchor: false,
                            group: g as u8,
                            gate: true,
                        },
                    );
                }
            }
        }
        gates
    }
}

/// Phase two: the two automata and every regex NFA, independent of each other and built
/// in parallel (the folded automaton, the largest job, first). Returns the folded and the
/// cased engine.
fn build_engines(
    index: Index,
    rules: &[CompiledRule],
    size_limit: usize,
    compile: Compile,
) -> Result<(Engine, Engine), Vec<CompileError>> {
    // Compiling on first use, the automata start as contiguous NFAs (a tenth of the build
    // time) and their DFAs are built in the background; see `Engine::automaton`.
    let kind = match compile {
        Compile::AtBuild => AhoCorasickKind::DFA,
        Compile::FirstUse => AhoCorasickKind::ContiguousNFA,
    };
    let Index {
        folded: folded_lits,
        cased: cased_lits,
        pending,
        ..
    } = index;
    let mut jobs: Vec<Job<'_, Built>> = Vec::with_capacity(pending.len() + 2);
    jobs.push(Box::new(|| {
        Built::Automaton(build_automaton(&folded_lits.patterns, false, kind))
    }));
    jobs.push(Box::new(|| {
        Built::Automaton(build_automaton(&cased_lits.patterns, true, kind))
    }));
    for hir in pending.iter().filter_map(|p| p.hir.as_ref()) {
        jobs.push(Box::new(move || {
            Built::Regex(compile_regex(hir, size_limit))
        }));
    }
    let mut built = run_jobs(jobs).into_iter();
    let mut automaton = || match built.next() {
        Some(Some(Built::Automaton(a))) => a,
        _ => Err(CompileError::Automaton("builder thread failed".into())),
    };
    let (folded_ac, cased_ac) = (automaton(), automaton());
    let mut errors = Vec::new();
    let mut folded_res: Vec<CompiledRegex> = Vec::new();
    let mut cased_res: Vec<CompiledRegex> = Vec::new();
    for p in pending {
        let rule = &rules[p.rule].rule;
        let re = if p.hir.is_some() {
            let re = match built.next() {
                Some(Some(Built::Regex(r))) => r,
                _ => Err("builder thread failed".to_string()),
            };
            if let Some(e) = regex_error(rule, re.as_ref().map_err(String::as_str)) {
                errors.push(e);
                continue;
            }
            OnceLock::from(re)
        } else {
            // Planned ahead: it compiled when its plan was written, and compiles on first
            // use (`Matcher::engine`).
            OnceLock::new()
        };
        let res = if p.cased {
            &mut cased_res
        } else {
            &mut folded_res
        };
        res.push(CompiledRegex {
            rule: p.rule,
            re,
            anchored: p.anchored,
            all_groups: p.all_groups,
            prefix: p.prefix,
            reach: p.reach,
        });
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    match (folded_ac, cased_ac) {
        (Ok(f), Ok(c)) => Ok((
            Engine::new(f, folded_lits, folded_res, false, kind),
            Engine::new(c, cased_lits, cased_res, true, kind),
        )),
        (f, c) => Err(f.err().into_iter().chain(c.err()).collect()),
    }
}

/// The build error of a regex rule's compiled engine: it did not compile, or it matches
/// the empty string (it would hit everywhere).
fn regex_error(rule: &Rule, re: Result<&MetaRegex, &str>) -> Option<CompileError> {
    match re {
        Ok(re) if re.is_match("") => Some(CompileError::EmptyMatch {
            location: rule.location.clone(),
            rule_id: rule.id.clone(),
        }),
        Ok(_) => None,
        Err(message) => Some(CompileError::Regex {
            location: rule.location.clone(),
            rule_id: rule.id.clone(),
            message: message.to_string(),
        }),
    }
}

/// A rule as compiled into a matcher, with the pack it came from.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    /// The pack name.
    pub pack: String,
    /// The rule.
    pub rule: Rule,
}

#[derive(Debug, Clone, Copy)]
struct LitEntry {
    rule: usize,
    /// Keyword index for keyword sets; 0 for literals; the engine's regex index for anchors.
    keyword: usize,
    /// A regex anchor: a literal of which every match of the regex contains one of its
    /// group. It is not a hit by itself.
    anchor: bool,
    /// Which anchor group of the regex (0 places search windows; all must occur).
    group: u8,
    /// A raw-view gate literal (in the folded automaton): `rule` is the gate index and
    /// `group` the gate group (see `RawGates`).
    gate: bool,
}

/// The folded forms of a cased rule's literals, as one raw-view gate group, or `None` when
/// one of them is not printable ASCII or folds to nothing.
fn gate_group(literals: &[String]) -> Option<Vec<String>> {
    let mut out = Vec::new();
    for p in literals {
        if !p
            .bytes()
            .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
        {
            return None;
        }
        // A combining mark after `<`, `=` or `>` composes with it (`≠`).
        let f = fold_pattern(p)
            .trim_end_matches(['<', '=', '>'])
            .to_string();
        if f.is_empty() {
            return None;
        }
        out.push(f);
    }
    out.sort();
    out.dedup();
    Some(out)
}

#[derive(Debug, Default)]
struct LiteralTable {
    /// Distinct pattern strings, in insertion order.
    patterns: Vec<String>,
    /// For each distinct pattern, every (rule, keyword, variant) that uses it.
    entries: Vec<Vec<LitEntry>>,
    index: HashMap<String, usize>,
}

impl LiteralTable {
    fn add(&mut self, text: String, rule: usize, keyword: usize) {
        self.add_entry(
            text,
            LitEntry {
                rule,
                keyword,
                anchor: false,
                group: 0,
                gate: false,
            },
        );
    }

    fn add_entry(&mut self, text: String, entry: LitEntry) {
        if let Some(&i) = self.index.get(&text) {
            self.entries[i].push(entry);
        } else {
            self.index.insert(text.clone(), self.patterns.len());
            self.patterns.push(text);
            self.entries.push(vec![entry]);
        }
    }
}

/// How far from an anchor a regex with unbounded repetition (`\s+`) is searched, in bytes
/// on each side. Matches longer than this around their anchor are not found: a documented
/// bound on the work one regex may do per anchor.
pub const UNBOUNDED_REACH: usize = 1024;

/// A compiled regex rule.
#[derive(Debug)]
struct CompiledRegex {
    rule: usize,
    /// The engine: compiled by `build`, or on first use when planned ahead (an error then
    /// is the compiler's message; see [`ScanHits::failed`]).
    re: OnceLock<Result<MetaRegex, String>>,
    /// Whether the regex has anchors in the automaton (else it runs on whole views).
    anchored: bool,
    /// Bit mask of its anchor groups; the regex runs only where all of them occurred.
    all_groups: u8,
    /// Longest possible match in bytes (or [`UNBOUNDED_REACH`]): a match containing an
    /// anchor lies within this distance of it.
    reach: usize,
    /// Whether the primary anchors start every match: the regex then runs as an anchored
    /// search at each occurrence instead of over windows around them.
    prefix: bool,
}

/// A job of [`run_jobs`].
type Job<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

/// Runs `jobs` on up to as many threads as there are cores (at most 8), each thread taking
/// the next job as soon as it is free, so one long job does not hold up the others (a
/// fixed split per thread did). Results come back in job order; a job whose thread
/// panicked yields `None`. Written by hand because the rules crate has no thread pool and
/// start-up needs only this.
fn run_jobs<T: Send>(jobs: Vec<Job<'_, T>>) -> Vec<Option<T>> {
    let n = jobs.len();
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(8)
        .min(n);
    if threads < 2 {
        return jobs.into_iter().map(|j| Some(j())).collect();
    }
    let queue = std::sync::Mutex::new(jobs.into_iter().enumerate());
    let mut out: Vec<Option<T>> = (0..n).map(|_| None).collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let next = match queue.lock() {
                            Ok(mut q) => q.next(),
                            Err(_) => None,
                        };
                        let Some((i, job)) = next else { break };
                        done.push((i, job()));
                    }
                    done
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().unwrap_or_default() {
                out[i] = Some(r);
            }
        }
    });
    out
}

/// What phase two builds.
enum Built {
    Automaton(Result<Option<AhoCorasick>, CompileError>),
    Regex(Result<MetaRegex, String>),
}

/// A regex rule after phase one: what it compiles from and how it is searched.
struct PreparedRegex {
    /// Parsed with the rule's case option: the NFA is compiled from it. `None` when it is
    /// compiled on first use from its pattern.
    hir: Option<Hir>,
    /// Longest match in bytes, if bounded.
    max_len: Option<usize>,
    plan: AnchorPlan,
    /// Raw-view gate groups (cased rules, when raw gating is on).
    raw_gates: Vec<Vec<String>>,
}

impl PreparedRegex {
    /// A regex prepared from its plan; without `hir` it compiles on first use.
    fn from_plan(hir: Option<Hir>, plan: RegexPlan) -> PreparedRegex {
        PreparedRegex {
            hir,
            max_len: plan.max_len,
            plan: AnchorPlan {
                groups: plan.groups,
                prefix: plan.prefix,
            },
            raw_gates: plan.raw_gates,
        }
    }
}

/// A regex rule waiting for its NFA (phase two).
struct PendingRegex {
    rule: usize,
    cased: bool,
    /// `None`: compiled on first use.
    hir: Option<Hir>,
    anchored: bool,
    all_groups: u8,
    prefix: bool,
    reach: usize,
}

/// Phase one for one regex: parse it (once as compiled, once as the anchor functions read
/// it), and derive its reach, its search plan and its raw-view gates.
fn prepare_regex(
    pattern: &str,
    case_sensitive: bool,
    anchors: bool,
    raw_gate: bool,
) -> Result<PreparedRegex, String> {
    let (hir, plan) = crate::plans::compute(pattern, case_sensitive, anchors, raw_gate)?;
    Ok(PreparedRegex::from_plan(Some(hir), plan))
}

/// Compiles one rule regex from its HIR: linear-time engines only, size-limited.
fn compile_regex(hir: &Hir, size_limit: usize) -> Result<MetaRegex, String> {
    MetaRegex::builder()
        .configure(
            MetaRegex::config()
                // Anchors already decide where a regex runs (small windows): a literal
                // prefilter per regex would cost start-up time and win little.
                .auto_prefilter(false)
                // Only where a match is: no capture groups, and none of the engines that
                // serve them (one-pass DFA, backtracker), a sixth of compile time.
                .which_captures(WhichCaptures::Implicit)
                .onepass(false)
                .backtrack(false)
                .nfa_size_limit(Some(size_limit))
                // The lazy DFA's state cache per regex and thread: the bounded repetitions
                // over Unicode classes (`[^)\s]{1,200}`) make many states, and at 2 MiB
                // the caches were cleared and rebuilt all the time (the matcher took 0.79–0.96
                // s on the ripgrep corpus, 0.65–0.70 s at 8 MiB). Memory grows only with
                // states actually built (peak RSS in docs/performance.md).
                .hybrid_cache_capacity(8 * size_limit),
        )
        .build_from_hir(hir)
        .map_err(|e| e.to_string())
}

/// The automaton of one family's literals, or `None` when it has none.
fn build_automaton(
    patterns: &[String],
    cased: bool,
    kind: AhoCorasickKind,
) -> Result<Option<AhoCorasick>, CompileError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    // The cased automaton matches ASCII case-insensitively so that lower-cased regex
    // anchors find "System:" too; case-sensitive literals are verified byte for byte.
    AhoCorasick::builder()
        .match_kind(MatchKind::Standard)
        // A full DFA: a few MB for the default pack, and the fastest overlapping search
        // (twice a contiguous NFA's speed here, but eight times its build time: ~40 ms).
        .kind(Some(kind))
        .ascii_case_insensitive(cased)
        .build(patterns)
        .map(Some)
        .map_err(|e| CompileError::Automaton(e.to_string()))
}

/// One family of views (folded or cased): an automaton (literals, keywords and regex
/// anchors) and the regexes.
#[derive(Debug)]
struct Engine {
    /// All literals (standard semantics, overlapping search), as built by `build`.
    ac: Option<AhoCorasick>,
    /// When `ac` is a contiguous NFA: the same patterns as a DFA, set by a background
    /// thread started at build. Both report the same matches with the same pattern IDs
    /// (standard semantics, overlapping), so a scan may use either.
    dfa: Arc<OnceLock<AhoCorasick>>,
    entries: Vec<Vec<LitEntry>>,
    patterns: Vec<String>,
    regexes: Vec<CompiledRegex>,
    /// Whether literal hits must be verified byte for byte (the cased family).
    verify_case: bool,
}

impl Engine {
    fn new(
        ac: Option<AhoCorasick>,
        lits: LiteralTable,
        regexes: Vec<CompiledRegex>,
        verify_case: bool,
        kind: AhoCorasickKind,
    ) -> Engine {
        let engine = Engine {
            ac,
            dfa: Arc::new(OnceLock::new()),
            entries: lits.entries,
            patterns: lits.patterns,
            regexes,
            verify_case,
        };
        if kind != AhoCorasickKind::DFA && engine.ac.is_some() {
            engine.build_dfa_in_background();
        }
        engine
    }

    /// Starts a detached thread that builds the DFA. The process may exit before it ends
    /// (a one-shot command that was done sooner); scans use the NFA until it is set.
    fn build_dfa_in_background(&self) {
        // The cased family is the one that verifies case (its automaton ignores ASCII case).
        let (patterns, cased, cell) = (self.patterns.clone(), self.verify_case, self.dfa.clone());
        let spawned = std::thread::Builder::new()
            .name("rampart-ac-dfa".into())
            .spawn(move || {
                if let Ok(Some(dfa)) = build_automaton(&patterns, cased, AhoCorasickKind::DFA) {
                    let _ = cell.set(dfa);
                }
            });
        // No thread (resource limits): the NFA serves, which is correct, only slower.
        drop(spawned);
    }

    /// The automaton scans use: the DFA once built, else the one `build` made.
    fn automaton(&self) -> Option<&AhoCorasick> {
        self.dfa.get().or(self.ac.as_ref())
    }

    /// Builds the DFA now if the background thread has not set it yet.
    fn finish_dfa(&self) {
        if self.dfa.get().is_none()
            && let Some(ac) = &self.ac
            && ac.kind() != AhoCorasickKind::DFA
            && let Ok(Some(dfa)) =
                build_automaton(&self.patterns, self.verify_case, AhoCorasickKind::DFA)
        {
            let _ = self.dfa.set(dfa);
        }
    }
}

/// One rule hit in one view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleHit {
    /// Index of the rule in [`Matcher::rules`].
    pub rule: usize,
    /// Index of the view in [`Normalized::views`].
    pub view: usize,
    /// Byte span in the view's text.
    pub view_span: Range<usize>,
    /// Byte span in the original text.
    pub span: Range<usize>,
}

/// The result of scanning one normalized input.
#[derive(Debug, Clone, Default)]
pub struct ScanHits {
    /// Hits, sorted by rule ID then original span; one per (rule, span), from the earliest view.
    pub hits: Vec<RuleHit>,
    /// How many hits were dropped by the per-rule cap.
    pub dropped: usize,
    /// Rules (by index) whose regex, planned ahead and compiled on first use, did not
    /// compile: they were not searched. Never happens with the embedded packs, whose plan
    /// files list only patterns that compiled; a layer fails rather than miss them.
    pub failed: Vec<usize>,
}

/// An immutable, `Send + Sync` compiled rule set. Build once, share in an `Arc`, scan many.
#[derive(Debug)]
pub struct Matcher {
    rules: Vec<CompiledRule>,
    /// Whether the raw view is scanned only for cased rules whose gates all occurred in
    /// the folded view.
    gated: bool,
    /// For each rule, its raw-view gate (cased rules, when gated).
    gate_of_rule: Vec<Option<usize>>,
    /// For each raw-view gate, the mask of all its groups.
    gate_masks: Vec<u8>,
    folded: Engine,
    cased: Engine,
    max_hits_per_rule: usize,
    /// For regexes compiled on first use.
    regex_size_limit: usize,
}

impl Matcher {
    /// The compiled rules, sorted by ID. [`RuleHit::rule`] indexes this slice.
    pub fn rules(&self) -> &[CompiledRule] {
        &self.rules
    }

    /// The rule with this ID.
    pub fn rule_by_id(&self, id: &str) -> Option<&CompiledRule> {
        self.rules
            .binary_search_by(|r| r.rule.id.as_str().cmp(id))
            .ok()
            .map(|i| &self.rules[i])
    }

    /// Every distinct literal the automata search for (folded, then cased; variants
    /// included). Used by benchmarks that compare against `rg -F -f`.
    pub fn literal_patterns(&self) -> impl Iterator<Item = &str> {
        self.folded
            .patterns
            .iter()
            .chain(self.cased.patterns.iter())
            .map(String::as_str)
    }

    /// Scans every view of a normalized input.
    pub fn scan(&self, normalized: &Normalized) -> ScanHits {
        let mut raw_hits: Vec<RuleHit> = Vec::new();
        // The folded view (index 1) first: it tells which cased rules can match the raw
        // view (index 0).
        let mut gates_seen: Vec<u8> = vec![0; self.gate_masks.len()];
        let mut raw_rules: Option<Vec<bool>> = None;
        let mut failed: Vec<usize> = Vec::new();
        let order = [1, 0].into_iter().chain(2..normalized.views.len());
        for vi in order {
            let Some(view) = normalized.views.get(vi) else {
                continue;
            };
            let engine = if view.kind.is_cased() {
                &self.cased
            } else {
                &self.folded
            };
            let mut allowed: Option<&[bool]> = None;
            if view.kind == ViewKind::Raw && self.gated {
                let open: Vec<bool> = self
                    .gate_of_rule
                    .iter()
                    .map(|g| g.is_some_and(|g| gates_seen[g] == self.gate_masks[g]))
                    .collect();
                if !open.contains(&true) {
                    continue;
                }
                allowed = Some(raw_rules.insert(open));
            }
            let gates = if view.kind == ViewKind::Folded {
                Some(gates_seen.as_mut_slice())
            } else {
                None
            };
            failed.extend(self.scan_view(engine, vi, view, allowed, gates, &mut raw_hits));
        }
        // Sort by rule, original span, then view order; keep the first view per (rule, span).
        raw_hits.sort_by(|a, b| {
            (a.rule, a.span.start, a.span.end, a.view).cmp(&(
                b.rule,
                b.span.start,
                b.span.end,
                b.view,
            ))
        });
        raw_hits.dedup_by(|b, a| a.rule == b.rule && a.span == b.span);
        failed.sort_unstable();
        failed.dedup();
        let mut out = ScanHits {
            failed,
            ..ScanHits::default()
        };
        let mut per_rule: BTreeMap<usize, usize> = BTreeMap::new();
        for hit in raw_hits {
            let n = per_rule.entry(hit.rule).or_insert(0);
            if *n < self.max_hits_per_rule {
                *n += 1;
                out.hits.push(hit);
            } else {
                out.dropped += 1;
            }
        }
        out
    }

    /// Scans one view, only for the `allowed` rules (by rule index) if given; records in
    /// `gates` (if given) which groups of each raw-view gate occurred. Returns the rules
    /// whose regex failed to compile on first use (see [`ScanHits::failed`]).
    fn scan_view(
        &self,
        engine: &Engine,
        vi: usize,
        view: &View,
        allowed: Option<&[bool]>,
        gates: Option<&mut [u8]>,
        out: &mut Vec<RuleHit>,
    ) -> Vec<usize> {
        let text = view.text.as_str();
        if text.is_empty() {
            return Vec::new();
        }
        let vs = ViewScan {
            engine,
            vi,
            view,
            text,
            allowed,
        };
        // Per rule, keyword occurrences (keyword index, view span) for keyword sets.
        let mut keyword_hits: BTreeMap<usize, Vec<(usize, Range<usize>)>> = BTreeMap::new();
        // Per-view work space, reused across scans on this thread (no allocation per view).
        let mut sc = SCRATCH.with(Cell::take);
        sc.reset(engine);
        self.literal_pass(&vs, gates, &mut sc, &mut keyword_hits, out);
        self.keyword_set_hits(&vs, keyword_hits, out);
        let failed = self.regex_pass(&vs, &mut sc, out);
        sc.clear_windows();
        SCRATCH.with(|c| c.set(sc));
        failed
    }

    /// The automaton pass over the view: raw-view gate groups go to `gates`, regex anchors
    /// to the scratch (search windows, groups seen), keyword-set occurrences to
    /// `keyword_hits`, and literal hits to `out`.
    fn literal_pass(
        &self,
        vs: &ViewScan<'_>,
        mut gates: Option<&mut [u8]>,
        sc: &mut Scratch,
        keyword_hits: &mut BTreeMap<usize, Vec<(usize, Range<usize>)>>,
        out: &mut Vec<RuleHit>,
    ) {
        let (engine, text) = (vs.engine, vs.text);
        let Some(ac) = engine.automaton() else {
            return;
        };
        for m in ac.find_overlapping_iter(text) {
            let pid = m.pattern().as_usize();
            let exact = !engine.verify_case
                || engine.patterns.get(pid).map(String::as_bytes)
                    == text.as_bytes().get(m.start()..m.end());
            for e in &engine.entries[pid] {
                if e.gate {
                    if let Some(mask) = gates.as_deref_mut().and_then(|g| g.get_mut(e.rule)) {
                        *mask |= 1 << e.group;
                    }
                    continue;
                }
                if !vs.is_allowed(e.rule) {
                    continue;
                }
                if e.anchor {
                    sc.note_anchor(engine, e, m.start(), m.end(), text.len());
                    continue;
                }
                if !exact {
                    continue;
                }
                let rule = &self.rules[e.rule].rule;
                if rule.token_boundary && !boundary_ok(text, m.start(), m.end()) {
                    continue;
                }
                if let RuleMatch::KeywordSet { .. } = rule.matcher {
                    let list = keyword_hits.entry(e.rule).or_default();
                    // Bound the work on adversarial repetition.
                    if list.len() < 4096 {
                        list.push((e.keyword, m.start()..m.end()));
                    }
                    continue;
                }
                out.push(vs.hit(e.rule, m.start()..m.end()));
            }
        }
    }

    /// A hit for each keyword set with enough distinct keywords close together.
    fn keyword_set_hits(
        &self,
        vs: &ViewScan<'_>,
        keyword_hits: BTreeMap<usize, Vec<(usize, Range<usize>)>>,
        out: &mut Vec<RuleHit>,
    ) {
        for (rule_idx, occurrences) in keyword_hits {
            let RuleMatch::KeywordSet {
                min_distinct,
                window,
                ..
            } = self.rules[rule_idx].rule.matcher
            else {
                continue;
            };
            if let Some(span) = keyword_window(&occurrences, min_distinct, window) {
                out.push(vs.hit(rule_idx, span));
            }
        }
    }

    /// Runs each allowed regex whose anchor groups all occurred: over the whole view, at its
    /// anchors (prefix regexes) or over the merged windows around them.
    fn regex_pass(
        &self,
        vs: &ViewScan<'_>,
        sc: &mut Scratch,
        out: &mut Vec<RuleHit>,
    ) -> Vec<usize> {
        let (text, vi, view) = (vs.text, vs.vi, vs.view);
        let mut failed = Vec::new();
        let Scratch {
            windows: regex_windows,
            whole,
            seen: groups_seen,
            merged,
            ..
        } = sc;
        for (i, cr) in vs.engine.regexes.iter().enumerate() {
            if (cr.anchored && groups_seen[i] != cr.all_groups) || !vs.is_allowed(cr.rule) {
                continue;
            }
            if !whole[i] && regex_windows[i].is_empty() {
                continue;
            }
            // Only now, with somewhere to search: a regex planned ahead compiles here.
            let Ok(re) = self.engine(cr) else {
                failed.push(cr.rule);
                continue;
            };
            merged.clear();
            let rule = &self.rules[cr.rule].rule;
            if whole[i] {
                merged.push(0..text.len());
            } else if cr.prefix {
                self.run_anchored(cr, re, vi, view, &mut regex_windows[i], out);
                continue;
            } else {
                merge_windows(text, &mut regex_windows[i], merged);
            }
            self.run_windows(vs, cr, re, rule, merged, out);
        }
        failed
    }

    /// The engine of a regex, compiling it now if it was planned ahead and this is its
    /// first use (once per matcher; threads that need it meanwhile wait for it).
    fn engine<'c>(&self, cr: &'c CompiledRegex) -> Result<&'c MetaRegex, &'c str> {
        cr.re
            .get_or_init(|| {
                let rule = &self.rules[cr.rule].rule;
                match &rule.matcher {
                    RuleMatch::Regex { pattern } => {
                        crate::plans::parse_cased(pattern, rule.case_sensitive)
                            .and_then(|hir| compile_regex(&hir, self.regex_size_limit))
                    }
                    _ => Err(format!("rule {} is not a regex rule", rule.id)),
                }
            })
            .as_ref()
            .map_err(String::as_str)
    }

    /// How many regexes are compiled, of how many: all of them unless some were planned
    /// ahead and have not been needed yet ([`Compile::FirstUse`]).
    pub fn regexes_compiled(&self) -> (usize, usize) {
        let all = self.folded.regexes.iter().chain(&self.cased.regexes);
        let total = all.clone().count();
        (all.filter(|cr| cr.re.get().is_some()).count(), total)
    }

    /// Compiles every regex not compiled yet (those planned ahead, see [`Compile`]), so
    /// that no scan compiles: a server does this before it reports ready. Returns an error
    /// per regex that does not compile or matches the empty string.
    pub fn compile_all(&self) -> Vec<CompileError> {
        self.folded.finish_dfa();
        self.cased.finish_dfa();
        self.folded
            .regexes
            .iter()
            .chain(&self.cased.regexes)
            .filter_map(|cr| regex_error(&self.rules[cr.rule].rule, self.engine(cr)))
            .collect()
    }

    /// Runs a regex over merged search windows, up to the per-rule cap.
    fn run_windows(
        &self,
        vs: &ViewScan<'_>,
        cr: &CompiledRegex,
        re: &MetaRegex,
        rule: &Rule,
        merged: &[Range<usize>],
        out: &mut Vec<RuleHit>,
    ) {
        let text = vs.text;
        let mut found = 0;
        let mut last_end = 0;
        for w in merged.iter().cloned() {
            let input = Input::new(text).range(w.start.max(last_end)..w.end);
            for m in re.find_iter(input) {
                last_end = last_end.max(m.end());
                if rule.token_boundary && !boundary_ok(text, m.start(), m.end()) {
                    continue;
                }
                out.push(vs.hit(cr.rule, m.start()..m.end()));
                found += 1;
                if found >= self.max_hits_per_rule {
                    return;
                }
            }
        }
    }
}

/// The view a scan step works on, with what every step reads.
struct ViewScan<'v> {
    engine: &'v Engine,
    /// Index of the view in [`Normalized::views`].
    vi: usize,
    view: &'v View,
    text: &'v str,
    /// The rules scanned for (by rule index); `None`: all.
    allowed: Option<&'v [bool]>,
}

impl ViewScan<'_> {
    fn is_allowed(&self, rule: usize) -> bool {
        self.allowed
            .is_none_or(|a| a.get(rule).copied().unwrap_or(false))
    }

    /// A hit of `rule` at `span` of the view.
    fn hit(&self, rule: usize, span: Range<usize>) -> RuleHit {
        RuleHit {
            rule,
            view: self.vi,
            span: self.view.to_original(span.clone()),
            view_span: span,
        }
    }
}

impl Matcher {
    /// Runs a prefix-anchored regex: an anchored search at each anchor occurrence (in
    /// order, skipping those inside an earlier match), which finds the same matches as a
    /// leftmost-first scan since every match starts at an occurrence.
    fn run_anchored(
        &self,
        cr: &CompiledRegex,
        re: &MetaRegex,
        vi: usize,
        view: &View,
        starts: &mut [Range<usize>],
        out: &mut Vec<RuleHit>,
    ) {
        let text = view.text.as_str();
        let rule = &self.rules[cr.rule].rule;
        starts.sort_unstable_by_key(|r| r.start);
        let mut last_end = 0;
        let mut found = 0;
        let mut prev = None;
        for w in starts.iter() {
            if w.start < last_end || prev == Some(w.start) {
                continue;
            }
            prev = Some(w.start);
            let mut end = w.end;
            while end < text.len() && !text.is_char_boundary(end) {
                end += 1;
            }
            let input = Input::new(text).range(w.start..end).anchored(Anchored::Yes);
            let Some(m) = re.search(&input) else {
                continue;
            };
            last_end = m.end();
            if rule.token_boundary && !boundary_ok(text, m.start(), m.end()) {
                continue;
            }
            out.push(RuleHit {
                rule: cr.rule,
                view: vi,
                view_span: m.start()..m.end(),
                span: view.to_original(m.start()..m.end()),
            });
            found += 1;
            if found >= self.max_hits_per_rule {
                break;
            }
        }
    }
}

/// Reusable per-view work space of [`Matcher::scan`] (one per thread).
#[derive(Default)]
struct Scratch {
    /// Per regex, search windows around its primary anchors.
    windows: Vec<Vec<Range<usize>>>,
    /// Per regex, whether it searches the whole view.
    whole: Vec<bool>,
    /// Per regex, the anchor groups seen.
    seen: Vec<u8>,
    /// The merged windows of the regex being run.
    merged: Vec<Range<usize>>,
    /// Regexes with windows to clear after the view.
    touched: Vec<usize>,
}

impl Scratch {
    /// Readies the work space for a view of `engine`: no windows, every unanchored regex
    /// searching the whole view, no anchor groups seen.
    fn reset(&mut self, engine: &Engine) {
        let n = engine.regexes.len();
        if self.windows.len() < n {
            self.windows.resize_with(n, Vec::new);
        }
        // Per regex: whether to search the whole view, else the windows around anchors.
        self.whole.clear();
        self.whole
            .extend(engine.regexes.iter().map(|r| !r.anchored));
        self.seen.clear();
        self.seen.resize(n, 0);
    }

    /// Records an occurrence at `start..end` (in a view of `len` bytes) of anchor `e`: its
    /// group is seen, and a primary anchor adds a search window for its regex (or, past
    /// [`MAX_ANCHOR_WINDOWS`], makes it search the whole view).
    fn note_anchor(&mut self, engine: &Engine, e: &LitEntry, start: usize, end: usize, len: usize) {
        if let Some(mask) = self.seen.get_mut(e.keyword) {
            *mask |= 1 << e.group;
        }
        if e.group != 0 {
            return;
        }
        if let (Some(windows), Some(cr), Some(false)) = (
            self.windows.get_mut(e.keyword),
            engine.regexes.get(e.keyword),
            self.whole.get(e.keyword).copied(),
        ) {
            if windows.len() >= MAX_ANCHOR_WINDOWS {
                windows.clear();
                self.whole[e.keyword] = true;
            } else {
                if windows.is_empty() {
                    self.touched.push(e.keyword);
                }
                let from = if cr.prefix {
                    start
                } else {
                    end.saturating_sub(cr.reach)
                };
                windows.push(from..start.saturating_add(cr.reach).min(len));
            }
        }
    }

    /// Clears the windows of the regexes that had some, for the next view.
    fn clear_windows(&mut self) {
        for &i in self.touched.iter() {
            self.windows[i].clear();
        }
        self.touched.clear();
    }
}

thread_local! {
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

/// Most anchor occurrences tracked per regex per view; beyond it the whole view is searched.
const MAX_ANCHOR_WINDOWS: usize = 256;

/// Sorts and merges search windows into `out`, widening them to char boundaries.
fn merge_windows(text: &str, w: &mut [Range<usize>], out: &mut Vec<Range<usize>>) {
    w.sort_by_key(|r| r.start);
    for r in w.iter() {
        let mut r = r.clone();
        while r.start > 0 && !text.is_char_boundary(r.start) {
            r.start -= 1;
        }
        while r.end < text.len() && !text.is_char_boundary(r.end) {
            r.end += 1;
        }
        match out.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => out.push(r),
        }
    }
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Whether `text[start..end]` does not touch a word character on a side where the match
/// itself begins or ends with one (so `system:` needs no right-hand boundary).
fn boundary_ok(text: &str, start: usize, end: usize) -> bool {
    let Some(m) = text.get(start..end) else {
        return false;
    };
    let (Some(first), Some(last)) = (m.chars().next(), m.chars().next_back()) else {
        return false;
    };
    if is_word(first) && text[..start].chars().next_back().is_some_and(is_word) {
        return false;
    }
    if is_word(last) && text[end..].chars().next().is_some_and(is_word) {
        return false;
    }
    true
}

/// The first window of at most `window` bytes holding `min_distinct` different keywords.
fn keyword_window(
    occ: &[(usize, Range<usize>)],
    min_distinct: usize,
    window: usize,
) -> Option<Range<usize>> {
    let mut sorted: Vec<&(usize, Range<usize>)> = occ.iter().collect();
    sorted.sort_by_key(|(_, r)| (r.start, r.end));
    let mut counts: HashMap<usize, usize> = HashMap::new();
    let mut lo = 0;
    for hi in 0..sorted.len() {
        *counts.entry(sorted[hi].0).or_insert(0) += 1;
        while sorted[hi].1.end.saturating_sub(sorted[lo].1.start) > window {
            let k = sorted[lo].0;
            if let Some(c) = counts.get_mut(&k) {
                *c -= 1;
                if *c == 0 {
                    counts.remove(&k);
                }
            }
            lo += 1;
        }
        if counts.len() >= min_distinct {
            let end = sorted[lo..=hi]
                .iter()
                .map(|(_, r)| r.end)
                .max()
                .unwrap_or(0);
            return Some(sorted[lo].1.start..end);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boundary_requires_non_word_neighbours_only_on_word_edges() {
        assert!(boundary_ok("say system: hi", 4, 11));
        assert!(!boundary_ok("mysystem: hi", 2, 9));
        assert!(boundary_ok("system:x", 0, 7));
        assert!(!boundary_ok("ignoreme", 0, 6));
        assert!(boundary_ok("ignore me", 0, 6));
    }

    #[test]
    fn keyword_window_needs_distinct_keywords_close_together() {
        let occ = vec![(0, 0..4), (0, 10..14), (1, 200..204)];
        assert_eq!(keyword_window(&occ, 2, 120), None);
        let occ = vec![(0, 0..4), (1, 100..104)];
        assert_eq!(keyword_window(&occ, 2, 120), Some(0..104));
    }
}
