//! How two processes of one job on different machines trust each other over TCP: a session's
//! client and its host (`labpool run --pty` on another node), and `srun` and a gang's step
//! host. Both hold a secret made for that job (the session's token, the gang's secret); each
//! proves it to the other without sending it, so a member who took the job's port first learns
//! nothing from the connection and is not believed.
//!
//! The exchange, one line each, read with a small bound and a deadline before anything else:
//!
//! ```text
//! client -> host    LP1 <client nonce>
//! host   -> client  <host nonce> <MAC("host", client nonce, host nonce)>
//! client -> host    <MAC("client", client nonce, host nonce)>
//! ```
//!
//! MACs are BLAKE3 keyed hashes under a key derived from the secret; nonces are 128 random
//! bits, so no answer can be replayed to another connection. The link is not encrypted: what
//! follows travels in the clear on the nodes' network (see `docs/security.md`).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long each side waits for the other's line.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// The longest line of the exchange.
const MAX_LINE: usize = 160;

/// The first word of a client's line: the protocol's version.
const HELLO: &str = "LP1";

/// `n` random bytes as hex, from the kernel's random source: tokens and secrets nobody can
/// guess.
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes).expect("the kernel's random source is readable");
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The proof of `secret` for `role` over both nonces.
fn mac(secret: &str, role: &str, client: &str, host: &str) -> blake3::Hash {
    let key = blake3::derive_key("labpool link proof v1", secret.as_bytes());
    let mut h = blake3::Hasher::new_keyed(&key);
    for part in [role, client, host] {
        h.update(&(part.len() as u64).to_le_bytes());
        h.update(part.as_bytes());
    }
    h.finalize()
}

/// True when `text` is the proof of `expected` (compared in constant time).
fn proves(text: &str, expected: blake3::Hash) -> bool {
    blake3::Hash::from_hex(text).is_ok_and(|h| h == expected)
}

fn refused(why: &str) -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, why.to_string())
}

/// Reads one line of at most [`MAX_LINE`] bytes, within [`DEADLINE`].
fn read_line(s: &TcpStream) -> io::Result<String> {
    s.set_read_timeout(Some(DEADLINE))?;
    let mut line = Vec::new();
    let mut byte = [0u8; 1];
    let mut r = s;
    loop {
        if r.read(&mut byte)? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the other side closed the link",
            ));
        }
        if byte[0] == b'\n' {
            break;
        }
        if line.len() == MAX_LINE {
            return Err(refused("a line longer than the link's exchange allows"));
        }
        line.push(byte[0]);
    }
    String::from_utf8(line).map_err(|_| refused("a line that is not text"))
}

fn write_line(s: &TcpStream, line: &str) -> io::Result<()> {
    s.set_write_timeout(Some(DEADLINE))?;
    let mut w = s;
    w.write_all(format!("{line}\n").as_bytes())
}

/// The client's side: proves `secret` to the host and checks the host's proof. An error means
/// the other end is not the job's (or did not answer in time): send it nothing more.
pub fn client(s: &TcpStream, secret: &str) -> io::Result<()> {
    let mine = random_hex(16);
    write_line(s, &format!("{HELLO} {mine}"))?;
    let line = read_line(s)?;
    let (theirs, proof) = line
        .split_once(' ')
        .ok_or_else(|| refused("the host's answer is not a proof"))?;
    if theirs.len() != 32 || !proves(proof, mac(secret, "host", &mine, theirs)) {
        return Err(refused(
            "the host could not prove it holds the job's secret",
        ));
    }
    write_line(s, &mac(secret, "client", &mine, theirs).to_hex())?;
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)
}

/// The host's side: checks the client's proof of `secret` and proves its own. An error means
/// the client is not the job's: close the connection.
pub fn host(s: &TcpStream, secret: &str) -> io::Result<()> {
    let line = read_line(s)?;
    let theirs = match line.split_once(' ') {
        Some((HELLO, nonce)) if nonce.len() == 32 => nonce.to_string(),
        _ => return Err(refused("not a labpool link")),
    };
    let mine = random_hex(16);
    write_line(
        s,
        &format!("{mine} {}", mac(secret, "host", &theirs, &mine).to_hex()),
    )?;
    if !proves(&read_line(s)?, mac(secret, "client", &theirs, &mine)) {
        return Err(refused(
            "the client could not prove it holds the job's secret",
        ));
    }
    s.set_read_timeout(None)?;
    s.set_write_timeout(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair(
        host_secret: &'static str,
        client_secret: &'static str,
    ) -> (io::Result<()>, io::Result<()>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (s, _) = l.accept().unwrap();
            host(&s, host_secret)
        });
        let c = TcpStream::connect(addr).unwrap();
        let client_side = client(&c, client_secret);
        drop(c);
        (h.join().unwrap(), client_side)
    }

    #[test]
    fn both_sides_that_hold_the_secret_trust_each_other() {
        let (h, c) = pair("s3cret", "s3cret");
        h.unwrap();
        c.unwrap();
    }

    #[test]
    fn a_side_without_the_secret_is_refused_by_the_other() {
        let (_, c) = pair("theirs", "mine");
        assert_eq!(c.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
    }

    #[test]
    fn a_host_never_waits_long_for_a_line_or_takes_a_long_one() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let mut c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        c.write_all(&[b'x'; 4096]).unwrap();
        let e = host(&s, "k").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}");
        let mut c2 = TcpStream::connect(addr).unwrap();
        let (s2, _) = l.accept().unwrap();
        c2.write_all(b"LP1 ").unwrap();
        let t0 = std::time::Instant::now();
        assert!(host(&s2, "k").is_err());
        assert!(t0.elapsed() < DEADLINE + Duration::from_secs(2));
    }
}
