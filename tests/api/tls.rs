//! TLS on both ports with certificates made in the test (rcgen): REST and gRPC over TLS, a
//! certificate replaced on disk and picked up without a restart, and mutual TLS where a client
//! certificate's DNS name stands for a token; the gateway's client to an `https` upstream, which
//! trusts the system's store and `--upstream-ca` and nothing else.

use crate::helpers::{spawn_app_with, TestApp};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A CA that signs leaf certificates.
struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().expect("key");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, key).expect("CA"),
        }
    }

    /// A leaf for `dns_name`: its PEM certificate and key.
    fn leaf(&self, dns_name: &str) -> (String, String) {
        let key = KeyPair::generate().expect("key");
        let cert = CertificateParams::new(vec![dns_name.to_owned()])
            .expect("params")
            .signed_by(&key, &self.issuer)
            .expect("signed");
        (cert.pem(), key.serialize_pem())
    }

    fn pem(&self) -> String {
        self.issuer.pem()
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path.to_str().expect("utf-8").to_owned()
}

/// A TLS client trusting `ca`, offering `alpn`, with a client certificate when given.
fn connector(ca: &str, alpn: &[u8], client: Option<&(String, String)>) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.expect("pem")).expect("root");
    }
    let builder = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots);
    let mut config = match client {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .expect("cert"),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).expect("key"),
            )
            .expect("client cert"),
    };
    config.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(config))
}

/// Sends one HTTP/1.1 request over TLS; the answer's status and text, or the TLS error.
async fn https(
    app: &TestApp,
    connector: &TlsConnector,
    request: &str,
) -> std::io::Result<(u16, String)> {
    let tcp = TcpStream::connect(app.http_addr).await?;
    let name = ServerName::try_from("localhost").expect("name");
    let mut tls = connector.connect(name, tcp).await?;
    tls.write_all(request.as_bytes()).await?;
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), tls.read_to_end(&mut answer))
        .await
        .map_err(|_| std::io::Error::other("no answer"))??;
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not HTTP: {text:?}")))?;
    Ok((status, text))
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n")
}

fn post(path: &str, body: &str, token: Option<&str>) -> String {
    let authorization = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    format!(
        "POST {path} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-type: application/json\r\n{authorization}content-length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Calls gRPC health over TLS (HTTP/2 by ALPN); the grpc-status.
async fn grpc_health(app: &TestApp, connector: &TlsConnector) -> String {
    let tcp = TcpStream::connect(app.grpc_addr).await.expect("connect");
    let tls = connector
        .connect(ServerName::try_from("localhost").expect("name"), tcp)
        .await
        .expect("handshake");
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (h2, connection) = h2::client::handshake(tls).await.expect("h2");
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.expect("ready");
    let request = http::Request::post("https://localhost/grpc.health.v1.Health/Check")
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("request");
    let (response, mut send) = h2.send_request(request, false).expect("send");
    send.send_data(vec![0u8, 0, 0, 0, 0].into(), true)
        .expect("empty message");
    let mut body = response.await.expect("response").into_body();
    while let Some(data) = body.data().await {
        data.expect("data");
    }
    let trailers = body.trailers().await.expect("trailers").unwrap_or_default();
    trailers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn both_ports_speak_tls_and_a_replaced_certificate_is_used_without_restart() {
    let dir = tempfile::tempdir().expect("dir");
    let first = Ca::new("first CA");
    let (cert, key) = first.leaf("localhost");
    let cert_path = write(dir.path(), "cert.pem", &cert);
    let key_path = write(dir.path(), "key.pem", &key);
    let app = spawn_app_with(&[
        "--tls-cert",
        &cert_path,
        "--tls-key",
        &key_path,
        "--policy-poll-interval",
        "1",
    ])
    .await;
    let trusts_first = connector(&first.pem(), b"http/1.1", None);
    let (status, _) = https(&app, &trusts_first, &get("/healthz"))
        .await
        .expect("REST over TLS");
    assert_eq!(status, 200);
    let check = r#"{"schema": {"type": "string"}, "instance": "x"}"#;
    let (status, text) = https(&app, &trusts_first, &post("/v1/validate", check, None))
        .await
        .expect("a check over TLS");
    assert_eq!(status, 200, "{text}");
    assert!(text.contains(r#""valid":true"#), "{text}");
    assert_eq!(
        grpc_health(&app, &connector(&first.pem(), b"h2", None)).await,
        "0"
    );
    // Plaintext on a TLS port gets no answer.
    let plain = app.client.get(app.url("/healthz")).send().await;
    assert!(
        plain.is_err(),
        "plaintext was answered on a TLS port: {plain:?}"
    );

    // The certificate is replaced (a new CA, as in a rotation); new connections get it.
    let second = Ca::new("second CA");
    let (cert, key) = second.leaf("localhost");
    write(dir.path(), "key.pem", &key);
    write(dir.path(), "cert.pem", &cert);
    let trusts_second = connector(&second.pem(), b"http/1.1", None);
    let mut rotated = false;
    for _ in 0..100 {
        if https(&app, &trusts_second, &get("/healthz")).await.is_ok() {
            rotated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(rotated, "the new certificate was not served");
    assert!(
        https(&app, &trusts_first, &get("/healthz")).await.is_err(),
        "the old certificate is still served"
    );
}

#[tokio::test]
async fn mutual_tls_requires_a_client_certificate_and_its_name_can_stand_for_a_token() {
    let dir = tempfile::tempdir().expect("dir");
    let servers = Ca::new("server CA");
    let clients = Ca::new("client CA");
    let (cert, key) = servers.leaf("localhost");
    let cert_path = write(dir.path(), "cert.pem", &cert);
    let key_path = write(dir.path(), "key.pem", &key);
    let ca_path = write(dir.path(), "clients.pem", &clients.pem());
    let tokens = write(
        dir.path(),
        "tokens.toml",
        "[[tokens]]\nname = \"orchestrator.clients.internal\"\nscopes = [\"check\"]\nservers = [\"crm\"]\n",
    );
    let app = spawn_app_with(&[
        "--tls-cert",
        &cert_path,
        "--tls-key",
        &key_path,
        "--tls-client-ca",
        &ca_path,
        "--auth-tokens",
        &tokens,
    ])
    .await;
    let check = r#"{"server": "crm", "schema": {"type": "string"}, "instance": "x"}"#;
    // No client certificate: the handshake (or the first read) fails.
    let anonymous = connector(&servers.pem(), b"http/1.1", None);
    assert!(
        https(&app, &anonymous, &post("/v1/validate", check, None))
            .await
            .is_err(),
        "a client without a certificate was answered"
    );
    // A certificate from another CA: refused too.
    let stranger = Ca::new("stranger CA").leaf("orchestrator.clients.internal");
    assert!(https(
        &app,
        &connector(&servers.pem(), b"http/1.1", Some(&stranger)),
        &post("/v1/validate", check, None)
    )
    .await
    .is_err());
    // The client CA's certificate named as a token: it is that token.
    let orchestrator = clients.leaf("orchestrator.clients.internal");
    let with_cert = connector(&servers.pem(), b"http/1.1", Some(&orchestrator));
    let (status, text) = https(&app, &with_cert, &post("/v1/validate", check, None))
        .await
        .expect("answered");
    assert_eq!(status, 200, "{text}");
    let other_server = r#"{"server": "billing", "schema": {"type": "string"}, "instance": "x"}"#;
    let (status, text) = https(&app, &with_cert, &post("/v1/validate", other_server, None))
        .await
        .expect("answered");
    assert_eq!(status, 403, "{text}");
    let (status, text) = https(
        &app,
        &with_cert,
        &post("/v1/servers/crm/tools", r#"{"tools": []}"#, None).replacen("POST", "PUT", 1),
    )
    .await
    .expect("answered");
    assert_eq!(
        status, 403,
        "the certificate's token has no register scope: {text}"
    );
    // A valid certificate whose name is no token: 401.
    let nobody = clients.leaf("nobody.clients.internal");
    let (status, text) = https(
        &app,
        &connector(&servers.pem(), b"http/1.1", Some(&nobody)),
        &post("/v1/validate", check, None),
    )
    .await
    .expect("answered");
    assert_eq!(status, 401, "{text}");
}

/// A TLS terminator in front of `upstream` (`host:port`), as a load balancer would stand there:
/// its certificate `leaf`, `alpn` the one protocol it offers; its port.
async fn tls_in_front_of(upstream: String, leaf: &(String, String), alpn: &[u8]) -> u16 {
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_no_client_auth()
    .with_single_cert(
        CertificateDer::pem_slice_iter(leaf.0.as_bytes())
            .collect::<Result<Vec<_>, _>>()
            .expect("cert"),
        PrivateKeyDer::from_pem_slice(leaf.1.as_bytes()).expect("key"),
    )
    .expect("server config");
    config.alpn_protocols = vec![alpn.to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, upstream) = (acceptor.clone(), upstream.clone());
            tokio::spawn(async move {
                // A handshake the client refuses ends here.
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                if let Ok(mut plain) = TcpStream::connect(&upstream).await {
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                }
            });
        }
    });
    port
}

#[tokio::test]
async fn the_gateway_reaches_an_https_upstream_it_trusts_and_refuses_one_it_does_not() {
    // HTTP/1.1, and HTTP/2 (the upstream serves both; ALPN picks).
    for alpn in [&b"http/1.1"[..], b"h2"] {
        https_upstream(alpn).await;
    }
}

async fn https_upstream(alpn: &[u8]) {
    use crate::helpers::mcp::{raw_upstream, Gateway};
    let (_server, url) = raw_upstream().await;
    let (authority, path) = url
        .strip_prefix("http://")
        .and_then(|rest| rest.split_once('/'))
        .expect("http://HOST:PORT/PATH");
    let ca = Ca::new("upstream CA");
    let port = tls_in_front_of(authority.to_owned(), &ca.leaf("localhost"), alpn).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca_file = write(dir.path(), "upstream-ca.pem", &ca.pem());
    let route = format!("crm=https://localhost:{port}/{path}");
    let call = r#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"sized","arguments":{"id":7}}}"#;
    let ask = |gateway: &Gateway| {
        crate::helpers::mcp::mcp_request(gateway.url("crm"))
            .body(call)
            .send()
    };

    let trusting = Gateway::start(std::slice::from_ref(&route), &["--upstream-ca", &ca_file]).await;
    let answer = ask(&trusting).await.expect("POST");
    assert_eq!(answer.status(), 200);
    let answer: serde_json::Value = answer.json().await.expect("JSON");
    assert_eq!(answer["id"], 5);
    assert!(
        answer["result"]["structuredContent"].is_object(),
        "{answer}"
    );

    // The upstream's CA is in no store this gateway trusts: no answer is relayed, and the
    // client is told why.
    let wary = Gateway::start(&[route], &[]).await;
    let refused = ask(&wary).await.expect("POST");
    assert_eq!(refused.status(), 502);
    let text = refused.text().await.expect("text");
    assert!(text.contains("certificate"), "{text}");
    assert!(!text.contains("structuredContent"), "{text}");
    assert!(
        !text.contains(path),
        "the upstream's path is not shown: {text}"
    );
}
