//! The database's account tables: accounts, members, limits and the credit ledger.

use crate::db::{Db, DbError};
use labpool_scheduler::Timestamp;
use labpool_scheduler::credits::{Entry, EntryKind};
use labpool_scheduler::policy::Limits;
use sqlx::{Row, Sqlite, Transaction};

impl Db {
    /// Accounts: name, description, limits, members.
    pub async fn accounts(&self) -> Result<Vec<(String, String, Limits, Vec<String>)>, DbError> {
        let rows = sqlx::query("SELECT name, description, limits FROM accounts ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        let members =
            sqlx::query("SELECT account, user FROM account_members ORDER BY account, user")
                .fetch_all(&self.pool)
                .await?;
        let mut out = Vec::new();
        for r in rows {
            let name: String = r.try_get("name")?;
            let limits: String = r.try_get("limits")?;
            let limits: Limits = serde_json::from_str(&limits).map_err(|e| DbError::Corrupt {
                job: 0,
                what: format!("limits of {name}: {e}"),
            })?;
            let users = members
                .iter()
                .filter(|m| m.try_get::<String, _>("account").is_ok_and(|a| a == name))
                .map(|m| m.try_get::<String, _>("user"))
                .collect::<Result<Vec<_>, _>>()?;
            out.push((name, r.try_get("description")?, limits, users));
        }
        Ok(out)
    }

    /// Users' own limits.
    pub async fn user_limits(&self) -> Result<Vec<(String, Limits)>, DbError> {
        let rows = sqlx::query("SELECT user, limits FROM user_limits ORDER BY user")
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let user: String = r.try_get(0)?;
                let text: String = r.try_get(1)?;
                let limits = serde_json::from_str(&text).map_err(|e| DbError::Corrupt {
                    job: 0,
                    what: format!("limits of {user}: {e}"),
                })?;
                Ok((user, limits))
            })
            .collect()
    }

    /// Creates an account.
    pub async fn add_account(
        tx: &mut Transaction<'_, Sqlite>,
        name: &str,
        description: &str,
        now: i64,
    ) -> Result<(), DbError> {
        sqlx::query("INSERT INTO accounts (name, description, created) VALUES (?, ?, ?)")
            .bind(name)
            .bind(description)
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Removes an account and its memberships.
    pub async fn remove_account(
        tx: &mut Transaction<'_, Sqlite>,
        name: &str,
    ) -> Result<(), DbError> {
        sqlx::query("DELETE FROM account_members WHERE account = ?")
            .bind(name)
            .execute(&mut **tx)
            .await?;
        sqlx::query("DELETE FROM accounts WHERE name = ?")
            .bind(name)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Adds (or removes) a member.
    pub async fn set_member(
        tx: &mut Transaction<'_, Sqlite>,
        account: &str,
        user: &str,
        member: bool,
    ) -> Result<(), DbError> {
        let sql = if member {
            "INSERT OR IGNORE INTO account_members (account, user) VALUES (?, ?)"
        } else {
            "DELETE FROM account_members WHERE account = ? AND user = ?"
        };
        sqlx::query(sql)
            .bind(account)
            .bind(user)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Stores an account's limits.
    pub async fn set_account_limits(
        tx: &mut Transaction<'_, Sqlite>,
        account: &str,
        limits: &Limits,
    ) -> Result<(), DbError> {
        sqlx::query("UPDATE accounts SET limits = ? WHERE name = ?")
            .bind(serde_json::to_string(limits).expect("limits serialise"))
            .bind(account)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Stores a user's own limits.
    pub async fn set_user_limits(
        tx: &mut Transaction<'_, Sqlite>,
        user: &str,
        limits: &Limits,
    ) -> Result<(), DbError> {
        sqlx::query("INSERT INTO user_limits (user, limits) VALUES (?, ?) ON CONFLICT (user) DO UPDATE SET limits = excluded.limits")
            .bind(user)
            .bind(serde_json::to_string(limits).expect("limits serialise"))
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Appends a ledger entry. The ledger is never updated or deleted.
    pub async fn append_ledger(tx: &mut Transaction<'_, Sqlite>, e: &Entry) -> Result<(), DbError> {
        sqlx::query(
            "INSERT INTO ledger (time, user, kind, amount, job, note) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(e.time.0)
        .bind(&e.user)
        .bind(e.kind.as_str())
        .bind(e.amount)
        .bind(e.job.map(|j| j as i64))
        .bind(&e.note)
        .execute(&mut **tx)
        .await?;
        Ok(())
    }

    /// Ledger entries from `since_ms` on, of one user or all.
    pub async fn ledger(&self, user: Option<&str>, since_ms: i64) -> Result<Vec<Entry>, DbError> {
        let rows = sqlx::query("SELECT time, user, kind, amount, job, note FROM ledger WHERE time >= ?1 AND (?2 IS NULL OR user = ?2) ORDER BY id")
            .bind(since_ms)
            .bind(user)
            .fetch_all(&self.pool)
            .await?;
        rows.iter()
            .map(|r| {
                let kind: String = r.try_get("kind")?;
                Ok(Entry {
                    time: Timestamp(r.try_get("time")?),
                    user: r.try_get("user")?,
                    kind: EntryKind::parse(&kind).ok_or_else(|| DbError::Corrupt {
                        job: 0,
                        what: format!("ledger kind {kind}"),
                    })?,
                    amount: r.try_get("amount")?,
                    job: r.try_get::<Option<i64>, _>("job")?.map(|j| j as u64),
                    note: r.try_get("note")?,
                })
            })
            .collect()
    }
}
