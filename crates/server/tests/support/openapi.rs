//! A small JSON-schema checker for the subset `openapi.json` uses (type, enum, minimum,
//! required, properties with `additionalProperties: false`, items, `$ref`), shared by the
//! API and proxy tests: response bodies must match the schema the document declares.

use serde_json::Value;

/// Checks `v` against `schema`, resolving `$ref`s in `doc`; the error names the path.
pub fn validate(doc: &Value, schema: &Value, v: &Value, at: &str) -> Result<(), String> {
    let mut schema = schema;
    while let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let ptr = r.trim_start_matches('#');
        schema = doc
            .pointer(ptr)
            .ok_or_else(|| format!("{at}: dangling $ref {r}"))?;
    }
    if let Some(t) = schema.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            _ => true,
        };
        if !ok {
            return Err(format!("{at}: expected {t}, got {v}"));
        }
    }
    if let Some(e) = schema.get("enum").and_then(Value::as_array)
        && !e.contains(v)
    {
        return Err(format!("{at}: {v} not in {e:?}"));
    }
    if let Some(min) = schema.get("minimum").and_then(Value::as_i64)
        && v.as_i64().is_some_and(|x| x < min)
    {
        return Err(format!("{at}: {v} < {min}"));
    }
    for r in schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let r = r.as_str().unwrap_or_default();
        if v.get(r).is_none() {
            return Err(format!("{at}: missing required {r:?}"));
        }
    }
    if let (Some(props), Some(obj)) = (
        schema.get("properties").and_then(Value::as_object),
        v.as_object(),
    ) {
        for (k, val) in obj {
            match props.get(k) {
                Some(s) => validate(doc, s, val, &format!("{at}.{k}"))?,
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    return Err(format!("{at}: unexpected property {k:?}"));
                }
                None => {}
            }
        }
    }
    if let (Some(items), Some(arr)) = (schema.get("items"), v.as_array()) {
        for (i, x) in arr.iter().enumerate() {
            validate(doc, items, x, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// Panics unless `body` matches the JSON schema `openapi.json` declares for `method path`
/// answering `status`.
pub fn check_against_doc(method: &str, path: &str, status: u16, body: &Value) {
    let doc: Value = serde_json::from_str(rampart_server::OPENAPI_JSON).expect("openapi.json");
    let schema = &doc["paths"][path][method.to_lowercase()]["responses"][status.to_string()]["content"]
        ["application/json"]["schema"];
    assert!(
        !schema.is_null(),
        "{method} {path} {status} has no JSON schema in openapi.json"
    );
    if let Err(e) = validate(&doc, schema, body, "$") {
        panic!("{method} {path} {status}: response does not match openapi.json: {e}\n{body}");
    }
}
