//! The shared registry: registrations and schema texts in Redis (`--registry redis://...`), so
//! every replica answers for every contract, and contracts outlive restarts.
//!
//! Checks never wait on Redis: they read the in-process [`Registry`] and [`SchemaTexts`], which
//! this module keeps a copy of what Redis holds:
//!
//! - a registration is written to Redis in one transaction (`MULTI`/`EXEC`: the schema texts,
//!   the server's tools replaced or merged, its entry in the server index, and a notification)
//!   before it is put in force here and acknowledged, so an acknowledged registration is in
//!   Redis;
//! - every replica subscribes to the notifications and re-reads the server named in each; after
//!   a lost subscription it subscribes again and reads everything (a full resync), and it is not
//!   ready until its first full read;
//! - a check that names a server, tool or hash this replica does not hold reads through to
//!   Redis once, on a worker, before it is answered 404; a miss is remembered for
//!   [`MISS_TTL`], so a flood of unknown names costs Redis at most one read per name and that
//!   long, and at most [`MAX_READING_THROUGH`] at once.
//!
//! Keys (a database of its own, or a Redis of its own, per deployment):
//!
//! - `schemagate:servers`: a hash, server -> `{"at", "by", "protocol"}` of its latest
//!   registration;
//! - `schemagate:tools:{server}`: a hash, tool -> `{"input", "output", "protocol", "at", "by"}`
//!   (schema hashes in hex);
//! - `schemagate:schema:{hash}`: a schema's text. Registered texts never expire; texts learned
//!   from inline checks expire after `--registry-schema-ttl-secs` unless registered since;
//! - `schemagate:changes`: the channel each change names its server on.

mod contracts;
mod failure;
mod records;

pub use self::failure::redacted;
use self::failure::{unavailable, FollowError};

use self::contracts::push_history;
use self::records::{
    build, readable_tools, text_key, tools_key, ServerRecord, ToolRecord, CHANGES, SERVERS,
};
use super::history::Version;
use super::{Registry, ServerTools};
use crate::core::domain::SchemaHash;
use crate::core::error::CheckError;
use crate::core::metrics::{Metrics, RegistryOp};
use crate::core::schema::texts::SchemaTexts;
use bytes::Bytes;
use futures_util::StreamExt;
use hashbrown::{DefaultHashBuilder, HashMap, HashSet};
use moka::sync::Cache;
use redis::aio::ConnectionManager;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// How long a name or hash Redis did not have is answered 404 without asking again.
pub const MISS_TTL: Duration = Duration::from_secs(1);
/// Most reads through to Redis at once; past it, a miss is answered 404 at once.
pub const MAX_READING_THROUGH: usize = 4;
/// The longest a read-through may take before the check is answered 404.
const READ_THROUGH_TIMEOUT: Duration = Duration::from_millis(500);
/// How often the subscription is pinged, so a silent connection is noticed.
const PING_EVERY: Duration = Duration::from_secs(2);
/// Inline schema texts waiting to be written to Redis; past it, they are not shared.
const REMEMBER_QUEUE: usize = 1024;
/// The first wait before reconnecting; it doubles up to 2 s, and starts again once connected.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// Keys read or written per Redis command in a full resync.
const CHUNK: usize = 256;

/// How the shared registry is reached.
#[derive(Debug, Clone)]
pub struct RedisConfig {
    /// `redis://` or `rediss://` (TLS), with user, password and database number as Redis URLs
    /// have them.
    pub url: String,
    /// The longest one Redis command (or a connection) may take.
    pub timeout: Duration,
    /// How long a text learned from an inline check is kept in Redis.
    pub text_ttl: Duration,
}

/// What a check did not find here.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Miss {
    Tool { server: String, tool: String },
    Hash(SchemaHash),
}

/// The shared registry's side of this replica.
pub struct RedisRegistry {
    client: redis::Client,
    commands: ConnectionManager,
    registry: Arc<Registry>,
    texts: Arc<SchemaTexts>,
    metrics: Arc<Metrics>,
    config: RedisConfig,
    /// Subscribed, and caught up since.
    connected: AtomicBool,
    /// Cancelled once the first full read is done: the replica may report ready.
    synced: CancellationToken,
    misses: Cache<Miss, (), DefaultHashBuilder>,
    reading_through: AtomicUsize,
    runtime: tokio::runtime::Handle,
    remember: mpsc::Sender<(SchemaHash, Bytes)>,
    remembered: std::sync::Mutex<Option<mpsc::Receiver<(SchemaHash, Bytes)>>>,
    /// Held from reading Redis to putting what was read in force, so that reads are put in
    /// force in the order they were made: an older read never overwrites a newer one.
    applying: tokio::sync::Mutex<()>,
}

impl RedisRegistry {
    /// Connects lazily: nothing is sent before [`RedisRegistry::start`]. Must be called within a
    /// Tokio runtime.
    pub fn new(
        config: RedisConfig,
        registry: Arc<Registry>,
        texts: Arc<SchemaTexts>,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Arc<Self>> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| {
            anyhow::anyhow!("--registry: the shared registry must be set up within a Tokio runtime")
        })?;
        let client = redis::Client::open(config.url.as_str())
            .map_err(|e| anyhow::anyhow!("--registry {}: {e}", redacted(&config.url)))?;
        let commands = ConnectionManager::new_lazy_with_config(
            client.clone(),
            redis::aio::ConnectionManagerConfig::new()
                .set_connection_timeout(Some(config.timeout))
                .set_response_timeout(Some(config.timeout))
                .set_number_of_retries(1)
                .set_max_delay(Duration::from_millis(500)),
        )
        .map_err(|e| anyhow::anyhow!("--registry {}: {e}", redacted(&config.url)))?;
        let (remember, remembered) = mpsc::channel(REMEMBER_QUEUE);
        metrics.registry().connected.set(0.0);
        Ok(Arc::new(Self {
            client,
            commands,
            registry,
            texts,
            metrics,
            config,
            connected: AtomicBool::new(false),
            synced: CancellationToken::new(),
            misses: Cache::builder()
                .max_capacity(100_000)
                .time_to_live(MISS_TTL)
                .build_with_hasher(DefaultHashBuilder::default()),
            reading_through: AtomicUsize::new(0),
            runtime,
            remember,
            remembered: std::sync::Mutex::new(Some(remembered)),
            applying: tokio::sync::Mutex::new(()),
        }))
    }

    /// Follows Redis until `stop`: subscribes, reads everything, then applies each change;
    /// after a lost connection, does it all again. Also writes the texts of inline schemas.
    pub fn start(self: &Arc<Self>, stop: CancellationToken) {
        let follower = Arc::clone(self);
        let until = stop.clone();
        tokio::spawn(async move { follower.follow(until).await });
        let receiver = self.remembered.lock().ok().and_then(|mut r| r.take());
        if let Some(receiver) = receiver {
            let writer = Arc::clone(self);
            tokio::spawn(async move { writer.write_texts(receiver, stop).await });
        }
    }

    /// Resolves once the first full read is done.
    pub fn synced(&self) -> &CancellationToken {
        &self.synced
    }

    pub fn is_connected(&self) -> bool {
        self.connected.load(Ordering::Relaxed)
    }

    fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::Relaxed);
        self.metrics
            .registry()
            .connected
            .set(if connected { 1.0 } else { 0.0 });
    }

    fn failed(&self, op: RegistryOp, e: &dyn std::fmt::Display) {
        self.metrics.registry().error(op);
        tracing::warn!(op = op.as_str(), error = %e, "registry (Redis) operation failed");
    }

    async fn follow(self: Arc<Self>, stop: CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let result = tokio::select! {
                () = stop.cancelled() => return,
                result = self.follow_once(&stop, &mut backoff) => result,
            };
            self.set_connected(false);
            match result {
                Ok(()) => return,
                Err(e) => self.failed(RegistryOp::Subscribe, &e),
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }

    /// One subscription: subscribe, read everything, apply changes until the connection fails.
    async fn follow_once(
        &self,
        stop: &CancellationToken,
        backoff: &mut Duration,
    ) -> Result<(), FollowError> {
        let pubsub = tokio::time::timeout(self.config.timeout, self.client.get_async_pubsub())
            .await
            .map_err(|_| FollowError::Timeout("connecting"))??;
        let (mut sink, mut changes) = pubsub.split();
        tokio::time::timeout(self.config.timeout, sink.subscribe(CHANGES))
            .await
            .map_err(|_| FollowError::Timeout("subscribing"))??;
        // Subscribed first, then read: a change made in between is both read and notified.
        let mut conn = self.commands.clone();
        self.resync(&mut conn).await.inspect_err(|e| {
            self.failed(RegistryOp::Sync, e);
        })?;
        self.set_connected(true);
        *backoff = FIRST_BACKOFF;
        self.metrics.registry().resyncs.increment(1);
        self.synced.cancel();
        tracing::info!(
            servers = self.registry.load().iter().count(),
            "registry (Redis) read in full; following its changes"
        );
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            tokio::select! {
                () = stop.cancelled() => return Ok(()),
                message = changes.next() => {
                    let Some(message) = message else {
                        return Err(FollowError::Closed);
                    };
                    let server = String::from_utf8_lossy(message.get_payload_bytes()).into_owned();
                    self.refresh(&mut conn, &server).await.inspect_err(|e| {
                        self.failed(RegistryOp::Sync, e);
                    })?;
                }
                _ = ping.tick() => {
                    tokio::time::timeout(self.config.timeout, sink.ping::<redis::Value>())
                        .await
                        .map_err(|_| FollowError::Timeout("pinging"))??;
                }
            }
        }
    }

    /// Reads one server's registration and puts it in force here (or removes it).
    async fn refresh(
        &self,
        conn: &mut ConnectionManager,
        server: &str,
    ) -> Result<bool, FollowError> {
        let _applying = self.applying.lock().await;
        let read = self.read_servers(conn, &[server.to_owned()]).await?;
        let registration = read.into_iter().next().and_then(|(_, r)| r);
        let found = registration.is_some();
        self.registry
            .apply(server, registration)
            .map_err(|e| FollowError::Apply(e.to_string()))?;
        Ok(found)
    }

    /// Reads every registration and replaces this replica's with them.
    async fn resync(&self, conn: &mut ConnectionManager) -> Result<(), FollowError> {
        let _applying = self.applying.lock().await;
        let index: std::collections::HashMap<String, Vec<u8>> = self
            .timed(redis::cmd("HGETALL").arg(SERVERS).query_async(conn))
            .await?;
        let names: Vec<String> = index.into_keys().collect();
        let mut all = HashMap::with_capacity(names.len());
        for chunk in names.chunks(CHUNK) {
            for (server, registration) in self.read_servers(conn, chunk).await? {
                if let Some(r) = registration {
                    all.insert(server, r);
                }
            }
        }
        self.registry
            .replace_all(all)
            .map_err(|e| FollowError::Apply(e.to_string()))
    }

    async fn timed<T>(
        &self,
        query: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, FollowError> {
        Ok(tokio::time::timeout(self.config.timeout, query)
            .await
            .map_err(|_| FollowError::Timeout("waiting for an answer"))??)
    }

    /// Reads the registrations of `servers` (`None` for one Redis does not hold), with the texts
    /// of their schemas that this replica does not hold.
    async fn read_servers(
        &self,
        conn: &mut ConnectionManager,
        servers: &[String],
    ) -> Result<Vec<(String, Option<ServerTools>)>, FollowError> {
        let mut pipe = redis::pipe();
        for server in servers {
            pipe.cmd("HGET").arg(SERVERS).arg(server);
            pipe.cmd("HGETALL").arg(tools_key(server));
        }
        type Read = (Option<Vec<u8>>, std::collections::HashMap<String, Vec<u8>>);
        let read: Vec<redis::Value> = self.timed(pipe.query_async(conn)).await?;
        let mut records = Vec::with_capacity(servers.len());
        let mut pairs = read.into_iter();
        for server in servers {
            let (Some(meta), Some(tools)) = (pairs.next(), pairs.next()) else {
                return Err(FollowError::Apply("a short answer from Redis".into()));
            };
            let (meta, tools): Read = (
                redis::from_redis_value(meta)?,
                redis::from_redis_value(tools)?,
            );
            records.push((server.clone(), meta, tools));
        }
        // The texts this replica does not hold yet.
        let held = self.registry.load();
        let mut wanted: HashSet<SchemaHash> = HashSet::new();
        let mut parsed = Vec::with_capacity(records.len());
        for (server, meta, tools) in records {
            let meta = meta.and_then(|m| serde_json::from_slice::<ServerRecord>(&m).ok());
            let tools = readable_tools(&server, tools);
            for (_, record) in &tools {
                for hex in [
                    &record.input,
                    &record.output,
                    &record.shadow_input,
                    &record.shadow_output,
                ]
                .into_iter()
                .flatten()
                {
                    if let Ok(hash) = SchemaHash::parse(hex) {
                        if held.text(&hash).is_none() && self.texts.get(&hash).is_none() {
                            wanted.insert(hash);
                        }
                    }
                }
            }
            parsed.push((server, meta, tools));
        }
        let fetched = self.fetch_texts(conn, wanted).await?;
        let text_of = |hash: &SchemaHash| {
            held.text(hash)
                .cloned()
                .or_else(|| self.texts.get(hash))
                .or_else(|| fetched.get(hash).cloned())
        };
        Ok(parsed
            .into_iter()
            .map(|(server, meta, tools)| {
                let registration = meta.map(|meta| build(&server, meta, tools, &text_of));
                (server, registration)
            })
            .collect())
    }

    /// The texts of the schemas `wanted`, read from Redis in chunks (a text Redis lacks is left
    /// out).
    async fn fetch_texts(
        &self,
        conn: &mut ConnectionManager,
        wanted: HashSet<SchemaHash>,
    ) -> Result<HashMap<SchemaHash, Bytes>, FollowError> {
        let mut fetched: HashMap<SchemaHash, Bytes> = HashMap::new();
        let wanted: Vec<SchemaHash> = wanted.into_iter().collect();
        for chunk in wanted.chunks(CHUNK) {
            let keys: Vec<String> = chunk.iter().map(text_key).collect();
            let texts: Vec<Option<Vec<u8>>> = self
                .timed(redis::cmd("MGET").arg(keys).query_async(conn))
                .await?;
            for (hash, text) in chunk.iter().zip(texts) {
                if let Some(text) = text {
                    fetched.insert(*hash, Bytes::from(text));
                }
            }
        }
        Ok(fetched)
    }

    /// Puts the registration of `server` as Redis now holds it in force here, after this replica
    /// changed it: what is answered is then what every replica converges to (a concurrent change
    /// made elsewhere included). A failure to read is logged; the follower reads everything again
    /// once Redis is back.
    pub async fn settle(&self, server: &str) {
        let mut conn = self.commands.clone();
        if let Err(e) = self.refresh(&mut conn, server).await {
            self.failed(RegistryOp::Sync, &e);
        }
    }

    /// Writes a registration to Redis (one transaction, with its notification). Only once this
    /// succeeds is it put in force (see [`RedisRegistry::settle`]) and acknowledged.
    pub async fn write(&self, prepared: &super::Prepared) -> Result<(), CheckError> {
        let server = prepared.server.as_str();
        let key = tools_key(server);
        let mut pipe = redis::pipe();
        pipe.atomic();
        let mut written = HashSet::new();
        for schema in prepared
            .tools
            .iter()
            .flat_map(|t| [&t.input, &t.output, &t.shadow_input, &t.shadow_output])
            .flatten()
        {
            if written.insert(schema.hash) {
                pipe.cmd("SET")
                    .arg(text_key(&schema.hash))
                    .arg(schema.text.as_ref())
                    .ignore();
            }
        }
        if !prepared.merge {
            pipe.cmd("DEL").arg(&key).ignore();
        }
        if !prepared.tools.is_empty() {
            let mut hset = redis::cmd("HSET");
            hset.arg(&key);
            for tool in &prepared.tools {
                let record = serde_json::to_vec(&ToolRecord::of(tool)).map_err(unavailable)?;
                hset.arg(tool.name.as_str()).arg(record);
            }
            pipe.add_command(hset).ignore();
        }
        let meta = ServerRecord::of(&prepared.provenance, prepared.protocol);
        pipe.cmd("HSET")
            .arg(SERVERS)
            .arg(server)
            .arg(serde_json::to_vec(&meta).map_err(unavailable)?)
            .ignore();
        push_history(&mut pipe, server, &prepared.versions)?;
        pipe.cmd("PUBLISH").arg(CHANGES).arg(server).ignore();
        self.query(RegistryOp::Write, pipe).await
    }

    /// Removes `tool` of `server` (or, with `None`, the server and all its tools) from Redis;
    /// says how many tools were removed, or why none was.
    /// `gone`: the versions the removal adds to the tools' histories.
    pub async fn delete(
        &self,
        server: &str,
        tool: Option<&str>,
        gone: &[(String, Version)],
    ) -> Result<usize, CheckError> {
        let key = tools_key(server);
        let mut pipe = redis::pipe();
        pipe.atomic();
        push_history(&mut pipe, server, gone)?;
        pipe.cmd("HEXISTS").arg(SERVERS).arg(server);
        match tool {
            None => {
                pipe.cmd("HLEN").arg(&key);
                pipe.cmd("DEL").arg(&key).ignore();
                pipe.cmd("HDEL").arg(SERVERS).arg(server).ignore();
            }
            Some(tool) => {
                pipe.cmd("HDEL").arg(&key).arg(tool);
            }
        }
        pipe.cmd("PUBLISH").arg(CHANGES).arg(server).ignore();
        let (exists, removed): (bool, usize) = self.query(RegistryOp::Write, pipe).await?;
        if !exists {
            return Err(CheckError::UnknownServer(server.to_owned()));
        }
        if let (Some(tool), 0) = (tool, removed) {
            return Err(CheckError::UnknownTool {
                server: server.to_owned(),
                tool: tool.to_owned(),
            });
        }
        Ok(removed)
    }

    async fn query<T: redis::FromRedisValue>(
        &self,
        op: RegistryOp,
        pipe: redis::Pipeline,
    ) -> Result<T, CheckError> {
        let mut conn = self.commands.clone();
        match self.timed(pipe.query_async::<T>(&mut conn)).await {
            Ok(v) => Ok(v),
            Err(e) => {
                self.failed(op, &e);
                Err(unavailable(e))
            }
        }
    }

    /// Shares the text of a schema first seen inline, without waiting: queued for a writer task
    /// (and not shared when the queue is full).
    pub fn share_text(&self, hash: SchemaHash, text: &Bytes) {
        if self
            .remember
            .try_send((hash, Bytes::copy_from_slice(text)))
            .is_err()
        {
            self.metrics.registry().error(RegistryOp::Remember);
        }
    }

    async fn write_texts(
        &self,
        mut queue: mpsc::Receiver<(SchemaHash, Bytes)>,
        stop: CancellationToken,
    ) {
        let ttl = self.config.text_ttl.as_secs().max(1);
        loop {
            let (hash, text) = tokio::select! {
                () = stop.cancelled() => return,
                next = queue.recv() => match next { Some(next) => next, None => return },
            };
            let mut pipe = redis::pipe();
            // NX: a registered text (no expiry) keeps its lack of one.
            pipe.cmd("SET")
                .arg(text_key(&hash))
                .arg(text.as_ref())
                .arg("NX")
                .arg("EX")
                .arg(ttl)
                .ignore();
            let _ = self.query::<()>(RegistryOp::Remember, pipe).await;
        }
    }

    /// Reads `miss` through to Redis, blocking the calling thread for at most
    /// [`READ_THROUGH_TIMEOUT`]; says whether anything was found (and is now held here). Never
    /// blocks a thread of the async runtime, asks nothing while disconnected, and remembers a
    /// miss for [`MISS_TTL`].
    pub fn read_through(&self, miss: Miss) -> bool {
        if !self.may_read_through(&miss) || tokio::runtime::Handle::try_current().is_ok() {
            return false;
        }
        if self.reading_through.fetch_add(1, Ordering::AcqRel) >= MAX_READING_THROUGH {
            self.reading_through.fetch_sub(1, Ordering::AcqRel);
            return false;
        }
        let found = self.runtime.block_on(async {
            tokio::time::timeout(READ_THROUGH_TIMEOUT, self.fetch(&miss))
                .await
                .unwrap_or(Err(FollowError::Timeout("reading through")))
        });
        self.reading_through.fetch_sub(1, Ordering::AcqRel);
        let found = match found {
            Ok(found) => found,
            Err(e) => {
                self.failed(RegistryOp::ReadThrough, &e);
                false
            }
        };
        if !found {
            self.misses.insert(miss, ());
        }
        found
    }

    /// Whether a check that misses `miss` should read through: connected, and not asked lately.
    pub fn may_read_through(&self, miss: &Miss) -> bool {
        self.is_connected() && !self.misses.contains_key(miss)
    }

    async fn fetch(&self, miss: &Miss) -> Result<bool, FollowError> {
        let mut conn = self.commands.clone();
        match miss {
            Miss::Tool { server, tool } => {
                self.refresh(&mut conn, server).await?;
                Ok(self.registry.load().tool(server, tool).is_some())
            }
            Miss::Hash(hash) => {
                let text: Option<Vec<u8>> = self
                    .timed(redis::cmd("GET").arg(text_key(hash)).query_async(&mut conn))
                    .await?;
                let Some(text) = text.filter(|t| SchemaHash::of(t) == *hash) else {
                    return Ok(false);
                };
                self.texts.remember(*hash, &Bytes::from(text));
                Ok(true)
            }
        }
    }
}
