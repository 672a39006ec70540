//! The database's nodes table: specs, drains and the agents that serve them.

use crate::db::{Db, DbError};
use labpool_scheduler::node::NodeSpec;
use sqlx::Row;

impl Db {
    /// Records a node's spec.
    pub async fn upsert_node(
        &self,
        spec: &NodeSpec,
        gpu_source: &str,
        now_ms: i64,
    ) -> Result<(), DbError> {
        sqlx::query(
            "INSERT INTO nodes (name, spec, gpu_source, last_seen) VALUES (?, ?, ?, ?) \
             ON CONFLICT (name) DO UPDATE SET spec = excluded.spec, gpu_source = excluded.gpu_source, last_seen = excluded.last_seen",
        )
        .bind(&spec.name)
        .bind(serde_json::to_string(spec).expect("a node spec serialises"))
        .bind(gpu_source)
        .bind(now_ms)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Records why a node is draining (`None`: it is not).
    pub async fn set_node_drain(&self, node: &str, reason: Option<&str>) -> Result<(), DbError> {
        sqlx::query("UPDATE nodes SET drain = ? WHERE name = ?")
            .bind(reason)
            .bind(node)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Records that `node` is served by a remote agent at `address`.
    pub async fn set_node_agent(&self, node: &str, address: &str) -> Result<(), DbError> {
        sqlx::query("UPDATE nodes SET agent = ? WHERE name = ?")
            .bind(address)
            .bind(node)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    /// Nodes served by remote agents: spec, GPU source and the agent's last address.
    pub async fn agent_nodes(&self) -> Result<Vec<(NodeSpec, String, String)>, DbError> {
        let rows = sqlx::query(
            "SELECT spec, gpu_source, agent FROM nodes WHERE agent IS NOT NULL ORDER BY name",
        )
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::new();
        for r in rows {
            if let Some(spec) = stored_spec(&r)? {
                out.push((spec, r.try_get("gpu_source")?, r.try_get("agent")?));
            }
        }
        Ok(out)
    }

    /// Nodes no agent serves whose GPUs came from `gpu_source` (over Slurm: `slurm`).
    pub async fn nodes_from(&self, gpu_source: &str) -> Result<Vec<NodeSpec>, DbError> {
        let rows = sqlx::query(
            "SELECT spec FROM nodes WHERE agent IS NULL AND gpu_source = ? ORDER BY name",
        )
        .bind(gpu_source)
        .fetch_all(&self.pool)
        .await?;
        let mut out = Vec::new();
        for r in rows {
            out.extend(stored_spec(&r)?);
        }
        Ok(out)
    }

    /// Every node an admin drained, with the reason.
    pub async fn drained_nodes(&self) -> Result<Vec<(String, String)>, DbError> {
        let rows =
            sqlx::query("SELECT name, drain FROM nodes WHERE drain IS NOT NULL ORDER BY name")
                .fetch_all(&self.pool)
                .await?;
        rows.into_iter()
            .map(|r| Ok((r.try_get("name")?, r.try_get("drain")?)))
            .collect()
    }
}

/// A row's stored spec; None (logged) when it cannot be read, so the node is skipped.
fn stored_spec(r: &sqlx::sqlite::SqliteRow) -> Result<Option<NodeSpec>, DbError> {
    let spec: String = r.try_get("spec")?;
    match serde_json::from_str::<NodeSpec>(&spec) {
        Ok(spec) => Ok(Some(spec)),
        Err(e) => {
            tracing::error!("a stored node spec cannot be read ({e}); skipped");
            Ok(None)
        }
    }
}
