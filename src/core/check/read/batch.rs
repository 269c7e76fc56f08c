//! A batch body: `{"items": [...]}`, each item read (or, for a large body, split out) in order.

use super::*;

/// Reads a batch object: `items`, and nothing else.
pub(super) struct BatchReader<'b> {
    pub(super) body: &'b Bytes,
    pub(super) depth_limit: usize,
    pub(super) max_items: usize,
}

type BatchItems = Result<Vec<BatchItem>, CheckError>;

impl<'de> Reader<'de> for BatchReader<'_> {
    type Output = BatchItems;

    fn object<A: MapAccess<'de>>(self, mut map: A) -> Result<BatchItems, A::Error> {
        let mut items = None;
        let mut problem = FirstError::default();
        while let Some(Key(key)) = map.next_key()? {
            if key == "items" && items.is_none() {
                items = Some(map.next_value_seed(Shape(ItemsReader {
                    body: self.body,
                    depth_limit: self.depth_limit,
                    max_items: self.max_items,
                    split_only: self.body.len() > ONE_PASS_MAX_BYTES,
                }))?);
                continue;
            }
            map.next_value::<IgnoredAny>()?;
            let message = if key == "items" {
                "duplicate field `items`".to_owned()
            } else {
                format!("unknown field `{key}`: a batch is {{\"items\": [check, ...]}}")
            };
            problem.note(invalid(message));
        }
        Ok(problem.or(()).and_then(|()| {
            items.unwrap_or_else(|| {
                Err(invalid(
                    "missing field `items`: a batch is {\"items\": [check, ...]}".into(),
                ))
            })
        }))
    }

    fn wrong(self, found: &'static str) -> BatchItems {
        Err(invalid(format!(
            "a batch must be a JSON object {{\"items\": [check, ...]}}, not {found}"
        )))
    }
}

/// Batch bodies up to this size are read whole in one pass. Larger ones are only split into their
/// items here, and each item is read when it is checked: reading a whole large batch first would
/// hold all its documents in memory at once (several times the body's size).
pub const ONE_PASS_MAX_BYTES: usize = 1024 * 1024;

/// Reads `items`: each check, or its own error; or, with `split_only`, each item's JSON text.
/// Past the limit, items are counted, not read.
pub(super) struct ItemsReader<'b> {
    pub(super) body: &'b Bytes,
    pub(super) depth_limit: usize,
    pub(super) max_items: usize,
    pub(super) split_only: bool,
}

impl<'de> Reader<'de> for ItemsReader<'_> {
    type Output = BatchItems;

    fn array<A: SeqAccess<'de>>(self, mut seq: A) -> Result<BatchItems, A::Error> {
        let mut checks = Vec::new();
        let mut len = 0usize;
        loop {
            if len < self.max_items && self.split_only {
                match seq.next_element::<&'de RawValue>()? {
                    Some(raw) => {
                        checks.push(BatchItem::Unread(self.body.slice_ref(raw.get().as_bytes())))
                    }
                    None => break,
                }
            } else if len < self.max_items {
                let reader = CheckReader {
                    body: self.body,
                    depth_limit: self.depth_limit,
                };
                match seq.next_element_seed(Shape(reader))? {
                    Some(check) => checks.push(BatchItem::Read(check)),
                    None => break,
                }
            } else if seq.next_element::<IgnoredAny>()?.is_none() {
                break;
            }
            len += 1;
        }
        if len > self.max_items {
            return Ok(Err(CheckError::BatchTooLarge {
                len,
                limit: self.max_items,
            }));
        }
        Ok(Ok(checks))
    }

    fn wrong(self, found: &'static str) -> BatchItems {
        Err(invalid(format!(
            "`items` must be an array of checks, not {found}"
        )))
    }
}
