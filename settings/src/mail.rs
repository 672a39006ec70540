//! `[mail]`: how job notifications (`--mail-type`) and warnings before a kill reach members:
//! e-mail through an SMTP relay, and the `[alerts] webhook` with the member named.

use serde::{Deserialize, Serialize};

/// `[mail]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct MailConfig {
    /// The SMTP relay, `HOST:PORT` (plain SMTP, as to the host's own postfix on port 25);
    /// without it notices go to the webhook only.
    pub smtp: Option<String>,
    /// The sender address [default: labpool@HOSTNAME].
    pub from: Option<String>,
    /// The domain a login name is mailed at (`alice` to `alice@DOMAIN`); without it only
    /// `--mail-user` addresses get e-mail.
    pub domain: Option<String>,
    /// Every running job's member is warned when this share of its time limit has passed,
    /// percent (0: only those who asked with --mail-type=TIME_LIMIT_*).
    pub warn_time_percent: u32,
    /// Every running job's member is warned when its memory reaches this share of its --mem,
    /// percent (0: never).
    pub warn_memory_percent: u32,
}

impl Default for MailConfig {
    fn default() -> Self {
        MailConfig {
            smtp: None,
            from: None,
            domain: None,
            warn_time_percent: 90,
            warn_memory_percent: 90,
        }
    }
}

impl MailConfig {
    /// `smtp` is `HOST:PORT`; the warning mark is below 100.
    pub(super) fn check(&self) -> Result<(), String> {
        let mut problems = Vec::new();
        if let Some(s) = &self.smtp
            && s.rsplit_once(':')
                .is_none_or(|(_, p)| p.parse::<u16>().is_err())
        {
            problems.push(format!(
                "[mail] smtp {s:?}: give HOST:PORT, e.g. \"127.0.0.1:25\""
            ));
        }
        if self.warn_memory_percent >= 100 {
            problems.push(format!(
                "[mail] warn_memory_percent {}: give 1 to 99, or 0 for no warning",
                self.warn_memory_percent
            ));
        }
        if self.warn_time_percent >= 100 {
            problems.push(format!(
                "[mail] warn_time_percent {}: give 1 to 99, or 0 for no warning",
                self.warn_time_percent
            ));
        }
        if problems.is_empty() {
            Ok(())
        } else {
            Err(problems.join("; "))
        }
    }
}
