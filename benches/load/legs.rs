//! Every leg: the ceiling and the core in process, the transports against a real server, and
//! the memory curves.

use super::*;

/// A check body with what it carries: its JSON text and whether it is a batch of many.
#[derive(Clone)]
pub(crate) struct Body {
    pub(crate) json: Bytes,
    pub(crate) checks: u64,
}

/// The output schemas of every tool, compiled as the service compiles them, by server and tool.
pub(crate) type Validators = HashMap<String, HashMap<String, jsonschema::Validator>>;

pub(crate) fn validators(tools: &Value) -> Validators {
    let (options, limits) = service::compile_settings();
    let mut out = Validators::new();
    for (server, list) in tools["servers"].as_object().expect("servers") {
        for tool in list["tools"].as_array().into_iter().flatten() {
            let (Some(name), Some(schema)) = (tool["name"].as_str(), tool.get("outputSchema"))
            else {
                continue;
            };
            // The service compiles it (refusing nothing here); the ceiling judges
            // `serde_json::Value`s with the validator's own representation, same settings.
            compile(schema.to_string().as_bytes(), options, &limits).expect("compiles");
            let validator = jsonschema::options()
                .should_validate_formats(options.assert_formats)
                .build(schema)
                .expect("compiles");
            out.entry(server.clone())
                .or_default()
                .insert(name.to_owned(), validator);
        }
    }
    out
}

/// The ceiling's work for one check: parse it into a `serde_json::Value` (the plain parse, not the
/// service's reader, so the ceiling does not move with the service's own choices), find its
/// validator, `is_valid`.
pub(crate) fn ceiling_check(validators: &Validators, body: &Bytes) -> bool {
    let check: Value = serde_json::from_slice(body).expect("parses");
    let (Some(server), Some(tool)) = (check["server"].as_str(), check["tool"].as_str()) else {
        return false;
    };
    let result = &check["result"];
    if result["isError"] == Value::Bool(true) {
        return true;
    }
    result
        .get("structuredContent")
        .is_some_and(|doc| validators[server][tool].is_valid(doc))
}

/// The core's work for one check: parse, check, and the answer as JSON (as REST writes it).
pub(crate) fn core_check(gate: &Gate, body: &Bytes) -> usize {
    let check = Check::from_json(body, 64).expect("parses");
    let verdict = gate.check(&check, Transport::Rest).expect("verdict");
    answer_json(&verdict).len()
}

pub(crate) fn answer_json(verdict: &schemagate::core::verdict::Verdict) -> Vec<u8> {
    let mut out = Vec::with_capacity(verdict.json_size_hint());
    verdict.write_json(&mut out).expect("serialises");
    out
}

/// Checks every item once and lists the verdicts that disagree with the corpus's `expect`.
pub(crate) fn agreement(gate: &Gate, corpus: &corpus::Corpus, bodies: &[Body]) -> Vec<String> {
    let mut differ = Vec::new();
    for (item, body) in corpus.items.iter().zip(bodies) {
        let check = Check::from_json(&body.json, 64).expect("parses");
        let got = match gate.check(&check, Transport::Rest) {
            Ok(v) => v.outcome.as_str().to_owned(),
            Err(e) => format!("error {}", e.code()),
        };
        if got != item.expect {
            differ.push(format!(
                "{}/{}: expected {}, got {got}",
                item.server, item.tool, item.expect
            ));
        }
    }
    differ
}

/// Runs `work` over `bodies` on `threads` threads for `seconds`.
pub(crate) fn in_process(
    name: &str,
    bodies: &[Body],
    threads: usize,
    seconds: f64,
    work: impl Fn(&Bytes) + Sync,
) -> Leg {
    let stop = AtomicBool::new(false);
    let start = Instant::now();
    let cpu0 = process_cpu();
    let (checks, bytes, latencies) = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (stop, work) = (&stop, &work);
                s.spawn(move || {
                    let (mut n, mut bytes) = (0u64, 0u64);
                    let mut lat = Vec::new();
                    let mut i = t * 7919;
                    while !stop.load(Ordering::Relaxed) {
                        let body = &bodies[i % bodies.len()];
                        if n % 16 == 0 {
                            let t0 = Instant::now();
                            work(&body.json);
                            lat.push(t0.elapsed().as_micros() as u32);
                        } else {
                            work(&body.json);
                        }
                        n += 1;
                        bytes += body.json.len() as u64;
                        i += 1;
                    }
                    (n, bytes, lat)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs_f64(seconds));
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .fold((0, 0, Vec::new()), |(n, b, mut l), h| {
                let (hn, hb, hl) = h.join().expect("thread");
                l.extend(hl);
                (n + hn, b + hb, l)
            })
    });
    Leg {
        name: name.into(),
        checks,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        latencies,
        server_cpu: process_cpu() - cpu0,
        client_cpu: f64::NAN,
    }
}

/// Runs one loop per state, each calling `step` (which returns its state and the checks and bytes
/// its request carried) until `seconds` are over, on the client runtime, against `server`.
pub(crate) async fn drive<S, F, Fut>(
    name: String,
    (states, server): (Vec<S>, &ServerProcess),
    seconds: f64,
    step: F,
) -> Leg
where
    S: Send + 'static,
    F: Fn(S, usize, u64) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = (S, u64, u64)> + Send,
{
    let step = Arc::new(step);
    let deadline = Instant::now() + Duration::from_secs_f64(seconds);
    let cpu0 = server.cpu();
    let client0 = thread_cpu(&CLIENT_THREADS);
    let start = Instant::now();
    let mut handles = Vec::new();
    for (task, state) in states.into_iter().enumerate() {
        let step = Arc::clone(&step);
        handles.push(tokio::spawn(async move {
            let mut state = state;
            let (mut checks, mut bytes) = (0u64, 0u64);
            let mut lat = Vec::new();
            let mut i = 0u64;
            while Instant::now() < deadline {
                let t0 = Instant::now();
                let (next, c, b) = step(state, task, i).await;
                state = next;
                lat.push(t0.elapsed().as_micros() as u32);
                checks += c;
                bytes += b;
                i += 1;
            }
            (checks, bytes, lat)
        }));
    }
    let (mut checks, mut bytes, mut latencies) = (0, 0, Vec::new());
    for h in handles {
        let (c, b, l) = h.await.expect("task");
        checks += c;
        bytes += b;
        latencies.extend(l);
    }
    Leg {
        name,
        checks,
        bytes,
        seconds: start.elapsed().as_secs_f64(),
        latencies,
        server_cpu: server.cpu() - cpu0,
        client_cpu: thread_cpu(&CLIENT_THREADS) - client0,
    }
}

pub(crate) fn bodies_of(items: &[corpus::Item]) -> Vec<Body> {
    items
        .iter()
        .map(|i| Body {
            json: Bytes::from(corpus::Corpus::check_text(i)),
            checks: 1,
        })
        .collect()
}

/// Batch bodies of `size` items (whole batches only, unless there are fewer items).
pub(crate) fn batches_of(items: &[corpus::Item], size: usize) -> Vec<Body> {
    items
        .chunks(size)
        .filter(|c| c.len() == size || items.len() < size)
        .map(|c| Body {
            json: Bytes::from(corpus::Corpus::batch_text(c)),
            checks: c.len() as u64,
        })
        .collect()
}

pub(crate) fn subset(corpus: &corpus::Corpus, expect: &str) -> Vec<corpus::Item> {
    corpus
        .items
        .iter()
        .filter(|i| i.expect == expect)
        .cloned()
        .collect()
}

/// A runtime of `threads` threads named `name`, each pinned to `cpus` when given.
pub(crate) fn runtime(
    name: &str,
    threads: usize,
    cpus: Option<&[usize]>,
) -> std::io::Result<tokio::runtime::Runtime> {
    let cpus = cpus.map(<[usize]>::to_vec);
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(name)
        .on_thread_start(move || {
            if let Some(cpus) = &cpus {
                pin_current_thread(cpus);
            }
        })
        .enable_all()
        .build()
}

/// Waits until the server at `addr` is ready (with a shared registry: once it was read in full).
async fn wait_ready(http: &reqwest::Client, addr: SocketAddr) {
    while http
        .get(format!("http://{addr}/readyz"))
        .send()
        .await
        .map_or(true, |r| !r.status().is_success())
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The REST and gRPC legs, against a server started in this process.
pub(crate) struct TransportRun<'a> {
    pub(crate) opts: &'a Opts,
    pub(crate) cores: usize,
    pub(crate) corpus: &'a corpus::Corpus,
    pub(crate) bodies: &'a [Body],
    pub(crate) valid: &'a [corpus::Item],
    pub(crate) invalid: &'a [corpus::Item],
    pub(crate) server_cpus: &'a [usize],
    pub(crate) client_cpus: &'a [usize],
}

impl TransportRun<'_> {
    pub(crate) fn legs(&self, legs: &mut Vec<Leg>) -> anyhow::Result<()> {
        let pin = self.opts.pin && self.cores >= 2;
        let redis = if self.opts.with_redis {
            Some(crate::redis_server::RedisServer::start()?)
        } else {
            None
        };
        let mut argv = vec!["--log-level".to_owned(), "error".into()];
        if let Some(token) = crate::http1::TOKEN.get() {
            use sha2::Digest;
            let digest: String = sha2::Sha256::digest(token.as_bytes())
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            argv.push(format!("--auth-token=bench:{digest}:check,register"));
        }
        if let Some(redis) = &redis {
            argv.extend(["--registry".to_owned(), redis.url()]);
            println!(
                "registry: in Redis ({}), read by every check from its in-process copy",
                redis.url()
            );
        }
        let server = ServerProcess::start(&argv, pin.then_some(self.server_cpus))?;
        let client_rt = runtime("sg-client", self.cores, pin.then_some(self.client_cpus))?;
        client_rt.block_on(async {
            let base = format!("http://{}", server.http);
            let http = crate::http_client::client();
            wait_ready(&http, server.http).await;
            for (server, list) in self.corpus.tools["servers"].as_object().expect("servers") {
                let mut put = http
                    .put(format!("{base}/v1/servers/{server}/tools"))
                    .body(list.to_string());
                if let Some(token) = crate::http1::TOKEN.get() {
                    put = put.bearer_auth(token);
                }
                let r = put.send().await?;
                anyhow::ensure!(r.status().is_success(), "registration failed");
            }
            let compiles = || async {
                let text = http
                    .get(format!("{base}/metrics"))
                    .send()
                    .await?
                    .text()
                    .await?;
                let value = |name: &str| {
                    text.lines()
                        .find_map(|l| {
                            l.strip_prefix(name)
                                .and_then(|v| v.trim().parse::<f64>().ok())
                        })
                        .unwrap_or(0.0)
                };
                anyhow::Ok((
                    value("schemagate_schema_compiles_total "),
                    value("schemagate_cache_hits_total "),
                ))
            };
            let (compiles_before, hits_before) = compiles().await?;
            self.rest_legs(&server, legs).await?;
            self.grpc_legs(&server, legs).await?;
            // A cache hit neither parses nor compiles a schema: every compile happened at
            // registration, none during the legs.
            let (compiles_after, hits_after) = compiles().await?;
            println!(
                "server cache: {compiles_before} schema compiles at registration; during the transport legs {} compiles and {} cache hits",
                compiles_after - compiles_before,
                hits_after - hits_before
            );
            anyhow::Ok(())
        })?;
        if redis.is_some() {
            let other = ServerProcess::start(&argv, pin.then_some(self.server_cpus))?;
            client_rt.block_on(async {
                wait_ready(&crate::http_client::client(), other.http).await;
                crate::registry::propagation_leg(
                    server.http,
                    other.http,
                    crate::http1::TOKEN.get().map(String::as_str),
                    500,
                )
                .await
            })?;
        }
        Ok(())
    }

    pub(crate) async fn rest_legs(
        &self,
        server: &ServerProcess,
        legs: &mut Vec<Leg>,
    ) -> anyhow::Result<()> {
        let seconds = self.opts.seconds;
        let single = self
            .bodies
            .iter()
            .map(|b| Request::post("/v1/validate", b))
            .collect();
        if self.opts.wants(Group::RestSingle) {
            // The HTTP stack's own cost per request on this machine: an endpoint with no check.
            legs.push(
                rest_leg(
                    "REST GET /healthz (no check), 32 conns".into(),
                    server,
                    32,
                    seconds,
                    vec![Request::get("/healthz")],
                )
                .await?,
            );
            legs.push(
                rest_leg(
                    "REST single, 32 connections".into(),
                    server,
                    32,
                    seconds,
                    single,
                )
                .await?,
            );
        }
        if !self.opts.wants(Group::RestBatch) {
            return Ok(());
        }
        for (label, items, size, connections) in [
            (
                "REST batch 100, 8 connections",
                &self.corpus.items[..],
                100,
                8,
            ),
            (
                "REST batch 1000, 4 connections",
                &self.corpus.items[..],
                1000,
                4,
            ),
            ("REST batch 100, valid only", self.valid, 100, 8),
            ("REST batch 100, invalid only", self.invalid, 100, 8),
        ] {
            let batches = batches_of(items, size)
                .iter()
                .map(|b| Request::post("/v1/validate/batch", b))
                .collect();
            legs.push(rest_leg(label.into(), server, connections, seconds, batches).await?);
        }
        Ok(())
    }

    pub(crate) async fn grpc_legs(
        &self,
        server: &ServerProcess,
        legs: &mut Vec<Leg>,
    ) -> anyhow::Result<()> {
        let seconds = self.opts.seconds;
        let checks: Vec<proto::Check> = self.corpus.items.iter().map(grpc_check).collect();
        let sizes: Vec<u64> = self.bodies.iter().map(|b| b.json.len() as u64).collect();
        let grpc = (&GrpcConnection::connect(server.grpc).await?, server);
        if self.opts.wants(Group::GrpcUnary) {
            let calls = checks
                .iter()
                .zip(&sizes)
                .map(|(check, &size)| GrpcCall::new("Validate", [check], 1, size))
                .collect();
            legs.push(grpc_leg("gRPC unary, 32 in flight".into(), grpc, 32, seconds, calls).await);
        }
        if self.opts.wants(Group::GrpcBatch) {
            let calls = checks
                .chunks(100)
                .zip(sizes.chunks(100))
                .map(|(items, sizes)| {
                    let batch = proto::ValidateBatchRequest {
                        items: items.to_vec(),
                    };
                    let n = batch.items.len() as u64;
                    GrpcCall::new("ValidateBatch", [&batch], n, sizes.iter().sum())
                })
                .collect();
            legs.push(
                grpc_leg(
                    "gRPC batch 100, 8 in flight".into(),
                    grpc,
                    8,
                    seconds,
                    calls,
                )
                .await,
            );
        }
        if self.opts.wants(Group::GrpcStream) {
            // Each call is a window of 1,000 checks sent on one stream and all their answers
            // read; 4 streams in flight.
            let calls = (0..checks.len().min(16))
                .map(|w| {
                    let start = w * 997;
                    let window: Vec<proto::StreamCheck> = (0..1000)
                        .map(|k| proto::StreamCheck {
                            id: k.to_string(),
                            check: Some(checks[(start + k) % checks.len()].clone()),
                        })
                        .collect();
                    let bytes = (0..1000).map(|k| sizes[(start + k) % sizes.len()]).sum();
                    GrpcCall::new("ValidateStream", window.iter(), 1000, bytes)
                })
                .collect();
            legs.push(grpc_leg("gRPC stream, 4 streams".into(), grpc, 4, seconds, calls).await);
        }
        Ok(())
    }
}

/// Resident size while 2,500 distinct schemas with one large compiled pattern each pass through
/// the cache, and how long hostile regex schemas take to be answered.
pub(crate) fn regex_memory_leg(cores: usize) {
    println!();
    println!("memory, regexes: 2,500 distinct schemas with one large pattern each (default --cache-max-bytes), in a fresh process");
    let gate = service::bare_gate(cores);
    let check = |body: Value| {
        let body = Bytes::from(body.to_string());
        let start = Instant::now();
        let answer = Check::from_json(&body, 64).and_then(|c| gate.check(&c, Transport::Rest));
        (answer, start.elapsed())
    };
    println!("{:>8} {:>10}", "schemas", "RSS MiB");
    println!("{:>8} {:>10.1}", 0, rss_mib());
    for i in 0..2_500u64 {
        // Distinct patterns of 500 to 999 repetitions (past about 1,050 the engines' size limit
        // refuses one by itself).
        let class = (b'a' + (i / 500) as u8) as char;
        let schema =
            json!({"type": "string", "pattern": format!("[^{class}]{{{}}}", 500 + i % 500)});
        let (answer, _) = check(json!({"schema": schema, "instance": "b"}));
        answer.expect("verdict");
        if (i + 1) % 500 == 0 {
            println!("{:>8} {:>10.1}", i + 1, rss_mib());
        }
    }
    let many: Vec<Value> = (0..10_000)
        .map(|n| json!({"pattern": format!("[^{}]{{{}}}", (b'a' + (n / 100 % 26) as u8) as char, 900 + n % 100)}))
        .collect();
    let (answer, took) = check(json!({"schema": {"anyOf": many}, "instance": "b"}));
    println!(
        "10,000 large patterns in one schema: {} in {:.1} ms, RSS {:.1} MiB",
        answer.map_or_else(|e| e.code().to_owned(), |v| v.outcome.as_str().to_owned()),
        took.as_secs_f64() * 1e3,
        rss_mib()
    );
    let patterns: Vec<Value> = (0..1_000)
        .map(|n| json!({"pattern": format!("[^ab]{{{}}}", 1 + n % 50)}))
        .collect();
    let strings = vec!["a".repeat(30_000); 100];
    let (answer, took) =
        check(json!({"schema": {"items": {"anyOf": patterns}}, "instance": strings}));
    println!(
        "anyOf of 1,000 patterns over 3 MB of strings: {} in {:.1} ms",
        answer.map_or_else(|e| e.code().to_owned(), |v| v.outcome.as_str().to_owned()),
        took.as_secs_f64() * 1e3
    );
    let text = gate.render_metrics();
    let entries = text
        .lines()
        .find_map(|l| l.strip_prefix("schemagate_cache_entries "))
        .unwrap_or("?");
    println!("cache: {entries} entries at the end");
}

/// Resident size while 100,000 distinct schemas pass through the cache.
pub(crate) fn memory_leg(cores: usize) {
    println!();
    println!("memory: 100,000 distinct schemas through the cache (default --cache-max-bytes), in a fresh process");
    let gate = service::bare_gate(cores);
    let base_rss = rss_mib();
    let start = Instant::now();
    println!("{:>8} {:>10} {:>12}", "schemas", "RSS MiB", "compiles/s");
    println!("{:>8} {:>10.1} {:>12}", 0, base_rss, "-");
    let mut last = Instant::now();
    for i in 0..100_000u64 {
        let body = Bytes::from(
            json!({"schema": {"type": "object", "properties": {"n": {"const": i}, "name": {"type": "string", "pattern": "^[a-z]+$"}}},
                   "instance": {"n": i, "name": "abc"}})
            .to_string(),
        );
        let check = Check::from_json(&body, 64).expect("parses");
        gate.check(&check, Transport::Rest).expect("verdict");
        if (i + 1) % 10_000 == 0 {
            println!(
                "{:>8} {:>10.1} {:>12.0}",
                i + 1,
                rss_mib(),
                10_000.0 / last.elapsed().as_secs_f64()
            );
            last = Instant::now();
        }
    }
    let text = gate.render_metrics();
    let value = |name: &str| {
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|v| v.trim().parse::<f64>().ok())
            })
            .unwrap_or(0.0)
    };
    println!(
        "{:.1} s; cache: {} entries at the end, {} evictions",
        start.elapsed().as_secs_f64(),
        value("schemagate_cache_entries "),
        value("schemagate_cache_evictions_total ")
    );
}
