//! Shadow (candidate) schemas: read for registered tools and compiled, or dropped, as
//! registrations that leave the contract, its provenance and its history as they are.

use super::prepare::compile_reported;
use super::{
    parse_tools_list, Prepared, RegisteredTool, Registration, Registry, ServerTools, ToolSchemas,
};
use crate::core::domain::ServerId;
use crate::core::error::CheckError;
use crate::core::policy::Policy;
use crate::core::schema::cache::SchemaCache;
use bytes::Bytes;
use std::sync::Arc;

impl Registry {
    /// Reads shadow (candidate) schemas for `server`'s registered tools from a `tools/list`
    /// result (each listed tool's inputSchema and outputSchema become its shadow ones; a
    /// schema left out clears that shadow) and compiles them; nothing is stored yet. A tool
    /// that is not registered refuses the whole (`unknown_tool`).
    pub fn prepare_shadow(
        &self,
        cache: &SchemaCache,
        policy: &Policy,
        depth_limit: usize,
        server: &str,
        body: &Bytes,
    ) -> Result<Prepared, CheckError> {
        let (server_id, in_force) = self.in_force(server)?;
        let list = parse_tools_list(
            &server_id,
            body,
            depth_limit,
            in_force.protocol,
            &in_force.provenance,
        )?;
        let mut tools = Vec::with_capacity(list.tools.len());
        let mut report = Vec::with_capacity(list.tools.len());
        for candidate in list.tools {
            let name = candidate.name.as_str();
            let mut tool =
                in_force
                    .tools
                    .get(name)
                    .cloned()
                    .ok_or_else(|| CheckError::UnknownTool {
                        server: server.to_owned(),
                        tool: name.to_owned(),
                    })?;
            let rules = policy.rules_for(Some(server), Some(name));
            report.push(compile_reported(
                cache,
                &rules,
                in_force.protocol,
                name,
                (&candidate.input, &candidate.output),
            ));
            tool.shadow_input = candidate.input;
            tool.shadow_output = candidate.output;
            tools.push(tool);
        }
        Ok(Self::unchanged_contract(
            server_id, &in_force, tools, report,
        ))
    }

    /// The registration that drops the shadow schemas of `tool` (`None`: of every tool) of
    /// `server`; nothing is stored yet.
    pub fn prepare_shadow_removal(
        &self,
        server: &str,
        tool: Option<&str>,
    ) -> Result<Prepared, CheckError> {
        let (server_id, in_force) = self.in_force(server)?;
        if let Some(tool) = tool {
            if !in_force.tools.contains_key(tool) {
                return Err(CheckError::UnknownTool {
                    server: server.to_owned(),
                    tool: tool.to_owned(),
                });
            }
        }
        let tools: Vec<ToolSchemas> = in_force
            .tools
            .values()
            .filter(|t| tool.is_none_or(|name| t.name.as_str() == name))
            .filter(|t| t.shadow_input.is_some() || t.shadow_output.is_some())
            .map(|t| ToolSchemas {
                shadow_input: None,
                shadow_output: None,
                ..t.clone()
            })
            .collect();
        let report = tools
            .iter()
            .map(|t| RegisteredTool {
                name: t.name.as_str().to_owned(),
                input_schema_hash: None,
                output_schema_hash: None,
                errors: Vec::new(),
            })
            .collect();
        Ok(Self::unchanged_contract(
            server_id, &in_force, tools, report,
        ))
    }

    /// `server`'s id and the tools in force for it (a server with none is `unknown_server`).
    fn in_force(&self, server: &str) -> Result<(ServerId, Arc<ServerTools>), CheckError> {
        let server_id = ServerId::parse(server)?;
        let in_force = self
            .servers
            .load()
            .server(server)
            .cloned()
            .ok_or_else(|| CheckError::UnknownServer(server.to_owned()))?;
        Ok((server_id, in_force))
    }

    /// A registration of `tools` (merged) that leaves the server's contract, its provenance and
    /// its tools' histories as they are: only their shadow schemas change.
    fn unchanged_contract(
        server: ServerId,
        in_force: &ServerTools,
        tools: Vec<ToolSchemas>,
        report: Vec<RegisteredTool>,
    ) -> Prepared {
        Prepared {
            registration: Registration {
                server: server.as_str().to_owned(),
                protocol_version: in_force.protocol,
                tools: report,
                next_cursor: None,
                changes: Vec::new(),
            },
            server,
            tools,
            merge: true,
            provenance: in_force.provenance.clone(),
            protocol: in_force.protocol,
            versions: Vec::new(),
            refused: Vec::new(),
        }
    }
}
