//! `*`-wildcard patterns over whole names, shared by tool policies (case-sensitive tool
//! names) and model prices (model names in any case). Pure and in both builds; no
//! allocation, since ingest matches every step and tool call against them.

/// Whether `pattern` matches the whole of `name`; `*` matches any run of characters.
pub fn glob(pattern: &str, name: &str) -> bool {
    glob_with(pattern.as_bytes(), name.as_bytes(), |a, b| a == b)
}

/// Like [`glob`], ASCII letters compared without case.
pub fn glob_ignore_case(pattern: &str, name: &str) -> bool {
    glob_with(pattern.as_bytes(), name.as_bytes(), |a, b| a.eq_ignore_ascii_case(&b))
}

/// Works on bytes: `*` is ASCII, and comparing UTF-8 byte by byte (ASCII letters folded at
/// most) never matches half a character against a whole one.
fn glob_with(pattern: &[u8], name: &[u8], eq: impl Fn(u8, u8) -> bool + Copy) -> bool {
    let same = |a: &[u8], b: &[u8]| a.len() == b.len() && a.iter().zip(b).all(|(x, y)| eq(*x, *y));
    let parts: Vec<&[u8]> = pattern.split(|b| *b == b'*').collect();
    if parts.len() == 1 {
        return same(pattern, name);
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if name.len() < first.len() + last.len()
        || !same(first, &name[..first.len()])
        || !same(last, &name[name.len() - last.len()..])
    {
        return false;
    }
    let mut rest = &name[first.len()..name.len() - last.len()];
    for middle in &parts[1..parts.len() - 1] {
        match (0..=rest.len().saturating_sub(middle.len()))
            .find(|&at| rest.len() >= middle.len() && same(middle, &rest[at..at + middle.len()]))
        {
            Some(at) => rest = &rest[at + middle.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names() {
        assert!(glob("send_*", "send_email"));
        assert!(glob("*delete*", "hard_delete_repo"));
        assert!(glob("*", "anything"));
        assert!(glob("a*b*c", "a-x-b-y-c"));
        assert!(glob("a*b*c", "a-b-c"));
        assert!(!glob("a*b*c", "acb"));
        assert!(!glob("send_*", "resend_email"));
        assert!(!glob("a*a", "a"));
        assert!(glob("exact", "exact"));
        assert!(!glob("exact", "exactly"));
        assert!(glob("gpt-4*", "gpt-4.1"));
        assert!(glob("*sonnet*", "claude-sonnet-4"));
        assert!(!glob("gpt-4", "gpt-4.1"));
        assert!(!glob("Send_*", "send_email"), "tool names keep their case");
    }

    #[test]
    fn model_names_match_in_any_case() {
        assert!(glob_ignore_case("GPT-4.1-MINI*", "gpt-4.1-mini-2025-04-14"));
        assert!(glob_ignore_case("*Claude-Sonnet-4*", "us.anthropic.claude-sonnet-4-5"));
        assert!(!glob_ignore_case("gpt-4o*", "gpt-4.1"));
        assert!(glob_ignore_case("é*", "é-model"), "non-ASCII compared exactly");
        assert!(!glob_ignore_case("*ab", "b"));
    }
}
