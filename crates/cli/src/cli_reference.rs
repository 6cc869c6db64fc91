//! `docs/cli.md`, the command-line reference, generated from the clap definitions: every
//! command and subcommand with its long help. A test keeps the committed file current;
//! `RAMPART_BLESS_DOCS=1 cargo test -p rampart-cli cli_reference` rewrites it.

use clap::CommandFactory;

/// The reference as Markdown: a contents list, then one section per command (depth-first,
/// in declaration order) with its `--help` text.
pub fn render() -> String {
    let mut root = crate::Cli::command();
    root.build();
    let mut sections = Vec::new();
    collect(&root, &mut Vec::new(), &mut sections);
    let mut out = String::from(
        "# `rampart` command-line reference\n\n\
         Generated from the command definitions (`crates/cli/src/cli_reference.rs`); do not \
         edit by hand. Regenerate with\n\
         `RAMPART_BLESS_DOCS=1 cargo test -p rampart-cli cli_reference`; a test fails when \
         this file is out of date.\n\n",
    );
    for (path, _) in &sections {
        let depth = path.len().saturating_sub(1);
        out.push_str(&format!(
            "{}- [`{}`](#{})\n",
            "  ".repeat(depth),
            path.join(" "),
            anchor(path)
        ));
    }
    for (path, help) in &sections {
        out.push_str(&format!(
            "\n## `{}`\n\n```text\n{}\n```\n",
            path.join(" "),
            help.trim_end()
        ));
    }
    out
}

/// Every command under `cmd` (itself first) with its long help, skipping hidden ones and
/// clap's own `help` subcommand.
fn collect(cmd: &clap::Command, path: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    path.push(cmd.get_name().to_string());
    let mut c = cmd.clone();
    out.push((path.clone(), c.render_long_help().to_string()));
    for sub in cmd.get_subcommands() {
        if sub.is_hide_set() || sub.get_name() == "help" {
            continue;
        }
        collect(sub, path, out);
    }
    path.pop();
}

/// The GitHub anchor of a `## \`rampart a b\`` heading.
fn anchor(path: &[String]) -> String {
    path.join("-").to_lowercase()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The committed reference is what the command definitions say today.
    #[test]
    fn cli_reference_is_current() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/cli.md");
        let want = super::render();
        if std::env::var_os("RAMPART_BLESS_DOCS").is_some() {
            std::fs::write(&path, &want).expect("writes docs/cli.md");
            return;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            have == want,
            "docs/cli.md is out of date: regenerate it with \
             `RAMPART_BLESS_DOCS=1 cargo test -p rampart-cli cli_reference`"
        );
    }
}
