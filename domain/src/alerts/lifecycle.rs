//! From findings to alert transitions, pure. A finding with no alert open for its subject
//! fires a new one; a finding for an open alert refreshes it (value, items, last breach);
//! an open alert with no finding resolves only once it has not been breached for the hold
//! time, so a value hovering at the limit does not fire and resolve on every evaluation.

use super::rules::Finding;

/// An alert that is firing or acknowledged, as the lifecycle needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenAlert {
    pub id: String,
    pub subject: String,
    pub last_breach_ms: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Transition {
    /// A new alert, firing from now.
    Fire(Finding),
    /// Still breaching: new value and items, breached now.
    Refresh { id: String, finding: Finding },
    /// Quiet for the hold time.
    Resolve { id: String },
}

/// The transitions for one rule. `hold_ms` of zero resolves at the first quiet evaluation
/// (used when a rule is switched off).
pub fn reconcile(open: &[OpenAlert], findings: Vec<Finding>, now_ms: i64, hold_ms: i64) -> Vec<Transition> {
    let mut transitions = Vec::new();
    for alert in open {
        if !findings.iter().any(|f| f.subject == alert.subject) && now_ms - alert.last_breach_ms >= hold_ms {
            transitions.push(Transition::Resolve { id: alert.id.clone() });
        }
    }
    for finding in findings {
        match open.iter().find(|a| a.subject == finding.subject) {
            Some(alert) => transitions.push(Transition::Refresh { id: alert.id.clone(), finding }),
            None => transitions.push(Transition::Fire(finding)),
        }
    }
    transitions
}

/// What changed in a refresh worth a timeline entry, if anything: the value of a count,
/// share or cost ("3 → 5: …"), or for an age (which grows at every evaluation) how many
/// things are behind it.
pub fn what_changed(before: &super::Alert, after: &Finding) -> Option<String> {
    let count = |items: usize, total: Option<i64>| total.unwrap_or(items as i64);
    if after.unit == super::Unit::Seconds {
        let (was, now) = (count(before.items.len(), before.items_total), after.items.len() as i64);
        return (was != now).then(|| format!("{was} → {now} behind it: {}", after.title));
    }
    (before.value != after.value)
        .then(|| format!("{} → {}: {}", before.unit.format(before.value), after.unit.format(after.value), after.title))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alerts::Unit;

    fn finding(subject: &str) -> Finding {
        Finding {
            subject: subject.into(),
            title: "t".into(),
            value: 2.0,
            threshold: 1.0,
            unit: Unit::Count,
            items: vec![],
        }
    }

    #[test]
    fn a_refresh_is_worth_an_entry_when_what_it_counts_changed() {
        let mut before = crate::alerts::tests_support::alert(); // value 2, one run
        let mut after = Finding { value: 2.0, title: "2 calls".into(), items: before.items.clone(), ..finding("") };
        assert_eq!(what_changed(&before, &after), None);
        after.value = 5.0;
        assert_eq!(what_changed(&before, &after).as_deref(), Some("2 → 5: 2 calls"));
        // An age grows at every evaluation: only the number of things waiting counts.
        before.unit = Unit::Seconds;
        after.unit = Unit::Seconds;
        assert_eq!(what_changed(&before, &after), None);
        after.items.push(after.items[0].clone());
        assert_eq!(what_changed(&before, &after).as_deref(), Some("1 → 2 behind it: 2 calls"));
    }

    fn open(id: &str, subject: &str, last_breach_ms: i64) -> OpenAlert {
        OpenAlert { id: id.into(), subject: subject.into(), last_breach_ms }
    }

    #[test]
    fn fires_refreshes_and_keeps_subjects_apart() {
        let t = reconcile(&[open("a1", "", 0)], vec![finding(""), finding("tool:wire")], 1000, 60_000);
        assert_eq!(
            t,
            vec![Transition::Refresh { id: "a1".into(), finding: finding("") }, Transition::Fire(finding("tool:wire"))]
        );
    }

    #[test]
    fn resolves_only_after_the_hold_time() {
        let alert = [open("a1", "", 100_000)];
        assert!(reconcile(&alert, vec![], 159_999, 60_000).is_empty(), "quiet for 59.999 s: still held");
        assert_eq!(reconcile(&alert, vec![], 160_000, 60_000), vec![Transition::Resolve { id: "a1".into() }]);
        assert_eq!(reconcile(&alert, vec![], 100_001, 0), vec![Transition::Resolve { id: "a1".into() }]);
    }

    #[test]
    fn a_breach_within_the_hold_keeps_the_same_alert() {
        // Quiet for 30 s, then breached again: refreshed, not resolved and fired anew.
        let alert = [open("a1", "", 100_000)];
        assert!(reconcile(&alert, vec![], 130_000, 60_000).is_empty());
        assert_eq!(
            reconcile(&alert, vec![finding("")], 140_000, 60_000),
            vec![Transition::Refresh { id: "a1".into(), finding: finding("") }]
        );
    }
}
