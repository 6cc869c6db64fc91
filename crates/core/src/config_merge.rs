//! The merge behind `extends`: a partial configuration over a complete one.

use toml::{Table, Value};

/// The array of tables whose entries are matched by `kind` instead of replaced whole.
const LAYERS: &str = "layers";

/// Merges `over` into `base`: tables key by key, `layers` entries by `kind`, everything else
/// replaced. `Err` names what cannot be merged.
pub(crate) fn merge_config(base: &mut Table, over: Table) -> Result<(), String> {
    for (key, value) in over {
        if key == LAYERS {
            let Value::Array(layers) = value else {
                return Err("`layers` must be an array of tables ([[layers]])".into());
            };
            merge_layers(base, layers)?;
            continue;
        }
        merge_value(base, key, value);
    }
    Ok(())
}

/// Tables merge recursively; any other value replaces what was there.
fn merge_value(base: &mut Table, key: String, value: Value) {
    match (base.get_mut(&key), value) {
        (Some(Value::Table(b)), Value::Table(o)) => {
            for (k, v) in o {
                merge_value(b, k, v);
            }
        }
        (_, v) => {
            base.insert(key, v);
        }
    }
}

/// Each entry of `over` goes into the one base layer of its `kind`, or is added at the end.
fn merge_layers(base: &mut Table, over: Vec<Value>) -> Result<(), String> {
    let layers = match base
        .entry(LAYERS)
        .or_insert_with(|| Value::Array(Vec::new()))
    {
        Value::Array(a) => a,
        _ => return Err("the base configuration's `layers` is not an array".into()),
    };
    for (i, entry) in over.into_iter().enumerate() {
        let Value::Table(entry) = entry else {
            return Err(format!("layers[{i}] must be a table"));
        };
        let Some(kind) = entry.get("kind").and_then(Value::as_str).map(str::to_owned) else {
            return Err(format!(
                "layers[{i}] needs a `kind`: the base layer it changes, or a new layer"
            ));
        };
        let same: Vec<usize> = layers
            .iter()
            .enumerate()
            .filter(|(_, l)| l.get("kind").and_then(Value::as_str) == Some(kind.as_str()))
            .map(|(j, _)| j)
            .collect();
        match same[..] {
            [] => layers.push(Value::Table(entry)),
            [j] => {
                if let Some(Value::Table(target)) = layers.get_mut(j) {
                    for (k, v) in entry {
                        merge_value(target, k, v);
                    }
                }
            }
            _ => {
                return Err(format!(
                    "layers[{i}]: the base configuration has {} `{kind}` layers; write the \
                     whole configuration instead of extending it",
                    same.len()
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(src: &str) -> Table {
        toml::from_str(src).unwrap_or_default()
    }

    #[test]
    fn tables_merge_key_by_key_and_layers_by_kind() {
        let mut base = table(
            "version = 1\n[policy]\nfail_mode = \"closed\"\nlayer_timeout_ms = 2000\n\
             [[layers]]\nkind = \"rules\"\n[[layers]]\nkind = \"linear\"\nambiguous = [0.4, 0.7]\n",
        );
        let over = table(
            "[policy]\nfail_mode = \"open\"\n[[layers]]\nkind = \"linear\"\nthreshold = 0.95\n\
             [[layers]]\nkind = \"judge\"\n",
        );
        assert_eq!(merge_config(&mut base, over), Ok(()));
        let want = table(
            "version = 1\n[policy]\nfail_mode = \"open\"\nlayer_timeout_ms = 2000\n\
             [[layers]]\nkind = \"rules\"\n[[layers]]\nkind = \"linear\"\nambiguous = [0.4, 0.7]\n\
             threshold = 0.95\n[[layers]]\nkind = \"judge\"\n",
        );
        assert_eq!(base, want);
    }

    #[test]
    fn a_layer_without_kind_or_with_an_ambiguous_kind_is_an_error() {
        let mut base = table("[[layers]]\nkind = \"rules\"\n[[layers]]\nkind = \"rules\"\n");
        let e = merge_config(&mut base.clone(), table("[[layers]]\nthreshold = 1.0\n"));
        assert!(e.is_err_and(|e| e.contains("needs a `kind`")));
        let e = merge_config(&mut base, table("[[layers]]\nkind = \"rules\"\n"));
        assert!(e.is_err_and(|e| e.contains("2 `rules` layers")));
    }
}
