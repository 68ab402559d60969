//! The three patch types the API accepts from clients that do not use server-side apply:
//! JSON merge patch (RFC 7386), strategic merge patch (for the cases clients send: maps merge, `null` deletes, lists
//! of objects with a merge key — `name`, `type` for conditions, `address`… — merge by that key, other lists are
//! replaced, `$patch: delete` in a keyed list entry removes it) and JSON patch (RFC 6902: add, remove, replace, test,
//! copy, move).

use serde_json::Value;

pub fn merge(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let map = target.as_object_mut().expect("just made an object");
    for (k, v) in patch {
        if v.is_null() {
            map.remove(k);
        } else {
            merge(map.entry(k.clone()).or_insert(Value::Null), v);
        }
    }
}

/// The keys that identify entries of the lists clients patch (the `patchMergeKey` of the Kubernetes types).
const MERGE_KEYS: &[&str] = &["name", "type", "address", "containerPort", "key", "mountPath", "devicePath", "ip"];

pub fn strategic(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let map = target.as_object_mut().expect("just made an object");
    for (k, v) in patch {
        if k.starts_with("$") {
            continue; // directives other than the list `$patch: delete` below are not needed by wmrender's clients
        }
        match v {
            Value::Null => {
                map.remove(k);
            }
            Value::Array(items) => {
                let key = items
                    .iter()
                    .find_map(|i| MERGE_KEYS.iter().find(|mk| i.get(**mk).is_some_and(|v| !v.is_object())))
                    .copied();
                let existing = map.get_mut(k).and_then(Value::as_array_mut);
                match (key, existing) {
                    (Some(mk), Some(list)) => {
                        for item in items {
                            let pos = list.iter().position(|e| e.get(mk) == item.get(mk));
                            let delete = item.get("$patch").and_then(Value::as_str) == Some("delete");
                            match (pos, delete) {
                                (Some(p), true) => {
                                    list.remove(p);
                                }
                                (None, true) => {}
                                (Some(p), false) => strategic(&mut list[p], item),
                                (None, false) => list.push(item.clone()),
                            }
                        }
                    }
                    _ => {
                        map.insert(k.clone(), v.clone());
                    }
                }
            }
            _ => strategic(map.entry(k.clone()).or_insert(Value::Null), v),
        }
    }
}

fn pointer_parts(path: &str) -> Result<Vec<String>, String> {
    if path.is_empty() {
        return Ok(vec![]);
    }
    let rest = path.strip_prefix('/').ok_or_else(|| format!("invalid JSON pointer {path:?}"))?;
    Ok(rest.split('/').map(|p| p.replace("~1", "/").replace("~0", "~")).collect())
}

fn remove_at(doc: &mut Value, path: &str) -> Result<Value, String> {
    let mut parts = pointer_parts(path)?;
    let last = parts.pop().ok_or("cannot remove the whole document")?;
    let parent = parts.iter().try_fold(doc, |o, p| child(o, p)).ok_or_else(|| format!("path {path:?} not found"))?;
    match parent {
        Value::Object(m) => m.remove(&last).ok_or_else(|| format!("path {path:?} not found")),
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|_| format!("bad index in {path:?}"))?;
            if i < a.len() { Ok(a.remove(i)) } else { Err(format!("index out of range in {path:?}")) }
        }
        _ => Err(format!("path {path:?} not found")),
    }
}

fn child<'a>(o: &'a mut Value, p: &str) -> Option<&'a mut Value> {
    match o {
        Value::Object(m) => m.get_mut(p),
        Value::Array(a) => a.get_mut(p.parse::<usize>().ok()?),
        _ => None,
    }
}

fn add_at(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let mut parts = pointer_parts(path)?;
    let Some(last) = parts.pop() else {
        *doc = value;
        return Ok(());
    };
    let parent = parts.iter().try_fold(doc, |o, p| child(o, p)).ok_or_else(|| format!("path {path:?} not found"))?;
    match parent {
        Value::Object(m) => {
            m.insert(last, value);
            Ok(())
        }
        Value::Array(a) if last == "-" => {
            a.push(value);
            Ok(())
        }
        Value::Array(a) => {
            let i: usize = last.parse().map_err(|_| format!("bad index in {path:?}"))?;
            if i > a.len() {
                return Err(format!("index out of range in {path:?}"));
            }
            a.insert(i, value);
            Ok(())
        }
        _ => Err(format!("path {path:?} not found")),
    }
}

pub fn json_patch(doc: &mut Value, ops: &Value) -> Result<(), String> {
    let ops = ops.as_array().ok_or("a JSON patch is a list of operations")?;
    let mut work = doc.clone();
    for op in ops {
        let path = op["path"].as_str().ok_or("an operation without `path`")?;
        match op["op"].as_str() {
            Some("add") => add_at(&mut work, path, op["value"].clone())?,
            Some("remove") => {
                remove_at(&mut work, path)?;
            }
            Some("replace") => {
                remove_at(&mut work, path)?;
                add_at(&mut work, path, op["value"].clone())?;
            }
            Some("test") => {
                if work.pointer(path) != Some(&op["value"]) {
                    return Err(format!("test failed at {path:?}"));
                }
            }
            Some(o @ ("copy" | "move")) => {
                let from = op["from"].as_str().ok_or("an operation without `from`")?;
                let v = if o == "move" {
                    remove_at(&mut work, from)?
                } else {
                    work.pointer(from).cloned().ok_or_else(|| format!("path {from:?} not found"))?
                };
                add_at(&mut work, path, v)?;
            }
            other => return Err(format!("unknown JSON patch operation {other:?}")),
        }
    }
    *doc = work;
    Ok(())
}
