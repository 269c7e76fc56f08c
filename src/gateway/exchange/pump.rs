//! The upstream's answer relayed to the client through the MCP rules: a JSON message read
//! whole (up to the size limit), server-sent events one at a time as they arrive, a stdio
//! server's lines one at a time as it writes them, or bytes that are not JSON-RPC passed as they
//! are. Each message goes through the exchange's rules with a [`Relay`] saying where it came
//! from; the pump knows the exchange only by its methods.

use super::{AnswerHead, Exchange, Mode, Open, Relay};
use crate::gateway::sse::{self, Event, Next};
use crate::gateway::upstream::{self, Failure, GiveBack, Response, Upstreamed};
use crate::mcp::Direction;
use crate::ops::lines::Line;
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap};
use std::future::Future;
use std::io;
use std::sync::Arc;
use tokio::sync::mpsc;

/// Bytes of an oversized JSON answer kept to find its message's `id`.
const HEAD_BYTES: usize = 4096;
/// The UTF-8 byte order mark.
const BOM: &[u8] = b"\xEF\xBB\xBF";

/// An upstream answer to relay.
pub(super) struct Pump {
    pub(super) exchange: Arc<Exchange>,
    pub(super) response: Upstreamed,
    pub(super) kind: Mode,
    /// The request it answers (`None`: the client's GET or DELETE).
    pub(super) request: Option<Bytes>,
    /// The client's answer, when this answers the client's own message.
    pub(super) open: Option<Arc<Open>>,
    /// For a JSON answer to the client's message: the head it gives the client's answer, once
    /// read whole.
    pub(super) head: Option<AnswerHead>,
}

/// Reads the upstream's answer and relays it: a JSON message, events one by one as they come,
/// or the bytes as they are. The answer to the client's own message stops when it ends or the
/// client has gone (dropping it closes it: for the upstream, the client cancelled); the answer to
/// a request of the rules' own is read to its end. A request whose answer did not come, and
/// cannot come later (not on a stream the client may resume, or the rules' own), is no longer
/// followed.
pub(super) async fn run(pump: Pump) {
    let Pump {
        exchange,
        response,
        kind,
        request,
        open,
        head,
    } = pump;
    let mut resumable = false;
    let relayed = match (kind, response) {
        (
            _,
            Upstreamed::Lines {
                lines, give_back, ..
            },
        ) => pump_lines(&exchange, lines, &give_back, open.as_ref()).await,
        (Mode::Json, Upstreamed::Http(response)) => {
            pump_json(&exchange, response, open.as_ref(), head, request.as_ref()).await
        }
        (Mode::Sse, Upstreamed::Http(response)) => {
            pump_events(&exchange, response, open.as_ref(), &mut resumable).await
        }
        (Mode::Raw, Upstreamed::Http(response)) => {
            pump_raw(&exchange, response, open.as_ref()).await
        }
    };
    if let Err(e) = &relayed {
        tracing::debug!(route = %exchange.route_name(), error = %e, "relay of the upstream's answer ended");
    }
    let client_gone = relayed.as_ref().is_err_and(client_gone);
    // The request's id, read once for all three.
    if let Some(id) = request.as_deref().and_then(|r| exchange.request_id(r)) {
        if !client_gone && open.is_some() && !resumable && exchange.boundary().awaits_answer(id) {
            // The stream ended (or was cut) before the answer it owes: the client gets an
            // error for its request, not a stream that ends in silence.
            exchange.stream_cut(id).await;
        }
        if open.is_none() || !resumable {
            exchange.boundary().unanswered_id(id);
        }
    }
    drop(open);
}

/// [`run`] in a box of its own, for a task: the answer to one of the rules' own requests (its
/// pump may relay messages that send more requests, whose pumps are tasks again).
pub(super) fn pump(pump: Pump) -> futures_util::future::BoxFuture<'static, ()> {
    Box::pin(run(pump))
}

/// The next chunk of the upstream's answer, or `None` at its end; with `open`, an error once the
/// client has gone.
async fn next_chunk(
    response: &mut Response,
    open: Option<&Arc<Open>>,
) -> io::Result<Option<Bytes>> {
    let read = |e: String| io::Error::other(format!("reading the upstream's answer: {e}"));
    unless_gone(open, upstream::next_chunk(response))
        .await?
        .map_err(read)
}

/// `next`'s output; with `open`, an error once the client has gone instead.
async fn unless_gone<T>(open: Option<&Arc<Open>>, next: impl Future<Output = T>) -> io::Result<T> {
    let Some(open) = open else {
        return Ok(next.await);
    };
    tokio::select! {
        out = next => Ok(out),
        () = open.0.client_left() => Err(io::Error::new(io::ErrorKind::BrokenPipe, "the client has gone")),
    }
}

/// A stdio server's messages (see [`crate::gateway::upstream::stdio`]), each relayed as it is
/// read: the stream ends with the answer it was opened for. Once the client has gone, the message
/// it did not get and those still waiting on the stream go back to the session (`give_back`),
/// for the client's next stream: a server's request is never lost with a stream.
async fn pump_lines(
    exchange: &Arc<Exchange>,
    mut lines: mpsc::Receiver<Line>,
    give_back: &GiveBack,
    open: Option<&Arc<Open>>,
) -> io::Result<()> {
    let gone = |e: io::Error, undelivered: Option<Line>, mut lines: mpsc::Receiver<Line>| {
        if client_gone(&e) {
            lines.close();
            undelivered
                .into_iter()
                .chain(std::iter::from_fn(|| lines.try_recv().ok()))
                .for_each(|line| give_back(line));
        }
        Err(e)
    };
    loop {
        let line = match unless_gone(open, lines.recv()).await {
            Ok(Some(line)) => line,
            Ok(None) => return Ok(()),
            Err(e) => return gone(e, None, lines),
        };
        if let Err(e) = relay_line(exchange, &line, open).await {
            return gone(e, Some(line), lines);
        }
    }
}

/// Whether `e` says the client has gone (see [`unless_gone`]).
fn client_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::BrokenPipe
}

/// One of a stdio server's messages, through the rules to the client.
async fn relay_line(
    exchange: &Arc<Exchange>,
    line: &Line,
    open: Option<&Arc<Open>>,
) -> io::Result<()> {
    match line {
        Line::Message(bytes) => {
            let data = bytes.slice_ref(bytes.trim_ascii());
            let link = Relay {
                exchange,
                open,
                source: Some(data.clone()),
                event: None,
            };
            exchange
                .boundary()
                .relay(&link, Direction::ToClient, &data)
                .await
        }
        Line::Oversized { head, len } => {
            let link = Relay {
                exchange,
                open,
                source: None,
                event: None,
            };
            exchange
                .boundary()
                .oversized(&link, Direction::ToClient, head, *len)
                .await
        }
    }
}

/// A JSON answer read to its end: its bytes (at most `max`, or its first bytes past it, to find
/// its id) and its whole length. An answer that came in one chunk is that chunk, not a copy.
async fn read_whole(
    response: &mut Response,
    open: Option<&Arc<Open>>,
    max: usize,
) -> io::Result<(Bytes, usize)> {
    let keep = max.max(HEAD_BYTES);
    let mut body = Bytes::new();
    let mut joined: Option<BytesMut> = None;
    let mut len = 0usize;
    while let Some(chunk) = next_chunk(response, open).await? {
        len += chunk.len();
        if body.is_empty() && joined.is_none() {
            body = chunk;
            continue;
        }
        let joined = joined.get_or_insert_with(|| BytesMut::from(&body[..]));
        if joined.len() < keep {
            joined.extend_from_slice(&chunk);
        }
    }
    Ok((joined.map_or(body, BytesMut::freeze), len))
}

async fn pump_json(
    exchange: &Arc<Exchange>,
    mut response: Response,
    open: Option<&Arc<Open>>,
    head: Option<AnswerHead>,
    request: Option<&Bytes>,
) -> io::Result<()> {
    let max = exchange.max_message_bytes();
    // The client is owed this answer: one it cannot read goes as the gateway's error instead.
    let owed = open.is_some() && exchange.expects_answer();
    let bad_answer = |why: String| exchange.failed(&Failure::BadAnswer(why), request);
    let (mut body, mut len) = match read_whole(&mut response, open, max).await {
        Ok(read) => read,
        Err(e) if client_gone(&e) => return Err(e),
        Err(e) => {
            // Cut off (a connection closed before the length it declared, a chunked body that
            // never ended): what came cannot be stood behind.
            if open.is_some() {
                bad_answer(format!("cut its answer off before its end ({e})"));
            }
            return Ok(());
        }
    };
    // A byte order mark is not JSON, yet clients that read JSON skip it: the rules read what
    // the client will.
    if body.starts_with(BOM) {
        body = body.slice(BOM.len()..);
        len -= BOM.len();
    }
    if let Some(head) = head {
        exchange.stage(head);
    }
    let link = Relay {
        exchange,
        open,
        source: None,
        event: None,
    };
    if len > max {
        let head = &body[..body.len().min(HEAD_BYTES)];
        exchange
            .boundary()
            .oversized(&link, Direction::ToClient, head, len)
            .await?;
    } else {
        let link = Relay {
            source: Some(body.clone()),
            ..link
        };
        let boundary = exchange.boundary();
        let relayed = if owed {
            boundary
                .relay_message(&link, Direction::ToClient, &body)
                .await?
        } else {
            boundary.relay(&link, Direction::ToClient, &body).await?;
            true
        };
        if !relayed {
            // The answer owed to the client cannot be read: not relayed unchecked.
            bad_answer("answered with a body that is not a JSON-RPC message".to_owned());
            return Ok(());
        }
    }
    if open.is_some() && exchange.mode().is_none() {
        if owed {
            // The rules withheld the one message, and wrote nothing in its place.
            bad_answer("answered with a message the gateway withheld (see its log)".to_owned());
        } else {
            exchange.decide_staged();
        }
    }
    Ok(())
}

async fn pump_events(
    exchange: &Arc<Exchange>,
    mut response: Response,
    open: Option<&Arc<Open>>,
    resumable: &mut bool,
) -> io::Result<()> {
    let mut reader = sse::Reader::new(exchange.max_message_bytes());
    loop {
        let chunk = next_chunk(&mut response, open).await?;
        match &chunk {
            Some(chunk) => reader.push(chunk),
            None => {
                if let Some(next) = reader.finish() {
                    relay_event(exchange, next, open, resumable).await?;
                }
                return Ok(());
            }
        }
        while let Some(next) = reader.next_event() {
            relay_event(exchange, next, open, resumable).await?;
        }
    }
}

async fn relay_event(
    exchange: &Arc<Exchange>,
    next: Next,
    open: Option<&Arc<Open>>,
    resumable: &mut bool,
) -> io::Result<()> {
    match next {
        Next::Event(event) => {
            *resumable |= event.id.as_ref().is_some_and(|id| !id.is_empty());
            let message = event
                .data
                .clone()
                .filter(|data| !data.iter().all(u8::is_ascii_whitespace));
            let Some(data) = message else {
                // No message (a priming event's empty data, a `retry`): relayed as it came, on
                // the client's own stream only.
                if open.is_none() || exchange.mode() != Some(Mode::Sse) {
                    return Ok(());
                }
                return exchange.write(event.raw.clone()).await;
            };
            let link = Relay {
                exchange,
                open,
                source: Some(data.clone()),
                event: Some(&event),
            };
            exchange
                .boundary()
                .relay(&link, Direction::ToClient, &data)
                .await
        }
        Next::Oversized { id, head, len } => {
            *resumable |= id.as_ref().is_some_and(|id| !id.is_empty());
            let event = Event {
                raw: Bytes::new(),
                id,
                name: None,
                data: None,
            };
            let link = Relay {
                exchange,
                open,
                source: None,
                event: Some(&event),
            };
            exchange
                .boundary()
                .oversized(&link, Direction::ToClient, &head, len)
                .await
        }
    }
}

async fn pump_raw(
    exchange: &Arc<Exchange>,
    mut response: Response,
    open: Option<&Arc<Open>>,
) -> io::Result<()> {
    while let Some(chunk) = next_chunk(&mut response, open).await? {
        exchange.write(chunk).await?;
    }
    Ok(())
}

/// What an answer with these headers holds.
pub fn content_mode(headers: &HeaderMap) -> Mode {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    match essence.as_str() {
        "text/event-stream" => Mode::Sse,
        "application/json" => Mode::Json,
        _ => Mode::Raw,
    }
}
