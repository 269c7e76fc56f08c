//! One session's own view of its server's tools: the schemas the session's own `tools/list`
//! gave. A server may list its tools by the client's capabilities (a tool that needs sampling,
//! offered only to clients that declare it), so sessions of one route may be offered different
//! tools; each session's calls are judged by what that session was offered, whatever another
//! session's listing made the route's contract. Bounded: a listing past the bounds leaves the
//! session on the route's contract.

use crate::core::check::ListedSchemas;
use ahash::HashMap;
use std::sync::Arc;

/// Most tools a session's view holds.
pub const MAX_VIEW_TOOLS: usize = 10_000;
/// Most bytes of schema text a session's view holds that the route's contract did not hold
/// when it was listed (texts it holds are shared, not copied).
pub const MAX_VIEW_BYTES: usize = 1 << 20;

/// A tool the session's listing named: its schemas, or `None` when they could not be read (the
/// route's contract, which marks it unenforceable, decides).
pub type Offer = Option<Arc<ListedSchemas>>;

/// What the session's own listing says of a tool.
#[derive(Debug, Clone)]
pub enum Offered {
    /// The session has no complete listing of its own: the route's contract decides.
    NoView,
    /// Its listing names the tool.
    Tool(Offer),
    /// Its listing does not name the tool.
    Absent,
}

#[derive(Debug, Default)]
pub struct View {
    /// The last complete listing, by tool name.
    tools: Option<HashMap<String, Offer>>,
    /// The listing being read, page by page; `None` once it passed the bounds.
    reading: Option<Reading>,
    /// The listing being read passed the bounds: it is not kept.
    over: bool,
}

#[derive(Debug, Default)]
struct Reading {
    tools: HashMap<String, Offer>,
    /// Bytes of its schema texts the route's contract did not hold.
    own_bytes: usize,
}

impl View {
    /// A page of the session's listing: `tools` named, with `own_bytes` of schema text the route's
    /// contract does not hold. The first page starts a listing. Says whether this page took the
    /// listing past the bounds (it is then not kept).
    pub fn page(
        &mut self,
        first_page: bool,
        tools: Vec<(String, Offer)>,
        own_bytes: usize,
    ) -> bool {
        if first_page {
            self.reading = Some(Reading::default());
            self.over = false;
        }
        let Some(reading) = self.reading.as_mut() else {
            return false;
        };
        reading.own_bytes += own_bytes;
        reading.tools.extend(tools);
        if reading.tools.len() > MAX_VIEW_TOOLS || reading.own_bytes > MAX_VIEW_BYTES {
            self.reading = None;
            self.over = true;
            return true;
        }
        false
    }

    /// The listing ended: a complete one becomes the view; one cut short leaves the view as it
    /// was; one past the bounds leaves none (the route's contract decides).
    pub fn ended(&mut self, complete: bool) {
        let reading = self.reading.take();
        if !complete {
            return;
        }
        match reading {
            Some(reading) => self.tools = Some(reading.tools),
            None if self.over => self.tools = None,
            None => {}
        }
    }

    /// What the session's listing says of `tool`.
    pub fn offered(&self, tool: &str) -> Offered {
        match &self.tools {
            None => Offered::NoView,
            Some(tools) => match tools.get(tool) {
                Some(offer) => Offered::Tool(offer.clone()),
                None => Offered::Absent,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(names: &[&str]) -> Vec<(String, Offer)> {
        names.iter().map(|n| ((*n).to_owned(), None)).collect()
    }

    #[test]
    fn a_view_is_the_last_complete_listing_and_only_it() {
        let mut view = View::default();
        assert!(matches!(view.offered("a"), Offered::NoView));
        view.page(true, named(&["a"]), 0);
        view.page(false, named(&["b"]), 0);
        assert!(
            matches!(view.offered("a"), Offered::NoView),
            "not a view before it ends"
        );
        view.ended(true);
        assert!(matches!(view.offered("b"), Offered::Tool(None)));
        assert!(matches!(view.offered("c"), Offered::Absent));
        // A listing cut short leaves the view as it was.
        view.page(true, named(&["c"]), 0);
        view.ended(false);
        assert!(matches!(view.offered("a"), Offered::Tool(None)));
        assert!(matches!(view.offered("c"), Offered::Absent));
    }

    #[test]
    fn a_listing_past_the_bounds_leaves_the_route_to_decide() {
        let mut view = View::default();
        view.page(true, named(&["a"]), 0);
        view.ended(true);
        assert!(!view.page(true, named(&["a"]), 10));
        assert!(view.page(false, named(&["b"]), MAX_VIEW_BYTES));
        assert!(!view.page(false, named(&["c"]), 0), "said once");
        view.ended(true);
        assert!(matches!(view.offered("a"), Offered::NoView));
        let many: Vec<String> = (0..=MAX_VIEW_TOOLS).map(|i| format!("t{i}")).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(view.page(true, named(&many), 0));
        view.ended(true);
        assert!(matches!(view.offered("t0"), Offered::NoView));
    }
}
