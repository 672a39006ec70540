//! Admins' changes to accounts, their members and QOS limits, and the accounts view.

use crate::api::{AccountChange, AccountView, AccountsView};
use crate::db::Db;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use labpool_scheduler::policy::Account;
use std::collections::BTreeMap;

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
}

impl Engine {
    pub(super) fn admin_only(&self, caller: &Caller, what: &str) -> Result<(), ApiError> {
        crate::http::admin_only(&self.config, caller, what)
    }

    /// Applies an admin change to accounts or limits. The outer error is the database's.
    pub(crate) async fn change_accounts(
        &mut self,
        change: AccountChange,
        caller: &Caller,
    ) -> anyhow::Result<Result<String, ApiError>> {
        let what = match &change {
            AccountChange::SetQos { .. } => "set QOS limits",
            _ => "change accounts",
        };
        if let Err(e) = self.admin_only(caller, what) {
            return Ok(Err(e));
        }
        let bad = |msg: String, hint: Option<String>| Ok(Err(ApiError::bad_request(msg, hint)));
        let known = |s: &Self| {
            s.sched
                .accounts()
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut tx = self.db.begin().await?;
        let message = match change {
            AccountChange::Add { name, description } => {
                if !valid_name(&name) {
                    return bad(
                        format!(
                            "invalid account name {name:?}: use letters, digits, '-', '_' and '.'"
                        ),
                        None,
                    );
                }
                if self.sched.accounts().contains_key(&name) {
                    return bad(
                        format!("account {name} already exists"),
                        Some("`labpool account list` shows it".into()),
                    );
                }
                Db::add_account(&mut tx, &name, &description, self.clock.now_ms()).await?;
                tx.commit().await?;
                self.sched.set_account(&name, Account::default());
                self.descriptions.insert(name.clone(), description);
                format!("account {name} added")
            }
            AccountChange::Remove { name } => {
                if !self.sched.accounts().contains_key(&name) {
                    return bad(
                        format!("no account {name}; accounts: {}", known(self)),
                        None,
                    );
                }
                Db::remove_account(&mut tx, &name).await?;
                tx.commit().await?;
                self.sched.remove_account(&name);
                self.descriptions.remove(&name);
                format!("account {name} removed; its jobs keep running without its limits")
            }
            AccountChange::AddUser { account, .. } | AccountChange::RemoveUser { account, .. }
                if !self.sched.accounts().contains_key(&account) =>
            {
                return bad(
                    format!("no account {account}; accounts: {}", known(self)),
                    Some(format!("create it: labpool account add {account}")),
                );
            }
            AccountChange::AddUser { account, user } => {
                if !matches!(nix::unistd::User::from_name(&user), Ok(Some(_))) {
                    return bad(
                        format!("there is no user {user} on this machine"),
                        Some("check the name (`getent passwd`)".into()),
                    );
                }
                Db::set_member(&mut tx, &account, &user, true).await?;
                tx.commit().await?;
                let mut a = self.sched.accounts()[&account].clone();
                a.members.insert(user.clone());
                self.sched.set_account(&account, a);
                format!("{user} added to account {account}")
            }
            AccountChange::RemoveUser { account, user } => {
                let mut a = self.sched.accounts()[&account].clone();
                if !a.members.remove(&user) {
                    return bad(format!("{user} is not a member of account {account}"), None);
                }
                Db::set_member(&mut tx, &account, &user, false).await?;
                tx.commit().await?;
                self.sched.set_account(&account, a);
                format!("{user} removed from account {account}")
            }
            AccountChange::SetQos {
                account,
                user,
                settings,
            } => {
                if settings.is_empty() {
                    return bad(
                        "no settings given".into(),
                        Some("write e.g. MaxTRESPerUser=gres/gpu=2".into()),
                    );
                }
                match (account, user) {
                    (Some(name), None) => {
                        let Some(mut a) = self.sched.accounts().get(&name).cloned() else {
                            return bad(
                                format!("no account {name}; accounts: {}", known(self)),
                                None,
                            );
                        };
                        if let Err(e) = a.limits.apply(&settings) {
                            return bad(e.to_string(), None);
                        }
                        Db::set_account_limits(&mut tx, &name, &a.limits).await?;
                        tx.commit().await?;
                        let now_set = a.limits.describe().join(" ");
                        self.sched.set_account(&name, a);
                        format!(
                            "account {name}: {}",
                            if now_set.is_empty() {
                                "no limits".into()
                            } else {
                                now_set
                            }
                        )
                    }
                    (None, Some(user)) => {
                        if !matches!(nix::unistd::User::from_name(&user), Ok(Some(_))) {
                            return bad(
                                format!("there is no user {user} on this machine"),
                                Some("check the name (`getent passwd`)".into()),
                            );
                        }
                        let mut limits = self
                            .sched
                            .user_limits()
                            .get(&user)
                            .cloned()
                            .unwrap_or_default();
                        if let Err(e) = limits.apply(&settings) {
                            return bad(e.to_string(), None);
                        }
                        if limits.grp_gpus.is_some() {
                            return bad(
                                "GrpTRES limits a whole account; for one user use MaxTRESPerUser"
                                    .into(),
                                None,
                            );
                        }
                        Db::set_user_limits(&mut tx, &user, &limits).await?;
                        tx.commit().await?;
                        let now_set = limits.describe().join(" ");
                        self.sched.set_user_limits(&user, limits);
                        format!(
                            "user {user}: {}",
                            if now_set.is_empty() {
                                "no limits".into()
                            } else {
                                now_set
                            }
                        )
                    }
                    _ => return bad("name an account or --user, not both".into(), None),
                }
            }
        };
        tracing::info!(by = %caller.user, "{message}");
        Ok(Ok(message))
    }

    /// Accounts, their members and limits, with the GPUs they hold now; users' own limits.
    pub(crate) fn accounts_view(&self) -> AccountsView {
        let mut in_use: BTreeMap<&str, u32> = BTreeMap::new();
        for (job, alloc) in self.sched.running() {
            if let Some(a) = &job.account {
                *in_use.entry(a).or_default() += alloc.gpu_count() as u32;
            }
        }
        AccountsView {
            accounts: self
                .sched
                .accounts()
                .iter()
                .map(|(name, a)| AccountView {
                    name: name.clone(),
                    description: self.descriptions.get(name).cloned().unwrap_or_default(),
                    members: a.members.iter().cloned().collect(),
                    limits: a.limits.describe(),
                    gpus_in_use: in_use.get(name.as_str()).copied().unwrap_or(0),
                })
                .collect(),
            user_limits: self
                .sched
                .user_limits()
                .iter()
                .map(|(u, l)| (u.clone(), l.describe()))
                .collect(),
        }
    }
}
