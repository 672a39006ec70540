//! The database's reservations table: one row per booking, the scheduler's own value as JSON.

use crate::db::{Db, DbError};
use labpool_scheduler::reservation::Reservation;
use sqlx::Row;

impl Db {
    /// Every reservation, by name.
    pub async fn reservations(&self) -> Result<Vec<Reservation>, DbError> {
        let rows = sqlx::query("SELECT name, booking FROM reservations ORDER BY name")
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|r| {
                let name: String = r.try_get("name")?;
                let text: String = r.try_get("booking")?;
                serde_json::from_str(&text).map_err(|e| DbError::Corrupt {
                    job: 0,
                    what: format!("reservation {name}: {e}"),
                })
            })
            .collect()
    }

    /// Stores a new booking.
    pub async fn add_reservation(&self, r: &Reservation, by: &str, at: i64) -> Result<(), DbError> {
        sqlx::query(
            "INSERT INTO reservations (name, booking, created_by, created_at) VALUES (?, ?, ?, ?)",
        )
        .bind(&r.name)
        .bind(serde_json::to_string(r).expect("a reservation serialises"))
        .bind(by)
        .bind(at)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Deletes bookings by name.
    pub async fn delete_reservations(&self, names: &[String]) -> Result<(), DbError> {
        for name in names {
            sqlx::query("DELETE FROM reservations WHERE name = ?")
                .bind(name)
                .execute(&self.pool)
                .await?;
        }
        Ok(())
    }
}
