//! A count of events between log lines, so that a flood costs a log line a second.

use std::time::{Duration, Instant};

/// Events counted between log lines: a log line is due at most once a second, and says how many
/// came since the last.
#[derive(Debug, Default)]
pub struct Tally {
    since: u64,
    logged: Option<Instant>,
}

impl Tally {
    /// Counts one event: when a log line is due, how many to report (counting starts again).
    pub fn count(&mut self) -> Option<u64> {
        self.since += 1;
        let due = self
            .logged
            .is_none_or(|at| at.elapsed() >= Duration::from_secs(1));
        due.then(|| {
            self.logged = Some(Instant::now());
            std::mem::take(&mut self.since)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_is_reported_once_with_its_count() {
        let mut tally = Tally::default();
        assert_eq!(tally.count(), Some(1), "the first is logged at once");
        assert_eq!(tally.count(), None);
        assert_eq!(tally.count(), None);
        tally.logged = tally.logged.map(|at| at - Duration::from_secs(2));
        assert_eq!(
            tally.count(),
            Some(3),
            "the next log line counts those since"
        );
    }
}
