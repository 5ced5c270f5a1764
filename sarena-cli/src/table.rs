//! How `sarena` lays out tables, ages and sizes.

use comfy_table::{ContentArrangement, Table, presets};

/// A borderless table (kubectl style): a header line, then one line per row.
pub fn table(header: &[&str], rows: impl IntoIterator<Item = Vec<String>>) -> String {
    let mut t = Table::new();
    t.load_style(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    for row in rows {
        t.add_row(row);
    }
    let mut out = String::new();
    for line in t.to_string().lines() {
        // comfy-table pads every cell; the edges need none.
        out.push_str(line.trim_end());
        out.push('\n');
    }
    // NOTHING still indents by the left padding: drop that one column.
    out.lines()
        .map(|l| l.strip_prefix(' ').unwrap_or(l))
        .fold(String::new(), |mut acc, l| {
            acc.push_str(l);
            acc.push('\n');
            acc
        })
}

/// `key: value` lines, the keys padded to one width.
pub fn fields(pairs: &[(&str, String)]) -> String {
    let width = pairs.iter().map(|(k, _)| k.len()).max().unwrap_or(0) + 1;
    pairs
        .iter()
        .map(|(k, v)| format!("{:<width$} {v}\n", format!("{k}:")))
        .collect()
}

/// A duration in seconds the way `kubectl` shows ages: `45s`, `3m12s`, `5h2m`, `3d4h`.
pub fn age(seconds: u64) -> String {
    let (d, h, m, s) = (
        seconds / 86400,
        seconds / 3600 % 24,
        seconds / 60 % 60,
        seconds % 60,
    );
    match (d, h, m) {
        (0, 0, 0) => format!("{s}s"),
        (0, 0, _) => format!("{m}m{s}s"),
        (0, _, _) => format!("{h}h{m}m"),
        _ => format!("{d}d{h}h"),
    }
}

/// A byte count in binary units: `640B`, `1.5KiB`, `2.0GiB`.
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n}B");
    }
    let mut value = n as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1}{}", UNITS[unit])
}

/// The first 12 characters of a container id, as runtimes show them.
pub fn short_id(id: &str) -> String {
    id.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_and_sizes() {
        assert_eq!(age(0), "0s");
        assert_eq!(age(192), "3m12s");
        assert_eq!(age(5 * 3600 + 120), "5h2m");
        assert_eq!(age(3 * 86400 + 4 * 3600 + 5), "3d4h");
        assert_eq!(bytes(640), "640B");
        assert_eq!(bytes(1536), "1.5KiB");
        assert_eq!(bytes(3 << 30), "3.0GiB");
        assert_eq!(short_id("0123456789abcdef"), "0123456789ab");
    }

    #[test]
    fn tables_align_columns_without_borders() {
        let t = table(
            &["NAME", "CIDR"],
            [
                vec!["default".into(), "10.0.0.0/8".into()],
                vec!["a".into(), "-".into()],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3, "{t}");
        assert!(lines[0].starts_with("NAME"), "{t:?}");
        let col = lines[0].find("CIDR").unwrap();
        assert_eq!(lines[1].find("10.0.0.0/8"), Some(col), "{t}");
        assert_eq!(lines[2].find('-'), Some(col), "{t}");
    }

    #[test]
    fn fields_line_up() {
        let f = fields(&[("Daemon", "ready".into()), ("Endpoints", "3".into())]);
        assert_eq!(f, "Daemon:    ready\nEndpoints: 3\n");
    }
}
