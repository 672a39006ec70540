//! A session's connection, on the Unix socket (the client is on the job's machine) or on TCP
//! (it is not): the job's session port, the second of its leased ports. Over TCP the client
//! and the host first prove to each other that they hold the session's token, which only the
//! client and the job's own environment hold ([`crate::link_auth`]).

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

pub use crate::api::sessions::TOKEN_VAR;

/// A byte stream both ways, that can be split into a reading and a writing half.
pub trait Conn: Read + Write + Send {
    /// Another handle on the same connection.
    fn dup(&self) -> io::Result<Box<dyn Conn>>;
    /// Ends the connection both ways, for every handle on it.
    fn close(&self);
    /// How long a write may wait for the other end to read.
    fn set_write_timeout(&self, d: Option<std::time::Duration>) -> io::Result<()>;
    /// How long a read may wait for the other end to write.
    fn set_read_timeout(&self, d: Option<std::time::Duration>) -> io::Result<()>;
}

macro_rules! conn_for {
    ($t:ty) => {
        impl Conn for $t {
            fn dup(&self) -> io::Result<Box<dyn Conn>> {
                Ok(Box::new(self.try_clone()?))
            }
            fn close(&self) {
                let _ = self.shutdown(std::net::Shutdown::Both);
            }
            fn set_write_timeout(&self, d: Option<std::time::Duration>) -> io::Result<()> {
                <$t>::set_write_timeout(self, d)
            }
            fn set_read_timeout(&self, d: Option<std::time::Duration>) -> io::Result<()> {
                <$t>::set_read_timeout(self, d)
            }
        }
    };
}

conn_for!(UnixStream);
conn_for!(TcpStream);

/// The second port in a job's `LABPOOL_PORTS` (`FIRST-LAST`): a session's on the job's first
/// node, the step launcher's on a multi-node job's others.
pub fn session_port(ports: &str) -> Option<u16> {
    ports.split('-').next()?.parse::<u16>().ok()?.checked_add(1)
}

/// What a client sends after the window size line: `[kind][length, 2 bytes big-endian][bytes]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// Bytes typed (kind 0).
    Input(Vec<u8>),
    /// The window's new rows and columns (kind 1, 4 bytes).
    Resize(u16, u16),
}

impl Frame {
    /// The frame on the wire.
    pub fn encode(&self) -> Vec<u8> {
        let (kind, body) = match self {
            Frame::Input(b) => (0u8, b.clone()),
            Frame::Resize(r, c) => (1u8, [r.to_be_bytes(), c.to_be_bytes()].concat()),
        };
        let mut out = Vec::with_capacity(3 + body.len());
        out.push(kind);
        out.extend_from_slice(&(body.len() as u16).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Reads one frame; an error at the end of the stream or on a malformed frame.
    pub fn read(r: &mut impl Read) -> io::Result<Frame> {
        let mut head = [0u8; 3];
        r.read_exact(&mut head)?;
        let mut body = vec![0u8; u16::from_be_bytes([head[1], head[2]]) as usize];
        r.read_exact(&mut body)?;
        match (head[0], body.as_slice()) {
            (0, _) => Ok(Frame::Input(body)),
            (1, [a, b, c, d]) => Ok(Frame::Resize(
                u16::from_be_bytes([*a, *b]),
                u16::from_be_bytes([*c, *d]),
            )),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "bad session frame",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_a_bad_one_is_refused() {
        for f in [Frame::Input(b"ls\r".to_vec()), Frame::Resize(50, 132)] {
            assert_eq!(Frame::read(&mut f.encode().as_slice()).unwrap(), f);
        }
        assert!(Frame::read(&mut [7u8, 0, 0].as_slice()).is_err());
        assert!(Frame::read(&mut [1u8, 0, 1, 9].as_slice()).is_err());
    }
}
