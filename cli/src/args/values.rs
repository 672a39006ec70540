//! Readers for values the command line names, each with an error that says what to give.

/// A job id: a number, as `labpool queue` and `labpool history` show it.
pub fn job_id(text: &str) -> Result<u64, String> {
    text.trim().parse().map_err(|_| {
        format!("{text:?} is not a job id: give the number `labpool queue` or `labpool history` shows, e.g. 12")
    })
}

/// A login name that exists on this host (`--user`): a name nobody has would list nothing and
/// look like "no jobs".
pub fn login_name(text: &str) -> Result<String, String> {
    match nix::unistd::User::from_name(text) {
        Ok(Some(_)) => Ok(text.to_string()),
        _ => Err(format!(
            "no user {text:?} on this host: give a login name (`getent passwd NAME` finds it)"
        )),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_word_is_no_job_id_and_nobody_is_no_user() {
        assert_eq!(super::job_id("12"), Ok(12));
        assert!(
            super::job_id("abc")
                .unwrap_err()
                .contains("is not a job id")
        );
        assert_eq!(super::login_name("root").as_deref(), Ok("root"));
        assert!(
            super::login_name("nosuch-lp-user")
                .unwrap_err()
                .contains("no user")
        );
    }
}
