//! A registration prepared: a server's `tools/list` read, its schemas compiled (so the first
//! checks hit the cache) and reported, its changes classed and the refusals of pinned tools
//! found; nothing is stored until it is committed.

use super::{
    parse_tools_list, Prepared, Provenance, RegisterOptions, RegisteredSchema, RegisteredTool,
    Registration, Registry, SchemaProblem, ToolSchemas,
};
use crate::core::domain::{ProtocolVersion, ServerId};
use crate::core::error::CheckError;
use crate::core::policy::{Policy, Rules};
use crate::core::schema::cache::SchemaCache;
use bytes::Bytes;

impl Registry {
    /// Reads a server's tools (an MCP tools/list result) and compiles their schemas, so the
    /// first checks hit the cache; nothing is stored yet. A broken schema is reported for its
    /// tool alone.
    #[allow(clippy::too_many_arguments)]
    pub fn prepare(
        &self,
        cache: &SchemaCache,
        policy: &Policy,
        depth_limit: usize,
        server: &str,
        body: &Bytes,
        how: RegisterOptions,
        by: Option<&str>,
        accepted: &dyn Fn(&str, &str) -> bool,
    ) -> Result<Prepared, CheckError> {
        let server_id = ServerId::parse(server)?;
        let protocol = how.protocol_version.unwrap_or(ProtocolVersion::NEWEST);
        let provenance = Provenance::now(by);
        let mut list = parse_tools_list(&server_id, body, depth_limit, protocol, &provenance)?;
        self.ensure_fits(&server_id, &list.tools, how.merge)?;
        if !how.drop_shadow {
            self.keep_shadows(server, &mut list.tools);
        }
        let mut report = Vec::with_capacity(list.tools.len());
        for tool in &list.tools {
            let rules = policy.rules_for(Some(server), Some(tool.name.as_str()));
            report.push(compile_reported(
                cache,
                &rules,
                protocol,
                tool.name.as_str(),
                (&tool.input, &tool.output),
            ));
        }
        // Classed once every new schema was compiled under the cost bounds: only schemas that
        // compile are analysed (an old one is compiled again, or found in the cache).
        let usable = |tool: &str, schema: &RegisteredSchema| {
            let options = policy.rules_for(Some(server), Some(tool)).compile;
            let (compiled, _) =
                cache.get_or_compile(schema.key(options), &schema.text, options, true);
            compiled.is_ok()
        };
        let (changes, versions, had_contract) = self.changes(
            policy,
            server,
            &list.tools,
            (how.merge, list.next_cursor.as_deref()),
            &provenance,
            &usable,
        );
        let refused = Self::refusals(
            policy,
            server,
            &changes,
            &list.tools,
            had_contract,
            accepted,
        );
        let mut tools = list.tools;
        if !how.merge && list.next_cursor.is_some() {
            self.keep_pinned(policy, server, &mut tools);
        }
        Ok(Prepared {
            registration: Registration {
                server: server.to_owned(),
                protocol_version: protocol,
                tools: report,
                next_cursor: list.next_cursor,
                changes,
            },
            versions,
            refused,
            server: server_id,
            tools,
            merge: how.merge,
            provenance,
            protocol,
        })
    }

    /// A tool registered again keeps its shadow schemas (on a later page of a listing, as they
    /// were before its first page).
    fn keep_shadows(&self, server: &str, tools: &mut [ToolSchemas]) {
        let current = self.servers.load();
        let base = self
            .listing_base
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(server)
            .cloned();
        for tool in tools {
            let name = tool.name.as_str();
            let old = current
                .server(server)
                .and_then(|s| s.tools.get(name))
                .or_else(|| base.as_ref().and_then(|b| b.tools.get(name)));
            if let Some(old) = old {
                tool.shadow_input = old.shadow_input.clone();
                tool.shadow_output = old.shadow_output.clone();
            }
        }
    }

    /// A first page of several replaces the server's tools with its own: a pinned tool in
    /// force that it does not list is kept (its removal is judged at the listing's end).
    fn keep_pinned(&self, policy: &Policy, server: &str, tools: &mut Vec<ToolSchemas>) {
        if let Some(in_force) = self.servers.load().server(server) {
            let mut kept: Vec<ToolSchemas> = in_force
                .tools
                .values()
                .filter(|t| !tools.iter().any(|n| n.name == t.name))
                .filter(|t| policy.rules_for(Some(server), Some(t.name.as_str())).pin)
                .cloned()
                .collect();
            tools.append(&mut kept);
        }
    }
}

/// Compiles a tool's `input` and `output` schemas (so the first checks hit the cache) and
/// reports them as registered: their hashes, and why one cannot be used (it does not compile,
/// or an outputSchema's root is not an object where `protocol` requires one).
pub(super) fn compile_reported(
    cache: &SchemaCache,
    rules: &Rules,
    protocol: ProtocolVersion,
    name: &str,
    (input, output): (&Option<RegisteredSchema>, &Option<RegisteredSchema>),
) -> RegisteredTool {
    let mut errors = Vec::new();
    for (label, schema, is_output) in [
        ("inputSchema", input, false),
        ("outputSchema", output, true),
    ] {
        let Some(schema) = schema else { continue };
        let key = schema.key(rules.compile);
        let (compiled, _) = cache.get_or_compile(key, &schema.text, rules.compile, true);
        let problem = match compiled.as_ref() {
            Err(e) => Some(e.clone()),
            Ok(c) if is_output && rules.object_root_required(protocol) && !c.root_is_object => {
                Some(CheckError::SchemaRootNotObject {
                    version: protocol.as_str(),
                })
            }
            Ok(_) => None,
        };
        if let Some(e) = problem {
            errors.push(SchemaProblem {
                schema: label,
                code: e.code(),
                message: e.to_string(),
            });
        }
    }
    RegisteredTool {
        name: name.to_owned(),
        input_schema_hash: input.as_ref().map(|s| s.hash),
        output_schema_hash: output.as_ref().map(|s| s.hash),
        errors,
    }
}
