//! Small lenient readers for platform JSON: ids and counts arrive as numbers on one
//! platform and strings on another.

use serde_json::Value;

/// A string or number field as a string.
pub fn text(v: &Value, key: &str) -> Option<String> {
    match v.get(key)? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A string or number field as a string, empty when absent.
pub fn text_or_empty(v: &Value, key: &str) -> String {
    text(v, key).unwrap_or_default()
}

/// A non-negative integer field given as a number or a numeric string.
pub fn uint(v: &Value, key: &str) -> Option<u64> {
    match v.get(key)? {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// A boolean field given as a bool or "true"/"false".
pub fn boolean(v: &Value, key: &str) -> Option<bool> {
    match v.get(key)? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// The array at `key`, empty when absent or null (platforms omit empty lists).
pub fn array<'a>(v: &'a Value, key: &str) -> &'a [Value] {
    v.get(key)
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

/// Every message-bearing field of an error object joined, for keyword and ban matching.
pub fn joined(v: &Value, keys: &[&str]) -> String {
    keys.iter()
        .filter_map(|k| text(v, k))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The first object named `key` at most `depth` levels down (JD nests `apiResult`).
pub fn find_key<'a>(v: &'a Value, key: &str, depth: usize) -> Option<&'a Value> {
    let obj = v.as_object()?;
    if let Some(found) = obj.get(key) {
        return Some(found);
    }
    if depth == 0 {
        return None;
    }
    obj.values()
        .find_map(|child| find_key(child, key, depth - 1))
}
