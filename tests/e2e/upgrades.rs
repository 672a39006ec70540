//! Versions between nodes: an agent newer than its controller, or one it cannot read, is
//! refused at registration with the version to install; this build's own agents join, and one
//! a minor release behind joins and is named by the doctor.

use crate::doctor::problems;
use crate::nodes::{Cluster, registration, signed_post};
use crate::pool::{Pool, have_root};
use serde_json::Value;

#[test]
fn an_agent_ahead_of_its_controller_is_refused_with_the_version_to_install() {
    if !have_root("an_agent_ahead_of_its_controller_is_refused_with_the_version_to_install") {
        return;
    }
    let mut c = Cluster::new("127.0.0.1", "30s");
    c.ctrl.start();
    let key = labpool_cluster::ClusterKey::load(&c.ctrl.dir.join("cluster.key")).unwrap();
    let this = labpool::api::versions::THIS;
    for (version, says) in [
        ("99.0.0", "newer than this controller's"),
        ("soon", "not MAJOR.MINOR.PATCH"),
    ] {
        let reg = serde_json::to_vec(&registration("newer", version)).unwrap();
        let (status, body) = signed_post(&key, &c.join, "/v1/agent/register", &reg);
        assert_eq!(status, 409, "{version}: {body}");
        for part in [says, this] {
            assert!(body.contains(part), "{part:?} not in {body}");
        }
    }
    assert!(
        c.nodes().iter().all(|n| n["name"] != "newer"),
        "a refused agent's node was taken"
    );
    // This build's agent joins; one a minor release behind joins too, and the doctor asks
    // for its upgrade.
    let i = c.add_agent("n1", "1:t4", "127.0.0.1");
    c.start_agent(i);
    let parts: Vec<u64> = this.split('.').map(|p| p.parse().unwrap()).collect();
    let behind = format!("{}.{}.9", parts[0], parts[1].saturating_sub(1));
    let reg = serde_json::to_vec(&registration("behind", &behind)).unwrap();
    let (status, body) = signed_post(&key, &c.join, "/v1/agent/register", &reg);
    assert_eq!(status, 200, "{behind}: {body}");
    let versions: Vec<(String, Value)> = c
        .nodes()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["agent_version"].clone(),
            )
        })
        .collect();
    assert!(
        versions.contains(&("n1".into(), this.into())),
        "{versions:?}"
    );
    assert!(
        versions.contains(&("behind".into(), behind.clone().into())),
        "{versions:?}"
    );
    let found = problems(&c.ctrl.cli(&["doctor", "--json"]));
    let about: Vec<_> = found.iter().filter(|p| p.0 == "versions").collect();
    assert_eq!(about.len(), 1, "{found:?}");
    assert_eq!(about[0].2, "behind");
    assert_eq!(
        about[0].3,
        format!("its agent runs labpool {behind}, the controller {this}")
    );
}

/// Runs `f` on the SQLite database at `path` (created when `create`), then closes it.
fn with_db<T>(
    path: &std::path::Path,
    create: bool,
    f: impl AsyncFnOnce(&sqlx::SqlitePool) -> T,
) -> T {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let options = sqlx::sqlite::SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(create)
            .read_only(!create);
        let db = sqlx::SqlitePool::connect_with(options).await.unwrap();
        let out = f(&db).await;
        db.close().await;
        out
    })
}

/// Every row of each table in the SQLite database at `path`, by table.
fn rows_by_table(path: &std::path::Path) -> std::collections::BTreeMap<String, i64> {
    with_db(path, false, async |db| {
        let tables: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .fetch_all(db)
                .await
                .unwrap();
        let mut out = std::collections::BTreeMap::new();
        for t in tables {
            let n: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT count(*) FROM \"{t}\"")))
                    .fetch_one(db)
                    .await
                    .unwrap();
            out.insert(t, n);
        }
        out
    })
}

/// Writes the database a fixture's dump describes at `path`.
fn load_fixture(sql: &str, path: &std::path::Path) {
    with_db(path, true, async |db| {
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(db)
            .await
            .unwrap();
    });
}

/// The fixtures: (schema number, path), oldest first.
fn fixtures(root: &std::path::Path) -> Vec<(u32, std::path::PathBuf)> {
    let mut out: Vec<(u32, std::path::PathBuf)> =
        std::fs::read_dir(root.join("tests/fixtures/state"))
            .unwrap()
            .filter_map(|e| {
                let path = e.ok()?.path();
                let n = path
                    .file_name()?
                    .to_str()?
                    .strip_prefix("schema-")?
                    .strip_suffix(".sql")?
                    .parse()
                    .ok()?;
                Some((n, path))
            })
            .collect();
    out.sort();
    out
}

/// The newest migration this tree has.
fn newest_migration(root: &std::path::Path) -> u32 {
    std::fs::read_dir(root.join("migrations"))
        .unwrap()
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.split('_').next()?.parse().ok()
        })
        .max()
        .unwrap()
}

/// The database of every released schema, kept as a fixture (`scripts/schema-fixture`), is
/// migrated by this build with its records whole, and the job that was running when it was
/// taken ends and is recorded. A new migration without its fixture fails here; so does a
/// change to a migration a fixture recorded (its checksum no longer matches).
#[test]
fn every_released_schema_is_migrated_whole_and_its_running_job_ends_and_is_recorded() {
    if !have_root(
        "every_released_schema_is_migrated_whole_and_its_running_job_ends_and_is_recorded",
    ) {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let fixtures = fixtures(root);
    let newest = newest_migration(root);
    assert!(
        fixtures.iter().any(|(n, _)| *n == newest),
        "migration {newest} has no fixture: run scripts/schema-fixture and commit tests/fixtures/state/schema-{newest}.sql"
    );
    for (schema, path) in fixtures {
        let sql = std::fs::read_to_string(&path).unwrap();
        let mut pool = Pool::new("2:t4");
        pool.edit_config(|t| {
            let at = t.find("[node]\nname = ").unwrap() + "[node]\n".len();
            let end = at + t[at..].find('\n').unwrap();
            format!("{}name = \"fixture-node\"{}", &t[..at], &t[end..])
        });
        let state = pool.dir.join("state");
        std::fs::create_dir_all(&state).unwrap();
        let db = state.join("labpool.db");
        load_fixture(&sql, &db);
        let before = rows_by_table(&db);
        // What the upgrade will do, read before it is made.
        let check: Value = serde_json::from_str(&pool.ok(&["upgrade-check", "--json"])).unwrap();
        assert_eq!(check["schema"]["version"], schema, "{check}");
        assert_eq!(check["schema"]["running_jobs"], 1, "{check}");
        assert_eq!(
            check["schema"]["pending"].as_array().unwrap().len() as u32,
            newest - schema,
            "{check}"
        );
        assert_eq!(check["blocking"], serde_json::json!([]), "{check}");
        pool.start();
        let history = pool.history();
        let done = history.iter().find(|j| j["name"] == "fixture-done");
        assert!(
            done.is_some_and(|j| j["state"] == "COMPLETED"),
            "schema {schema}: {history:?}"
        );
        // The queue first, then the history: a job that ends between the two reads is in the
        // history by the second.
        let named = |jobs: Vec<Value>| jobs.into_iter().find(|j| j["name"] == "fixture-running");
        let ran = named(pool.queue()).or_else(|| named(pool.history()));
        let id = ran.unwrap_or_else(|| panic!("schema {schema}: the running job is gone"))["id"]
            .as_u64()
            .unwrap();
        let ended = pool.wait_done(id, std::time::Duration::from_secs(60));
        assert_eq!(ended["state"], "COMPLETED", "schema {schema}: {ended}");
        let accounts = pool.ok(&["account", "list", "--json"]);
        assert!(
            accounts.contains("fixture-lab"),
            "schema {schema}: {accounts}"
        );
        pool.stop();
        let after = rows_by_table(&db);
        for (table, n) in &before {
            let now = after.get(table).copied().unwrap_or(0);
            assert!(
                now >= *n,
                "schema {schema}: {table} had {n} rows, now {now}"
            );
        }
    }
}

/// A database a newer labpool migrated: `upgrade-check` says the upgrade is blocked and why,
/// and `serve` refuses it with what to do instead of opening it.
#[test]
fn a_database_from_a_newer_labpool_blocks_the_upgrade_and_is_not_opened() {
    if !have_root("a_database_from_a_newer_labpool_blocks_the_upgrade_and_is_not_opened") {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let (_, newest) = fixtures(root).pop().unwrap();
    let sql = std::fs::read_to_string(newest).unwrap().replace(
        "COMMIT;",
        "INSERT INTO _sqlx_migrations VALUES(999,'from the future','2030-01-01 00:00:00',1,X'00',1);\nCOMMIT;",
    );
    let pool = Pool::new("1:t4");
    std::fs::create_dir_all(pool.dir.join("state")).unwrap();
    load_fixture(&sql, &pool.dir.join("state/labpool.db"));
    let out = pool.cli(&["upgrade-check"]);
    assert_eq!(out.status.code(), Some(1));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("1 problem blocks this upgrade")
            && said.contains("migrated by a newer labpool (migration 999"),
        "{said}"
    );
    let serve = pool.command(&["serve"]).output().unwrap();
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(!serve.status.success());
    assert!(
        err.contains("migration 999, which this binary does not have")
            && err.contains("labpool state restore"),
        "{err}"
    );
}
