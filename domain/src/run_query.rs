//! The run list's query (pure): its filters, sort and keyset cursor, and how the page's
//! and the API's parameters (`QueryParams`) become one, with an error naming the first
//! parameter that is wrong. Storage turns a `RunQuery` into SQL (`storage::runs`).

use crate::canonical::{QueryParams, TerminalReason, Trigger};
use serde::{Deserialize, Serialize};

/// Derived flags a run can be filtered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunFlag {
    /// At least one duplicate side effect.
    Duplicates,
    /// Completed without calling a read tool.
    NoRead,
    /// At least one tool call ran without a valid approval.
    ApprovalViolation,
}

impl RunFlag {
    pub const ALL: [RunFlag; 3] = [RunFlag::Duplicates, RunFlag::NoRead, RunFlag::ApprovalViolation];

    /// As the `flag` parameter spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunFlag::Duplicates => "duplicates",
            RunFlag::NoRead => "no_read",
            RunFlag::ApprovalViolation => "approval_violation",
        }
    }
}

impl std::str::FromStr for RunFlag {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match RunFlag::ALL.into_iter().find(|f| f.as_str() == s) {
            Some(flag) => Ok(flag),
            None => Err(format!("unknown flag `{s}` (expected duplicates, no_read or approval_violation)")),
        }
    }
}

/// How the run list is ordered (always descending, ties broken by run id).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunSort {
    /// Newest first.
    #[default]
    Started,
    /// Most expensive first.
    Cost,
    /// Longest first.
    Duration,
    /// Most duplicate side effects first.
    Duplicates,
}

impl std::str::FromStr for RunSort {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "started" => Ok(RunSort::Started),
            "cost" => Ok(RunSort::Cost),
            "duration" => Ok(RunSort::Duration),
            "duplicates" => Ok(RunSort::Duplicates),
            other => Err(format!("unknown sort `{other}` (expected started, cost, duration or duplicates)")),
        }
    }
}

/// How many of a tool's runs a search for it reads, newest first, when every one must be
/// tested against a filter or the sort is not by start: the filter may match none of them,
/// and a tool most runs call has millions. The page says where the search stopped and
/// links to the runs before (`until`), so nothing is out of reach.
pub const SEARCH_WINDOW: i64 = 2_500;

/// The newest `runs` of the searched tool's runs (within the query's time range), which
/// start at `since_ns` or later.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchWindow {
    pub since_ns: i64,
    pub runs: i64,
}

/// How many runs a list without a search term reads, newest first, from the index of one
/// of its conditions when it must test each against the others or sort them
/// ([`RunQuery::tests_each_run`]): two conditions may have few runs in common or none, so
/// reading one's runs until a page of both is found reads all of them. As with a search,
/// the page says where it stopped and links to the runs before. The same number as a
/// search reads, so either page costs about the same (storage takes one window for both).
pub const FILTER_WINDOW: i64 = SEARCH_WINDOW;

/// The condition whose runs a windowed list reads, newest first, by its own index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lead {
    /// The runs of one agent (its stored name).
    Agent(String),
    Trigger(Trigger),
    Flag(RunFlag),
    /// Every run: no condition of the query has an index of its own (the model).
    Newest,
}

/// The runs a list without a search term read: those that pass `lead`, from `since_ns`
/// on when it has more than `runs` of them (within the time range); all of them when
/// `since_ns` is `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterWindow {
    pub lead: Lead,
    pub since_ns: Option<i64>,
    pub runs: i64,
}

/// The lead a windowed list reads from, given where each candidate's window would start
/// (`None`: it has fewer runs than the window). The one with the fewest runs reaches
/// furthest back for the same number read, so it covers the most time: one whose runs
/// all fit, else the one whose window starts earliest. Candidates come in the order of
/// [`RunQuery::leads`]; ties keep the earlier.
pub fn choose_lead(probed: Vec<(Lead, Option<i64>)>) -> Option<(Lead, Option<i64>)> {
    let mut best: Option<(Lead, Option<i64>)> = None;
    for (lead, since) in probed {
        let better = match (&best, since) {
            (None, _) => true,
            (Some((_, Some(_))), None) => true,
            (Some((_, Some(b))), Some(s)) => s < *b,
            (Some((_, None)), _) => false,
        };
        if better {
            best = Some((lead, since));
        }
    }
    best
}

/// A run-list query. Times are Unix nanoseconds on the run's start.
#[derive(Debug, Clone, Default)]
pub struct RunQuery {
    pub terminal_reason: Option<TerminalReason>,
    pub agent: Option<String>,
    pub trigger: Option<Trigger>,
    pub since_ns: Option<i64>,
    pub until_ns: Option<i64>,
    pub flag: Option<RunFlag>,
    /// The run's main model (`runs.model`), exactly.
    pub model: Option<String>,
    /// A run id, trace id, idempotency key, external resource id or tool name.
    pub search: Option<String>,
    /// The tool name the search term names, as stored, when it differs only in case
    /// (found by `storage::runs::resolve_search`).
    pub search_tool: Option<String>,
    /// The stored agent names `agent` matches (part of the name, any case), found by
    /// `storage::runs::resolve_search` so the filter is an indexed equality, not a scan.
    pub agent_names: Option<Vec<String>>,
    /// The tool's runs a search reads when it reads only the newest of them (found by
    /// `storage::runs::resolve_search`).
    pub search_window: Option<SearchWindow>,
    /// The runs a list without a search term reads when it must test each
    /// ([`RunQuery::tests_each_run`]; found by `storage::runs::resolve_search`).
    pub filter_window: Option<FilterWindow>,
    pub sort: RunSort,
    /// The cursor of the previous page's last run.
    pub after: Option<Cursor>,
    pub limit: i64,
}

/// The sort value of a run, as a cursor carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SortKey {
    Int(i64),
    Float(f64),
}

/// Keyset position: the last run of a page, by (sort value, run id).
#[derive(Debug, Clone, PartialEq)]
pub struct Cursor {
    pub key: SortKey,
    pub run_id: String,
}

impl Cursor {
    /// An opaque text form for URLs.
    pub fn encode(&self) -> String {
        let key = match self.key {
            SortKey::Int(v) => format!("i{v}"),
            SortKey::Float(v) => format!("f{v}"),
        };
        format!("{key}.{}", hex::encode(self.run_id.as_bytes()))
    }

    pub fn decode(text: &str) -> Result<Cursor, String> {
        let bad = || format!("invalid cursor `{text}`: pass the next_cursor of the previous page unchanged");
        let (key, id) = text.rsplit_once('.').ok_or_else(bad)?;
        let key = match key.split_at_checked(1) {
            Some(("i", v)) => SortKey::Int(v.parse().map_err(|_| bad())?),
            Some(("f", v)) => SortKey::Float(v.parse().map_err(|_| bad())?),
            _ => return Err(bad()),
        };
        let run_id = String::from_utf8(hex::decode(id).map_err(|_| bad())?).map_err(|_| bad())?;
        Ok(Cursor { key, run_id })
    }
}

fn time_ns(name: &str, value: &str) -> Result<i64, String> {
    chrono::DateTime::parse_from_rfc3339(value)
        .ok()
        .and_then(|t| t.timestamp_nanos_opt())
        .ok_or_else(|| format!("`{name}` must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got `{value}`"))
}

/// Empty form fields count as absent.
fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

impl QueryParams {
    /// Checks every parameter; the error names the first one that is wrong.
    pub fn into_query(self, now: chrono::DateTime<chrono::Utc>) -> Result<RunQuery, String> {
        let terminal_reason = given(&self.terminal_reason)
            .map(|r| {
                TerminalReason::parse(r).ok_or_else(|| {
                    format!("unknown terminal_reason `{r}` (expected completed, step_limit, budget, error, escalated or running)")
                })
            })
            .transpose()?;
        let trigger = given(&self.trigger)
            .map(|t| {
                Trigger::parse(t).ok_or_else(|| {
                    format!("unknown trigger `{t}` (expected user, schedule, webhook, retry or unknown)")
                })
            })
            .transpose()?;
        let limit = self.limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(format!("`limit` must be between 1 and 500, got {limit}"));
        }
        let range_since = given(&self.range)
            .map(|r| {
                let hours = match r {
                    "1h" => 1,
                    "24h" => 24,
                    "7d" => 24 * 7,
                    "30d" => 24 * 30,
                    other => return Err(format!("unknown range `{other}` (expected 1h, 24h, 7d or 30d)")),
                };
                Ok((now - chrono::Duration::hours(hours)).timestamp_nanos_opt().unwrap_or(0))
            })
            .transpose()?;
        Ok(RunQuery {
            terminal_reason,
            agent: given(&self.agent).map(str::to_string),
            trigger,
            since_ns: given(&self.since).map(|s| time_ns("since", s)).transpose()?.or(range_since),
            until_ns: given(&self.until).map(|s| time_ns("until", s)).transpose()?,
            flag: given(&self.flag).map(|f| f.parse::<RunFlag>()).transpose()?,
            model: given(&self.model).map(str::to_string),
            search: given(&self.q).map(str::to_string),
            search_tool: None,
            agent_names: None,
            search_window: None,
            filter_window: None,
            sort: given(&self.sort).map(|s| s.parse::<RunSort>()).transpose()?.unwrap_or_default(),
            after: given(&self.cursor).map(Cursor::decode).transpose()?,
            limit,
        })
    }
}

impl RunQuery {
    /// Whether a filter needs a column that only `runs` has.
    pub fn filters_on_runs(&self) -> bool {
        self.agent.is_some() || self.trigger.is_some() || self.flag.is_some() || self.model.is_some()
    }

    /// Whether a search for a tool must test each of its runs rather than read a page of
    /// them newest first: a filter other than time, or another sort. Such a search reads
    /// only the newest [`SEARCH_WINDOW`] of the tool's runs.
    pub fn tests_each_tool_run(&self) -> bool {
        self.term().is_some()
            && (self.filters_on_runs() || self.terminal_reason.is_some() || self.sort != RunSort::Started)
    }

    /// Whether a list without a search term must test each run one index gives against
    /// conditions other indexes answer, or sort what it reads: two of agent, trigger,
    /// flag and model; the model (it has no index); or one of them with a reason or
    /// another sort. Such a list reads a window of the runs of one condition
    /// ([`FILTER_WINDOW`], [`RunQuery::leads`]). The reason is never the lead: the counts
    /// leave it out and must read the same runs as the list.
    pub fn tests_each_run(&self) -> bool {
        if self.term().is_some() || self.agent_names.as_ref().is_some_and(Vec::is_empty) {
            return false;
        }
        let conditions = [self.agent.is_some(), self.trigger.is_some(), self.flag.is_some(), self.model.is_some()];
        let n = conditions.iter().filter(|c| **c).count();
        n > 0 && (n > 1 || self.model.is_some() || self.terminal_reason.is_some() || self.sort != RunSort::Started)
    }

    /// The conditions a windowed list may read its runs from, each by an index ordered by
    /// start: the agent when the filter names one stored agent (several would need a
    /// merge of their ranges), the trigger, the flag; every run when none of these is
    /// given.
    pub fn leads(&self) -> Vec<Lead> {
        let mut leads = Vec::new();
        if let Some([name]) = self.agent_names.as_deref() {
            leads.push(Lead::Agent(name.clone()));
        }
        if let Some(t) = self.trigger {
            leads.push(Lead::Trigger(t));
        }
        if let Some(f) = self.flag {
            leads.push(Lead::Flag(f));
        }
        if leads.is_empty() {
            leads.push(Lead::Newest);
        }
        leads
    }

    /// The trimmed search term, if any.
    pub fn term(&self) -> Option<&str> {
        self.search.as_deref().map(str::trim).filter(|s| !s.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        let c = Cursor { key: SortKey::Int(1_700_000_000_000_000_000), run_id: "run/with.dots".into() };
        assert_eq!(Cursor::decode(&c.encode()), Ok(c));
        let c = Cursor { key: SortKey::Float(0.125), run_id: "r".into() };
        assert_eq!(Cursor::decode(&c.encode()), Ok(c));
        assert!(Cursor::decode("nonsense").unwrap_err().contains("invalid cursor"));
        assert!(Cursor::decode("12.zz").is_err());
    }

    #[test]
    fn a_list_tests_each_run_when_no_one_index_answers_it() {
        let q = |f: fn(&mut RunQuery)| {
            let mut q = RunQuery { limit: 50, ..Default::default() };
            f(&mut q);
            q
        };
        fn agent(q: &mut RunQuery) {
            q.agent = Some("bill".into());
            q.agent_names = Some(vec!["billing".into()]);
        }
        // One condition with an index, newest first: that index alone.
        assert!(!q(|_| {}).tests_each_run());
        assert!(!q(|q| q.terminal_reason = Some(TerminalReason::Error)).tests_each_run());
        assert!(!q(|q| q.sort = RunSort::Cost).tests_each_run());
        assert!(!q(agent).tests_each_run());
        assert!(!q(|q| q.flag = Some(RunFlag::NoRead)).tests_each_run());
        assert!(!q(|q| q.since_ns = Some(1)).tests_each_run(), "a time range is every index's");
        // Two conditions, the model, a condition with a reason or another sort.
        assert!(q(|q| {
            q.trigger = Some(Trigger::Retry);
            q.flag = Some(RunFlag::Duplicates);
        })
        .tests_each_run());
        assert!(q(|q| q.model = Some("gpt-4.1".into())).tests_each_run());
        assert!(q(|q| {
            q.flag = Some(RunFlag::Duplicates);
            q.terminal_reason = Some(TerminalReason::Budget);
        })
        .tests_each_run());
        assert!(q(|q| {
            q.flag = Some(RunFlag::Duplicates);
            q.sort = RunSort::Duration;
        })
        .tests_each_run());
        // A search has a window of its own; an agent filter that names no agent, nothing to read.
        assert!(!q(|q| {
            q.model = Some("m".into());
            q.search = Some("send_email".into());
        })
        .tests_each_run());
        assert!(!q(|q| {
            q.model = Some("m".into());
            q.agent = Some("nobody".into());
            q.agent_names = Some(vec![]);
        })
        .tests_each_run());

        let leads = q(|q| {
            agent(q);
            q.trigger = Some(Trigger::Schedule);
            q.flag = Some(RunFlag::ApprovalViolation);
            q.model = Some("m".into());
        })
        .leads();
        assert_eq!(
            leads,
            vec![
                Lead::Agent("billing".into()),
                Lead::Trigger(Trigger::Schedule),
                Lead::Flag(RunFlag::ApprovalViolation)
            ]
        );
        let two_agents = q(|q| {
            q.agent = Some("a".into());
            q.agent_names = Some(vec!["billing".into(), "janitor".into()]);
            q.model = Some("m".into());
        });
        assert_eq!(two_agents.leads(), vec![Lead::Newest]);
    }

    #[test]
    fn the_lead_is_the_condition_with_the_fewest_runs() {
        let agent = || Lead::Agent("billing".into());
        let flag = || Lead::Flag(RunFlag::Duplicates);
        // Both have more runs than the window: the one whose window reaches further back.
        assert_eq!(choose_lead(vec![(agent(), Some(500)), (flag(), Some(100))]), Some((flag(), Some(100))));
        assert_eq!(choose_lead(vec![(agent(), Some(100)), (flag(), Some(500))]), Some((agent(), Some(100))));
        // One has fewer runs than the window: all of them are read, whatever the other.
        assert_eq!(choose_lead(vec![(agent(), Some(100)), (flag(), None)]), Some((flag(), None)));
        assert_eq!(choose_lead(vec![(agent(), None), (flag(), None)]), Some((agent(), None)));
        assert_eq!(choose_lead(vec![(agent(), Some(7)), (flag(), Some(7))]), Some((agent(), Some(7))));
        assert_eq!(choose_lead(vec![]), None);
    }

    #[test]
    fn parameters_become_a_query_or_name_what_is_wrong() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-12-04T12:00:00Z").unwrap().with_timezone(&chrono::Utc);
        let params = |f: fn(&mut QueryParams)| {
            let mut p = QueryParams::default();
            f(&mut p);
            p
        };
        let q = params(|p| {
            p.terminal_reason = Some("error".into());
            p.range = Some("24h".into());
            p.sort = Some("cost".into());
            p.agent = Some("  ".into());
        })
        .into_query(now)
        .unwrap();
        assert_eq!(q.terminal_reason, Some(TerminalReason::Error));
        assert_eq!(q.sort, RunSort::Cost);
        assert_eq!(q.agent, None, "an empty field is absent");
        assert_eq!(q.since_ns, Some((now - chrono::Duration::hours(24)).timestamp_nanos_opt().unwrap()));
        assert_eq!(q.limit, 50);
        let err = params(|p| p.limit = Some(501)).into_query(now).unwrap_err();
        assert_eq!(err, "`limit` must be between 1 and 500, got 501");
        let err = params(|p| p.flag = Some("dupes".into())).into_query(now).unwrap_err();
        assert!(err.contains("unknown flag `dupes`"), "{err}");
        let err = params(|p| p.since = Some("yesterday".into())).into_query(now).unwrap_err();
        assert!(err.contains("`since` must be an RFC 3339 time"), "{err}");
        let q = params(|p| p.q = Some(" key-1 ".into())).into_query(now).unwrap();
        assert_eq!(q.term(), Some("key-1"));
        assert!(!q.filters_on_runs());
    }
}
