//! The fields of a submit that a member sets and labpool acts on or shows to others, checked
//! before anything else, every problem at once: ranges the node would honour (the login
//! shell's timeout), text that reaches other people's terminals, the controller's log and
//! mail headers, and the flags that decide preemption and its price. A raw API body gets the
//! same answer as the CLI: `interactive` is a session's (its script is the session host), and
//! `--preemptible` is refused where nothing could preempt the job, since it halves the charge.

use crate::api::MAX_LOGIN_TIMEOUT_S as MAX_TIMEOUT_S;
use crate::api::SubmitRequest;
use std::time::Duration;

/// Longest `--comment` kept.
const MAX_COMMENT: usize = 1024;

/// Every problem with the member-set fields of `req`, in words; `idle` is the pool's
/// `[jobs] interactive_idle`.
pub fn field_problems(req: &SubmitRequest, idle: Duration) -> Vec<String> {
    let mut problems = Vec::new();
    if let Some(s) = req.get_user_env
        && !(1..=MAX_TIMEOUT_S).contains(&s)
    {
        problems.push(format!(
            "get_user_env: {s} s; the login shell may be given 1 to {MAX_TIMEOUT_S} s"
        ));
    }
    if let Some(c) = &req.comment {
        if let Some(bad) = c.chars().find(|ch| ch.is_control() && *ch != '\t') {
            problems.push(format!(
                "--comment holds the control character {:?}; a comment is one line of text",
                bad
            ));
        }
        if c.len() > MAX_COMMENT {
            problems.push(format!(
                "--comment is {} bytes; at most {MAX_COMMENT}",
                c.len()
            ));
        }
    }
    if let Some(who) = &req.mail_user
        && let Some(why) = bad_mail_user(who)
    {
        problems.push(why);
    }
    let session = crate::api::session_script::idle_of_script(&req.script);
    if req.interactive {
        match session {
            None => problems.push(
                "interactive: only a session started by `labpool run --pty` (or `srun --pty`) or a notebook (`labpool notebook`) is interactive"
                    .into(),
            ),
            Some(d) if d > idle.max(Duration::from_secs(1)) => problems.push(format!(
                "interactive: the session's idle limit ({} s) is longer than the pool's [jobs] interactive_idle ({} s)",
                d.as_secs(),
                idle.as_secs()
            )),
            Some(_) => {}
        }
    }
    if req.preemptible {
        let never = [
            (req.interactive, "an interactive session"),
            (req.emergency, "an emergency job (--emergency)"),
            (req.reservation.is_some(), "a job in a reservation"),
        ];
        for (_, what) in never.iter().filter(|(is, _)| *is) {
            problems.push(format!(
                "--preemptible: {what} is never preempted, so it is not charged the preemptible rate"
            ));
        }
    }
    problems
}

/// Why `who` cannot be mailed: a user name or one e-mail address, nothing that could break a
/// log line or a mail header.
fn bad_mail_user(who: &str) -> Option<String> {
    if who.is_empty() || who.len() > 254 || who.chars().any(char::is_control) {
        return Some(format!(
            "--mail-user {:?} is not a user name or an e-mail address",
            who.chars().take(64).collect::<String>()
        ));
    }
    if who.contains('@') {
        return who
            .parse::<lettre::Address>()
            .err()
            .map(|e| format!("--mail-user {who:?} is not an e-mail address ({e})"));
    }
    let plain = who
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    (!plain).then(|| format!("--mail-user {who:?} is not a user name or an e-mail address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req() -> SubmitRequest {
        serde_json::from_value(serde_json::json!({
            "name": "t", "script": "#!/bin/sh\ntrue\n", "workdir": "/tmp"
        }))
        .unwrap()
    }

    #[test]
    fn each_member_set_field_is_held_to_its_range_and_every_problem_is_named() {
        let mut r = req();
        r.get_user_env = Some(u32::MAX);
        r.comment = Some("ok\x1b]0;owned\x07\r\n".into());
        r.mail_user = Some("alice\r\nINFO forged".into());
        r.interactive = true;
        r.preemptible = true;
        r.emergency = true;
        let p = field_problems(&r, Duration::from_secs(3600));
        assert_eq!(p.len(), 6, "{p:#?}");
        let all = p.join("\n");
        for part in [
            "get_user_env: 4294967295",
            "control character '\\u{1b}'",
            "--mail-user",
            "only a session started by `labpool run --pty`",
            "an interactive session is never preempted",
            "an emergency job (--emergency) is never preempted",
        ] {
            assert!(all.contains(part), "{part:?} not in {all}");
        }
        assert!(field_problems(&req(), Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn mail_goes_to_a_user_name_or_one_address() {
        assert_eq!(bad_mail_user("alice"), None);
        assert_eq!(bad_mail_user("alice@lab.example.org"), None);
        for bad in ["", "a b", "a@b@c", "alice,bob@x.org", "x\r\nBcc: y@z.org"] {
            assert!(bad_mail_user(bad).is_some(), "{bad:?}");
        }
    }
}
