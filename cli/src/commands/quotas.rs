//! `labpool quota`, `labpool purge scratch` and `labpool dataset audit`: the CLI side of the
//! controller's quota service.

use crate::api::quotas::{
    AuditRequest, LimitRequest, LimitSet, PurgeDone, PurgePlanView, PurgeRequest, QuotaQuery,
    ScanRequest, ScanStatus, UserQuota,
};
use crate::args::{LimitArgs, PurgeCommand, QuotaArgs, QuotaCommand};
use crate::client::Client;
use crate::clock::when;
use crate::render::{print, table};
use crate::settings::Config;
use indicatif::{ProgressBar, ProgressStyle};
use labpool_quotas::audit::AuditReport;
use labpool_quotas::limits::Limit;
use labpool_units::{format_duration, format_duration_approx, format_size};
use std::io::{BufRead, IsTerminal, Write};
use std::time::Duration;

fn limit_cell(v: Option<u64>, bytes: bool) -> String {
    match v {
        None => "-".into(),
        Some(n) if bytes => format_size(n),
        Some(n) => n.to_string(),
    }
}

fn describe_limit(l: &Limit) -> String {
    format!(
        "soft {} hard {}, files soft {} hard {}, grace {}",
        limit_cell(l.soft_bytes, true),
        limit_cell(l.hard_bytes, true),
        limit_cell(l.soft_files, false),
        limit_cell(l.hard_files, false),
        format_duration(l.grace())
    )
}

/// One user's quota, as `labpool quota` prints it.
fn render_user(q: &UserQuota) -> String {
    let rows = q
        .filesystems
        .iter()
        .map(|f| {
            let used = f
                .usage
                .map_or("not scanned".to_string(), |u| format_size(u.bytes));
            let files = f.usage.map_or("-".to_string(), |u| u.files.to_string());
            let grace = match f.over_soft_since {
                Some(since) => {
                    let end = since + f.limit.grace().as_millis() as i64;
                    let left = (end - crate::clock::now_ms()).max(0) / 1000;
                    if left == 0 {
                        "expired".to_string()
                    } else {
                        format_duration_approx(Duration::from_secs(left as u64))
                    }
                }
                None => "-".to_string(),
            };
            vec![
                f.fs.clone(),
                used,
                limit_cell(f.limit.soft_bytes, true),
                limit_cell(f.limit.hard_bytes, true),
                files,
                limit_cell(f.limit.soft_files, false),
                limit_cell(f.limit.hard_files, false),
                grace,
                f.percent.map_or("-".into(), |p| format!("{p:.0}%")),
            ]
        })
        .collect();
    let mut out = format!("{} (uid {})\n", q.user, q.uid);
    out.push_str(&table(
        &[
            "FS",
            "USED",
            "SOFT",
            "HARD",
            "FILES",
            "F-SOFT",
            "F-HARD",
            "GRACE LEFT",
            "USE%",
        ],
        rows,
    ));
    // One enforcement for every file system is said once, after them.
    let same = q
        .filesystems
        .windows(2)
        .all(|w| w[0].enforcement == w[1].enforcement);
    for f in &q.filesystems {
        out.push_str(&format!("\n\n{} ({})", f.fs, f.user_dir.display()));
        match f.scanned_at {
            Some(t) => out.push_str(&format!("\n  scanned  {}", when(t))),
            None => out.push_str("\n  scanned  never: `labpool quota scan` counts now"),
        }
        if !same || q.filesystems.len() == 1 {
            out.push_str(&format!("\n  enforced {}", f.enforcement));
        }
        for m in &f.messages {
            out.push_str(&format!("\n  ! {m}"));
        }
        if !f.top.is_empty() {
            out.push_str("\n  biggest directories:");
            for d in f.top.iter().take(5) {
                out.push_str(&format!(
                    "\n    {:>7}  {}",
                    format_size(d.bytes),
                    d.path.display()
                ));
            }
        }
    }
    if same
        && q.filesystems.len() > 1
        && let Some(f) = q.filesystems.first()
    {
        out.push_str(&format!("\n\nenforced (all) {}", f.enforcement));
    }
    if q.refused {
        out.push_str("\n\nNew jobs are refused until usage is back under the limit and a scan has counted it (`labpool quota scan`).");
    }
    out
}

fn render_report(all: &[UserQuota]) -> String {
    let rows = all
        .iter()
        .map(|q| {
            let cell = |fs: &str| {
                q.filesystems
                    .iter()
                    .find(|f| f.fs == fs)
                    .map_or("-".to_string(), |f| {
                        let used = f.usage.map_or("-".into(), |u| format_size(u.bytes));
                        let limit = f.limit.soft_bytes.or(f.limit.hard_bytes);
                        match limit {
                            Some(l) => format!("{used}/{}", format_size(l)),
                            None => used,
                        }
                    })
            };
            vec![
                q.user.clone(),
                cell("home"),
                cell("scratch"),
                q.percent.map_or("-".into(), |p| format!("{p:.0}%")),
                if q.refused {
                    "OVER: jobs refused".to_string()
                } else if q.filesystems.iter().any(|f| !f.messages.is_empty()) {
                    "near or in grace".to_string()
                } else {
                    String::new()
                },
            ]
        })
        .collect();
    table(&["USER", "HOME", "SCRATCH", "USE%", "STATE"], rows)
}

/// The requests `quota set` / `quota default` make: one per file system touched.
pub fn limit_requests(user: Option<&str>, a: &LimitArgs) -> anyhow::Result<Vec<LimitRequest>> {
    let user = user.map(str::to_string);
    let mut out = Vec::new();
    if let Some(fs) = &a.fs {
        if a.soft.is_none()
            && a.hard.is_none()
            && a.files_soft.is_none()
            && a.files_hard.is_none()
            && a.grace.is_none()
        {
            anyhow::bail!(
                "--fs {fs} sets nothing by itself\nhint: add --soft, --hard, --files-soft, --files-hard or --grace"
            );
        }
        out.push(LimitRequest {
            user,
            fs: fs.clone(),
            soft: a.soft.clone(),
            hard: a.hard.clone(),
            files_soft: a.files_soft.clone(),
            files_hard: a.files_hard.clone(),
            grace: a.grace.clone(),
        });
        return Ok(out);
    }
    for (fs, v) in [("home", &a.home), ("scratch", &a.scratch)] {
        if let Some(v) = v {
            out.push(LimitRequest {
                user: user.clone(),
                fs: fs.into(),
                hard: Some(v.clone()),
                ..LimitRequest::default()
            });
        }
    }
    if out.is_empty() {
        anyhow::bail!(
            "no limit given\nhint: --home SIZE and/or --scratch SIZE, or --fs home|scratch with --soft/--hard/--files-soft/--files-hard/--grace"
        );
    }
    // Sizes are checked here too, so a bad second value does not leave the first one set.
    for r in &out {
        for v in [&r.soft, &r.hard].into_iter().flatten() {
            labpool_quotas::size::parse_size(v)?;
        }
        for v in [&r.files_soft, &r.files_hard].into_iter().flatten() {
            labpool_quotas::size::parse_count(v)?;
        }
        if let Some(g) = &r.grace {
            labpool_quotas::size::parse_duration(g)?;
        }
    }
    Ok(out)
}

/// Runs `labpool quota ...`.
pub async fn quota(args: &QuotaArgs, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match &args.command {
        None => {
            let q = QuotaQuery {
                user: args.user.clone(),
            };
            let q: UserQuota = client.get_query("/v1/quota", &q).await?;
            print(args.json, &q, render_user);
        }
        Some(QuotaCommand::Report { json }) => {
            let all: Vec<UserQuota> = client.get("/v1/quota/report").await?;
            print(*json, &all, |a| render_report(a));
        }
        Some(QuotaCommand::Set { user, limits }) => set_limits(&client, Some(user), limits).await?,
        Some(QuotaCommand::Default { limits }) => set_limits(&client, None, limits).await?,
        Some(QuotaCommand::Scan { fs, json }) => scan(&client, fs.clone(), *json).await?,
    }
    Ok(())
}

async fn set_limits(client: &Client, user: Option<&str>, a: &LimitArgs) -> anyhow::Result<()> {
    let mut done = Vec::new();
    for req in limit_requests(user, a)? {
        let set: LimitSet = client.post("/v1/quota/limits", &req).await?;
        done.push(set);
    }
    print(a.json, &done, |done| {
        done.iter()
            .map(|s| {
                let who = if s.user == "*" {
                    "default".to_string()
                } else {
                    s.user.clone()
                };
                format!(
                    "{who} on {}: {}\n  {}",
                    s.fs,
                    describe_limit(&s.limit),
                    s.kernel
                )
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

async fn scan(client: &Client, fs: Option<String>, json: bool) -> anyhow::Result<()> {
    let started: ScanStatus = client.post("/v1/quota/scan", &ScanRequest { fs }).await?;
    let bar = if json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else if started.expected_entries > 0 {
        let b = ProgressBar::new(started.expected_entries);
        b.set_style(ProgressStyle::with_template(
            "scanning {msg} [{bar:30}] {human_pos}/{human_len} entries {per_sec} eta {eta}",
        )?);
        b
    } else {
        let b = ProgressBar::new_spinner();
        b.set_style(ProgressStyle::with_template(
            "{spinner} scanning {msg} {human_pos} entries {per_sec}",
        )?);
        b
    };
    bar.set_message(started.fs.join(", "));
    let status = loop {
        let s: ScanStatus = client.get("/v1/quota/scan").await?;
        if s.id != started.id || !s.running {
            break s;
        }
        bar.set_length(bar.length().unwrap_or(0).max(s.entries));
        bar.set_position(s.entries);
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    bar.finish_and_clear();
    if let Some(e) = &status.error {
        anyhow::bail!("the quota scan failed: {e}");
    }
    print(json, &status, |s| {
        s.done
            .iter()
            .map(|d| {
                let mut line = format!(
                    "{}: {} entries, {} allocated, {} owners, {:.1} s",
                    d.fs,
                    d.entries,
                    format_size(d.bytes),
                    d.users,
                    d.seconds
                );
                if d.errors > 0 {
                    line.push_str(&format!(
                        " ({} entries unreadable; see the controller log)",
                        d.errors
                    ));
                }
                for m in &d.mounts_skipped {
                    line.push_str(&format!("\n  not entered (a mount): {}", m.display()));
                }
                line
            })
            .collect::<Vec<_>>()
            .join("\n")
    });
    Ok(())
}

fn render_plan(p: &PurgePlanView) -> String {
    let mut out = format!(
        "Purge plan for {} (files untouched for {} days or more):\n",
        p.root.display(),
        p.max_age_days
    );
    if let Some(note) = &p.atime_note {
        out.push_str(&format!("note: {note}\n"));
    }
    if p.per_user.is_empty() {
        out.push_str("nothing to delete: 0 files, 0B\n");
    } else {
        out.push_str(&table(
            &["USER", "FILES", "BYTES"],
            p.per_user
                .iter()
                .map(|u| {
                    vec![
                        u.user.clone(),
                        u.tally.files.to_string(),
                        format_size(u.tally.bytes),
                    ]
                })
                .collect(),
        ));
        out.push_str(&format!(
            "\ntotal: {}, {}\n\noldest:\n",
            labpool_units::count(p.total.files, "file"),
            format_size(p.total.bytes)
        ));
        for f in &p.oldest {
            out.push_str(&format!(
                "  {:>4} days  {:>7}  {}  {}\n",
                f.age_days,
                format_size(f.bytes),
                f.user,
                f.path.display()
            ));
        }
    }
    for u in &p.warned {
        out.push_str(&format!(
            "notice: {} has {} ({}) passing the limit within the warning window\n",
            u.user,
            labpool_units::count(u.tally.files, "file"),
            format_size(u.tally.bytes)
        ));
    }
    for k in &p.kept {
        out.push_str(&format!("kept (.labpool-keep): {}\n", k.display()));
    }
    for j in &p.jobs_skipped {
        out.push_str(&format!(
            "kept (a job's working directory): {}\n",
            j.display()
        ));
    }
    for m in &p.mounts_skipped {
        out.push_str(&format!("not entered (a mount): {}\n", m.display()));
    }
    if p.errors > 0 {
        out.push_str(&format!("{} entries could not be read\n", p.errors));
    }
    out.trim_end().to_string()
}

/// Runs `labpool purge ...`.
pub async fn purge(command: &PurgeCommand, config: &Config) -> anyhow::Result<()> {
    let PurgeCommand::Scratch { dry_run, yes, json } = command;
    let client = Client::new(&config.controller.socket);
    let spinner = if *json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let s = ProgressBar::new_spinner();
        s.set_message("planning the scratch purge");
        s.enable_steady_tick(Duration::from_millis(120));
        s
    };
    let plan: PurgePlanView = client
        .post("/v1/purge/scratch", &PurgeRequest::default())
        .await?;
    spinner.finish_and_clear();
    if *dry_run {
        print(*json, &plan, |p| {
            format!(
                "{}\ndry run: {} ({}) of {} would be deleted, {} warned, {} kept by .labpool-keep, {} of running jobs skipped; nothing was deleted",
                render_plan(p).trim_end(),
                labpool_units::count(p.total.files, "file"),
                format_size(p.total.bytes),
                labpool_units::count(p.per_user.len() as u64, "member"),
                labpool_units::count(p.warned.len() as u64, "member"),
                labpool_units::count(p.kept.len() as u64, "path"),
                labpool_units::count(p.jobs_skipped.len() as u64, "directory"),
            )
        });
        return Ok(());
    }
    if !*json {
        crate::out!("{}", render_plan(&plan));
    }
    if plan.total.files == 0 && plan.warned.is_empty() {
        return Ok(());
    }
    if !*yes {
        if !std::io::stdin().is_terminal() {
            anyhow::bail!(
                "not deleting without confirmation: standard input is not a terminal\nhint: pass --yes (for cron and scripts), or --dry-run to see the plan"
            );
        }
        eprint!(
            "Delete {} ({}) and send the notices? [y/N] ",
            labpool_units::count(plan.total.files, "file"),
            format_size(plan.total.bytes)
        );
        std::io::stderr().flush()?;
        let mut answer = String::new();
        std::io::stdin().lock().read_line(&mut answer)?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            crate::out!("Nothing deleted.");
            return Ok(());
        }
    }
    let done: PurgeDone = client
        .post(
            "/v1/purge/scratch",
            &PurgeRequest {
                execute: Some(plan.id.clone()),
            },
        )
        .await?;
    print(*json, &done, |d| {
        let mut out = format!(
            "Deleted {} ({}); each is listed in {}",
            labpool_units::count(d.removed.files, "file"),
            format_size(d.removed.bytes),
            d.audit_log.display()
        );
        for u in &d.per_user {
            out.push_str(&format!(
                "\n  {}: {}, {}",
                u.user,
                labpool_units::count(u.tally.files, "file"),
                format_size(u.tally.bytes)
            ));
        }
        if !d.skipped.is_empty() {
            out.push_str(&format!(
                "\nLeft {} planned files (used, replaced or protected since the plan):",
                d.skipped.len()
            ));
            for (p, why) in d.skipped.iter().take(10) {
                out.push_str(&format!("\n  {}: {why}", p.display()));
            }
        }
        for n in &d.notices {
            out.push_str(&format!("\nnotice: {n}"));
        }
        out
    });
    Ok(())
}

/// Runs `labpool dataset audit`.
pub async fn audit(client: &Client, fix: bool, json: bool) -> anyhow::Result<()> {
    let r: AuditReport = client
        .post("/v1/datasets/audit", &AuditRequest { fix })
        .await?;
    print(json, &r, |r| {
        let mut out = format!(
            "Checked {} entries under {}",
            r.checked,
            r.roots
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        if r.offenders.is_empty() {
            out.push_str(": members can write nothing.");
            return out;
        }
        out.push_str(&format!(
            ": {} entries members could write\n",
            r.offenders.len()
        ));
        out.push_str(&table(
            &["PATH", "OWNER", "MODE", "WHY", "FIXED"],
            r.offenders
                .iter()
                .map(|o| {
                    vec![
                        o.path.display().to_string(),
                        crate::identity::user_name(o.uid),
                        format!("{:04o}", o.mode),
                        o.why.join(","),
                        match (&o.fix_error, o.fixed) {
                            (Some(e), _) => format!("failed: {e}"),
                            (None, true) => "yes".into(),
                            (None, false) => "no".into(),
                        },
                    ]
                })
                .collect(),
        ));
        if !fix {
            out.push_str("\nhint: `labpool dataset audit --fix` takes the write bits off and gives member-owned entries to root");
        }
        out
    });
    Ok(())
}
