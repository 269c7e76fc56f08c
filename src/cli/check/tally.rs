//! What a run counts: checks by server, tool and payload, by attempt and outcome, the checks the
//! policy would reject, and the fields that fail. Each judging thread keeps its own tally; they
//! are added up at the end. Every map is bounded, whatever the log holds: past the bound, new
//! keys fold into `_other`, as the service's metrics fold label values.

use crate::core::check::PayloadKind;
use crate::core::metrics::Attempt;
use crate::core::verdict::{clip, field_path, Outcome, Verdict};
use hashbrown::{Equivalent, HashMap};
use std::hash::{Hash, Hasher};

/// Most (server, tool, payload) rows a tally keeps apart.
const MAX_ROWS: usize = 10_000;
/// Most failing fields a tally keeps apart.
const MAX_FIELDS: usize = 10_000;
/// The longest instance path kept apart (longer ones are cut, ending in `…`): property names
/// come from the payload, which may be megabytes.
const MAX_PATH_BYTES: usize = 256;
/// What a key past its bound becomes.
pub const OTHER: &str = "_other";
/// The server or tool of a check that names none.
pub const NONE: &str = "-";

/// A (server, tool, payload) row's key.
pub type RowKey = (String, String, PayloadKind);

/// A failing field's key: the row's, the instance path with indices folded, the keyword.
pub type FieldKey = (String, String, PayloadKind, String, String);

/// One row's counts.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Row {
    /// Checks by attempt (first, retry) and outcome (in [`Outcome::ALL`] order).
    pub outcomes: [[u64; Outcome::ALL.len()]; 2],
    /// Checks the policy would reject (or, on the MCP wire, withhold).
    pub rejected: u64,
}

impl Row {
    pub fn checks(&self) -> u64 {
        self.outcomes.iter().flatten().sum()
    }

    /// Checks with `outcome`, over both attempts.
    pub fn outcome(&self, outcome: Outcome) -> u64 {
        self.outcomes.iter().map(|a| a[outcome.index()]).sum()
    }

    /// Valid and invalid checks of `attempt`: compliance is the first over their sum.
    pub fn judged(&self, attempt: Attempt) -> (u64, u64) {
        let a = &self.outcomes[attempt as usize];
        (a[Outcome::Valid.index()], a[Outcome::Invalid.index()])
    }

    fn add(&mut self, other: &Row) {
        for (mine, theirs) in self.outcomes.iter_mut().zip(&other.outcomes) {
            for (m, t) in mine.iter_mut().zip(theirs) {
                *m += t;
            }
        }
        self.rejected += other.rejected;
    }
}

/// The check a verdict or error belongs to, as far as it is known.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub server: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub payload: PayloadKind,
    pub attempt: u32,
    pub call_id: Option<&'a str>,
}

/// What a check found, as a tally reads it.
#[derive(Debug, Clone, Copy)]
pub struct Seen<'a> {
    pub subject: Subject<'a>,
    pub outcome: Outcome,
    pub rejected: bool,
    pub verdict: Option<&'a Verdict>,
}

/// The counts of a run, or of one thread's share of it.
#[derive(Debug, Default)]
pub struct Tally {
    pub rows: HashMap<RowKey, Row>,
    pub fields: HashMap<FieldKey, u64>,
    /// Lines (or tools-file entries) that could not be checked.
    pub input_errors: u64,
    /// Transcript lines that are no JSON-RPC message (a server's banner, say): passed over, as
    /// the proxy relays them unjudged.
    pub passed_over: u64,
    /// Calls (on the MCP wire) to a tool no listing and no tools file names: the server answers
    /// them itself, as the relay relays them.
    pub unknown_tools: u64,
}

impl Tally {
    /// Counts one check.
    pub fn count(&mut self, seen: Seen<'_>) {
        let Subject {
            server,
            tool,
            payload,
            attempt,
            ..
        } = seen.subject;
        let server = cut(server.unwrap_or(NONE), MAX_PATH_BYTES);
        let tool = cut(tool.unwrap_or(NONE), MAX_PATH_BYTES);
        // Found without building a key: a row is made once per server, tool and payload.
        let found = RowRef(server, tool, payload);
        let row = match self.rows.get_mut(&found) {
            Some(row) => row,
            None => {
                let key = (server.to_owned(), tool.to_owned(), payload);
                bounded(&mut self.rows, key, MAX_ROWS, |(_, _, payload)| {
                    (OTHER.to_owned(), OTHER.to_owned(), *payload)
                })
            }
        };
        row.outcomes[Attempt::of(attempt) as usize][seen.outcome.index()] += 1;
        row.rejected += u64::from(seen.rejected);
        let Some(verdict) = seen.verdict.filter(|v| v.outcome == Outcome::Invalid) else {
            return;
        };
        for error in &verdict.errors {
            let key = (
                server.to_owned(),
                tool.to_owned(),
                payload,
                clip(field_path(error), MAX_PATH_BYTES),
                error.keyword.clone(),
            );
            *bounded(&mut self.fields, key, MAX_FIELDS, fold_field) += 1;
        }
    }

    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: Tally) {
        for (key, row) in other.rows {
            bounded(&mut self.rows, key, MAX_ROWS, |(_, _, payload)| {
                (OTHER.to_owned(), OTHER.to_owned(), *payload)
            })
            .add(&row);
        }
        for (key, n) in other.fields {
            *bounded(&mut self.fields, key, MAX_FIELDS, fold_field) += n;
        }
        self.input_errors += other.input_errors;
        self.passed_over += other.passed_over;
        self.unknown_tools += other.unknown_tools;
    }

    /// All rows added up.
    pub fn total(&self) -> Row {
        let mut total = Row::default();
        for row in self.rows.values() {
            total.add(row);
        }
        total
    }

    /// The `n` fields that fail most, most first (ties in key order, so a run reads the same
    /// every time).
    pub fn top_fields(&self, n: usize) -> Vec<(&FieldKey, u64)> {
        let mut fields: Vec<(&FieldKey, u64)> = self.fields.iter().map(|(k, n)| (k, *n)).collect();
        fields.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        fields.truncate(n);
        fields
    }

    /// The rows in key order.
    pub fn sorted_rows(&self) -> Vec<(&RowKey, &Row)> {
        let mut rows: Vec<_> = self.rows.iter().collect();
        rows.sort_unstable_by(|a, b| a.0.cmp(b.0));
        rows
    }
}

/// A failing field past the bound: all of it folded but the payload (so the map stays
/// bounded, at most one folded key per payload).
fn fold_field((_, _, payload, _, _): &FieldKey) -> FieldKey {
    let other = || OTHER.to_owned();
    (other(), other(), *payload, other(), other())
}

/// A row's key, borrowed: hashes as [`RowKey`] does.
struct RowRef<'a>(&'a str, &'a str, PayloadKind);

impl Hash for RowRef<'_> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.hash(state);
        self.1.hash(state);
        self.2.hash(state);
    }
}

impl Equivalent<RowKey> for RowRef<'_> {
    fn equivalent(&self, key: &RowKey) -> bool {
        key.0 == self.0 && key.1 == self.1 && key.2 == self.2
    }
}

/// `map`'s entry for `key`; when `map` is full and `key` new, the entry of `fold(&key)`.
fn bounded<K, V>(
    map: &mut HashMap<K, V>,
    key: K,
    limit: usize,
    fold: impl FnOnce(&K) -> K,
) -> &mut V
where
    K: std::hash::Hash + Eq,
    V: Default,
{
    let key = if map.len() >= limit && !map.contains_key(&key) {
        fold(&key)
    } else {
        key
    };
    map.entry(key).or_default()
}

/// `text`'s first `max` bytes at most (to a character boundary): a transcript's tool names are
/// the client's.
fn cut(text: &str, max: usize) -> &str {
    let mut end = text.len().min(max);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `part / whole` of valid over judged checks; `None` when none was judged.
pub fn ratio((valid, invalid): (u64, u64)) -> Option<f64> {
    let judged = valid + invalid;
    (judged > 0).then(|| valid as f64 / judged as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::domain::Tier;
    use crate::core::verdict::Action;
    use crate::core::verdict::ValidationFailure;

    fn invalid(paths: &[&str]) -> Verdict {
        Verdict {
            valid: Some(false),
            action: Action::Reject,
            tier: Tier::Untrusted,
            outcome: Outcome::Invalid,
            schema_hash: None,
            errors: paths
                .iter()
                .map(|p| ValidationFailure {
                    instance_path: (*p).to_owned(),
                    schema_path: String::new(),
                    keyword: "type".to_owned(),
                    message: String::new(),
                })
                .collect(),
            truncated: false,
            feedback: String::new(),
            findings: Vec::new(),
            shadow: None,
            call_id: None,
        }
    }

    fn seen<'a>(tool: &'a str, attempt: u32, verdict: &'a Verdict) -> Seen<'a> {
        Seen {
            subject: Subject {
                server: Some("crm"),
                tool: Some(tool),
                payload: PayloadKind::Result,
                attempt,
                call_id: None,
            },
            outcome: verdict.outcome,
            rejected: verdict.action == Action::Reject,
            verdict: Some(verdict),
        }
    }

    #[test]
    fn counts_add_up_across_threads_and_fields_fold_their_indices() {
        let bad = invalid(&["/items/3/id", "/items/4/id"]);
        let mut one = Tally::default();
        one.count(seen("list", 1, &bad));
        let mut two = Tally::default();
        two.count(seen("list", 2, &bad));
        one.add(two);
        let row = &one.rows[&("crm".to_owned(), "list".to_owned(), PayloadKind::Result)];
        assert_eq!(row.checks(), 2);
        assert_eq!(row.rejected, 2);
        assert_eq!(row.judged(Attempt::First), (0, 1));
        assert_eq!(row.judged(Attempt::Retry), (0, 1));
        let top = one.top_fields(5);
        assert_eq!(top.len(), 1);
        assert_eq!(top[0].0 .3, "/items/*/id");
        assert_eq!(top[0].1, 4);
    }

    #[test]
    fn keys_past_the_bound_fold_into_other() {
        let bad = invalid(&[]);
        let mut tally = Tally::default();
        let tools: Vec<String> = (0..MAX_ROWS + 5).map(|i| format!("t{i}")).collect();
        for tool in &tools {
            tally.count(seen(tool, 1, &bad));
        }
        assert_eq!(tally.rows.len(), MAX_ROWS + 1);
        let other = &tally.rows[&(OTHER.to_owned(), OTHER.to_owned(), PayloadKind::Result)];
        assert_eq!(other.checks(), 5);
        assert_eq!(tally.total().checks(), (MAX_ROWS + 5) as u64);
    }

    #[test]
    fn compliance_is_none_when_nothing_was_judged() {
        assert_eq!(ratio((0, 0)), None);
        assert_eq!(ratio((3, 1)), Some(0.75));
    }
}
