//! UTC time stamps as text, to the millisecond, with exactly three fraction digits so that
//! stamps sort as text.

/// How a stamp is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// RFC 3339: `2026-05-01T12:00:00.100Z`.
    Extended,
    /// ISO 8601's basic form, for file names: `20260501T120000.100Z`.
    Basic,
}

/// `nanos` since the Unix epoch as a UTC stamp in `style`; empty past the representable years.
pub fn utc(nanos: i128, style: Style) -> String {
    let (date, time) = match style {
        Style::Extended => ("-", ":"),
        Style::Basic => ("", ""),
    };
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .map(|t| {
            format!(
                "{:04}{date}{:02}{date}{:02}T{:02}{time}{:02}{time}{:02}.{:03}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_keep_three_fraction_digits_in_both_styles() {
        let nanos = 1_777_636_800_100_000_000; // 2026-05-01T12:00:00.100Z
        assert_eq!(utc(nanos, Style::Extended), "2026-05-01T12:00:00.100Z");
        assert_eq!(utc(nanos, Style::Basic), "20260501T120000.100Z");
    }
}
