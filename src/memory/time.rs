//! Times in the memory file: seconds since the Unix epoch as a float (what SQLite's
//! `unixepoch('subsec')` would give), and their UTC rendering for transcripts.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in seconds since the Unix epoch.
pub(crate) fn now() -> f64 {
    unix(SystemTime::now())
}

/// A `SystemTime` in seconds since the Unix epoch (negative before it).
pub(crate) fn unix(t: SystemTime) -> f64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM:SS` UTC.
pub fn format_utc(unix_s: f64) -> String {
    let secs = if unix_s.is_finite() {
        unix_s.floor() as i64
    } else {
        0
    };
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

// Howard Hinnant's days-to-civil algorithm: exact for the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::format_utc;

    #[test]
    fn formats_known_instants() {
        assert_eq!(format_utc(0.0), "1970-01-01 00:00:00");
        assert_eq!(format_utc(951_782_400.5), "2000-02-29 00:00:00");
        assert_eq!(format_utc(1_700_000_000.0), "2023-11-14 22:13:20");
    }
}
