//! `--mail-type` and `--mail-user`: which moments of a job its member is told about, and where.
//! The words are sbatch's; `ALL` is what of sbatch's `ALL` labpool tells (BEGIN, END, FAIL,
//! REQUEUE: it has no stage-out, and a job whose dependency can never be met just waits, so
//! INVALID_DEPEND and STAGE_OUT, named on their own, are warned about at submit), and `NONE`
//! clears the list.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// One moment to be told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum MailType {
    /// The job started.
    Begin,
    /// The job ended, however it ended.
    End,
    /// The job failed (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, DEADLINE).
    Fail,
    /// The job was requeued.
    Requeue,
    /// A dependency can never be satisfied.
    InvalidDepend,
    /// Staging out ended (labpool has no stage-out: accepted, never sent).
    StageOut,
    /// The job reached its time limit.
    TimeLimit,
    /// 90% of the time limit.
    TimeLimit90,
    /// 80% of the time limit.
    TimeLimit80,
    /// 50% of the time limit.
    TimeLimit50,
    /// Each array task on its own, not only the array.
    ArrayTasks,
}

impl MailType {
    /// The sbatch word.
    pub fn as_str(self) -> &'static str {
        match self {
            MailType::Begin => "BEGIN",
            MailType::End => "END",
            MailType::Fail => "FAIL",
            MailType::Requeue => "REQUEUE",
            MailType::InvalidDepend => "INVALID_DEPEND",
            MailType::StageOut => "STAGE_OUT",
            MailType::TimeLimit => "TIME_LIMIT",
            MailType::TimeLimit90 => "TIME_LIMIT_90",
            MailType::TimeLimit80 => "TIME_LIMIT_80",
            MailType::TimeLimit50 => "TIME_LIMIT_50",
            MailType::ArrayTasks => "ARRAY_TASKS",
        }
    }

    /// The share of the time limit a `TIME_LIMIT_*` warning is sent at, percent.
    pub fn time_percent(self) -> Option<u32> {
        match self {
            MailType::TimeLimit50 => Some(50),
            MailType::TimeLimit80 => Some(80),
            MailType::TimeLimit90 => Some(90),
            MailType::TimeLimit => Some(100),
            _ => None,
        }
    }
}

/// Parses `--mail-type`'s comma-separated list (case-insensitive). Every unknown word is named.
pub fn parse_mail_types(text: &str) -> Result<BTreeSet<MailType>, String> {
    use MailType::*;
    let mut out = BTreeSet::new();
    let mut bad = Vec::new();
    for word in text.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        match word.to_ascii_uppercase().as_str() {
            "NONE" => out.clear(),
            "ALL" => out.extend([Begin, End, Fail, Requeue]),
            "BEGIN" => drop(out.insert(Begin)),
            "END" => drop(out.insert(End)),
            "FAIL" => drop(out.insert(Fail)),
            "REQUEUE" => drop(out.insert(Requeue)),
            "INVALID_DEPEND" => drop(out.insert(InvalidDepend)),
            "STAGE_OUT" => drop(out.insert(StageOut)),
            "TIME_LIMIT" => drop(out.insert(TimeLimit)),
            "TIME_LIMIT_90" => drop(out.insert(TimeLimit90)),
            "TIME_LIMIT_80" => drop(out.insert(TimeLimit80)),
            "TIME_LIMIT_50" => drop(out.insert(TimeLimit50)),
            "ARRAY_TASKS" => drop(out.insert(ArrayTasks)),
            _ => bad.push(word.to_string()),
        }
    }
    if bad.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "--mail-type: {} not known; use NONE, BEGIN, END, FAIL, REQUEUE, ALL, INVALID_DEPEND, STAGE_OUT, TIME_LIMIT, TIME_LIMIT_90, TIME_LIMIT_80, TIME_LIMIT_50 or ARRAY_TASKS",
            bad.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_what_labpool_tells_of_sbatchs_all_and_every_unknown_word_is_named() {
        let all = parse_mail_types("all,time_limit_80").unwrap();
        assert_eq!(
            all.iter().map(|m| m.as_str()).collect::<Vec<_>>(),
            ["BEGIN", "END", "FAIL", "REQUEUE", "TIME_LIMIT_80"]
        );
        assert!(parse_mail_types("END,NONE").unwrap().is_empty());
        let e = parse_mail_types("END,BEGINN,ENDD").unwrap_err();
        assert!(e.starts_with("--mail-type: BEGINN, ENDD not known"), "{e}");
    }
}
