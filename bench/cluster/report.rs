//! An agent's stage report, read back from the `staged` line it logs.

/// One stage as its agent logged it (the `staged` line with the stage report's counts).
#[derive(Debug, Default, Clone)]
pub struct Report {
    /// Bytes read from the shared source.
    pub bytes_copied: u64,
    /// Bytes pulled from the peer.
    pub bytes_from_peer: u64,
    /// Files pulled from the peer.
    pub files_from_peer: u64,
    /// The peer the controller named (`-`: none).
    pub peer: String,
    /// Why the agent fell back from the peer to the source, when it did.
    pub peer_fallback: Option<String>,
    /// `staged` lines found (one expected: each agent stages once per cluster).
    pub count: usize,
}

/// The value of ` KEY=VALUE` in a log line, quotes removed; the last field runs to the end.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!(" {key}="))? + key.len() + 2;
    let rest = &line[at..];
    let value = if key == "peer_fallback" {
        rest
    } else {
        rest.split(' ').next().unwrap_or("")
    };
    Some(value.trim().trim_matches('"'))
}

/// The last `staged` report in an agent's log.
pub fn stage_report(log: &str) -> Report {
    let mut out = Report::default();
    for line in log
        .lines()
        .filter(|l| l.contains(" staged ") && l.contains(" bytes_copied="))
    {
        let n = |k: &str| field(line, k).and_then(|v| v.parse().ok()).unwrap_or(0);
        out = Report {
            bytes_copied: n("bytes_copied"),
            bytes_from_peer: n("bytes_from_peer"),
            files_from_peer: n("files_from_peer"),
            peer: field(line, "peer").unwrap_or("-").to_string(),
            peer_fallback: field(line, "peer_fallback")
                .filter(|v| *v != "-")
                .map(str::to_string),
            count: out.count + 1,
        };
    }
    out
}
