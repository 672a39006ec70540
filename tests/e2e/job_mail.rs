//! `--mail-type` and `--mail-user` against a real SMTP conversation (a sink on a loopback port
//! that answers as a relay does) and the webhook: a job's start, its time-limit warning and its
//! failure reach the address it named, and every member is warned before a time-limit kill.

use crate::pool::{Pool, webhook};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// One mail the sink took: the envelope's recipient and the message.
pub struct Mail {
    /// The envelope's recipient.
    pub to: String,
    /// The message, headers and body.
    pub data: String,
}

/// An SMTP sink: speaks enough of RFC 5321 for a client to hand it mail.
pub fn smtp_sink() -> (String, Receiver<Mail>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let tx = tx.clone();
            std::thread::spawn(move || {
                let mut r = BufReader::new(s.try_clone().unwrap());
                let _ = s.write_all(b"220 sink ESMTP\r\n");
                let (mut to, mut data, mut in_data) = (String::new(), String::new(), false);
                loop {
                    let mut line = String::new();
                    if r.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    if in_data {
                        if line == ".\r\n" {
                            in_data = false;
                            let _ = s.write_all(b"250 queued\r\n");
                            let _ = tx.send(Mail {
                                to: std::mem::take(&mut to),
                                data: std::mem::take(&mut data),
                            });
                        } else {
                            data.push_str(&line);
                        }
                        continue;
                    }
                    let upper = line.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-sink\r\n250 8BITMIME\r\n"
                    } else if upper.starts_with("RCPT TO:") {
                        to = line[8..].trim().trim_matches(['<', '>']).to_string();
                        b"250 ok\r\n"
                    } else if upper.starts_with("DATA") {
                        in_data = true;
                        b"354 go on\r\n"
                    } else if upper.starts_with("QUIT") {
                        let _ = s.write_all(b"221 bye\r\n");
                        return;
                    } else {
                        b"250 ok\r\n"
                    };
                    let _ = s.write_all(reply);
                }
            });
        }
    });
    (addr, rx)
}

/// Waits for a mail whose message contains `part`.
pub fn wait_mail(rx: &Receiver<Mail>, part: &str, seen: &mut Vec<Mail>) -> Mail {
    if let Some(i) = seen.iter().position(|m| m.data.contains(part)) {
        return seen.remove(i);
    }
    let end = Instant::now() + Duration::from_secs(30);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(m) if m.data.contains(part) => return m,
            Ok(m) => seen.push(m),
            Err(_) => break,
        }
    }
    let got: Vec<&str> = seen.iter().map(|m| m.data.as_str()).collect();
    panic!("no mail with {part:?}; got {got:#?}");
}

#[test]
fn mail_types_reach_the_mail_user_and_every_member_is_warned_before_the_limit() {
    let (relay, mails) = smtp_sink();
    let (hook, posts) = webhook();
    let mut pool = Pool::new("2:rtx4090");
    pool.edit_config(|t| {
        format!(
            "{}\n[alerts]\nwebhook = \"{hook}\"\n[mail]\nsmtp = \"{relay}\"\nfrom = \"pool@lab.example\"\ndomain = \"lab.example\"\nwarn_time_percent = 50\nwarn_memory_percent = 50\n",
            t.replace("# sample_interval = \"5s\"", "sample_interval = \"200ms\"")
        )
    });
    pool.start();
    let mut seen = Vec::new();

    // Asked for: start, 80% of a 5 s limit, and the failure at the limit.
    let asked = pool.submit(&[
        "-J",
        "train",
        "-t",
        "0:05",
        "--mail-type=BEGIN,FAIL,TIME_LIMIT_80",
        "--mail-user=alice@uni.example",
        "--wrap",
        "sleep 30",
    ]);
    let began = wait_mail(
        &mails,
        &format!("Job_id={asked} Name=train Began"),
        &mut seen,
    );
    assert_eq!(began.to, "alice@uni.example");
    assert!(
        began.data.contains("From: pool@lab.example"),
        "{}",
        began.data
    );
    let warned = wait_mail(
        &mails,
        &format!("Job_id={asked} Name=train Reached 80% of time limit"),
        &mut seen,
    );
    assert!(warned.data.contains("save a checkpoint"), "{}", warned.data);
    let failed = wait_mail(
        &mails,
        &format!("Job_id={asked} Name=train Failed, TIMEOUT"),
        &mut seen,
    );
    assert_eq!(failed.to, "alice@uni.example");
    // Not asked for: the member still hears of the coming kill, at their login's address.
    let quiet = pool.submit(&["-J", "quiet", "-t", "0:04", "--wrap", "sleep 30"]);
    let me = crate::pool::stdout_of(
        &std::process::Command::new("id")
            .arg("-un")
            .output()
            .unwrap(),
    );
    let warned = wait_mail(
        &mails,
        &format!("Job_id={quiet} Name=quiet Reached 50% of time limit"),
        &mut seen,
    );
    assert_eq!(warned.to, format!("{}@lab.example", me.trim()));
    pool.wait_done(quiet, Duration::from_secs(20));
    // It asked for no END or FAIL: nothing more about it.
    std::thread::sleep(Duration::from_secs(1));
    while let Ok(m) = mails.try_recv() {
        seen.push(m);
    }
    assert!(
        !seen.iter().any(|m| m
            .data
            .contains(&format!("Job_id={quiet} Name=quiet Failed"))),
        "{:?}",
        seen.iter().map(|m| &m.data).collect::<Vec<_>>()
    );
    // The webhook names the member too.
    let mut bodies = Vec::new();
    while let Ok(b) = posts.try_recv() {
        bodies.push(b);
    }
    assert!(
        bodies
            .iter()
            .any(|b| b.contains(&format!("Job_id={asked} Name=train Began"))
                && b.contains("\"user\":\"alice\"")),
        "{bodies:#?}"
    );

    // Memory: past half of its --mem (as the test sets the mark), the member is warned before
    // the kernel would kill it. Needs the node's memory cgroups (root).
    if crate::pool::have_root("a_job_near_its_memory_limit_is_warned") {
        let big = pool.submit(&[
            "-J",
            "big",
            "--mem=200M",
            "--wrap",
            "exec python3 -c 'import time; x = b\"x\" * (120 << 20); time.sleep(30)'",
        ]);
        let warned = wait_mail(&mails, &format!("Job_id={big} Name=big Reached"), &mut seen);
        assert!(warned.data.contains("of memory limit"), "{}", warned.data);
        assert!(
            warned.data.contains("of its 200M memory limit"),
            "{}",
            warned.data
        );
        pool.ok(&["cancel", &big.to_string()]);
    }

    // A mail type sbatch does not know is refused at submit, naming it.
    let out = pool.cli(&["submit", "--mail-type=BEGIN,FINISH", "--wrap", "true"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--mail-type: FINISH not known"), "{err}");
}

/// A chat bot's webhook URL is its key, and `labpool.toml` is read by every member's CLI: the
/// controller warns when the URL is written there, takes it from a file of its own, and will
/// not start on such a file that others can read.
#[test]
fn the_webhook_url_is_kept_where_members_cannot_read_it() {
    use std::os::unix::fs::PermissionsExt;
    let (hook, posts) = webhook();
    let mut pool = Pool::new("1:t4");
    pool.edit_config(|t| format!("{t}\n[alerts]\nwebhook = \"{hook}\"\n"));
    std::fs::set_permissions(&pool.config, std::fs::Permissions::from_mode(0o644)).unwrap();
    pool.start();
    pool.stop();
    assert!(
        pool.serve_log()
            .contains("which every user can read, and a bot's URL is its key"),
        "{}",
        pool.serve_log()
    );

    let file = pool.dir.join("webhook.url");
    std::fs::write(&file, format!("{hook}\n")).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    pool.edit_config(|t| {
        t.replace(
            &format!("webhook = \"{hook}\""),
            &format!("webhook_file = \"{}\"", file.display()),
        )
    });
    let out = pool.command(&["serve"]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("is readable by others (mode 644)"), "{err}");

    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    pool.start();
    let id = pool.submit(&["--mail-type=BEGIN", "--wrap", "true"]);
    pool.wait_done(id, Duration::from_secs(20));
    let post = posts.recv_timeout(Duration::from_secs(20)).unwrap();
    assert!(post.contains(&format!("Job_id={id}")), "{post}");
    pool.stop();
}

/// `--mail-type` on a pool with no mail relay is not silently dropped: sbatch warns, in its own
/// words, naming the setting; a login name with no `[mail] domain` is warned about too; and
/// `init` writes the `[mail]` block to fill in.
#[test]
fn mail_types_that_cannot_be_mailed_are_warned_about_at_submit() {
    let mut pool = Pool::new("1:rtx4090");
    let config = std::fs::read_to_string(&pool.config).unwrap();
    assert!(
        config.contains("# [mail]\n# smtp = \"127.0.0.1:25\""),
        "{config}"
    );
    pool.start();
    let sbatch = |pool: &Pool, args: &[&str]| pool.slurm_out("sbatch", args, true).1;
    let err = sbatch(
        &pool,
        &[
            "--mail-type=END",
            "--mail-user=alice@uni.example",
            "--wrap",
            "true",
        ],
    );
    assert!(
        err.contains("sbatch: warning: --mail-type: no e-mail is sent")
            && err.contains("[mail] smtp")
            && err.contains("controller's log"),
        "{err}"
    );
    assert!(
        sbatch(&pool, &["--wrap", "true"]).is_empty(),
        "no mail asked for, no word"
    );
    pool.stop();
    let (relay, _mails) = smtp_sink();
    pool.edit_config(|t| format!("{t}\n[mail]\nsmtp = \"{relay}\"\n"));
    pool.start();
    let err = sbatch(
        &pool,
        &["--mail-type=FAIL", "--mail-user=alice", "--wrap", "true"],
    );
    assert!(
        err.contains("no e-mail is sent to \"alice\"") && err.contains("[mail] domain"),
        "{err}"
    );
    let err = sbatch(
        &pool,
        &[
            "--mail-type=FAIL",
            "--mail-user=alice@uni.example",
            "--wrap",
            "true",
        ],
    );
    assert!(!err.contains("warning"), "{err}");
    // The moments labpool never tells of are named too.
    let err = sbatch(
        &pool,
        &[
            "--mail-type=FAIL,STAGE_OUT,ARRAY_TASKS",
            "--mail-user=alice@uni.example",
            "--wrap",
            "true",
        ],
    );
    assert!(
        err.contains("STAGE_OUT is never told here") && err.contains("ARRAY_TASKS changes nothing"),
        "{err}"
    );
}
