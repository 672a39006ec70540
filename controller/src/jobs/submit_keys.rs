//! Submit idempotency keys: a client names each submit with a key of its own making, and a
//! retry with the same key answers what the first one did, so a reply lost when the controller
//! died after committing never queues a job twice. The key is stored in the transaction that
//! inserts the jobs, so the two are on disk together or not at all.

use crate::api::Submitted;
use crate::db::{Db, DbError};
use sqlx::{Row, Sqlite, Transaction};

/// How long a key is remembered: far longer than any client retries.
pub const KEEP_MS: i64 = 7 * 86_400_000;

/// The longest key taken.
pub const MAX_KEY: usize = 128;

impl Db {
    /// The answer a submit with `key` by `uid` got, if one was committed.
    pub async fn submitted_with_key(
        &self,
        uid: u32,
        key: &str,
    ) -> Result<Option<Submitted>, DbError> {
        let row = sqlx::query("SELECT reply FROM submit_keys WHERE uid = ? AND key = ?")
            .bind(i64::from(uid))
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row
            .map(|r| r.try_get::<String, _>(0))
            .transpose()?
            .and_then(|text| serde_json::from_str(&text).ok()))
    }

    /// Records `reply` as the answer to `uid`'s submit with `key`.
    pub async fn record_submit_key(
        tx: &mut Transaction<'static, Sqlite>,
        uid: u32,
        key: &str,
        reply: &Submitted,
        now: i64,
    ) -> Result<(), DbError> {
        sqlx::query("INSERT INTO submit_keys (uid, key, reply, created) VALUES (?, ?, ?, ?)")
            .bind(i64::from(uid))
            .bind(key)
            .bind(serde_json::to_string(reply).expect("a reply serialises"))
            .bind(now)
            .execute(&mut **tx)
            .await?;
        Ok(())
    }

    /// Forgets keys older than [`KEEP_MS`].
    pub async fn forget_submit_keys(&self, now: i64) -> Result<u64, DbError> {
        Ok(sqlx::query("DELETE FROM submit_keys WHERE created < ?")
            .bind(now - KEEP_MS)
            .execute(&self.pool)
            .await?
            .rows_affected())
    }
}
