//! Schemas: what a schema may cost before it runs ([`analysis`]), its compilation into a
//! validator that refuses hostile schemas ([`compile`]), the cache of compiled schemas ([`cache`]),
//! and schema texts by hash, kept apart from the cache ([`texts`]).

pub(crate) mod analysis;
pub mod cache;
pub mod compile;
pub mod texts;
