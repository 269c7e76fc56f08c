//! Hostile schemas and payloads, as an attacker would send them: each is refused with a clear
//! 4xx (or INVALID_ARGUMENT) before it runs, and the other checks of a batch are answered.

use crate::helpers::{client, error_code, id_chain, spawn_app, spawn_app_with};
use schemagate::grpc::proto;
use serde_json::{json, Value};
use tonic::Code;

fn grpc_check(schema: &Value, instance: &Value) -> proto::Check {
    use proto::check::{Payload as P, SchemaSource as S};
    proto::Check {
        schema_source: Some(S::Schema(schema.to_string().into())),
        payload: Some(P::Instance(instance.to_string().into())),
        ..Default::default()
    }
}

#[tokio::test]
async fn doubling_chains_are_refused_however_their_refs_are_spelled() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let spellings: [fn(usize) -> String; 4] = [
        |i| format!("d{i}.json"),
        |i| format!("./d{i}.json"),
        |i| format!("json-schema:///d{i}.json"),
        |i| format!("d{i}.json#"),
    ];
    for spell in spellings {
        let schema = id_chain(30, spell);
        let (status, v) = app
            .validate(&json!({"schema": schema, "instance": "x"}))
            .await;
        assert_eq!(status, 422, "{v}");
        assert_eq!(v["error"]["code"], "schema_too_complex", "{v}");

        let err = grpc
            .validate(grpc_check(&schema, &json!("x")))
            .await
            .unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument);
        assert_eq!(error_code(&err), "schema_too_complex", "{err:?}");
    }
    // The same chains, short, still work.
    let short = id_chain(3, |i| format!("./d{i}.json"));
    let (status, v) = app
        .validate(&json!({"schema": short, "instance": "x"}))
        .await;
    assert_eq!((status, v["outcome"].as_str()), (200, Some("valid")), "{v}");
}

#[tokio::test]
async fn the_panic_schema_is_refused_alone_and_the_batch_is_answered() {
    let app = spawn_app().await;
    let panic_schema = json!({"$ref": "#%a\u{e9}"});
    let (status, v) = app
        .validate(&json!({"schema": panic_schema, "instance": 1}))
        .await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["error"]["code"], "schema_invalid", "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap_or("").contains("#%a"),
        "{v}"
    );

    let items = [
        json!({"schema": {"type": "integer"}, "instance": 1}),
        json!({"schema": panic_schema, "instance": 1}),
        json!({"schema": {"type": "integer"}, "instance": "x"}),
    ];
    let (status, v) = app.validate_batch(&items).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["results"][0]["outcome"], "valid", "{v}");
    assert_eq!(v["results"][1]["error"]["code"], "schema_invalid", "{v}");
    assert_eq!(v["results"][2]["outcome"], "invalid", "{v}");

    let mut grpc = client(&app).await;
    let batch = grpc
        .validate_batch(proto::ValidateBatchRequest {
            items: vec![
                grpc_check(&json!({"type": "integer"}), &json!(1)),
                grpc_check(&panic_schema, &json!(1)),
            ],
        })
        .await
        .expect("the batch is answered")
        .into_inner();
    let codes: Vec<&str> = batch
        .results
        .iter()
        .map(|r| match &r.answer {
            Some(proto::check_answer::Answer::Verdict(_)) => "verdict",
            Some(proto::check_answer::Answer::Error(e)) => e.code.as_str(),
            None => "none",
        })
        .collect();
    assert_eq!(codes, ["verdict", "schema_invalid"]);
}

#[tokio::test]
async fn regex_heavy_schemas_are_refused_in_time_and_weighed_in_the_cache() {
    // A cache of 8 MiB holds a handful of schemas with a large compiled pattern each, not
    // thousands: each is weighed by what its patterns hold.
    let app = spawn_app_with(&["--cache-max-bytes", "8388608"]).await;
    for n in 0..40 {
        let schema = json!({"type": "string", "pattern": format!("[^a]{{{}}}", 900 + n)});
        let (status, v) = app
            .validate(&json!({"schema": schema, "instance": "b".repeat(10)}))
            .await;
        assert_eq!(status, 200, "{v}");
    }
    let (_, metrics) = app.get("/metrics").await;
    let entries: f64 = metrics
        .lines()
        .find_map(|l| l.strip_prefix("schemagate_cache_entries "))
        .and_then(|v| v.parse().ok())
        .expect("cache entries series");
    assert!(
        entries < 40.0,
        "40 schemas of ~1 MB of patterns each fit in an 8 MiB cache: {entries} entries"
    );

    // A thousand such patterns in one schema: refused before the validator compiles them.
    let many: Vec<Value> = (0..1000)
        .map(|n| json!({"pattern": format!("[^ab]{{{}}}", 500 + n)}))
        .collect();
    let (status, v) = app
        .validate(&json!({"schema": {"anyOf": many}, "instance": "x"}))
        .await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["error"]["code"], "schema_too_complex", "{v}");

    // Patterns are charged by the length of the strings they run on.
    let anyof: Vec<Value> = (0..100)
        .map(|n| json!({"pattern": format!("^x{n}")}))
        .collect();
    let long = vec!["y".repeat(100_000); 10];
    let (status, v) = app
        .validate(&json!({"schema": {"items": {"anyOf": anyof}}, "instance": long}))
        .await;
    assert_eq!(status, 422, "{v}");
    assert_eq!(v["error"]["code"], "work_limit_exceeded", "{v}");
}

#[tokio::test]
async fn numbers_beyond_exact_range_are_never_rounded_into_a_pass() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let cases = [
        (
            r#"{"maximum": 18446744073709551616}"#,
            "18446744073709551617",
        ),
        (r#"{"const": 18446744073709551616}"#, "18446744073709551617"),
        (r#"{"enum": [1e20]}"#, "100000000000000000001"),
        (
            r#"{"minimum": -9223372036854775808}"#,
            "-9223372036854775809",
        ),
    ];
    for (schema, instance) in cases {
        let body = format!(r#"{{"schema": {schema}, "instance": {instance}}}"#);
        let (status, v) = app.post_raw("/v1/validate", body).await;
        assert_eq!(status, 422, "{schema} vs {instance}: {v}");
        assert_eq!(v["error"]["code"], "number_not_exact", "{v}");

        use proto::check::{Payload as P, SchemaSource as S};
        let check = proto::Check {
            schema_source: Some(S::Schema(schema.as_bytes().to_vec().into())),
            payload: Some(P::Instance(instance.as_bytes().to_vec().into())),
            ..Default::default()
        };
        let err = grpc.validate(check).await.unwrap_err();
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert_eq!(error_code(&err), "number_not_exact");
    }
    // Within the exact range, numbers are judged as they are.
    let (status, v) = app
        .post_raw(
            "/v1/validate",
            r#"{"schema": {"maximum": 18446744073709551614}, "instance": 18446744073709551615}"#,
        )
        .await;
    assert_eq!(
        (status, v["outcome"].as_str()),
        (200, Some("invalid")),
        "{v}"
    );
}

#[tokio::test]
async fn malformed_protobuf_is_invalid_argument() {
    let app = spawn_app().await;
    let http2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .expect("client");
    // Field 1 (server, a string) holding bytes that are not UTF-8, and a truncated message.
    for message in [&[0x0a, 0x02, 0xff, 0xfe][..], &[0x0a, 0x05, b'a'][..]] {
        let mut framed = vec![0u8];
        framed.extend_from_slice(&(message.len() as u32).to_be_bytes());
        framed.extend_from_slice(message);
        let response = http2
            .post(format!(
                "http://{}/schemagate.v1.Validator/Validate",
                app.grpc_addr
            ))
            .header("content-type", "application/grpc")
            .header("te", "trailers")
            .body(framed)
            .send()
            .await
            .expect("request");
        let header = |name: &str| {
            response
                .headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_owned()
        };
        // Trailers-only answer: INVALID_ARGUMENT (3), with the error code.
        assert_eq!(header("grpc-status"), "3", "{:?}", response.headers());
        assert_eq!(header("schemagate-error-code"), "malformed_message");
    }
}
