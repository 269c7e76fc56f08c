//! A check object: its fields, each read once, then put together.

use super::*;
use std::sync::Arc;

/// Reads a check object.
pub(super) struct CheckReader<'b> {
    pub(super) body: &'b Bytes,
    pub(super) depth_limit: usize,
}

/// What a check's fields held, before they are put together.
#[derive(Default)]
struct CheckFields<'de> {
    server: Option<Cow<'de, str>>,
    tool: Option<Cow<'de, str>>,
    schema: Option<&'de RawValue>,
    schema_hash: Option<Cow<'de, str>>,
    instance: Option<Document>,
    result: Option<ToolResult>,
    arguments: Option<Document>,
    attempt: Option<u32>,
    call_id: Option<Cow<'de, str>>,
    protocol_version: Option<Cow<'de, str>>,
}

/// The fields of a check: adding one is a variant here, its name, and its arm in
/// [`CheckReader`]'s exhaustive `match`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Field {
    Server,
    Tool,
    Schema,
    SchemaHash,
    Instance,
    Result,
    Arguments,
    Attempt,
    CallId,
    ProtocolVersion,
}

impl Field {
    const ALL: [Field; 10] = [
        Field::Server,
        Field::Tool,
        Field::Schema,
        Field::SchemaHash,
        Field::Instance,
        Field::Result,
        Field::Arguments,
        Field::Attempt,
        Field::CallId,
        Field::ProtocolVersion,
    ];

    /// The field's name on the wire.
    fn name(self) -> &'static str {
        match self {
            Field::Server => "server",
            Field::Tool => "tool",
            Field::Schema => "schema",
            Field::SchemaHash => "schema_hash",
            Field::Instance => "instance",
            Field::Result => "result",
            Field::Arguments => "arguments",
            Field::Attempt => "attempt",
            Field::CallId => "call_id",
            Field::ProtocolVersion => "protocol_version",
        }
    }

    fn parse(name: &str) -> Option<Field> {
        Field::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Its bit in the set of fields already seen.
    fn bit(self) -> u16 {
        1 << self as u16
    }
}

/// The fields of a check, for the messages about a body that is not one: `` `server`, `tool`, ...``.
fn check_fields() -> String {
    Field::ALL.map(|f| format!("`{}`", f.name())).join(", ")
}

impl<'de> Reader<'de> for CheckReader<'_> {
    type Output = Result<Check, CheckError>;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Output, A::Error> {
        let mut f = CheckFields::default();
        let mut seen = 0u16;
        let mut problem = FirstError::default();
        while let Some(Key(key)) = map.next_key()? {
            let Some(field) = Field::parse(&key) else {
                map.next_value::<IgnoredAny>()?;
                problem.note(invalid(format!(
                    "unknown field `{key}`, expected one of {}",
                    check_fields()
                )));
                continue;
            };
            if seen & field.bit() != 0 {
                map.next_value::<IgnoredAny>()?;
                problem.note(invalid(format!("duplicate field `{key}`")));
                continue;
            }
            seen |= field.bit();
            let name = field.name();
            let read = match field {
                Field::Server => text(name, map.next_value()?).map(|v| f.server = v),
                Field::Tool => text(name, map.next_value()?).map(|v| f.tool = v),
                Field::SchemaHash => text(name, map.next_value()?).map(|v| f.schema_hash = v),
                Field::CallId => text(name, map.next_value()?).map(|v| f.call_id = v),
                Field::ProtocolVersion => {
                    text(name, map.next_value()?).map(|v| f.protocol_version = v)
                }
                Field::Schema => {
                    f.schema = Some(map.next_value()?);
                    Ok(())
                }
                Field::Attempt => match map.next_value()? {
                    Scalar::Unsigned(n) => u32::try_from(n)
                        .map(|n| f.attempt = Some(n))
                        .map_err(|_| invalid(format!("`attempt` {n} is too large"))),
                    Scalar::Null => Ok(()),
                    other => Err(invalid(format!(
                        "`attempt` must be a whole number (1 for a first attempt), not {}",
                        other.kind()
                    ))),
                },
                Field::Instance => payload(name, map.next_value()?, self.body, self.depth_limit)
                    .map(|doc| f.instance = Some(doc)),
                Field::Arguments => payload(name, map.next_value()?, self.body, self.depth_limit)
                    .map(|doc| f.arguments = Some(doc)),
                Field::Result => map
                    .next_value_seed(Shape(ResultReader {
                        body: self.body,
                        depth_limit: self.depth_limit,
                    }))?
                    .map(|r| f.result = Some(r)),
            };
            if let Err(e) = read {
                problem.note(e);
            }
        }
        Ok(problem.or(()).and_then(|()| self.assemble(f)))
    }

    fn wrong(self, found: &'static str) -> Self::Output {
        Err(invalid(format!(
            "a check must be a JSON object with {}, not {found}",
            check_fields()
        )))
    }
}

impl CheckReader<'_> {
    fn assemble(&self, f: CheckFields<'_>) -> Result<Check, CheckError> {
        let schema = match (f.schema, f.schema_hash) {
            (Some(_), Some(_)) => return Err(CheckError::ConflictingSchemas),
            (Some(raw), None) => SchemaSource::Inline(self.body.slice_ref(raw.get().as_bytes())),
            (None, Some(hash)) => SchemaSource::Hash(hash.into_owned()),
            (None, None) => SchemaSource::Registered,
        };
        let payload = match (f.instance, f.result, f.arguments) {
            (Some(v), None, None) => Payload::Instance(v),
            (None, Some(r), None) => Payload::Result(r),
            (None, None, Some(v)) => Payload::Arguments(v),
            (None, None, None) => return Err(CheckError::MissingPayload),
            _ => return Err(CheckError::ConflictingPayloads),
        };
        Ok(Check {
            server: f.server.as_deref().map(Arc::from),
            tool: f.tool.as_deref().map(Arc::from),
            schema,
            payload,
            attempt: attempt(f.attempt)?,
            call_id: f.call_id.as_deref().map(Arc::from),
            protocol_version: f
                .protocol_version
                .map(|v| ProtocolVersion::parse(&v))
                .transpose()?,
            roots: None,
            result_bytes: None,
        })
    }
}
