//! labelSelector and fieldSelector as the API parses them (k8s.io/apimachinery/pkg/labels and fields): a comma-
//! separated list of requirements that must all hold. Labels: `k=v`, `k==v`, `k!=v`, `k` (exists), `!k` (absent).
//! Fields: `path=v`, `path==v`, `path!=v`, for `metadata.name`, `metadata.namespace` and the fields the kind allows;
//! any other field is refused, as the API does. Set-based label requirements (`in`, `notin`) are not part of this
//! stand-in: they are answered 400, so a client that depends on them fails loudly instead of matching wrongly.

use serde_json::Value;

enum Op {
    Eq(String),
    Ne(String),
    Exists,
    Absent,
}

pub struct Selector(Vec<(String, Op)>);

fn parse(text: &str, allow_existence: bool) -> Result<Selector, String> {
    let mut out = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let requirement = if let Some((k, v)) = part.split_once("!=") {
            (k.trim().to_string(), Op::Ne(v.trim().to_string()))
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            (k.trim().to_string(), Op::Eq(v.trim().to_string()))
        } else if part.contains(' ') || part.contains('(') {
            return Err(format!(
                "unable to parse requirement: {part:?} (set-based requirements are not part of the stand-in)"
            ));
        } else if !allow_existence {
            return Err(format!("invalid selector: '{part}'; can't understand '{part}'"));
        } else if let Some(k) = part.strip_prefix('!') {
            (k.to_string(), Op::Absent)
        } else {
            (part.to_string(), Op::Exists)
        };
        if requirement.0.is_empty() {
            return Err(format!("invalid selector: {part:?}"));
        }
        out.push(requirement);
    }
    Ok(Selector(out))
}

impl Selector {
    pub fn labels(text: &str) -> Result<Selector, String> {
        parse(text, true)
    }

    /// A field selector; `allowed` lists the fields the kind supports besides metadata.name and metadata.namespace.
    pub fn fields(text: &str, resource: &str, allowed: &[String]) -> Result<Selector, String> {
        let s = parse(text, false)?;
        for (field, _) in &s.0 {
            if field != "metadata.name" && field != "metadata.namespace" && !allowed.contains(field) {
                return Err(format!("field label not supported: {field} (for {resource})"));
            }
        }
        Ok(s)
    }

    pub fn matches_labels(&self, object: &Value) -> bool {
        let labels = &object["metadata"]["labels"];
        self.0.iter().all(|(k, op)| {
            let v = labels.get(k).and_then(Value::as_str);
            match op {
                Op::Eq(want) => v == Some(want),
                Op::Ne(want) => v != Some(want),
                Op::Exists => v.is_some(),
                Op::Absent => v.is_none(),
            }
        })
    }

    pub fn matches_fields(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, op)| {
            let v = path.split('.').fold(object, |o, k| &o[k]);
            let v = match v {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            match op {
                Op::Eq(want) => &v == want,
                Op::Ne(want) => &v != want,
                Op::Exists | Op::Absent => false,
            }
        })
    }
}
