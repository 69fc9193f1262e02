//! Numbers as the pages show them: dollars with the digits that matter, counts with thin
//! spaces between thousands.

/// Dollars as the run page shows them: cents for large amounts, more digits for small.
pub fn money(usd: f64) -> String {
    if usd >= 100.0 {
        format!("${usd:.2}")
    } else {
        format!("${usd:.4}")
    }
}

/// A count taken up to `limit` and one past it: "10\u{202f}000+" once past.
pub fn counted(n: i64, limit: i64) -> String {
    if n > limit {
        format!("{}+", thousands(limit))
    } else {
        thousands(n)
    }
}

/// An integer with thin spaces between thousands, so token counts read at a glance.
pub fn thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push('\u{202f}');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_past_its_limit_reads_as_the_limit_and_more() {
        assert_eq!(counted(9_999, 10_000), "9\u{202f}999");
        assert_eq!(counted(10_000, 10_000), "10\u{202f}000");
        assert_eq!(counted(10_001, 10_000), "10\u{202f}000+");
        assert_eq!(counted(3, 10_000), "3");
    }
}
