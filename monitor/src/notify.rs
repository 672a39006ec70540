//! Job notifications (`--mail-type`, `--mail-user`): which of a job's events its member is told
//! about, and the warnings before a kill. Deterministic: a job event or a running job's clock
//! in, the notices due out; the controller remembers what was sent and delivers.

use labpool_scheduler::options::MailType;
use std::collections::BTreeSet;

/// One job event, as `job_events` records it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its row id.
    pub id: i64,
    /// The job.
    pub job: u64,
    /// `start`, `end`, `requeue`, ….
    pub event: String,
    /// What the lifecycle wrote: `FAILED, exit code 1`, `attempt 2 on n1, GPUs [0]`, ….
    pub detail: String,
}

/// What a notice is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobNote {
    /// The job.
    pub job: u64,
    /// The mail type it answers.
    pub kind: MailType,
    /// A subject line, as Slurm writes it: `labpool Job_id=12 Name=train Ended, FAILED`.
    pub subject: String,
}

/// End states that count as a failure for `FAIL`.
const FAILED: [&str; 5] = [
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "DEADLINE",
];

/// The notices one event calls for, given the job's name and mail types.
pub fn for_event(e: &Event, name: &str, types: &BTreeSet<MailType>) -> Vec<JobNote> {
    let note = |kind: MailType, what: String| JobNote {
        job: e.job,
        kind,
        subject: format!("labpool Job_id={} Name={name} {what}", e.job),
    };
    let mut out = Vec::new();
    match e.event.as_str() {
        "start" if types.contains(&MailType::Begin) => {
            out.push(note(MailType::Begin, "Began".to_string()));
        }
        // A requeue asked for is noted twice (asked, then done): the done one is told.
        "requeue"
            if types.contains(&MailType::Requeue) && !e.detail.starts_with("requested by") =>
        {
            out.push(note(MailType::Requeue, format!("Requeued, {}", e.detail)));
        }
        "end" => {
            let state = e.detail.split([',', ':']).next().unwrap_or("").trim();
            let failed = FAILED.contains(&state);
            if state == "TIMEOUT" && types.contains(&MailType::TimeLimit) {
                out.push(note(
                    MailType::TimeLimit,
                    format!("Reached time limit, {}", e.detail),
                ));
            } else if failed && types.contains(&MailType::Fail) {
                out.push(note(MailType::Fail, format!("Failed, {}", e.detail)));
            } else if types.contains(&MailType::End) {
                out.push(note(MailType::End, format!("Ended, {}", e.detail)));
            }
        }
        _ => {}
    }
    out
}

/// The time-limit warning due for a running attempt, if any: the highest of the
/// `TIME_LIMIT_50/80/90` marks it asked for and `always_at` percent (`[mail] warn_time_percent`,
/// for every job; 0: none) that `elapsed_ms` of `limit_ms` has passed, when it is above
/// `last_sent` (the highest mark already sent for this attempt, 0 for none). A controller that
/// was down past two marks sends the higher one only.
pub fn time_warning(
    elapsed_ms: i64,
    limit_ms: i64,
    types: &BTreeSet<MailType>,
    always_at: u32,
    last_sent: u32,
) -> Option<u32> {
    if limit_ms <= 0 {
        return None;
    }
    let reached = elapsed_ms.saturating_mul(100) / limit_ms;
    types
        .iter()
        .filter_map(|t| t.time_percent())
        .chain((always_at > 0).then_some(always_at))
        .filter(|p| *p < 100 && i64::from(*p) <= reached)
        .max()
        .filter(|p| *p > last_sent)
}

#[cfg(test)]
mod tests {
    use super::*;
    use labpool_scheduler::options::parse_mail_types;

    fn ev(event: &str, detail: &str) -> Event {
        Event {
            id: 1,
            job: 12,
            event: event.into(),
            detail: detail.into(),
        }
    }

    #[test]
    fn events_become_the_notices_the_job_asked_for() {
        let t = parse_mail_types("BEGIN,END,FAIL").unwrap();
        assert_eq!(
            for_event(&ev("start", "attempt 1"), "train", &t)[0].subject,
            "labpool Job_id=12 Name=train Began"
        );
        let failed = for_event(&ev("end", "FAILED, exit code 3"), "train", &t);
        assert_eq!((failed.len(), failed[0].kind), (1, MailType::Fail));
        let done = for_event(&ev("end", "COMPLETED, exit code 0"), "train", &t);
        assert_eq!(done[0].kind, MailType::End);
        assert!(
            for_event(
                &ev("requeue", "requested by root"),
                "t",
                &parse_mail_types("ALL").unwrap()
            )
            .is_empty()
        );
        assert_eq!(
            for_event(
                &ev("requeue", "node n1 lost"),
                "t",
                &parse_mail_types("ALL").unwrap()
            )
            .len(),
            1
        );
        assert!(for_event(&ev("start", ""), "t", &BTreeSet::new()).is_empty());
    }

    #[test]
    fn time_warnings_fire_once_at_the_highest_mark_reached() {
        let t = parse_mail_types("TIME_LIMIT_50,TIME_LIMIT_80").unwrap();
        assert_eq!(time_warning(49, 100, &t, 90, 0), None);
        assert_eq!(time_warning(50, 100, &t, 90, 0), Some(50));
        assert_eq!(time_warning(79, 100, &t, 90, 50), None);
        assert_eq!(time_warning(95, 100, &t, 90, 50), Some(90));
        assert_eq!(
            time_warning(96, 100, &t, 90, 90),
            None,
            "80 is not sent after 90"
        );
        assert_eq!(time_warning(95, 100, &BTreeSet::new(), 0, 0), None);
    }
}
