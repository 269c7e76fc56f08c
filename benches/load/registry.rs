//! The shared-registry legs (`--with-redis`): a real `redis-server` (Debian package
//! `redis-server`) on a loopback port, the transport legs run against a replica whose registry is
//! in it, and then, with a second replica on the same Redis: how long a registration takes to be
//! acknowledged, and how long after its acknowledgement another replica uses it.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Registers a changed contract on `a` `rounds` times and, after each acknowledgement, asks `b`
/// (as fast as it answers) until it uses the new contract; prints both latencies.
pub(crate) async fn propagation_leg(
    a: SocketAddr,
    b: SocketAddr,
    token: Option<&str>,
    rounds: usize,
) -> anyhow::Result<()> {
    let http = crate::http_client::client();
    let authorised = |r: reqwest::RequestBuilder| match token {
        Some(t) => r.bearer_auth(t),
        None => r,
    };
    let (mut acks, mut reached) = (Vec::with_capacity(rounds), Vec::with_capacity(rounds));
    for round in 0..rounds {
        let server = format!("bench-registry-{}", round % 8);
        let list = serde_json::json!({"tools": [{
            "name": "lookup",
            "outputSchema": {"type": "object", "properties": {"n": {"const": round}}, "required": ["n"]}
        }]});
        let sent = Instant::now();
        let answer: serde_json::Value = authorised(
            http.put(format!("http://{a}/v1/servers/{server}/tools"))
                .body(list.to_string()),
        )
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
        let acked = Instant::now();
        acks.push((acked - sent).as_secs_f64() * 1000.0);
        let hash = answer["tools"][0]["output_schema_hash"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // Another replica uses it once its listing shows the new hash (the listing reads only
        // what the replica holds, never Redis).
        let deadline = acked + Duration::from_secs(5);
        loop {
            let listing: serde_json::Value =
                authorised(http.get(format!("http://{b}/v1/servers/{server}/tools")))
                    .send()
                    .await?
                    .json()
                    .await?;
            if listing["tools"][0]["output_schema_hash"] == hash.as_str() {
                reached.push(acked.elapsed().as_secs_f64() * 1000.0);
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "round {round}: the other replica did not see the change within 5 s"
            );
        }
    }
    acks.sort_by(f64::total_cmp);
    reached.sort_by(f64::total_cmp);
    println!(
        "shared registry (Redis), {rounds} registrations on one replica, another replica polled:"
    );
    println!(
        "  registration acknowledged (written to Redis): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
        quantile(&acks, 0.5),
        quantile(&acks, 0.99),
        quantile(&acks, 1.0)
    );
    println!(
        "  used by the other replica, after the acknowledgement: p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms (bound: 1,000 ms)",
        quantile(&reached, 0.5),
        quantile(&reached, 0.99),
        quantile(&reached, 1.0)
    );
    Ok(())
}
