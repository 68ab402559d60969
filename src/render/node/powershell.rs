//! The one way a value enters PowerShell: a single-quoted string literal. Inside single quotes PowerShell expands
//! nothing (`$(...)`, backticks and `;` are plain text); the only special character is the quote itself, which is
//! doubled. PowerShell also accepts the typographic quotes U+2018..U+201B as single quotes, so those are doubled
//! too. Inputs that reach scripts are validated first (no control characters); this function is the last line.

pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    for c in s.chars() {
        if matches!(c, '\'' | '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}') {
            out.push(c);
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// A PowerShell array literal of quoted strings: `@('a', 'b')`.
pub fn array<S: AsRef<str>>(items: &[S]) -> String {
    let inner: Vec<String> = items.iter().map(|s| quote(s.as_ref())).collect();
    format!("@({})", inner.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_values_stay_inside_the_literal() {
        assert_eq!(quote("plain"), "'plain'");
        assert_eq!(quote("it's"), "'it''s'");
        assert_eq!(quote("$(Remove-Item C:\\ -Recurse)"), "'$(Remove-Item C:\\ -Recurse)'");
        assert_eq!(quote("`whoami`; exit 1"), "'`whoami`; exit 1'");
        assert_eq!(quote("a\nb"), "'a\nb'");
        assert_eq!(quote("\u{2019}; evil"), "'\u{2019}\u{2019}; evil'");
        assert_eq!(array(&["a", "b'c"]), "@('a', 'b''c')");
    }
}
