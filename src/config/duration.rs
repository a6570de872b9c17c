//! Durations as people type them on a command line or in a parameter: `90`, `90s`, `15m`,
//! `1h` (the soak's and the node bench's lengths and sampling periods).

use std::time::Duration;

/// Parses `90`, `90s`, `15m`, `1h` into a duration.
pub fn parse_duration(s: &str) -> std::result::Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a number of seconds, or NUMs / NUMm / NUMh"))?;
    let mult = match unit {
        "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        _ => return Err(format!("{s:?}: unknown unit {unit:?} (s, m or h)")),
    };
    if !(n.is_finite() && n >= 0.0) {
        return Err(format!("{s:?}: not a duration"));
    }
    Ok(Duration::from_secs_f64(n * mult))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert!(parse_duration("5d").is_err() && parse_duration("x").is_err());
    }
}
