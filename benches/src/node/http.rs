//! A minimal HTTP/1.0 GET over the daemon's Unix socket (the harness only reads
//! the API: health, endpoints, IPAM).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use super::BenchError;

/// `GET path` on `socket`; returns the body of a 2xx answer.
pub fn get(socket: &Path, path: &str) -> Result<String, BenchError> {
    let err = |detail: String| BenchError::Api {
        socket: socket.to_path_buf(),
        path: path.to_string(),
        detail,
    };
    let mut stream = UnixStream::connect(socket).map_err(|e| err(format!("connect: {e}")))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| err(format!("set timeout: {e}")))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: sarena\r\n\r\n")
        .map_err(|e| err(format!("write: {e}")))?;
    let mut raw = String::new();
    stream
        .read_to_string(&mut raw)
        .map_err(|e| err(format!("read: {e}")))?;
    let (status, body) = parse_response(&raw).ok_or_else(|| err(format!("bad answer {raw:?}")))?;
    if !(200..300).contains(&status) {
        return Err(err(format!("status {status}: {body}")));
    }
    Ok(body.to_string())
}

/// Status code and body of a raw HTTP/1.x response.
pub fn parse_response(raw: &str) -> Option<(u16, &str)> {
    let (head, body) = raw.split_once("\r\n\r\n")?;
    let status_line = head.lines().next()?;
    let mut parts = status_line.split_whitespace();
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    let status = parts.next()?.parse().ok()?;
    Some((status, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_status_and_body() {
        let raw = "HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\n[]";
        assert_eq!(parse_response(raw), Some((200, "[]")));
        assert_eq!(
            parse_response("HTTP/1.1 404 Not Found\r\n\r\n"),
            Some((404, ""))
        );
        assert_eq!(parse_response("garbage"), None);
        assert_eq!(parse_response("SMTP 200\r\n\r\n"), None);
    }
}
