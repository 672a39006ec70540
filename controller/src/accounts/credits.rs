//! Credits: this month's balance from the in-memory ledger, admins' grants, and the credits view.

use crate::api::{CreditsView, GrantRequest, LedgerLine};
use crate::clock::{month_of, rfc3339};
use crate::db::Db;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use labpool_scheduler::credits::{Entry, EntryKind};

impl Engine {
    /// This month's summary for `user`, from the in-memory ledger.
    pub(crate) fn summary(&self, user: &str) -> labpool_scheduler::credits::MonthSummary {
        self.ledger.summary(&self.sched.policy().credits, user)
    }

    /// Tells the scheduler `user`'s balance after a ledger change.
    pub(crate) fn refresh_balance(&mut self, user: &str) {
        let balance = self.summary(user).balance;
        self.sched.set_balance(user, balance);
    }

    /// Grants credit (admins). The outer error is the database's.
    pub(crate) async fn grant(
        &mut self,
        req: GrantRequest,
        caller: &Caller,
    ) -> anyhow::Result<Result<CreditsView, ApiError>> {
        if let Err(e) = self.admin_only(caller, "grant credit") {
            return Ok(Err(e));
        }
        if !(req.amount > 0.0 && req.amount.is_finite()) {
            return Ok(Err(ApiError::bad_request(
                format!(
                    "cannot grant {} credits: give an amount above 0",
                    req.amount
                ),
                None,
            )));
        }
        if !matches!(nix::unistd::User::from_name(&req.user), Ok(Some(_))) {
            return Ok(Err(ApiError::bad_request(
                format!("there is no user {} on this machine", req.user),
                None,
            )));
        }
        let note = match &req.note {
            Some(n) => format!("granted by {}: {n}", caller.user),
            None => format!("granted by {}", caller.user),
        };
        let entry = Entry {
            time: self.clock.now(),
            user: req.user.clone(),
            kind: EntryKind::Grant,
            amount: req.amount,
            job: None,
            note: Some(note),
        };
        let mut tx = self.db.begin().await?;
        Db::append_ledger(&mut tx, &entry).await?;
        tx.commit().await?;
        self.ledger.record([entry]);
        self.refresh_balance(&req.user);
        tracing::info!(by = %caller.user, user = %req.user, amount = req.amount, "credit granted");
        Ok(Ok(self.credits_view(&req.user)))
    }

    /// A user's month in credits, running jobs counted.
    pub(crate) fn credits_view(&self, user: &str) -> CreditsView {
        let s = self.summary(user);
        let accruing = self.sched.accrued(user, self.clock.now());
        let (_, _, month, resets) = month_of(self.ledger.start());
        CreditsView {
            user: user.to_string(),
            month,
            resets,
            monthly_grant: s.monthly_grant,
            granted: s.granted,
            rebated: s.rebated,
            charged: s.charged,
            accruing,
            balance: s.balance - accruing,
            tokens_left: s.tokens_left,
            tokens_per_month: self.sched.policy().credits.emergency_tokens,
            entries: self
                .ledger
                .entries_of(user)
                .map(|e| LedgerLine {
                    time: rfc3339(e.time.0),
                    kind: e.kind.as_str().to_string(),
                    amount: e.amount,
                    job: e.job,
                    note: e.note.clone(),
                })
                .collect(),
        }
    }
}
