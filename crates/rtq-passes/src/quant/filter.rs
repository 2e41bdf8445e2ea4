use rtq_ir::Node;

/// Selects nodes by name pattern (`*` matches any run of characters) or by op type,
/// for `--exclude-nodes` / `--exclude-ops` style options.
#[derive(Debug, Clone, Default)]
pub struct NodeFilter {
    /// Node-name patterns.
    pub names: Vec<String>,
    /// Op types (exact).
    pub op_types: Vec<String>,
}

impl NodeFilter {
    /// Whether `node` is selected.
    pub fn matches(&self, node: &Node) -> bool {
        self.op_types.iter().any(|o| o == &node.op_type)
            || self.names.iter().any(|p| glob_match(p, &node.name))
    }

    /// Whether nothing is selected.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.op_types.is_empty()
    }
}

/// Glob matching with `*` only.
fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first)
        || !text[first.len()..].ends_with(last)
        || text.len() < first.len() + last.len()
    {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(at) => rest = &rest[at + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        assert!(glob_match("conv1", "conv1"));
        assert!(!glob_match("conv1", "conv10"));
        assert!(glob_match("conv*", "conv10"));
        assert!(glob_match("*head*", "det_head_conv"));
        assert!(glob_match("a*b*c", "aXXbYYc"));
        assert!(!glob_match("a*b*c", "aXXcYYb"));
        assert!(!glob_match("ab*ba", "aba"));
    }
}
