//! The schema texts this instance has seen by hash, so a check may name a schema by its hash.
//!
//! Kept apart from the compiled-validator cache: a text is small beside its validator, so the
//! store keeps texts long after their validators were dropped for idleness or size, and a hash
//! resolves (and is compiled again on demand) for as long as its text is here. The store is
//! bounded by its own byte budget (`--max-schema-text-bytes`) and has no idle expiry: it drops
//! the least recently used texts only when full. Texts of registered tools are not held here but
//! by the registry itself, for as long as the registration lasts.

use crate::core::domain::SchemaHash;
use bytes::Bytes;
use hashbrown::DefaultHashBuilder;
use moka::sync::Cache;

/// What each stored text costs besides its bytes (key, entry bookkeeping).
const ENTRY_OVERHEAD: usize = 96;

/// Schema texts by hash, bounded in bytes.
pub struct SchemaTexts {
    texts: Cache<SchemaHash, Bytes, DefaultHashBuilder>,
}

impl SchemaTexts {
    pub fn new(max_bytes: u64) -> Self {
        Self {
            texts: Cache::builder()
                .max_capacity(max_bytes)
                .weigher(|_k, v: &Bytes| {
                    u32::try_from(v.len() + ENTRY_OVERHEAD).unwrap_or(u32::MAX)
                })
                .build_with_hasher(DefaultHashBuilder::default()),
        }
    }

    /// Remembers a schema's text (copied, so the request that carried it is not pinned).
    pub fn remember(&self, hash: SchemaHash, text: &Bytes) {
        if !self.texts.contains_key(&hash) {
            self.texts.insert(hash, Bytes::copy_from_slice(text));
        }
    }

    /// The text of `hash`, if it is stored.
    pub fn get(&self, hash: &SchemaHash) -> Option<Bytes> {
        self.texts.get(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_store_drops_texts_but_keeps_what_fits() {
        let texts = SchemaTexts::new(4 * (1000 + ENTRY_OVERHEAD as u64));
        let mut hashes = Vec::new();
        for i in 0..16u8 {
            let text = Bytes::from(vec![b'a' + i; 1000]);
            let hash = SchemaHash::of(&text);
            texts.remember(hash, &text);
            hashes.push(hash);
        }
        texts.texts.run_pending_tasks();
        let kept = hashes.iter().filter(|h| texts.get(h).is_some()).count();
        assert!(
            (1..=4).contains(&kept),
            "{kept} of 16 texts kept in a 4-text budget"
        );
    }
}
