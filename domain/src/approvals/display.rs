//! The agent's own description of a call (its display fields) held against the arguments
//! that will actually run. An approver who reads "To: ana@example.com" must be told when
//! the arguments also carry `bcc: exfil@example.com`, and when the recipient shown differs
//! from the one in the arguments by a character they cannot see. Pure, both builds.
//!
//! A display field names the argument it describes with `argument` (a key, a dotted path
//! `message.to`, or a JSON pointer `/message/to`); without one it is matched by its label
//! (`Recipient` does not match `to`, `To` does) and, failing that, by its value. Every
//! argument no field covers is listed as unshown (information, not a contradiction);
//! a covered argument whose value the field contradicts is listed as differing. Text is
//! compared exactly, since one invisible character can change a recipient; amounts are
//! compared as numbers, so `€500.00` shown for `500` agrees and `50` shown for `5000`
//! does not, and a currency the field names must be the one a `currency` argument beside
//! the amount holds.

use super::DisplayField;
use serde_json::Value;

/// What the approver must be warned about.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct DisplayReport {
    /// Arguments (path and value as text) that no display field shows.
    pub unshown: Vec<(String, String)>,
    /// Display fields whose value differs from the argument they describe.
    pub differing: Vec<Difference>,
    /// Display fields that describe no argument at all.
    pub unmatched: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Difference {
    pub label: String,
    pub path: String,
    pub shown: String,
    pub actual: String,
}

impl DisplayReport {
    pub fn is_clean(&self) -> bool {
        self.unshown.is_empty() && self.differing.is_empty() && self.unmatched.is_empty()
    }
}

/// A value as a display field would show it: strings verbatim, anything else as
/// pretty-printed JSON (as request validation turns non-string display values into text).
pub fn as_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Every leaf of the arguments with its dotted path (`message.to`, `items.0.sku`). An
/// empty object or array is a leaf of its own.
fn leaves(value: &Value, path: &str, out: &mut Vec<(String, Value)>) {
    let join = |key: &str| if path.is_empty() { key.to_string() } else { format!("{path}.{key}") };
    match value {
        Value::Object(map) if !map.is_empty() => map.iter().for_each(|(k, v)| leaves(v, &join(k), out)),
        Value::Array(items) if !items.is_empty() => {
            items.iter().enumerate().for_each(|(i, v)| leaves(v, &join(&i.to_string()), out))
        }
        other => out.push((path.to_string(), other.clone())),
    }
}

/// The value at a dotted path or a JSON pointer.
fn at<'v>(arguments: &'v Value, path: &str) -> Option<&'v Value> {
    if path.starts_with('/') {
        return arguments.pointer(path);
    }
    path.split('.').try_fold(arguments, |v, part| match v {
        Value::Object(map) => map.get(part),
        Value::Array(items) => part.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}

/// A label or key reduced to its letters and digits, lowercased: `Tool Name` and
/// `tool_name` meet.
fn normalized(text: &str) -> String {
    text.chars().filter(|c| c.is_alphanumeric()).flat_map(char::to_lowercase).collect()
}

/// Paths in dotted form, whatever form the field used.
fn dotted(path: &str) -> String {
    path.trim_start_matches('/').replace('/', ".")
}

/// Holds the display fields against the arguments.
pub fn compare(arguments: &Value, display: &[DisplayField]) -> DisplayReport {
    let mut all = Vec::new();
    leaves(arguments, "", &mut all);
    let mut report = DisplayReport::default();
    let mut covered: Vec<String> = Vec::new();
    for field in display {
        let explicit = field.argument.as_deref().map(|p| (dotted(p), at(arguments, p)));
        let matched = match explicit {
            Some((path, found)) => found.map(|v| (path, v.clone())),
            None => {
                let by_label = all
                    .iter()
                    .map(|(path, _)| path)
                    .chain(top_level_keys(arguments).iter())
                    .find(|path| {
                        let last = path.rsplit('.').next().unwrap_or(path);
                        normalized(last) == normalized(&field.label) || normalized(path) == normalized(&field.label)
                    })
                    .and_then(|path| at(arguments, path).map(|v| (path.clone(), v.clone())));
                by_label.or_else(|| {
                    all.iter().find(|(_, v)| as_text(v) == field.value).map(|(p, v)| (p.clone(), v.clone()))
                })
            }
        };
        match matched {
            Some((path, value)) => {
                let actual = as_text(&value);
                let currency = sibling_currency(arguments, &path);
                if !agrees(&field.value, &actual, currency.as_deref()) {
                    report.differing.push(Difference {
                        label: field.label.clone(),
                        path: path.clone(),
                        shown: field.value.clone(),
                        actual,
                    });
                }
                covered.push(path);
            }
            None => report.unmatched.push(field.label.clone()),
        }
    }
    let is_covered =
        |path: &str| covered.iter().any(|c| path == c || path.starts_with(&format!("{c}.")) || c.is_empty());
    report.unshown = all.into_iter().filter(|(p, _)| !is_covered(p)).map(|(p, v)| (p, as_text(&v))).collect();
    report
}

/// Whether a display field's text says what the argument's text says: the same text, or
/// the same amount however it is written (currency sign or code, thousands separators,
/// trailing zeros). A currency the field names must match the argument's own (`500 EUR`)
/// and the `currency` argument beside it, when there is one.
pub fn agrees(shown: &str, actual: &str, sibling_currency: Option<&str>) -> bool {
    if shown == actual {
        return true;
    }
    let (Some(shown), Some(actual)) = (Amount::parse(shown), Amount::parse(actual)) else { return false };
    let currencies_agree = match (&shown.currency, &actual.currency.as_deref().or(sibling_currency)) {
        (Some(a), Some(b)) => a.eq_ignore_ascii_case(b),
        _ => true,
    };
    shown.value == actual.value && currencies_agree
}

/// A number as people write amounts: `500`, `500.00`, `€500.00`, `USD 1,234.50`,
/// `1 234,5 €`.
#[derive(Debug, PartialEq)]
struct Amount {
    value: f64,
    currency: Option<String>,
}

impl Amount {
    fn parse(text: &str) -> Option<Amount> {
        let text = text.trim();
        let (mut currency, mut rest) = (None, text);
        for (sign, code) in [("€", "EUR"), ("$", "USD"), ("£", "GBP"), ("¥", "JPY")] {
            if let Some(r) = rest.strip_prefix(sign).or_else(|| rest.strip_suffix(sign)) {
                currency = Some(code.to_string());
                rest = r.trim();
            }
        }
        let is_code = |w: &str| w.len() == 3 && w.chars().all(|c| c.is_ascii_uppercase());
        if currency.is_none() {
            if let Some((code, r)) = rest.split_once(' ').filter(|(c, _)| is_code(c)) {
                currency = Some(code.to_string());
                rest = r.trim();
            } else if let Some((r, code)) = rest.rsplit_once(' ').filter(|(_, c)| is_code(c)) {
                currency = Some(code.to_string());
                rest = r.trim();
            }
        }
        let digits: String =
            rest.chars().filter(|c| !matches!(c, ' ' | '\u{00A0}' | '\u{202F}' | '_' | '\'')).collect();
        let normal = match (digits.rfind('.'), digits.rfind(',')) {
            // `1,234.50`: commas group thousands.
            (Some(dot), Some(comma)) if comma < dot => digits.replace(',', ""),
            // `1.234,50`: dots group thousands, the comma is the decimal point.
            (Some(_), Some(_)) => digits.replace('.', "").replace(',', "."),
            // `1,234` or `1,234,567` groups thousands; `12,5` is a decimal comma.
            (None, Some(comma)) if digits.len() - comma == 4 => digits.replace(',', ""),
            (None, Some(_)) => digits.replace(',', "."),
            _ => digits,
        };
        let well_formed = !normal.is_empty()
            && normal.chars().all(|c| c.is_ascii_digit() || c == '.' || c == '-')
            && normal.chars().any(|c| c.is_ascii_digit());
        let value: f64 = if well_formed { normal.parse().ok()? } else { return None };
        value.is_finite().then_some(Amount { value, currency })
    }
}

/// The `currency` argument beside the one at `path` (`amount` → `currency`,
/// `payment.amount` → `payment.currency`), when it is a string.
fn sibling_currency(arguments: &Value, path: &str) -> Option<String> {
    let parent = path.rsplit_once('.').map(|(p, _)| p).unwrap_or("");
    let currency_path = if parent.is_empty() { "currency".to_string() } else { format!("{parent}.currency") };
    at(arguments, &currency_path).and_then(|v| v.as_str()).map(str::to_string)
}

fn top_level_keys(arguments: &Value) -> Vec<String> {
    arguments.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
}

/// For a bulk decision: the leaf paths (dotted, as [`leaves`] names them) whose values
/// differ between the payloads (a path some lack counts as differing), and those all
/// share, each sorted.
pub fn differing_paths(payloads: &[Value]) -> (Vec<String>, Vec<String>) {
    let all: Vec<std::collections::BTreeMap<String, Value>> = payloads
        .iter()
        .map(|p| {
            let mut out = Vec::new();
            leaves(p, "", &mut out);
            out.into_iter().collect()
        })
        .collect();
    let paths: std::collections::BTreeSet<&String> = all.iter().flat_map(|m| m.keys()).collect();
    let (mut differing, mut same) = (Vec::new(), Vec::new());
    for path in paths {
        let first = all.first().and_then(|m| m.get(path));
        if all.iter().all(|m| m.get(path) == first) {
            same.push(path.clone());
        } else {
            differing.push(path.clone());
        }
    }
    (differing, same)
}

/// The text at a dotted `path` in `value`, `—` when absent.
pub fn text_at(value: &Value, path: &str) -> String {
    at(value, path).map(as_text).unwrap_or_else(|| "—".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn field(label: &str, value: &str, argument: Option<&str>) -> DisplayField {
        DisplayField { label: label.into(), value: value.into(), argument: argument.map(Into::into) }
    }

    #[test]
    fn a_display_that_shows_every_argument_faithfully_is_clean() {
        let args = json!({"to": "ana@example.com", "subject": "Invoice", "body": "Attached."});
        let display = [
            field("To", "ana@example.com", None),
            field("Subject", "Invoice", None),
            field("Message", "Attached.", Some("body")),
        ];
        assert!(compare(&args, &display).is_clean(), "{:?}", compare(&args, &display));
    }

    #[test]
    fn hidden_arguments_are_called_out() {
        let args = json!({"to": "ana@example.com", "subject": "Invoice", "body": "Attached.",
                          "bcc": "exfil@evil.example", "options": {"force": true}});
        let display =
            [field("To", "ana@example.com", None), field("Subject", "Invoice", None), field("Body", "Attached.", None)];
        let report = compare(&args, &display);
        assert_eq!(
            report.unshown,
            vec![("bcc".into(), "exfil@evil.example".into()), ("options.force".into(), "true".into())]
        );
        assert!(report.differing.is_empty());
    }

    #[test]
    fn a_value_that_differs_by_an_invisible_character_is_called_out() {
        let args = json!({"to": "ana@example.com"});
        let report = compare(&args, &[field("To", "ana@exam\u{200B}ple.com", None)]);
        assert_eq!(report.differing.len(), 1);
        assert_eq!(report.differing[0].path, "to");
        assert_eq!(report.differing[0].actual, "ana@example.com");
        let report = compare(&args, &[field("Recipient", "ana@example.com", Some("/to"))]);
        assert!(report.is_clean(), "matched by pointer");
    }

    #[test]
    fn fields_are_matched_by_path_label_then_value_and_the_rest_reported() {
        let args = json!({"message": {"to": "x@y.z", "cc": ["a@b.c"]}, "amount": 10});
        let display = [
            field("Recipient", "x@y.z", None), // by value
            field("Amount", "10", None),       // by label, non-string
            field("CC", "[\n  \"a@b.c\"\n]", Some("message.cc")),
            field("Priority", "high", None), // describes nothing
        ];
        let report = compare(&args, &display);
        assert!(report.unshown.is_empty(), "{report:?}");
        assert!(report.differing.is_empty(), "{report:?}");
        assert_eq!(report.unmatched, vec!["Priority".to_string()]);
        let report = compare(&args, &[field("Amount", "100", None)]);
        assert_eq!(report.differing[0].actual, "10");
        assert_eq!(report.unshown.len(), 2, "message.to and message.cc.0");
    }

    #[test]
    fn amounts_agree_however_they_are_written_and_contradictions_do_not() {
        let args = json!({"amount": 500, "currency": "EUR", "fee": "1,234.50", "count": 5000});
        for (label, shown) in [("Amount", "€500.00"), ("Amount", "500 EUR"), ("Amount", "500"), ("Fee", "1234.5")] {
            assert!(compare(&args, &[field(label, shown, None)]).differing.is_empty(), "{label}: {shown}");
        }
        let shows_50 = compare(&args, &[field("Count", "50", None)]);
        assert_eq!(shows_50.differing.len(), 1, "50 shown, 5000 runs");
        let wrong_currency = compare(&args, &[field("Amount", "$500.00", None)]);
        assert_eq!(wrong_currency.differing.len(), 1, "USD shown, EUR runs");
        assert!(agrees("1.234,50 €", "1234.5", None));
        assert!(agrees("12,5", "12.5", None));
        assert!(!agrees("ana@example.com", "ana@exam\u{200B}ple.com", None), "text is exact");
        assert!(!agrees("five hundred", "500", None));
        assert!(!agrees("500 USD", "500 EUR", None));
        assert!(!agrees("-", "0", None));
    }

    #[test]
    fn bulk_payloads_are_compared_leaf_by_leaf() {
        let a = json!({"amount": 10, "to": "x", "meta": {"k": 1}});
        let b = json!({"amount": 20, "to": "x", "meta": {"k": 1, "extra": true}});
        let (differing, same) = differing_paths(&[a.clone(), b]);
        assert_eq!(differing, vec!["amount", "meta.extra"]);
        assert_eq!(same, vec!["meta.k", "to"]);
        assert_eq!(text_at(&a, "to"), "x");
        assert_eq!(text_at(&a, "meta.extra"), "—");
    }
}
