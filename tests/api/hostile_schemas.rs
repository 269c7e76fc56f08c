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

/// A raw check (schema and instance as JSON text) over REST and gRPC: the outcome or error code
/// each gives.
async fn both_transports(
    app: &crate::helpers::TestApp,
    grpc: &mut proto::validator_client::ValidatorClient<tonic::transport::Channel>,
    schema: &str,
    instance: &[u8],
) -> (String, String) {
    let mut body = format!(r#"{{"schema": {schema}, "instance": "#).into_bytes();
    body.extend_from_slice(instance);
    body.push(b'}');
    let (status, v) = app.post_raw("/v1/validate", body).await;
    let rest = match status {
        200 => v["outcome"].as_str().unwrap_or("").to_owned(),
        _ => v["error"]["code"].as_str().unwrap_or("").to_owned(),
    };
    use proto::check::{Payload as P, SchemaSource as S};
    let check = proto::Check {
        schema_source: Some(S::Schema(schema.as_bytes().to_vec().into())),
        payload: Some(P::Instance(instance.to_vec().into())),
        ..Default::default()
    };
    let grpc = match grpc.validate(check).await {
        Ok(answer) => match answer.into_inner().valid {
            Some(true) => "valid".to_owned(),
            Some(false) => "invalid".to_owned(),
            None => "unchecked".to_owned(),
        },
        Err(status) => error_code(&status).to_owned(),
    };
    (rest, grpc)
}

#[tokio::test]
async fn numbers_are_judged_exactly_and_never_rounded_into_a_pass() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let cases: &[(&str, &str, &str)] = &[
        (
            r#"{"maximum": 18446744073709551616}"#,
            "18446744073709551617",
            "invalid",
        ),
        (
            r#"{"const": 18446744073709551616}"#,
            "18446744073709551617",
            "invalid",
        ),
        (r#"{"enum": [1e20]}"#, "100000000000000000001", "invalid"),
        (r#"{"enum": [1e20]}"#, "100000000000000000000", "valid"),
        (
            r#"{"minimum": -9223372036854775808}"#,
            "-9223372036854775809",
            "invalid",
        ),
        (r#"{"type": "number", "minimum": 0}"#, "6.02e23", "valid"),
        (
            r#"{"maximum": 18446744073709551615}"#,
            "18446744073709551616",
            "invalid",
        ),
        (r#"{"multipleOf": 0.123456789}"#, "1e308", "invalid"),
        (
            r#"{"const": 9007199254740992}"#,
            "9007199254740992.0",
            "valid",
        ),
        (
            r#"{"maximum": 18446744073709551614}"#,
            "18446744073709551615",
            "invalid",
        ),
        (
            r#"{"type": "integer"}"#,
            "12345678910111213141516171819202122232425262728293031",
            "valid",
        ),
        (
            r#"{"exclusiveMaximum": 972783798187987123879878123.18878137}"#,
            "972783798187987123879878123.188781371",
            "invalid",
        ),
        (
            r#"{"type": "integer", "multipleOf": 0.5}"#,
            "1e308",
            "valid",
        ),
    ];
    for (schema, instance, expected) in cases {
        let (rest, by_grpc) = both_transports(&app, &mut grpc, schema, instance.as_bytes()).await;
        assert_eq!(rest, *expected, "REST: {schema} vs {instance}");
        assert_eq!(by_grpc, *expected, "gRPC: {schema} vs {instance}");
    }
    // A 5,000-digit literal is past the length budget: refused, and the message says what to do.
    let five_thousand_digits = format!("1{}", "0".repeat(4999));
    let (rest, by_grpc) = both_transports(
        &app,
        &mut grpc,
        r#"{"minimum": 0}"#,
        five_thousand_digits.as_bytes(),
    )
    .await;
    assert_eq!(
        (rest.as_str(), by_grpc.as_str()),
        ("number_too_long", "number_too_long")
    );
    let body = format!(r#"{{"schema": {{}}, "instance": [{five_thousand_digits}]}}"#);
    let (status, v) = app.post_raw("/v1/validate", body).await;
    assert_eq!(status, 422, "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("5000 characters") && m.contains("as a string")),
        "{v}"
    );
    // One within it is judged, exactly.
    let within = format!("1{}1", "0".repeat(4094));
    let (rest, by_grpc) =
        both_transports(&app, &mut grpc, r#"{"maximum": 1e4095}"#, within.as_bytes()).await;
    assert_eq!((rest.as_str(), by_grpc.as_str()), ("invalid", "invalid"));
}

#[tokio::test]
async fn payloads_are_read_by_the_same_rules_over_rest_and_grpc() {
    let app = spawn_app().await;
    let mut grpc = client(&app).await;
    let n_is_integer = r#"{"properties": {"n": {"type": "integer"}}}"#;
    let deep = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let cases: &[(&str, &[u8], &str)] = &[
        // Of a key given twice, the last member is judged: the one a consumer reads.
        (n_is_integer, br#"{"n": 1, "n": "one"}"#, "invalid"),
        (n_is_integer, br#"{"n": "one", "n": 1}"#, "valid"),
        (n_is_integer, br#"{"\u006e": "one"}"#, "invalid"),
        // Escapes decode; a surrogate pair is one character.
        (
            r#"{"const": "\u00e9\n\ud83d\ude00"}"#,
            br#""\u00e9\n\ud83d\ude00""#,
            "valid",
        ),
        (r#"{"maxLength": 1}"#, br#""\ud83d\ude00""#, "valid"),
        // A lone surrogate, invalid UTF-8, nesting past the limit: refused.
        (r#"{}"#, br#""\ud83d""#, "malformed_json"),
        (r#"{}"#, br#""\ude00x""#, "malformed_json"),
        (r#"{}"#, b"\"\xff\xfe\"", "malformed_json"),
        (r#"{}"#, deep.as_bytes(), "nesting_too_deep"),
    ];
    for (schema, instance, expected) in cases {
        let shown = String::from_utf8_lossy(instance);
        let (rest, by_grpc) = both_transports(&app, &mut grpc, schema, instance).await;
        assert_eq!(rest, *expected, "REST: {schema} vs {shown}");
        assert_eq!(by_grpc, *expected, "gRPC: {schema} vs {shown}");
    }
    // A lone surrogate's error says where it is, in the body.
    let (status, v) = app
        .post_raw(
            "/v1/validate",
            r#"{"schema": {}, "instance": ["ok", "\ud83d!"]}"#,
        )
        .await;
    assert_eq!(status, 400, "{v}");
    let message = v["error"]["message"].as_str().unwrap_or("");
    assert!(
        message.contains("`instance`") && message.contains("unexpected end of hex escape"),
        "{v}"
    );
    // In a result's text copy too: the copy is compared with structuredContent, so it must read.
    let (status, v) = app
        .post_raw(
            "/v1/validate",
            r#"{"schema": {}, "result": {"structuredContent": {}, "content": [{"type": "text", "text": "{\"a\": \"\udc00\"}"}]}}"#,
        )
        .await;
    assert_eq!(status, 400, "{v}");
    assert_eq!(v["error"]["code"], "malformed_json", "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("result.content[].text") && m.contains("surrogate")),
        "{v}"
    );
}

#[tokio::test]
async fn malformed_protobuf_is_invalid_argument() {
    let app = spawn_app().await;
    let http2 = crate::http_client::builder()
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
