//! A small gRPC client: registers a server's tools, then streams a batch of tool results and
//! prints each verdict as it arrives.
//!
//! Run a server (`cargo run --release -- serve`), then:
//! `cargo run --example grpc_client -- [127.0.0.1:50051]`

use schemagate::grpc::proto::{self, validator_client::ValidatorClient};
use serde_json::json;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let address = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:50051".to_owned());
    let address = if address.contains("://") {
        address
    } else {
        format!("http://{address}")
    };
    let channel = tonic::transport::Channel::from_shared(address)?
        .connect()
        .await?;
    let mut client = ValidatorClient::new(channel);

    let tools = json!({"tools": [{
        "name": "charge_card",
        "inputSchema": {"type": "object", "required": ["customer_id", "amount_cents"],
                        "properties": {"customer_id": {"type": "string"},
                                       "amount_cents": {"type": "integer", "minimum": 1}}},
        "outputSchema": {"type": "object", "required": ["status", "charge_id"],
                         "properties": {"status": {"enum": ["settled", "declined"]},
                                        "charge_id": {"type": "string", "pattern": "^ch_[0-9a-f]{8}$"}}}
    }]});
    let registration = client
        .register_tools(proto::RegisterToolsRequest {
            server: "payments".into(),
            tools_list: tools.to_string().into(),
            ..Default::default()
        })
        .await?
        .into_inner();
    for tool in &registration.tools {
        println!(
            "registered {} (output schema {})",
            tool.name, tool.output_schema_hash
        );
    }

    let results = [
        json!({"structuredContent": {"status": "settled", "charge_id": "ch_0123abcd"}}),
        json!({"structuredContent": {"status": "pending", "charge_id": "ch_0123abcd"}}),
        json!({"structuredContent": {"status": "settled"}}),
        json!({"isError": true, "content": [{"type": "text", "text": "card declined by issuer"}]}),
        json!({"content": [{"type": "text", "text": "{\"status\": \"settled\"}"}]}),
    ];
    let checks: Vec<proto::StreamCheck> = results
        .iter()
        .enumerate()
        .map(|(i, result)| proto::StreamCheck {
            id: format!("call-{i}"),
            check: Some(proto::Check {
                server: "payments".into(),
                tool: "charge_card".into(),
                payload: Some(proto::check::Payload::Result(result.to_string().into())),
                attempt: 1,
                ..Default::default()
            }),
        })
        .collect();
    let mut answers = client
        .validate_stream(tokio_stream::iter(checks))
        .await?
        .into_inner();
    while let Some(answer) = answers.message().await? {
        match answer.answer {
            Some(proto::stream_answer::Answer::Verdict(v)) => {
                let outcome = proto::Outcome::try_from(v.outcome).map_or("?", |o| o.as_str_name());
                let action = proto::Action::try_from(v.action).map_or("?", |a| a.as_str_name());
                println!("{}: {outcome} {action} {}", answer.id, v.feedback);
            }
            Some(proto::stream_answer::Answer::Error(e)) => {
                println!("{}: error {}: {}", answer.id, e.code, e.message);
            }
            None => println!("{}: empty answer", answer.id),
        }
    }
    Ok(())
}
