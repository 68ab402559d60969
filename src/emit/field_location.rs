//! Moving a diagnostic from one copy of a document to another.
//!
//! kpt and kustomize hand a KRM function a re-indented, re-formatted copy of the user's ClusterInputs (kpt adds
//! annotations; kustomize drops comments), so a line counted in the ResourceList means nothing to the user. Every
//! diagnostic carries its field path (`spec.machineSets[0].zone`), and a diagnostic's place is always either a key
//! or a value along that path. Walking the path in both copies at once finds the same key or value in the user's
//! file.

use crate::diagnostics::Loc;
use crate::inputs::yaml::{Key, Node, Value};
use std::collections::HashMap;

enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// `spec.machineSets[0].zone` → Key(spec), Key(machineSets), Index(0), Key(zone).
fn steps(field: &str) -> Vec<Step<'_>> {
    let mut out = Vec::new();
    for part in field.split('.').filter(|p| !p.is_empty()) {
        let (name, mut rest) = part.split_once('[').map_or((part, ""), |(n, r)| (n, r));
        if !name.is_empty() {
            out.push(Step::Key(name));
        }
        while let Some((index, after)) = rest.split_once(']') {
            if let Ok(i) = index.parse() {
                out.push(Step::Index(i));
            }
            rest = after.trim_start_matches('[');
        }
    }
    out
}

/// Moves places from `from` to `to`. Built once per pair of copies: each mapping's keys are indexed by name, so
/// that placing every diagnostic of a file with thousands of errors (one per key of a huge mapping) costs time in
/// proportion to the diagnostics, not to the diagnostics times the keys.
pub struct Placer<'a> {
    from: &'a Node,
    to: &'a Node,
    /// For every mapping of both copies (by address): the index of each key name's first entry.
    keys: HashMap<*const Node, HashMap<&'a str, usize>>,
}

impl<'a> Placer<'a> {
    pub fn new(from: &'a Node, to: &'a Node) -> Placer<'a> {
        let mut keys = HashMap::new();
        for root in [from, to] {
            let mut stack = vec![root];
            while let Some(node) = stack.pop() {
                match &node.value {
                    Value::Map(entries) => {
                        let mut names = HashMap::with_capacity(entries.len());
                        for (i, (k, v)) in entries.iter().enumerate() {
                            names.entry(&*k.name).or_insert(i);
                            stack.push(v);
                        }
                        keys.insert(node as *const Node, names);
                    }
                    Value::Seq(items) => stack.extend(items),
                    _ => {}
                }
            }
        }
        Placer { from, to, keys }
    }

    /// The entry under `key` of the mapping `node`, the first if the key is given twice.
    fn entry(&self, node: &'a Node, key: &str) -> Option<&'a (Key, Node)> {
        let Value::Map(entries) = &node.value else { return None };
        let i = *self.keys.get(&(node as *const Node))?.get(key)?;
        entries.get(i)
    }

    /// The place in `to` matching `loc` in `from`, following `field`; the deepest match along the path wins (a
    /// missing field is reported at its parent mapping). `None` when nothing along the path is at `loc`.
    pub fn map(&self, field: &str, loc: &Loc) -> Option<Loc> {
        let same = |a: &Loc| a.line == loc.line && a.column == loc.column;
        let mut found = same(&self.from.loc).then(|| self.to.loc.clone());
        let (mut a, mut b) = (self.from, self.to);
        for step in steps(field) {
            let next = match step {
                Step::Key(k) => {
                    let (Some((ka, va)), Some((kb, vb))) = (self.entry(a, k), self.entry(b, k)) else { break };
                    if same(&ka.loc) {
                        found = Some(kb.loc.clone());
                    }
                    (va, vb)
                }
                Step::Index(i) => match (&a.value, &b.value) {
                    (Value::Seq(sa), Value::Seq(sb)) => match (sa.get(i), sb.get(i)) {
                        (Some(va), Some(vb)) => (va, vb),
                        _ => break,
                    },
                    _ => break,
                },
            };
            (a, b) = next;
            if same(&a.loc) {
                found = Some(b.loc.clone());
            }
        }
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn parse(name: &str, text: &str) -> Node {
        crate::inputs::yaml::parse(&Arc::from(name), &Arc::from(text)).unwrap()
    }

    #[test]
    fn keys_values_and_parents_map_to_the_other_copy() {
        let from = parse("rl", "items: []\nfunctionConfig:\n  spec:\n    sets:\n    - zone: a\n      typo: 1\n");
        let Value::Map(top) = &from.value else { panic!() };
        let config = &top[1].1;
        let to = parse("file", "# mine\nspec:\n  sets:\n\n  - zone: a   # z\n    typo: 1\n");
        let at = |line, column| Loc { file: Arc::from("rl"), line, column };
        let placer = Placer::new(config, &to);
        let map = |_: &Node, _: &Node, field: &str, loc: &Loc| placer.map(field, loc);
        // A value.
        let l = map(config, &to, "spec.sets[0].zone", &at(5, 13)).unwrap();
        assert_eq!((&*l.file, l.line, l.column), ("file", 5, 11));
        // A key (unknown field).
        let l = map(config, &to, "spec.sets[0].typo", &at(6, 7)).unwrap();
        assert_eq!((l.line, l.column), (6, 5));
        // A missing field, reported at its parent.
        let l = map(config, &to, "spec.sets[0].name", &at(5, 7)).unwrap();
        assert_eq!((l.line, l.column), (5, 5));
        assert!(map(config, &to, "spec.other", &at(1, 1)).is_none());
    }
}
