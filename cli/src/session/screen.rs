//! What a session shows, kept while no terminal is attached. The shell's bytes feed a terminal
//! model (the `vt100` crate) and go on to the terminal attached now, if any. A terminal that
//! attaches gets the screen redrawn first (its text, colours, cursor and input modes), under the
//! same lock as the stream, so nothing is lost or shown twice between the two. One terminal at
//! a time: the newest takes the session, and the one before is told and let go (as
//! `tmux attach -d` does).

use super::conn::Conn;
use nix::pty::Winsize;
use std::io::Write;
use std::num::NonZeroU16;
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::Duration;

/// A terminal that stops reading for this long is let go, so that it cannot stall the shell.
const WRITE_WITHIN: Duration = Duration::from_secs(10);

/// The largest window a client may ask for: the screen model holds rows × columns cells.
const MAX_ROWS: u16 = 500;
const MAX_COLS: u16 = 1000;

/// The session's screen and the terminal attached to it.
pub struct Screen {
    inner: Mutex<Inner>,
    /// The pseudo-terminal's master side, to give it the attached window's size.
    master: std::fs::File,
}

struct Inner {
    parser: vt100::Parser,
    attached: Option<(u64, Box<dyn Conn>)>,
    next: u64,
}

/// A window size within bounds: 24x80 for a zero, at most [`MAX_ROWS`] x [`MAX_COLS`].
pub fn window(rows: u16, cols: u16) -> (NonZeroU16, NonZeroU16) {
    let clamp = |v: u16, default: u16, max: u16| {
        NonZeroU16::new(if v == 0 { default } else { v.min(max) }).expect("not zero")
    };
    (clamp(rows, 24, MAX_ROWS), clamp(cols, 80, MAX_COLS))
}

impl Screen {
    /// A blank screen of `rows` x `cols` over the terminal whose master side is `master`.
    pub fn new(master: std::fs::File, rows: u16, cols: u16) -> Screen {
        let (r, c) = window(rows, cols);
        Screen {
            inner: Mutex::new(Inner {
                parser: vt100::Parser::new(r, c, 0),
                attached: None,
                next: 1,
            }),
            master,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shell wrote `bytes`: onto the screen, and to the attached terminal.
    pub fn output(&self, bytes: &[u8]) {
        let mut inner = self.lock();
        inner.parser.process(bytes);
        if let Some((_, out)) = &mut inner.attached
            && out.write_all(bytes).is_err()
        {
            // Gone, or not reading: detached. Its input side notices too.
            if let Some((_, out)) = inner.attached.take() {
                out.close();
            }
        }
    }

    /// Attaches `out`, whose window is `rows` x `cols`: the terminal before it is told and let
    /// go, the shell's terminal takes the new size, and `out` gets the screen redrawn when
    /// `redraw` (not for the first terminal, whose screen is the shell's own). Returns the
    /// attachment's number, for [`Screen::detach`].
    pub fn attach(
        &self,
        mut out: Box<dyn Conn>,
        rows: u16,
        cols: u16,
        redraw: bool,
    ) -> std::io::Result<u64> {
        out.set_write_timeout(Some(WRITE_WITHIN))?;
        let mut inner = self.lock();
        if let Some((_, mut old)) = inner.attached.take() {
            let _ = old.write_all(
                b"\r\nlabpool: this session was attached from another terminal; detached here\r\n",
            );
            old.close();
        }
        let (r, c) = window(rows, cols);
        inner.parser.screen_mut().set_size(r, c);
        set_window(&self.master, r.get(), c.get());
        if redraw {
            out.write_all(inner.parser.screen().state_formatted().as_bytes())?;
        }
        let id = inner.next;
        inner.next += 1;
        inner.attached = Some((id, out));
        Ok(id)
    }

    /// Attachment `id` went away: the session is detached, unless another terminal has taken
    /// it since.
    pub fn detach(&self, id: u64) {
        let mut inner = self.lock();
        if inner.attached.as_ref().is_some_and(|(a, _)| *a == id)
            && let Some((_, out)) = inner.attached.take()
        {
            out.close();
        }
    }

    /// Whether attachment `id` is the terminal attached now.
    pub fn holds(&self, id: u64) -> bool {
        self.lock().attached.as_ref().is_some_and(|(a, _)| *a == id)
    }

    /// The attached terminal (only `id`) changed size.
    pub fn resize(&self, id: u64, rows: u16, cols: u16) {
        let mut inner = self.lock();
        if inner.attached.as_ref().is_some_and(|(a, _)| *a == id) {
            let (r, c) = window(rows, cols);
            inner.parser.screen_mut().set_size(r, c);
            // The kernel tells the shell's foreground jobs (SIGWINCH).
            set_window(&self.master, r.get(), c.get());
        }
    }

    /// Tells the attached terminal `text`, if one is attached.
    pub fn notice(&self, text: &str) {
        if let Some((_, out)) = &mut self.lock().attached {
            let _ = out.write_all(text.as_bytes());
        }
    }

    /// What the screen shows now, as text (for tests).
    pub fn contents(&self) -> String {
        self.lock().parser.screen().contents()
    }
}

nix::ioctl_write_ptr_bad!(tiocswinsz, nix::libc::TIOCSWINSZ, Winsize);

/// Gives the terminal behind `master` a new size.
fn set_window(master: &std::fs::File, rows: u16, cols: u16) {
    let w = Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads the struct it is given, on a terminal descriptor we hold.
    let _ = unsafe { tiocswinsz(master.as_raw_fd(), &w) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    fn terminal() -> (Screen, std::fs::File) {
        let pty = nix::pty::openpty(None, None).unwrap();
        (
            Screen::new(std::fs::File::from(pty.master), 24, 80),
            std::fs::File::from(pty.slave),
        )
    }

    fn read_some(s: &mut UnixStream) -> String {
        s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 8192];
        let n = s.read(&mut buf).unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn a_terminal_that_attaches_later_gets_the_screen_drawn_and_takes_the_session() {
        let (screen, _slave) = terminal();
        screen.output(b"$ export X=1\r\n$ echo \x1b[1mbold\x1b[0m\r\nbold\r\n$ ");
        let (first, mut first_peer) = UnixStream::pair().unwrap();
        screen.attach(Box::new(first), 24, 80, true).unwrap();
        let drawn = read_some(&mut first_peer);
        assert!(
            drawn.contains("export X=1") && drawn.contains("bold"),
            "{drawn:?}"
        );
        // A second terminal takes it: the first is told and closed, the second gets the stream.
        let (second, mut second_peer) = UnixStream::pair().unwrap();
        let id = screen.attach(Box::new(second), 30, 100, true).unwrap();
        let told = read_some(&mut first_peer);
        assert!(told.contains("attached from another terminal"), "{told:?}");
        assert_eq!(read_some(&mut first_peer), "", "the first is let go");
        assert!(read_some(&mut second_peer).contains("export X=1"));
        screen.output(b"more");
        assert_eq!(read_some(&mut second_peer), "more");
        assert!(
            screen.contents().ends_with("$ more"),
            "{}",
            screen.contents()
        );
        // The first's late going-away does not detach the second.
        screen.detach(id - 1);
        screen.output(b"!");
        assert_eq!(read_some(&mut second_peer), "!");
        screen.detach(id);
        assert_eq!(read_some(&mut second_peer), "");
    }

    #[test]
    fn a_window_size_is_kept_within_bounds() {
        assert_eq!(
            window(0, 0),
            (NonZeroU16::new(24).unwrap(), NonZeroU16::new(80).unwrap())
        );
        assert_eq!(
            window(60000, 60000),
            (
                NonZeroU16::new(MAX_ROWS).unwrap(),
                NonZeroU16::new(MAX_COLS).unwrap()
            )
        );
    }
}
