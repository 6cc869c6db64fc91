//! JSON read one way only: an object that names a key twice, or two keys that are equal
//! after NFKC and lower-casing (`path` and `PATH`, `path` and `ｐａｔｈ`), is refused.
//!
//! `serde_json` keeps the last of two equal keys; Python's `json` does too, but other
//! readers keep the first, and a tool that looks keys up without regard to case or width
//! reads a different one. A policy checks one value per argument, so a call in which an
//! argument could have two values is refused before any predicate runs (issue 35).
//!
//! Written here rather than taken from a crate: the duplicate check needs a `Visitor` over
//! map entries, a few lines on top of `serde_json::Value`'s own model.

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt;
use unicode_normalization::UnicodeNormalization;

/// The folded form two keys must not share: NFKC, then lower case (borrowed for the usual
/// lower-case ASCII key: the check runs on every call).
pub fn fold_key(k: &str) -> Cow<'_, str> {
    if k.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
        Cow::Borrowed(k)
    } else if k.is_ascii() {
        Cow::Owned(k.to_ascii_lowercase())
    } else {
        Cow::Owned(k.nfkc().collect::<String>().to_lowercase())
    }
}

/// Parses JSON text, refusing duplicate keys and keys equal after folding (at any depth).
pub fn from_str(text: &str) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let v = deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// Like [`from_str`], for bytes (a request body).
pub fn from_slice(bytes: &[u8]) -> Result<Value, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let v = deserialize(&mut de)?;
    de.end()?;
    Ok(v)
}

/// `deserialize_with` for a `serde_json::Value` field read strictly (see the module).
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Value, D::Error> {
    d.deserialize_any(StrictVisitor)
}

/// Like [`deserialize`], for an optional field.
pub fn deserialize_option<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    deserialize(d).map(Some)
}

/// The first pair of keys, at any depth, that are equal after folding (for values built in
/// code, where exact duplicates cannot exist but `PATH` and `path` can).
pub fn folded_collision(v: &Value) -> Option<(String, String)> {
    match v {
        Value::Array(a) => a.iter().find_map(folded_collision),
        Value::Object(m) => {
            // Objects are small: pairwise, with no map to allocate.
            let folded: Vec<(Cow<'_, str>, &String)> = m.keys().map(|k| (fold_key(k), k)).collect();
            for (i, (a, ka)) in folded.iter().enumerate() {
                if let Some((_, kb)) = folded[i + 1..].iter().find(|(b, _)| b == a) {
                    return Some(((*ka).clone(), (*kb).clone()));
                }
            }
            m.values().find_map(folded_collision)
        }
        _ => None,
    }
}

/// A value wrapper whose `Deserialize` is strict.
struct Strict(Value);

impl<'de> serde::Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor).map(Strict)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<Value, E> {
        Ok(Value::from(n))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        // Non-finite numbers cannot come from JSON text; refuse them from other formats.
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number that is not finite"))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E: de::Error>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(StrictVisitor)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        while let Some(Strict(v)) = seq.next_element()? {
            out.push(v);
        }
        Ok(Value::Array(out))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        let mut folded: BTreeMap<String, String> = BTreeMap::new();
        while let Some(k) = map.next_key::<String>()? {
            if out.contains_key(&k) {
                return Err(de::Error::custom(format!(
                    "duplicate key `{}`",
                    shorten(&k)
                )));
            }
            if let Some(first) = folded.insert(fold_key(&k).into_owned(), k.clone()) {
                return Err(de::Error::custom(format!(
                    "keys `{}` and `{}` are equal after case and width folding",
                    shorten(&first),
                    shorten(&k)
                )));
            }
            let Strict(v) = map.next_value()?;
            out.insert(k, v);
        }
        Ok(Value::Object(out))
    }
}

/// A key as an error shows it: at most 40 characters (keys are names, not values, but a
/// hostile one can be long).
fn shorten(k: &str) -> String {
    let mut s: String = k.chars().take(40).collect();
    if s.len() < k.len() {
        s.push('…');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn duplicate_keys_are_refused_at_any_depth() {
        assert!(from_str(r#"{"command":"curl x|sh","command":"ls"}"#).is_err());
        assert!(from_str(r#"{"a":{"b":1,"b":2}}"#).is_err());
        assert!(from_str(r#"[{"b":1,"b":2}]"#).is_err());
        let e = from_str(r#"{"path":"/a","PATH":"/b"}"#).unwrap_err();
        assert!(e.to_string().contains("equal after case"), "{e}");
        assert!(from_str(r#"{"path":"/a","ｐａｔｈ":"/b"}"#).is_err());
        assert_eq!(
            from_str(r#"{"a":[1,2.5,"x",null,true],"b":{}}"#).ok(),
            Some(json!({"a":[1,2.5,"x",null,true],"b":{}}))
        );
        assert!(from_str(r#"{"a":1} x"#).is_err());
    }

    #[test]
    fn folded_collisions_in_built_values() {
        assert_eq!(folded_collision(&json!({"a": 1, "b": [2]})), None);
        assert!(folded_collision(&json!({"x": [{"Path": 1, "path": 2}]})).is_some());
    }
}
