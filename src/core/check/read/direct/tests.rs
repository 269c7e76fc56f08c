use super::{read, read_ahead};
use crate::core::check::read::by_serde;
use crate::core::check::ToolResult;
use bytes::Bytes;
use bytestring::ByteString;
use proptest::prelude::*;

const LIMIT: usize = 64;

/// What a reading of a result comes to, compared field by field.
fn reading(result: &ToolResult) -> impl PartialEq + std::fmt::Debug {
    let document = result.structured_content.as_ref().map(|d| {
        (
            d.to_value(),
            String::from_utf8_lossy(d.text()).into_owned(),
            d.nodes,
            d.depth,
            d.string_bytes,
        )
    });
    let copies: Vec<Vec<u8>> = result
        .json_texts
        .iter()
        .map(|c| c.as_sent().to_vec())
        .collect();
    (document, copies, result.has_text_block, result.is_error)
}

/// The direct reader reads `text` as the serde reader does, or gives it up; answers whether it
/// read it.
fn agrees(text: &str) -> bool {
    let bytes = Bytes::copy_from_slice(text.as_bytes());
    let Some(direct) = read(&bytes, LIMIT) else {
        return false;
    };
    match by_serde(&bytes, LIMIT) {
        Ok(serde) => assert_eq!(reading(&direct), reading(&serde), "{text}"),
        Err(e) => panic!("read directly, refused by the serde reader ({e}): {text}"),
    }
    true
}

/// A JSON text written as a JSON string's content (the text copy a tool sends).
fn copy_of(json: &str) -> String {
    let quoted = serde_json::to_string(json).expect("a string");
    quoted[1..quoted.len() - 1].to_owned()
}

#[test]
fn results_as_the_sdks_send_them_are_read_directly() {
    let structured =
        r#"{"city":"Zürich","temp":-3.5e0,"tags":["a","b\"c"],"n":12345678901234567890123}"#;
    let copy = copy_of(structured);
    for text in [
        // The Python SDK's order, with `isError`.
        format!(r#"{{"content":[{{"type":"text","text":"{copy}"}}],"structuredContent":{structured},"isError":false}}"#),
        // The TypeScript SDK's, spaced, with `_meta` and an image block.
        format!("{{ \"structuredContent\" : {structured} ,\n \"content\": [ {{\"type\":\"image\",\"data\":\"AA==\",\"mimeType\":\"image/png\"}}, {{\"type\":\"text\",\"text\":\"{copy}\",\"annotations\":{{\"audience\":[\"user\"]}}}} ], \"_meta\": {{\"x\": [1, {{\"y\": null}}]}} }}\n"),
        r#"{"content":[{"type":"text","text":"done"}],"isError":true}"#.to_owned(),
        r#"{"content":null,"structuredContent":null}"#.to_owned(),
        r#"{"structuredContent":[1,"two",{"three":3}],"content":[]}"#.to_owned(),
        "{}".to_owned(),
    ] {
        assert!(agrees(&text), "given up: {text}");
    }
}

#[test]
fn anything_irregular_is_left_to_the_serde_reader() {
    let given_up = [
        // Keys given twice, or with escapes.
        r#"{"isError":true,"isError":false}"#,
        r#"{"structuredContent":{},"structuredContent":[]}"#,
        r#"{"content":[{"type":"text","type":"image"}]}"#,
        r#"{"content":[{"type":"text","text":"{}","text":"x"}]}"#,
        r#"{"structured\u0043ontent":{"a":1}}"#,
        r#"{"content":[{"type":"t\u0065xt","text":"{}"}]}"#,
        // serde_json's number token: the serde reader reads these objects as numbers.
        r#"{"$serde_json::private::Number":"1","content":[]}"#,
        r#"{"content":[{"$serde_json::private::Number":0,"type":"text","text":"{}"}]}"#,
        // Wrong types, broken JSON, trailing text.
        r#"{"isError":"yes"}"#,
        r#"{"isError":1}"#,
        r#"{"content":{}}"#,
        r#"{"content":["text"]}"#,
        r#"{"content":[{"type":"text","text":7}]}"#,
        r#"{"content":[{"type":5}]}"#,
        r#"{"content":[{"type":"text","text":"\ud800"}]}"#,
        r#"{"_meta":{"a":tru}}"#,
        r#"{"structuredContent":{"a":1}"#,
        r#"{"structuredContent":{"a":1}} x"#,
        r#"{"structuredContent":{"a":"\x"}}"#,
        "{\"structuredContent\":{\"a\":\"\u{1}\"}}",
        r#"[]"#,
        "",
    ];
    for text in given_up {
        let bytes = Bytes::copy_from_slice(text.as_bytes());
        assert!(read(&bytes, LIMIT).is_none(), "read directly: {text}");
    }
    // Text that is not UTF-8, and nesting past the limit.
    let mut broken = br#"{"content":[{"type":"text","text":"x"#.to_vec();
    broken.extend_from_slice(b"\xff\"}]}");
    assert!(read(&Bytes::from(broken), LIMIT).is_none());
    let deep = format!(
        r#"{{"structuredContent":{}{}}}"#,
        "[".repeat(70),
        "]".repeat(70)
    );
    assert!(read(&Bytes::from(deep.clone()), LIMIT).is_none());
    assert!(by_serde(&Bytes::from(deep), LIMIT).is_err());
}

#[test]
fn no_cut_of_a_result_is_read_directly() {
    let structured = r#"{"a":[1,2,{"b":"c\"d"}],"e":null}"#;
    let text = format!(
        r#"{{"content":[{{"type":"text","text":"{}"}}],"structuredContent":{structured},"isError":false}}"#,
        copy_of(structured)
    );
    for end in 0..text.len() {
        let bytes = Bytes::copy_from_slice(&text.as_bytes()[..end]);
        assert!(
            read(&bytes, LIMIT).is_none(),
            "read directly: {}",
            &text[..end]
        );
    }
    assert!(agrees(&text));
}

/// A member of a result: its text, and whether the direct reader reads it.
fn member() -> impl Strategy<Value = (String, bool)> {
    let structured = prop::sample::select(vec![
        (r#"{"a":1,"b":[true,null,"x\"y"]}"#, true),
        ("null", true),
        (r#"[1, 2.5e3, -0, 1e400]"#, true),
        (r#""s\u00e9\ud83d\ude00""#, true),
        (r#"{"k":"v","k":"w"}"#, true),
        (r#"{"d":{"x":{"y":[{}]}}}"#, true),
        (r#"{"bad":tru}"#, false),
        (r#"{"lone":"\udc00"}"#, false),
    ]);
    let block = prop::sample::select(vec![
        (r#"{"type":"text","text":"COPY"}"#, true),
        (r#"{"type":"text","text":"  COPY"}"#, true),
        (r#"{"type":"text","text":"plain prose \"quoted\""}"#, true),
        (r#"{"text":"COPY","type":"text","_meta":{}}"#, true),
        (r#"{"type":"image","data":"AA=="}"#, true),
        (r#"{"type":"resource","text":"COPY"}"#, true),
        (r#"{"type":"text"}"#, true),
        (r#"{"type":"text","text":null}"#, false),
        (r#"{"type":"t\u0065xt","text":"COPY"}"#, false),
        (r#""text""#, false),
    ]);
    let blocks = prop::collection::vec(block, 0..4);
    prop_oneof![
        (structured.clone(), structured).prop_map(|((s, ok), (copied, _))| {
            let member = format!(r#""structuredContent":{s}"#);
            // A block's COPY is the copy of some structured content.
            (format!("{member}\u{0}{}", copy_of(copied)), ok)
        }),
        blocks.prop_map(|blocks| {
            let ok = blocks.iter().all(|(_, ok)| *ok);
            let list: Vec<&str> = blocks.iter().map(|(b, _)| *b).collect();
            (format!(r#""content":[{}]"#, list.join(",")), ok)
        }),
        prop::sample::select(vec![
            (r#""isError":true"#.to_owned(), true),
            (r#""isError":false"#.to_owned(), true),
            (r#""isError":null"#.to_owned(), true),
            (r#""isError":"no""#.to_owned(), false),
            (r#""content":null"#.to_owned(), true),
            (
                r#""_meta":{"progressToken":1,"x":[{"y":[]}]}"#.to_owned(),
                true
            ),
            (r#""extra":"\u0041\n""#.to_owned(), true),
            (r#""$serde_json::private::Number":"1""#.to_owned(), false),
        ]),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// A result made of members the direct reader reads, each known member once, is read
    /// directly; whatever it reads, it reads as the serde reader does.
    #[test]
    fn the_direct_reader_reads_as_the_serde_reader(
        members in prop::collection::vec(member(), 0..5),
        space in prop::sample::select(vec!["", " ", "\n  "]),
    ) {
        let mut copy = copy_of("{}");
        let mut texts = Vec::new();
        for (member, _) in &members {
            let mut parts = member.split('\u{0}');
            texts.push(parts.next().unwrap_or_default().to_owned());
            if let Some(c) = parts.next() {
                copy = c.to_owned();
            }
        }
        let texts: Vec<String> = texts.iter().map(|t| t.replace("COPY", &copy)).collect();
        let text = format!("{space}{{{space}{}{space}}}{space}", texts.join(&format!(",{space}")));
        let key = |t: &String| t.split(':').next().unwrap_or_default().to_owned();
        let mut keys: Vec<String> = texts.iter().map(key).collect();
        let count = keys.len();
        keys.sort();
        keys.dedup();
        let regular = members.iter().all(|(_, ok)| *ok) && keys.len() == count;
        let read = agrees(&text);
        prop_assert!(read || !regular, "a regular result given up: {}", text);
        // The same result inside its message, read ahead where it lies: as the serde reader
        // reads the result's own text, to the result's end; a tool result's members alone.
        let extra = texts.iter().any(|t| t.starts_with(r#""extra""#));
        for (before, after) in [(r#"{"jsonrpc":"2.0","id":7,"result":"#, "}"), (r#"{"result":"#, r#","id":"x","jsonrpc":"2.0"}"#)] {
            let line = ByteString::from(format!("{before}{text}{after}\n"));
            let ahead = read_ahead(&line, before.len(), LIMIT);
            prop_assert!(ahead.is_some() || !regular || extra, "a regular result not read ahead: {}", text);
            prop_assert!(ahead.is_none() || !extra, "a result with another member read ahead: {}", text);
            if let Some((result, end)) = ahead {
                prop_assert_eq!(line[before.len()..end].trim_ascii(), text.trim_ascii());
                let serde = by_serde(&Bytes::from(text.clone()), LIMIT).expect("read ahead, so readable");
                prop_assert_eq!(reading(&result), reading(&serde));
            }
        }
    }
}

#[test]
fn a_result_read_ahead_ends_where_it_ends_and_only_a_tool_results_members_are_read() {
    let line = ByteString::from_static(
        r#"{"jsonrpc":"2.0","result":{"structuredContent":{"a":[1,{"b":"}"}]},"content":[]} ,"id":3}"#,
    );
    let at = r#"{"jsonrpc":"2.0","result":"#.len();
    let (result, end) = read_ahead(&line, at, LIMIT).expect("read ahead");
    assert_eq!(&line[end..], r#" ,"id":3}"#);
    assert!(result.structured_content.is_some());
    for other in [
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t"},"content":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":tru}}"#,
        r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]"#,
    ] {
        let line = ByteString::from_static(other);
        let at = r#"{"jsonrpc":"2.0","id":1,"result":"#.len();
        assert!(
            read_ahead(&line, at, LIMIT).is_none(),
            "read ahead: {other}"
        );
    }
    // Nesting is counted from the result, not from the message around it.
    for depth in LIMIT - 3..LIMIT + 3 {
        let text = format!(
            r#"{{"structuredContent":{}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let before = r#"{"jsonrpc":"2.0","id":1,"result":"#;
        let line = ByteString::from(format!("{before}{text}}}"));
        let ahead = read_ahead(&line, before.len(), LIMIT);
        let serde = by_serde(&Bytes::from(text), LIMIT);
        assert_eq!(ahead.is_some(), serde.is_ok(), "{depth} deep");
    }
}
