//! The hasher of a session's maps ([`super::session`], [`super::view`]), keyed by ids and names
//! its peers choose: ahash, where SipHash cost about 150 instructions a look-up (a few a call). A
//! peer cannot aim its keys at collisions: ahash's keys are drawn at random for each process (its
//! `runtime-rng`). The maps are bounded too: requests in flight and those cancelled by
//! `max_in_flight`, the tools followed by the session's bound, a view's tools by its own.

pub(super) type HashMap<K, V> = std::collections::HashMap<K, V, ahash::RandomState>;
pub(super) type HashSet<T> = std::collections::HashSet<T, ahash::RandomState>;
