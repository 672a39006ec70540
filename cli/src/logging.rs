//! Where the daemons' logs go (`serve`, `agent`, the demo). One line per event.
//!
//! - Started by systemd with standard error in the journal (`JOURNAL_STREAM` names the stream
//!   standard error is), the journal alone keeps them: no second copy in `log_file`, and no
//!   timestamp of ours beside the journal's (`journalctl -u labpool` reads them).
//! - Otherwise standard error, and `[controller] log_file` when set, rotated past
//!   `log_max_size` (`labpool.log` becomes `labpool.log.1`, and so on up to `log_keep` files),
//!   so a pool left alone for a year never fills its disk with its own log.

use crate::env_vars;
use crate::settings::ControllerConfig;
use anyhow::Context;
use file_rotate::compression::Compression;
use file_rotate::suffix::AppendCount;
use file_rotate::{ContentLimit, FileRotate};
use std::os::fd::AsFd;
use std::sync::Mutex;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::writer::MakeWriterExt;

/// systemd's variable: `DEV:INODE` of the journal stream it connected standard output and
/// error to.
const JOURNAL_STREAM: &str = "JOURNAL_STREAM";

/// Standard error is the journal's stream: `JOURNAL_STREAM` names its device and inode (a
/// child whose standard error was sent elsewhere inherits the variable, hence the check).
pub fn stderr_is_journal() -> bool {
    let Some((dev, ino)) = std::env::var(JOURNAL_STREAM).ok().and_then(|v| {
        let (d, i) = v.trim().split_once(':')?;
        Some((d.parse::<u64>().ok()?, i.parse::<u64>().ok()?))
    }) else {
        return false;
    };
    nix::sys::stat::fstat(std::io::stderr().as_fd())
        .is_ok_and(|st| st.st_dev == dev && st.st_ino == ino)
}

/// Sends logs to the journal, or to standard error (when `stderr`) and the rotated
/// `log_file`. The level comes from `$LABPOOL_LOG` (default `info`).
pub fn init(controller: &ControllerConfig, stderr: bool) -> anyhow::Result<()> {
    let filter =
        EnvFilter::try_from_env(env_vars::LABPOOL_LOG).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_target(false);
    // try_init: a second call (the demo after a test harness, say) keeps the first subscriber.
    if stderr && stderr_is_journal() {
        let _ = builder
            .without_time()
            .with_writer(std::io::stderr)
            .try_init();
        return Ok(());
    }
    let file = match controller.log_file.as_deref() {
        Some(path) => {
            // Opened once here, so that a path that cannot be written is said now, plainly.
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            Some(Mutex::new(FileRotate::new(
                path,
                AppendCount::new(controller.log_keep),
                ContentLimit::BytesSurpassed(controller.log_max_size as usize),
                Compression::None,
                None,
            )))
        }
        None => None,
    };
    let _ = match (file, stderr) {
        (Some(f), true) => builder.with_writer(std::io::stderr.and(f)).try_init(),
        (Some(f), false) => builder.with_writer(f).try_init(),
        (None, _) => builder.with_writer(std::io::stderr).try_init(),
    };
    Ok(())
}
