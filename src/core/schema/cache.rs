//! The compiled-schema cache (the texts themselves are kept by [`crate::core::schema::texts`] and the registry).
//!
//! Compiled validators are keyed by server, tool, schema hash and the compile options that change
//! a verdict. A hit neither parses nor compiles; concurrent first requests for one key compile
//! once; a schema that fails to compile is cached as its failure, so it costs one compile and
//! degrades only its own key. Both caches are bounded by weight (bytes) and idle time.

use crate::core::domain::SchemaHash;
use crate::core::error::CheckError;
use crate::core::metrics::Metrics;
use crate::core::policy::{CompileOptions, RegexEngine};
use crate::core::schema::compile::{compile, CompileLimits, CompiledSchema};
use bytes::Bytes;
use hashbrown::DefaultHashBuilder;
use moka::notification::RemovalCause;
use moka::sync::Cache;
use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A compile's result, kept whether it succeeded or not.
pub type Compiled = Arc<Result<CompiledSchema, CheckError>>;

/// Cache key: a digest of (server, tool, schema hash, compile options), fixed-size so a lookup
/// allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheKey([u8; 32]);

impl Hash for CacheKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // Already a digest: half of it feeds the map's own keyed hash, and equality still
        // compares all of it.
        let mut half = [0u8; 16];
        half.copy_from_slice(&self.0[..16]);
        state.write_u128(u128::from_le_bytes(half));
    }
}

impl CacheKey {
    pub fn new(
        server: Option<&str>,
        tool: Option<&str>,
        hash: &SchemaHash,
        options: CompileOptions,
    ) -> Self {
        let mut h = blake3::Hasher::new();
        for part in [server, tool] {
            match part {
                Some(s) => {
                    h.update(&[1]);
                    h.update(&(s.len() as u64).to_le_bytes());
                    h.update(s.as_bytes());
                }
                None => {
                    h.update(&[0]);
                }
            }
        }
        h.update(hash.as_bytes());
        h.update(&[
            u8::from(options.assert_formats),
            match options.regex_engine {
                RegexEngine::BoundedBacktracking => 0,
                RegexEngine::Linear => 1,
            },
        ]);
        CacheKey(*h.finalize().as_bytes())
    }
}

/// Sizes of the caches.
#[derive(Debug, Clone, Copy)]
pub struct CacheConfig {
    /// Weighted capacity of the compiled cache, in estimated bytes.
    pub max_bytes: u64,
    /// Entries unused this long are dropped.
    pub idle: Duration,
}

/// A compiled validator is estimated at this many times its schema text, plus the heap its
/// compiled patterns report, plus a fixed overhead (formats and small patterns dominate small
/// schemas). Measured with the load harness's memory
/// leg: 100,000 small schemas with one pattern each cost about 15 KiB of resident memory apiece.
const COMPILED_WEIGHT_FACTOR: u64 = 16;
/// Compiled patterns weigh this many times the heap their engine reports: measured with the load
/// harness's regex memory leg, resident size grows about 1.7 times that figure (the validator's
/// own copies, match caches, allocator overhead).
const REGEX_WEIGHT_FACTOR: u64 = 2;
const ENTRY_OVERHEAD: u64 = 16 * 1024;

pub struct SchemaCache {
    // foldhash (keyed per process) rather than SipHash: a lookup per check, on digests.
    compiled: Cache<CacheKey, Compiled, DefaultHashBuilder>,
    limits: CompileLimits,
    metrics: Arc<Metrics>,
    /// This cache among others in the process, for [`RECENT`].
    id: u64,
}

/// The compiled schemas each thread found last in the cache ([`SchemaCache::get`]): at most this
/// many per thread.
const RECENT_PER_THREAD: usize = 4;

/// Hits a thread answers from [`RECENT`] before it asks the cache again. The cache sees each such
/// schema read once in as many hits; one it dropped meanwhile (idle by its clock, which saw
/// fewer reads, or pushed out by size) is put back then, as a read would have kept it, rather
/// than compiled again.
const HITS_BETWEEN_LOOKUPS: u32 = 64;

/// A cache lookup costs more than a check of a small payload (the cache records each read, and
/// runs its upkeep on some): a relay thread, which checks the same few tools' payloads call
/// after call, answers most from here. What a thread holds here is outside the cache's weight
/// (at most four compiled schemas a thread, until it looks up others).
struct Recent {
    cache: u64,
    key: CacheKey,
    compiled: Compiled,
    hits_left: u32,
}

thread_local! {
    static RECENT: RefCell<Vec<Recent>> = const { RefCell::new(Vec::new()) };
}

static NEXT_CACHE_ID: AtomicU64 = AtomicU64::new(0);

impl SchemaCache {
    pub fn new(config: CacheConfig, limits: CompileLimits, metrics: Arc<Metrics>) -> Self {
        let evictions = metrics.cache_evictions.clone();
        let compiled = Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(|_key, value: &Compiled| {
                let (text, regexes) = value
                    .as_ref()
                    .as_ref()
                    .map_or((0, 0), |c| (c.source_len as u64, c.regex_bytes as u64));
                u32::try_from(
                    text * COMPILED_WEIGHT_FACTOR + regexes * REGEX_WEIGHT_FACTOR + ENTRY_OVERHEAD,
                )
                .unwrap_or(u32::MAX)
            })
            .time_to_idle(config.idle)
            .eviction_listener(move |_k, _v, cause| {
                if matches!(cause, RemovalCause::Size | RemovalCause::Expired) {
                    evictions.increment(1);
                }
            })
            .build_with_hasher(DefaultHashBuilder::default());
        Self {
            compiled,
            limits,
            metrics,
            id: NEXT_CACHE_ID.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// The compiled schema for `key`, compiling `text` on a miss (once, however many ask at once).
    /// The caller must be on a thread that may block: a miss compiles in place.
    /// Also says whether this call compiled (a miss).
    pub fn get_or_compile(
        &self,
        key: CacheKey,
        text: &Bytes,
        options: CompileOptions,
        count_hit: bool,
    ) -> (Compiled, bool) {
        if let Some(hit) = self.compiled.get(&key) {
            if count_hit {
                self.metrics.cache_hits.increment(1);
            }
            return (hit, false);
        }
        let mut compiled_here = false;
        let entry = self.compiled.get_with(key, || {
            compiled_here = true;
            self.compile_now(text, options)
        });
        if compiled_here {
            self.metrics.cache_misses.increment(1);
        } else if count_hit {
            self.metrics.cache_hits.increment(1);
        }
        (entry, compiled_here)
    }

    /// The compiled schema for `key` if it is cached; never compiles. Most hits are answered
    /// from the thread's [`RECENT`] ones.
    pub fn get(&self, key: &CacheKey) -> Option<Compiled> {
        let hit = match self.recent(key) {
            Some((hit, 0)) => {
                // Its hits here are spent: the cache reads it again (its copy kept, should
                // another thread have compiled it meanwhile), or has it back; it starts over.
                let hit = self.compiled.get(key).unwrap_or_else(|| {
                    self.compiled.insert(*key, Arc::clone(&hit));
                    hit
                });
                self.remember(*key, &hit);
                Some(hit)
            }
            Some((hit, _)) => Some(hit),
            None => self
                .compiled
                .get(key)
                .inspect(|hit| self.remember(*key, hit)),
        };
        if hit.is_some() {
            self.metrics.cache_hits.increment(1);
        }
        hit
    }

    /// `key`'s compiled schema, if this thread found it lately, and the hits it has left here.
    fn recent(&self, key: &CacheKey) -> Option<(Compiled, u32)> {
        RECENT.with_borrow_mut(|recent| {
            let found = recent
                .iter_mut()
                .find(|r| r.cache == self.id && r.key == *key)?;
            found.hits_left = found.hits_left.saturating_sub(1);
            Some((Arc::clone(&found.compiled), found.hits_left))
        })
    }

    /// Keeps `compiled`, just found in the cache, as this thread's latest [`RECENT`] one: in
    /// place of `key`'s, or else of the one kept longest if there are as many as are kept.
    fn remember(&self, key: CacheKey, compiled: &Compiled) {
        RECENT.with_borrow_mut(|recent| {
            match recent
                .iter()
                .position(|r| r.cache == self.id && r.key == key)
            {
                Some(at) => {
                    recent.remove(at);
                }
                None if recent.len() == RECENT_PER_THREAD => {
                    recent.remove(0);
                }
                None => {}
            }
            recent.push(Recent {
                cache: self.id,
                key,
                compiled: Arc::clone(compiled),
                hits_left: HITS_BETWEEN_LOOKUPS,
            });
        })
    }

    fn compile_now(&self, text: &Bytes, options: CompileOptions) -> Compiled {
        let start = Instant::now();
        let result = compile(text, options, &self.limits);
        self.metrics.compiles.increment(1);
        self.metrics
            .compile_duration
            .record(start.elapsed().as_secs_f64());
        if let Err(e) = &result {
            self.metrics.compile_failures.increment(1);
            tracing::info!(code = e.code(), error = %e, "schema did not compile");
        }
        Arc::new(result)
    }

    /// Refreshes the entry gauge (entry counts are kept lazily by the cache).
    pub fn refresh_gauges(&self) {
        self.compiled.run_pending_tasks();
        self.metrics
            .cache_entries
            .set(self.compiled.entry_count() as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPTIONS: CompileOptions = CompileOptions::ALL[0];

    fn cache() -> SchemaCache {
        SchemaCache::new(
            CacheConfig {
                max_bytes: 64 << 20,
                idle: Duration::from_secs(3600),
            },
            CompileLimits {
                max_schema_bytes: 1 << 20,
                max_depth: 64,
                max_schema_cost: 10_000,
                max_schema_regex_bytes: 16 << 20,
            },
            Arc::new(Metrics::new(1, 10_000)),
        )
    }

    /// A schema in use that the cache dropped is answered from a thread's recent ones and put
    /// back in the cache within a bounded number of hits, not compiled again; another cache,
    /// even with the same key, never sees this one's.
    #[test]
    fn a_schema_in_use_is_put_back_in_the_cache_within_a_bounded_number_of_hits() {
        let (cache, other) = (cache(), cache());
        let key = CacheKey::new(Some("crm"), Some("find"), &SchemaHash::of(b"{}"), OPTIONS);
        let text = Bytes::from_static(br#"{"type": "object"}"#);
        let (compiled, missed) = cache.get_or_compile(key, &text, OPTIONS, true);
        assert!(missed && compiled.is_ok());
        assert!(cache.get(&key).is_some(), "a cached schema is a hit");
        assert!(other.get(&key).is_none(), "another cache holds nothing");
        cache.compiled.invalidate(&key);
        assert!(!cache.compiled.contains_key(&key));
        for hit in 1..=HITS_BETWEEN_LOOKUPS {
            assert!(cache.get(&key).is_some(), "hit {hit}");
        }
        assert!(cache.compiled.contains_key(&key), "back in the cache");
        let (again, missed) = cache.get_or_compile(key, &text, OPTIONS, true);
        assert!(!missed, "not compiled again");
        assert!(Arc::ptr_eq(&again, &compiled));
    }
}
