//! JSON-RPC request ids as the official clients match them, so that every answer a client would
//! take for a followed request's is the one the rules judge.
//!
//! Neither SDK compares ids as text. The Python SDK (2.x) keys its requests by
//! `coerce_request_id`, so a string that Python's `int()` reads (`"7"`, `" 7 "`, `"+7"`,
//! `"0_7"`) is the number 7 on both sides; the TypeScript SDK looks an answer up by
//! `Number(response.id)`, so `"7"`, `"0x7"`, `"7.0"`, `"7e0"` and the JSON number `7.0` all find
//! request 7. A request is keyed here by the Python reading (the one that applies to both ends),
//! and an answer is looked up under every reading a client could give it ([`Readings`]). Where
//! an id could read as a number only by rules not written here (digits of another script, which
//! Python's `int()` accepts), the answer is [`Readings::doubtful`]: the rules withhold what they
//! cannot place.
//!
//! Everything here is linear in the id's length and allocates at most its size.

use std::borrow::Cow;

/// A request id as a session keys it: an integer in its canonical decimal form (`7`, `-3`, `0`),
/// or any other id as its canonical JSON text (`"abc"`, with the quotes). The two forms never
/// collide: JSON text of a string starts with a quote.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Key(Box<str>);

impl Key {
    /// The key of a request sent with the id `id` (its JSON text).
    pub fn of_request(id: &str) -> Key {
        match id.as_bytes().first() {
            Some(b'"') => match decode(id) {
                Some(text) => match python_int(&text) {
                    Some(n) => Key(n.into()),
                    None => Key(string_text(&text).into()),
                },
                None => Key(id.into()),
            },
            Some(b'-' | b'0'..=b'9') => match exact_integer(id) {
                Some(n) => Key(n.into()),
                None => Key(id.into()),
            },
            _ => Key(id.into()),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn into_string(self) -> String {
        self.0.into()
    }
}

/// The id's own text, when that is the only reading any client gives it and is already the
/// key's canonical form: a plain integer, or a string without escapes that no client reads as a
/// number. The usual ids, looked up with no allocation; `None` for the rest (see [`Readings`]).
pub fn sole_reading(id: &str) -> Option<&str> {
    let bytes = id.as_bytes();
    match bytes.first()? {
        b'"' => {
            let inner = id.strip_prefix('"')?.strip_suffix('"')?;
            let plain = !inner.contains('\\')
                && python_int(inner).is_none()
                && js_number(inner).is_none()
                && !inner.chars().any(|c| !c.is_ascii() && c.is_numeric());
            plain.then_some(id)
        }
        // Integers a double holds exactly: JavaScript reads them as written.
        b'1'..=b'9' => (bytes.len() <= 15 && bytes.iter().all(u8::is_ascii_digit)).then_some(id),
        b'0' => (bytes.len() == 1).then_some(id),
        _ => None,
    }
}

impl std::borrow::Borrow<str> for Key {
    fn borrow(&self) -> &str {
        &self.0
    }
}

/// Every request an answer with a given id could be taken for, by one client or another.
#[derive(Debug, Default, PartialEq)]
pub struct Readings {
    /// The keys to look the answer up under, the most literal first.
    pub keys: Vec<Key>,
    /// A client could read the id as a number by rules not modelled here (a string holding
    /// digits of another script): where no key finds a request, the answer cannot be placed.
    pub doubtful: bool,
}

impl Readings {
    /// How clients read an answer's id `id` (its JSON text).
    pub fn of_answer(id: &str) -> Readings {
        let mut readings = Readings {
            keys: vec![Key::of_request(id)],
            doubtful: false,
        };
        let js = match id.as_bytes().first() {
            Some(b'"') => decode(id).and_then(|text| {
                readings.doubtful = text.chars().any(|c| !c.is_ascii() && c.is_numeric());
                js_number(&text)
            }),
            Some(b'-' | b'0'..=b'9') => js_number(id),
            _ => None,
        };
        if let Some(key) = js.map(|n| Key(n.into())) {
            if !readings.keys.contains(&key) {
                readings.keys.push(key);
            }
        }
        readings
    }
}

/// A JSON string's value, `None` when `id` is not a JSON string.
fn decode(id: &str) -> Option<Cow<'_, str>> {
    serde_json::from_str(id).ok()
}

/// A string's canonical JSON text.
fn string_text(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// What Python's `int(text)` gives (the Python SDK's `coerce_request_id`), in canonical decimal;
/// `None` where it raises, or where the text holds digits other than ASCII ones (see
/// [`Readings::doubtful`]).
fn python_int(text: &str) -> Option<String> {
    let text = text.trim_matches(is_python_space);
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    // Digits, with single underscores between them.
    let bytes = digits.as_bytes();
    if bytes.is_empty() || !bytes[0].is_ascii_digit() || !bytes[bytes.len() - 1].is_ascii_digit() {
        return None;
    }
    let mut plain = String::with_capacity(bytes.len());
    let mut underscore = false;
    for &b in bytes {
        match b {
            b'0'..=b'9' => {
                plain.push(b as char);
                underscore = false;
            }
            b'_' if !underscore => underscore = true,
            _ => return None,
        }
    }
    Some(canonical(negative, &plain))
}

/// What JavaScript's `Number(text)` gives (the TypeScript SDK's lookup), when it is a finite
/// integer, in canonical decimal.
fn js_number(text: &str) -> Option<String> {
    let text = text.trim_matches(is_js_space);
    if text.is_empty() {
        return Some("0".to_owned());
    }
    let radix = match text.get(..2) {
        Some("0x" | "0X") => Some(16),
        Some("0o" | "0O") => Some(8),
        Some("0b" | "0B") => Some(2),
        _ => None,
    };
    let value = match radix {
        Some(radix) => {
            let digits = &text[2..];
            if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
                return None;
            }
            digits.chars().fold(0f64, |n, c| {
                n * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
            })
        }
        None => {
            if !is_decimal_literal(text) {
                return None;
            }
            text.parse::<f64>().ok()?
        }
    };
    if !value.is_finite() || value.fract() != 0.0 {
        return None;
    }
    let text = format!("{:.0}", value.abs());
    Some(canonical(value < 0.0, &text))
}

/// JavaScript's StrDecimalLiteral less `Infinity` (never an integer): a sign, then digits with
/// an optional fraction, or a fraction alone, then an optional exponent.
fn is_decimal_literal(text: &str) -> bool {
    let b = text.as_bytes();
    let mut i = usize::from(matches!(b.first(), Some(b'+' | b'-')));
    let digits = |i: &mut usize| {
        let start = *i;
        while b.get(*i).is_some_and(u8::is_ascii_digit) {
            *i += 1;
        }
        *i - start
    };
    let mut mantissa = digits(&mut i);
    if b.get(i) == Some(&b'.') {
        i += 1;
        mantissa += digits(&mut i);
    }
    if mantissa == 0 {
        return false;
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

/// The integer a JSON number's text is, exactly (`7`, `7.0`, `70e-1`), in canonical decimal
/// (the text itself when it is already so: most ids); `None` for a fraction, or an integer of
/// more than `MAX_INTEGER_DIGITS` digits.
fn exact_integer(text: &str) -> Option<Cow<'_, str>> {
    const MAX_INTEGER_DIGITS: usize = 64;
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let canonical_already = match rest.as_bytes() {
        [b'0'] => !negative,
        [b'1'..=b'9', tail @ ..] => {
            rest.len() <= MAX_INTEGER_DIGITS && tail.iter().all(u8::is_ascii_digit)
        }
        _ => false,
    };
    if canonical_already {
        return Some(Cow::Borrowed(text));
    }
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i64>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if whole.is_empty() || !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let digits = digits.trim_start_matches('0');
    let trimmed = digits.trim_end_matches('0');
    if trimmed.is_empty() {
        return Some(Cow::Borrowed("0"));
    }
    // The value is trimmed × 10^scale.
    let zeros = (digits.len() - trimmed.len()) as i64;
    let scale = exponent
        .checked_sub(fraction.len() as i64)?
        .checked_add(zeros)?;
    if scale < 0 || scale > MAX_INTEGER_DIGITS as i64 - trimmed.len() as i64 {
        return None;
    }
    let mut integer = trimmed.to_owned();
    integer.extend(std::iter::repeat_n('0', scale as usize));
    Some(Cow::Owned(canonical(negative, &integer)))
}

/// Decimal digits with a sign, in one spelling: no leading zeros, no `-0`.
fn canonical(negative: bool, digits: &str) -> String {
    let digits = digits.trim_start_matches('0');
    match (digits.is_empty(), negative) {
        (true, _) => "0".to_owned(),
        (false, true) => format!("-{digits}"),
        (false, false) => digits.to_owned(),
    }
}

/// What Python's `str.strip()` takes away.
fn is_python_space(c: char) -> bool {
    matches!(c, '\t'..='\r' | '\x1c'..='\x1f' | ' ' | '\u{85}')
        || (!c.is_ascii() && c.is_whitespace())
}

/// What JavaScript's `String.prototype.trim` (and so `Number`) takes away.
fn is_js_space(c: char) -> bool {
    matches!(c, '\t'..='\r' | ' ' | '\u{feff}')
        || (!c.is_ascii() && c.is_whitespace() && c != '\u{85}')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(id: &str) -> Vec<String> {
        Readings::of_answer(id)
            .keys
            .into_iter()
            .map(|k| k.0.into())
            .collect()
    }

    #[test]
    fn requests_are_keyed_by_the_python_reading() {
        for (id, key) in [
            ("7", "7"),
            ("-0", "0"),
            ("7.0", "7"),
            ("70e-1", "7"),
            ("0.7e1", "7"),
            ("7.5", "7.5"),
            (r#""7""#, "7"),
            (r#"" +0_7 ""#, "7"),
            (r#""7_""#, r#""7_""#),
            (r#""7__0""#, r#""7__0""#),
            (r#""abc""#, r#""abc""#),
            (r#""\u0061bc""#, r#""abc""#),
            (r#""0x7""#, r#""0x7""#),
            ("true", "true"),
        ] {
            assert_eq!(Key::of_request(id).as_str(), key, "{id}");
        }
        // Integers in their one spelling are their own keys, as the exact reading makes them;
        // others are keyed by that reading.
        for (id, own) in [
            ("0", true),
            ("7", true),
            ("10", true),
            ("100", true),
            ("999999999999999", true),
            ("1000000000000000", false),
            ("-7", false),
            ("007", false),
        ] {
            assert_eq!(sole_reading(id).is_some(), own, "{id}");
            let exact = exact_integer(id).expect("an integer");
            assert_eq!(Key::of_request(id).as_str(), exact, "{id}");
        }
    }

    #[test]
    fn answers_are_read_as_each_client_reads_them() {
        // Python's int() and JavaScript's Number() alike.
        assert_eq!(keys(r#""7""#), ["7"]);
        // Only JavaScript's Number().
        assert_eq!(keys(r#""0x7""#), [r#""0x7""#, "7"]);
        assert_eq!(keys(r#""7.0""#), [r#""7.0""#, "7"]);
        assert_eq!(keys(r#""7e0""#), [r#""7e0""#, "7"]);
        assert_eq!(keys(r#""\ufeff7""#), ["\"\u{feff}7\"", "7"]);
        assert_eq!(keys(r#""""#), [r#""""#, "0"]);
        assert_eq!(keys(r#"" ""#), [r#"" ""#, "0"]);
        // Only Python's int().
        assert_eq!(keys(r#""7_0""#), ["70"]);
        assert_eq!(keys(r#""\u00857""#), ["7"]);
        // Numbers: both read 7.0 as 7 (Python then refuses it, the TypeScript SDK does not).
        assert_eq!(keys("7.0"), ["7"]);
        assert_eq!(keys("1e21"), ["1000000000000000000000"]);
        // Past 2^53 the TypeScript SDK rounds.
        assert_eq!(
            keys("9007199254740993"),
            ["9007199254740993", "9007199254740992"]
        );
        // Nobody reads these as numbers.
        assert_eq!(keys(r#""Infinity""#), [r#""Infinity""#]);
        assert_eq!(keys(r#""7n""#), [r#""7n""#]);
        assert_eq!(keys(r#""0x""#), [r#""0x""#]);
        assert_eq!(keys(r#""1e""#), [r#""1e""#]);
        assert_eq!(keys(r#""abc""#), [r#""abc""#]);
        assert!(!Readings::of_answer(r#""7""#).doubtful);
        // Arabic-Indic seven: Python's int() reads it; the rules cannot place it.
        assert!(Readings::of_answer("\"\u{667}\"").doubtful);
    }

    #[test]
    fn the_usual_ids_have_one_reading_their_own() {
        for id in [
            "7",
            "0",
            "123456789012345",
            r#""abc""#,
            r#""call-9""#,
            r#""schemagate-00ff-1""#,
        ] {
            assert_eq!(sole_reading(id), Some(id), "{id}");
            assert_eq!(keys(id), [id], "{id}");
        }
        for id in [
            "-7",
            "07",
            "7.0",
            "1234567890123456",
            r#""7""#,
            r#""""#,
            r#""0x7""#,
            r#""a\u0062""#,
            "\"\u{667}\"",
            "true",
        ] {
            assert_eq!(sole_reading(id), None, "{id}");
        }
    }

    #[test]
    fn hostile_ids_stay_bounded() {
        assert_eq!(Key::of_request("1e999999999999").as_str(), "1e999999999999");
        assert_eq!(keys("1e400"), ["1e400"]);
        for huge in ["1e9223372036854775807", "-1e9223372036854775807"] {
            assert_eq!(Key::of_request(huge).as_str(), huge);
            assert_eq!(keys(huge), [huge]);
        }
        // A number too small to be anything but 0 for JavaScript.
        assert_eq!(
            keys("1e-9223372036854775808"),
            ["1e-9223372036854775808", "0"]
        );
        let long = format!("\"{}\"", "9".repeat(10_000));
        assert_eq!(Key::of_request(&long).as_str().len(), 10_000);
    }

    proptest::proptest! {
        /// An id's sole reading, when it has one, is its request's key: a session looks a
        /// request up by it without making the key.
        #[test]
        fn a_sole_reading_is_the_requests_key(id in r#"-?[0-9]{1,17}|"[0-9a-z_ .+-]{0,8}""#) {
            if let Some(text) = sole_reading(&id) {
                let key = Key::of_request(&id);
                proptest::prop_assert_eq!(key.as_str(), text);
            }
        }
    }
}
