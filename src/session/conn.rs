//! A session's connection, on the Unix socket (the client is on the job's machine) or on TCP
//! (it is not): the job's session port, the second of its leased ports. Over TCP the client
//! first shows the session's token, which only it and the job's own environment hold.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

/// The variable the session's token travels in, from `labpool run` to the session host.
pub const TOKEN_VAR: &str = "LABPOOL_SESSION_TOKEN";

/// A byte stream both ways, that can be split into a reading and a writing half.
pub trait Conn: Read + Write + Send {
    /// Another handle on the same connection.
    fn dup(&self) -> io::Result<Box<dyn Conn>>;
}

impl Conn for UnixStream {
    fn dup(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
}

impl Conn for TcpStream {
    fn dup(&self) -> io::Result<Box<dyn Conn>> {
        Ok(Box::new(self.try_clone()?))
    }
}

/// The second port in a job's `LABPOOL_PORTS` (`FIRST-LAST`): a session's on the job's first
/// node, the step launcher's on a multi-node job's others.
pub fn session_port(ports: &str) -> Option<u16> {
    ports.split('-').next()?.parse::<u16>().ok()?.checked_add(1)
}

/// Compares tokens in time that does not depend on where they differ.
pub fn same_token(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}
