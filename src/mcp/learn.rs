//! Contract learning: a server's contract (its tools with their schemas) is registered from
//! the `tools/list` answers it gives, the first page replacing it and later pages adding to it,
//! and asked for by the boundary itself when a call arrives before the contract is known or
//! after the tools changed.

use super::scan::Unread;
use super::session::{ListPage, Listing, Pending};
use super::{meta_protocol, Boundary, Direction, Link, Outgoing, PROTOCOL_META_KEY};
use crate::core::check::ListedSchemas;
use crate::core::domain::ProtocolVersion;
use crate::core::domain::ServerId;
use crate::core::error::CheckError;
use crate::core::registry::{parse_tools_list, Provenance, RegisterOptions, RegisteredSchema};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::io;
use std::sync::Arc;

impl Boundary {
    /// Before a call is checked: when the contract is not current (never listed, or the tools
    /// changed since), asks the server for it once and waits (up to `--contract-wait-ms`).
    pub(super) async fn ensure_contract(
        &self,
        link: &impl Link,
        meta: Option<&RawValue>,
    ) -> io::Result<()> {
        let mut listings = self.session.watch_listings();
        listings.borrow_and_update();
        // A contract another replica registered, or one a listing in another session of this
        // server completed, serves a session that has listed nothing itself.
        let registered = |route_listed: bool| {
            (self.config.registered_is_current || route_listed)
                && self.gate.has_contract(&self.config.server)
        };
        match self.session.listing(registered) {
            Listing::Current => return Ok(()),
            Listing::Wait => {}
            Listing::Ask(id) => {
                let protocol = meta_protocol(meta).or(self.session.protocol());
                let pending = Pending::ToolsList(ListPage {
                    first_page: true,
                    ours: true,
                    protocol,
                    meta: meta.map(|m| m.get().into()),
                });
                if self.session.track(&id, pending).is_err() {
                    self.session.listing_ended(false, true);
                    return Ok(());
                }
                tracing::debug!(id, "asking the server for its tools");
                link.send(
                    Direction::ToServer,
                    Outgoing::Own(&list_request(&id, None, meta)),
                )
                .await?;
            }
        }
        if tokio::time::timeout(self.config.contract_wait, listings.changed())
            .await
            .is_err()
        {
            tracing::warn!(
                server = %self.config.server,
                wait_ms = self.config.contract_wait.as_millis() as u64,
                "the server did not list its tools in time: checking with the contract at hand"
            );
        }
        Ok(())
    }

    /// A `tools/list` page answered: registered (the first page replacing the contract, later
    /// ones adding to it) before it is forwarded; the boundary's own listing follows `nextCursor`.
    pub(super) async fn listed(
        &self,
        link: &impl Link,
        line: &Bytes,
        id: &RawValue,
        result: Option<Unread<'_>>,
        page: ListPage,
    ) -> io::Result<()> {
        let Some(result) = result else {
            tracing::warn!(server = %self.config.server, id = id.get(), "the server answered tools/list with an error: the contract is unchanged");
            self.session.listing_ended(false, page.ours);
            return Ok(());
        };
        let read: Option<Page<'_>> = result.parse();
        let next_cursor = read
            .as_ref()
            .and_then(|p| p.next_cursor.as_deref())
            .filter(|c| !c.is_empty())
            .map(str::to_owned);
        if page.first_page {
            self.session.listing_started();
        }
        let tools = read.map(|p| p.tools).unwrap_or_default();
        self.register_page(line, result, &tools, &page).await;
        self.view_page(&tools, &page);
        match (next_cursor, page.ours) {
            (Some(cursor), true) => self.list_next(link, &cursor, page).await,
            (Some(_), false) => Ok(()),
            (None, ours) => {
                self.session.listing_ended(true, ours);
                Ok(())
            }
        }
    }

    /// Registers a page (`result`, whose tools are `tools`): whole, or where the registry
    /// refuses it whole (a pinned contract, a bad tool), tool by tool.
    async fn register_page(
        &self,
        line: &Bytes,
        result: Unread<'_>,
        tools: &[&RawValue],
        page: &ListPage,
    ) {
        let (first_page, ours, protocol) = (page.first_page, page.ours, page.protocol);
        let how = RegisterOptions {
            merge: !first_page,
            protocol_version: protocol,
            learned: true,
            drop_shadow: false,
        };
        let body = line.slice_ref(result.bytes());
        match self
            .gate
            .register(&self.caller, self.config.server.to_string(), body, how)
            .await
        {
            Ok(registration) => {
                for tool in registration.tools.iter().filter(|t| !t.errors.is_empty()) {
                    tracing::warn!(
                        server = %self.config.server,
                        tool = %tool.name,
                        errors = ?tool.errors.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(),
                        "a schema of this tool was refused: its calls cannot be checked against it"
                    );
                }
                tracing::info!(server = %self.config.server, tools = registration.tools.len(), first_page, ours, "contract registered");
            }
            Err(CheckError::ContractPinned { tools: refused, .. }) => {
                // The pinned tools keep the contract in force (their calls are checked against
                // it); the others are registered one by one, added to it.
                tracing::warn!(server = %self.config.server, refused = ?refused, "tools/list changes a pinned contract: the pinned tools keep the contract in force until the change is accepted");
                let others: Vec<&RawValue> = tools
                    .iter()
                    .copied()
                    .filter(|tool| {
                        !refused
                            .iter()
                            .any(|name| Some(name.as_str()) == tool_name(tool).as_deref())
                    })
                    .collect();
                self.register_one_by_one(&others, false, protocol).await;
            }
            Err(e) => {
                tracing::warn!(server = %self.config.server, error = %e, "tools/list could not be registered as a whole: registering its tools one by one");
                self.register_one_by_one(tools, first_page, protocol).await;
            }
        }
    }

    /// A page of this session's own listing (`tools`), for its view: each tool it
    /// names, with the schemas it gave, shared with the registered contract's where they are the
    /// same texts (registered just before, they are, unless a pin refused them).
    fn view_page(&self, tools: &[&RawValue], page: &ListPage) {
        let server = &self.config.server;
        let Ok(server_id) = ServerId::parse(server) else {
            return;
        };
        let protocol = page.protocol.unwrap_or(ProtocolVersion::NEWEST);
        let provenance = Provenance::now(None);
        let depth = self.gate.limits().max_depth;
        let mut own_bytes = 0;
        let mut offers = Vec::with_capacity(tools.len());
        for tool in tools {
            let Some(name) = tool_name(tool) else {
                continue;
            };
            let body = single_tool_list(tool);
            let offer = parse_tools_list(&server_id, &body, depth, protocol, &provenance)
                .ok()
                .and_then(|list| list.tools.into_iter().next())
                .map(|schemas| {
                    let registered = self.gate.registered_tool(server, &name);
                    let mut share =
                        |own: Option<RegisteredSchema>, theirs: Option<&RegisteredSchema>| {
                            own.map(|own| match theirs {
                                // The registered text, shared rather than copied.
                                Some(theirs) if theirs.hash == own.hash => {
                                    (own.hash, theirs.text.clone())
                                }
                                _ => {
                                    own_bytes += own.text.len();
                                    (own.hash, own.text)
                                }
                            })
                        };
                    let input = share(
                        schemas.input,
                        registered.as_ref().and_then(|r| r.input.as_ref()),
                    );
                    let output = share(
                        schemas.output,
                        registered.as_ref().and_then(|r| r.output.as_ref()),
                    );
                    Arc::new(ListedSchemas {
                        input,
                        output,
                        protocol,
                    })
                });
            offers.push((name, offer));
        }
        if self.session.view_page(page.first_page, offers, own_bytes) {
            tracing::warn!(server = %server, "this session's tools/list is past the bounds of a session's own view: its calls are judged by the route's contract");
        }
    }

    /// Asks the server for the page after `cursor` of the boundary's own listing (`page` the one
    /// answered).
    async fn list_next(&self, link: &impl Link, cursor: &str, page: ListPage) -> io::Result<()> {
        let id = self.session.our_id();
        let meta_raw = page
            .meta
            .as_deref()
            .and_then(|m| RawValue::from_string(m.to_owned()).ok());
        let request = list_request(&id, Some(cursor), meta_raw.as_deref());
        let pending = Pending::ToolsList(ListPage {
            first_page: false,
            ours: true,
            protocol: page.protocol,
            meta: page.meta,
        });
        if self.session.track(&id, pending).is_ok() {
            link.send(Direction::ToServer, Outgoing::Own(&request))
                .await
        } else {
            self.session.listing_ended(false, true);
            Ok(())
        }
    }

    /// Registers each tool of a page alone, so one bad tool (a name the registry refuses, say)
    /// costs only itself; a tool that cannot be registered is marked unenforceable.
    async fn register_one_by_one(
        &self,
        tools: &[&RawValue],
        first_page: bool,
        protocol: Option<ProtocolVersion>,
    ) {
        if first_page {
            let empty = RegisterOptions {
                merge: false,
                protocol_version: protocol,
                learned: true,
                drop_shadow: false,
            };
            let _ = self
                .gate
                .register(
                    &self.caller,
                    self.config.server.to_string(),
                    Bytes::from_static(b"{\"tools\":[]}"),
                    empty,
                )
                .await;
        }
        for tool in tools {
            let body = single_tool_list(tool);
            let how = RegisterOptions {
                merge: true,
                protocol_version: protocol,
                learned: true,
                drop_shadow: false,
            };
            if let Err(e) = self
                .gate
                .register(&self.caller, self.config.server.to_string(), body, how)
                .await
            {
                let name = tool_name(tool).unwrap_or_default();
                if matches!(e, CheckError::ContractPinned { .. }) {
                    // The pinned contract stays in force: its calls are checked against it.
                    tracing::warn!(server = %self.config.server, tool = %name, "a listed tool changes a pinned contract: its calls are checked against the contract in force until the change is accepted");
                    continue;
                }
                tracing::warn!(server = %self.config.server, tool = %name, error = %e, "a listed tool could not be registered: its calls cannot be checked");
                self.session.mark_unenforceable(&name);
            }
        }
    }
}

/// A `tools/list` result holding `tool` alone.
fn single_tool_list(tool: &RawValue) -> Bytes {
    let text = tool.get().as_bytes();
    let mut body = Vec::with_capacity(text.len() + 12);
    body.extend_from_slice(b"{\"tools\":[");
    body.extend_from_slice(text);
    body.extend_from_slice(b"]}");
    body.into()
}

/// A `tools/list` answer's page, as far as the rules read it.
#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow, default)]
    tools: Vec<&'a RawValue>,
    #[serde(borrow, default, rename = "nextCursor")]
    next_cursor: Option<Cow<'a, str>>,
}

/// The `name` of a listed tool.
fn tool_name(tool: &RawValue) -> Option<String> {
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow, default)]
        name: Option<Cow<'a, str>>,
    }
    serde_json::from_str::<Named<'_>>(tool.get())
        .ok()
        .and_then(|n| n.name)
        .map(Cow::into_owned)
}

/// The boundary's own `tools/list` request: `id` (JSON text), the page's `cursor`, and the
/// client's request `_meta` (2026-07-28 requests need its revision and capabilities) without
/// its progress token.
fn list_request(id: &str, cursor: Option<&str>, meta: Option<&RawValue>) -> Vec<u8> {
    let mut params = serde_json::Map::new();
    if let Some(cursor) = cursor {
        params.insert("cursor".into(), cursor.into());
    }
    if let Some(mut meta) = meta.and_then(|m| {
        serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(m.get()).ok()
    }) {
        meta.remove("progressToken");
        if meta.contains_key(PROTOCOL_META_KEY) {
            params.insert("_meta".into(), meta.into());
        }
    }
    let params = serde_json::Value::Object(params);
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/list","params":{params}}}"#).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_owned()).expect("valid JSON")
    }

    #[test]
    fn the_proxys_listing_carries_the_clients_revision_but_not_its_progress_token() {
        let meta = raw(
            r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":5}"#,
        );
        let request = list_request("\"schemagate-1\"", Some("p2"), Some(&meta));
        let v: serde_json::Value = serde_json::from_slice(&request).expect("JSON");
        assert_eq!(v["id"], "schemagate-1");
        assert_eq!(v["method"], "tools/list");
        assert_eq!(v["params"]["cursor"], "p2");
        assert_eq!(v["params"]["_meta"][PROTOCOL_META_KEY], "2026-07-28");
        assert!(v["params"]["_meta"].get("progressToken").is_none());
        let older = list_request("\"s\"", None, None);
        assert_eq!(
            older,
            br#"{"jsonrpc":"2.0","id":"s","method":"tools/list","params":{}}"#
        );
    }
}
