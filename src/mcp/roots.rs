//! The client's roots, as a session learns them on the wire: the server asks `roots/list`, the
//! client answers with its roots (URIs of the directories the user gave the agent), and the
//! boundary reads the answer on its way. `notifications/roots/list_changed` makes what was
//! learned stale until the next answer: the roots are then not known (rules on them say what
//! that leads to), never the old ones.

use serde::Deserialize;
use serde_json::value::RawValue;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

/// `roots/list` requests of the server awaited at most (older ones are forgotten).
const MAX_ASKED: usize = 16;
/// Roots kept of one answer at most.
const MAX_ROOTS: usize = 256;

/// A session's knowledge of its client's roots.
#[derive(Debug, Default)]
pub struct Roots {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// The ids (JSON text) of the server's `roots/list` requests not answered yet.
    asked: VecDeque<String>,
    known: Option<Arc<[String]>>,
}

impl Roots {
    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server asked for the roots, in its request `id`.
    pub fn asked(&self, id: &RawValue) {
        let mut state = self.state();
        if state.asked.len() == MAX_ASKED {
            state.asked.pop_front();
        }
        state.asked.push_back(id.get().to_owned());
    }

    /// The client answered `id` with `result` (its JSON text): if it answers a `roots/list`,
    /// its roots are known (a result that is not a list of roots makes them unknown). Any other
    /// answer is not read.
    pub fn answered(&self, id: &RawValue, result: Option<&[u8]>) {
        let mut state = self.state();
        let Some(at) = state.asked.iter().position(|asked| asked == id.get()) else {
            return;
        };
        state.asked.remove(at);
        state.known = result.and_then(read);
    }

    /// The client said its roots changed: unknown until the answer to a request asked after
    /// it (an answer to one asked before would bring the old roots back).
    pub fn changed(&self) {
        let mut state = self.state();
        state.known = None;
        state.asked.clear();
    }

    /// The roots, when known.
    pub fn known(&self) -> Option<Arc<[String]>> {
        self.state().known.clone()
    }
}

/// A `roots/list` result's root URIs; `None` when it is not one.
fn read(result: &[u8]) -> Option<Arc<[String]>> {
    #[derive(Deserialize)]
    struct Listed {
        roots: Vec<Root>,
    }
    #[derive(Deserialize)]
    struct Root {
        uri: String,
    }
    let listed: Listed = serde_json::from_slice(result).ok()?;
    if listed.roots.len() > MAX_ROOTS {
        return None;
    }
    Some(listed.roots.into_iter().map(|r| r.uri).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("JSON")
    }

    #[test]
    fn roots_are_learned_from_the_answer_to_the_servers_request_and_go_stale_on_change() {
        let roots = Roots::default();
        let listed = raw(r#"{"roots":[{"uri":"file:///srv/a","name":"a"}]}"#);
        roots.answered(&raw("1"), Some(listed.get().as_bytes()));
        assert!(roots.known().is_none(), "an answer to nothing asked");
        roots.asked(&raw(r#""r1""#));
        roots.answered(&raw(r#""r1""#), Some(listed.get().as_bytes()));
        assert_eq!(
            roots.known().as_deref(),
            Some(&["file:///srv/a".to_owned()][..])
        );
        roots.asked(&raw("3"));
        roots.changed();
        assert!(roots.known().is_none());
        roots.answered(&raw("3"), Some(listed.get().as_bytes()));
        assert!(
            roots.known().is_none(),
            "asked before the change: the old roots"
        );
        roots.asked(&raw("2"));
        roots.answered(&raw("2"), Some(raw(r#"{"roots":"all"}"#).get().as_bytes()));
        assert!(roots.known().is_none(), "not a list of roots");
    }
}
