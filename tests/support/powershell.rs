//! PowerShell text checked with a real parser (tree-sitter-powershell): no PowerShell runs on these machines.

/// The ERROR and MISSING nodes of a PowerShell text, as `line:column kind`.
pub fn powershell_problems(text: &str) -> Vec<String> {
    let mut parser = tree_sitter::Parser::new();
    parser.set_language(&tree_sitter_powershell::LANGUAGE.into()).expect("the PowerShell grammar loads");
    let tree = parser.parse(text, None).expect("a parse tree");
    let mut problems = Vec::new();
    let mut cursor = tree.walk();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_error() || node.is_missing() {
            let p = node.start_position();
            problems.push(format!("{}:{} {}", p.row + 1, p.column + 1, node.kind()));
        }
        stack.extend(node.children(&mut cursor));
    }
    problems
}
