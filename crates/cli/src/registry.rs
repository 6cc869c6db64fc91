//! The detector factories the `rampart` binary knows: `[[layers]] kind = "…"` in a
//! configuration picks one. Crates that add a layer register their factory here.

use rampart_core::{BuildError, Detector, DetectorFactory, Registry};
use std::path::Path;
use std::sync::Arc;

/// Every factory compiled into the binary.
pub fn registry() -> Registry {
    #[allow(unused_mut)]
    let mut r = Registry::default();
    // One line per layer crate, e.g. `r.register(Box::new(rampart_classify::LinearFactory));`
    r.register(Box::new(rampart_classify::LinearFactory));
    r.register(Box::new(Transformer));
    r.register(Box::new(rampart_judge::JudgeFactory::default()));
    r.register(Box::new(rampart_relational::RelationalFactory));
    r
}

/// The transformer factory, with the binary's knowledge of its built-in models: a layer whose
/// `model_dir` is a built-in model that was never set up fails with the command that sets it
/// up, not only with the missing directory.
#[derive(Debug)]
struct Transformer;

impl DetectorFactory for Transformer {
    fn kind(&self) -> &str {
        rampart_transformer::TransformerFactory.kind()
    }

    fn owasp(&self) -> &'static [rampart_core::Owasp] {
        rampart_transformer::TransformerFactory.owasp()
    }

    fn build(&self, options: &toml::Table) -> Result<Arc<dyn Detector>, BuildError> {
        rampart_transformer::TransformerFactory
            .build(options)
            .map_err(|e| match (e, setup_hint(options)) {
                (BuildError::Layer { kind, message }, Some(hint)) => BuildError::Layer {
                    kind,
                    message: format!("{message}\n{hint}"),
                },
                (e, _) => e,
            })
    }
}

/// What to run when `model_dir` is missing and names a built-in model (`DIR/models/NAME`, as
/// `rampart models setup` writes it).
fn setup_hint(options: &toml::Table) -> Option<String> {
    let dir = Path::new(options.get("model_dir")?.as_str()?);
    if dir.exists() {
        return None;
    }
    let name = dir.file_name()?.to_str()?;
    if !rampart_transformer::builtin::MODELS
        .iter()
        .any(|(n, _)| *n == name)
    {
        return None;
    }
    let models = dir.parent()?;
    if models.file_name()? != "models" {
        return Some(format!(
            "the built-in model {name} is not set up: `rampart models setup` builds it in \
             DATA_DIR/models/{name}; point model_dir there"
        ));
    }
    // `models/NAME` (relative) has the empty path as its parent: the current directory.
    let data_dir = match models.parent()? {
        p if p.as_os_str().is_empty() => Path::new("."),
        p => p,
    };
    // Without a name, `models setup` builds only the default model.
    let named = if name == rampart_transformer::builtin::DEFAULT_MODEL {
        String::new()
    } else {
        format!(" {name}")
    };
    let command = if data_dir == rampart_datasets::default_data_dir() {
        format!("rampart models setup{named}")
    } else {
        format!(
            "rampart models setup{named} --data-dir {}",
            data_dir.display()
        )
    };
    Some(format!(
        "the built-in model {name} is not set up: run `{command}`"
    ))
}

#[cfg(test)]
mod tests {
    use super::setup_hint;

    fn options(model_dir: &str) -> toml::Table {
        let mut t = toml::Table::new();
        t.insert("model_dir".into(), toml::Value::String(model_dir.into()));
        t
    }

    /// Regression (review): a relative `models/NAME` has the empty path as its data
    /// directory, and the hint read "`rampart models setup --data-dir `" with no argument.
    #[test]
    fn relative_models_dir_hint_names_the_current_directory() {
        let hint = setup_hint(&options("models/minilm-injection-v4")).expect("a hint");
        assert!(
            hint.contains("`rampart models setup --data-dir .`"),
            "{hint}"
        );
    }

    /// `models setup` without a name builds only the default model, so the hint for another
    /// built-in model names it.
    #[test]
    fn a_non_default_builtin_model_hint_names_the_model() {
        let hint = setup_hint(&options("models/minilm-injection-v3")).expect("a hint");
        assert!(
            hint.contains("`rampart models setup minilm-injection-v3 --data-dir .`"),
            "{hint}"
        );
    }

    #[test]
    fn a_users_own_model_dir_gets_no_hint() {
        assert_eq!(setup_hint(&options("no-such-dir/my-model")), None);
    }
}
