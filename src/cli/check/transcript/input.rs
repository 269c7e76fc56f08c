//! Where a transcript's lines come from, and the server it speaks to when `--server` does not
//! say.

use super::super::STDIN;
use crate::ops::lines::{Line, Lines};

/// Lines of a transcript read for its server's name, at most.
pub(super) const NAMING_LINES: usize = 64;

/// A transcript smaller than this is read whole at once (one read, rather than a read of the
/// blocking pool per buffer).
const WHOLE_FILE_BYTES: u64 = 4 << 20;

/// Where a transcript's lines come from.
pub(super) enum Input {
    Stdin,
    /// A small file, read whole.
    Whole(Vec<u8>),
    File,
}

impl Input {
    pub(super) async fn open(path: &std::path::Path) -> std::io::Result<Input> {
        if path.to_str() == Some(STDIN) {
            return Ok(Input::Stdin);
        }
        let len = tokio::fs::metadata(path).await?.len();
        match len <= WHOLE_FILE_BYTES {
            true => Ok(Input::Whole(tokio::fs::read(path).await?)),
            false => Ok(Input::File),
        }
    }
}

/// The server a transcript speaks to, when `--server` does not say: its recording's file name
/// (`SERVER-START-SESSION.jsonl`), else the `serverInfo.name` of the `initialize` answer among
/// its first lines.
pub(super) async fn server_of(
    path: &std::path::Path,
    input: &Input,
    max_line_bytes: usize,
) -> Result<String, String> {
    if let Some(server) = crate::ops::record::server_of(path) {
        return Ok(server);
    }
    let unnamed = || {
        format!(
            "name its server with --server NAME: it is no recording named SERVER-START-SESSION.jsonl, and no initialize answer with serverInfo.name is among its first {NAMING_LINES} lines"
        )
    };
    let mut lines = match input {
        Input::Stdin => return Err(unnamed()),
        Input::Whole(bytes) => Lines::new(
            Box::new(std::io::Cursor::new(bytes.as_slice()))
                as Box<dyn tokio::io::AsyncRead + Send + Unpin + '_>,
            max_line_bytes,
        ),
        Input::File => {
            let file = tokio::fs::File::open(path)
                .await
                .map_err(|e| format!("cannot read it: {e}"))?;
            Lines::new(
                Box::new(file) as Box<dyn tokio::io::AsyncRead + Send + Unpin + '_>,
                max_line_bytes,
            )
        }
    };
    for _ in 0..NAMING_LINES {
        let Ok(Some(Line::Message(text))) = lines.next().await else {
            break;
        };
        #[derive(serde::Deserialize)]
        struct Info<'a> {
            #[serde(borrow)]
            name: std::borrow::Cow<'a, str>,
        }
        #[derive(serde::Deserialize)]
        struct Initialized<'a> {
            #[serde(borrow, rename = "serverInfo")]
            server_info: Info<'a>,
        }
        #[derive(serde::Deserialize)]
        struct Answer<'a> {
            #[serde(borrow)]
            result: Initialized<'a>,
        }
        if let Ok(answer) = serde_json::from_slice::<Answer<'_>>(&text) {
            let name = answer.result.server_info.name;
            if !name.is_empty() {
                return Ok(name.into_owned());
            }
        }
    }
    Err(unnamed())
}
