//! reqwest clients for the tests and the load harness. Their reqwest carries rustls with no
//! crypto provider chosen; a plain client takes the process's default provider, installed here
//! (ring, as schemagate uses) before one is built.

pub fn builder() -> reqwest::ClientBuilder {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
}

pub fn client() -> reqwest::Client {
    builder().build().expect("an HTTP client")
}

/// GET `url`.
pub async fn get(url: impl reqwest::IntoUrl) -> reqwest::Result<reqwest::Response> {
    client().get(url).send().await
}
