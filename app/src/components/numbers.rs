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
