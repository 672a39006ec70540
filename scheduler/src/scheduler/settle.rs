//! What an attempt owes when it lets go of its GPUs, as ledger entries: the charge for the GPU
//! time it held (each GPU at its type's weight, a `--preemptible` job at its rate) and, at an
//! end, the rebate for efficient use. A pure function of the job, its allocation, the time and
//! its mean GPU use, so the controller charges by it alone and its properties are tested
//! (`tests/settle_properties.rs`): the ledger balances, and an attempt pays only for the time
//! it ran.

use super::Scheduler;
use crate::credits::{Entry, EntryKind};
use crate::job::{Allocation, JobSpec};
use crate::time::Timestamp;

/// How an attempt lets go of its GPUs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Settlement {
    /// It ended; `gpu_util` is its mean GPU utilisation (0 to 1), when it was sampled.
    Ended {
        /// Mean utilisation of its GPUs, 0 to 1.
        gpu_util: Option<f64>,
    },
    /// It was requeued (preempted, or its node was lost) after running: it pays for what ran,
    /// and earns no rebate.
    Requeued,
}

impl Scheduler {
    /// The ledger entries for `job`'s attempt on `alloc`, up to `end`: nothing when it cost
    /// nothing; else its charge, then its rebate when it earned one.
    pub fn settle(
        &self,
        job: &JobSpec,
        alloc: &Allocation,
        end: Timestamp,
        how: Settlement,
    ) -> Vec<Entry> {
        let charge = self.charge_for(job, alloc, end);
        if charge <= 0.0 || !charge.is_finite() {
            return Vec::new();
        }
        let held = labpool_units::format_elapsed(end.secs_since(alloc.start));
        let what = format!(
            "{} on {} for {held}",
            labpool_units::count(alloc.gpu_count() as u64, "GPU"),
            alloc.nodelist()
        );
        let entry = |kind: EntryKind, amount: f64, note: String| Entry {
            time: end,
            user: job.user.clone(),
            kind,
            amount,
            job: Some(job.id.0),
            note: Some(note),
        };
        match how {
            Settlement::Requeued => {
                vec![entry(
                    EntryKind::Charge,
                    charge,
                    format!("{what}, then requeued"),
                )]
            }
            Settlement::Ended { gpu_util } => {
                let mut out = vec![entry(EntryKind::Charge, charge, what)];
                let rebate = self.policy.credits.rebate(charge, gpu_util);
                if rebate > 0.0 {
                    out.push(entry(
                        EntryKind::Rebate,
                        rebate,
                        format!(
                            "efficient GPU use: {:.0}% mean utilisation",
                            gpu_util.unwrap_or(0.0) * 100.0
                        ),
                    ));
                }
                out
            }
        }
    }
}
