//! Signed requests between nodes: accepted once with the right key and clock; refused with a
//! wrong key, when replayed, when any signed part changed, and when the clocks are 10 minutes
//! apart (with the skew and the fix in the message). Key files: written 0600, refused when
//! others can read them or when they are not a key.

use labpool_cluster::{AuthError, ClusterKey, Request, Verifier};
use std::os::unix::fs::PermissionsExt;

const WINDOW: u64 = 5 * 60 * 1000;
const NOW: i64 = 1_800_000_000_000;

fn req(body: &[u8]) -> Request<'_> {
    Request {
        method: "POST",
        path: "/v1/agent/report",
        body,
        uid: Some(1001),
    }
}

#[test]
fn a_signed_request_is_accepted_once() {
    let key = ClusterKey::generate().unwrap();
    let mut v = Verifier::new(key.clone(), WINDOW);
    let sig = key.sign(&req(b"{\"ended\":7}"), NOW, "a-1");
    v.verify(&req(b"{\"ended\":7}"), &sig, NOW + 20).unwrap();
    let again = v
        .verify(&req(b"{\"ended\":7}"), &sig, NOW + 40)
        .unwrap_err();
    assert!(matches!(again, AuthError::Replay { .. }), "{again}");
    assert!(again.to_string().contains("a-1"), "{again}");
    // A fresh nonce is a new request.
    let sig2 = key.sign(&req(b"{\"ended\":7}"), NOW + 50, "a-2");
    v.verify(&req(b"{\"ended\":7}"), &sig2, NOW + 60).unwrap();
}

#[test]
fn a_wrong_key_is_refused_with_what_to_do() {
    let ours = ClusterKey::from_bytes([1; 32]);
    let theirs = ClusterKey::from_bytes([2; 32]);
    let mut v = Verifier::new(ours, WINDOW);
    let err = v
        .verify(&req(b"x"), &theirs.sign(&req(b"x"), NOW, "n"), NOW)
        .unwrap_err();
    assert!(matches!(err, AuthError::WrongKey), "{err}");
    assert!(
        err.to_string()
            .contains("copy the controller's cluster.key"),
        "{err}"
    );
    // Nothing was remembered for a refused request.
    assert_eq!(v.remembered(), 0);
}

#[test]
fn every_signed_part_is_covered() {
    let key = ClusterKey::from_bytes([3; 32]);
    let mut v = Verifier::new(key.clone(), WINDOW);
    let base = req(b"body");
    let sig = key.sign(&base, NOW, "n");
    let changed = [
        Request {
            method: "GET",
            ..base
        },
        Request {
            path: "/v1/agent/start",
            ..base
        },
        Request {
            body: b"bodY",
            ..base
        },
        Request {
            uid: Some(0),
            ..base
        },
        Request { uid: None, ..base },
    ];
    for r in changed {
        assert!(
            matches!(v.verify(&r, &sig, NOW), Err(AuthError::WrongKey)),
            "{r:?}"
        );
    }
    let mut later = sig.clone();
    later.timestamp_ms += 1;
    assert!(matches!(
        v.verify(&base, &later, NOW),
        Err(AuthError::WrongKey)
    ));
    let mut other_nonce = sig.clone();
    other_nonce.nonce = "m".into();
    assert!(matches!(
        v.verify(&base, &other_nonce, NOW),
        Err(AuthError::WrongKey)
    ));
    let mut garbage = sig.clone();
    garbage.mac = "zz".into();
    assert!(matches!(
        v.verify(&base, &garbage, NOW),
        Err(AuthError::Unsigned(_))
    ));
    v.verify(&base, &sig, NOW).unwrap();
}

#[test]
fn a_ten_minute_skew_is_refused_with_the_skew_and_the_fix() {
    let key = ClusterKey::from_bytes([4; 32]);
    let mut v = Verifier::new(key.clone(), WINDOW);
    // The peer's clock is 10 minutes behind ours.
    let sig = key.sign(&req(b"x"), NOW - 600_000, "slow");
    let err = v.verify(&req(b"x"), &sig, NOW).unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(
            err,
            AuthError::Skew {
                skew_ms: -600_000,
                ..
            }
        ),
        "{text}"
    );
    for part in [
        "10 min 0 s behind",
        "300 s window",
        "timedatectl set-ntp true; chronyc sources",
    ] {
        assert!(text.contains(part), "{part:?} missing in: {text}");
    }
    // Ahead by 10 minutes is refused too; 4 minutes either way is inside the window.
    let ahead = key.sign(&req(b"x"), NOW + 600_000, "fast");
    assert!(
        v.verify(&req(b"x"), &ahead, NOW)
            .unwrap_err()
            .to_string()
            .contains("ahead of")
    );
    v.verify(&req(b"x"), &key.sign(&req(b"x"), NOW - 240_000, "ok1"), NOW)
        .unwrap();
    v.verify(&req(b"x"), &key.sign(&req(b"x"), NOW + 240_000, "ok2"), NOW)
        .unwrap();
}

#[test]
fn old_nonces_are_forgotten_once_their_time_is_out_of_the_window() {
    let key = ClusterKey::from_bytes([5; 32]);
    let mut v = Verifier::new(key.clone(), WINDOW);
    for i in 0..100 {
        let t = NOW + i * 1000;
        v.verify(&req(b"x"), &key.sign(&req(b"x"), t, &format!("n{i}")), t)
            .unwrap();
    }
    assert_eq!(v.remembered(), 100);
    let later = NOW + 100 * 1000 + WINDOW as i64;
    v.verify(&req(b"x"), &key.sign(&req(b"x"), later, "last"), later)
        .unwrap();
    assert!(v.remembered() <= 2, "{}", v.remembered());
    // A forgotten nonce cannot come back: its timestamp is outside the window now.
    let replay = key.sign(&req(b"x"), NOW, "n0");
    assert!(matches!(
        v.verify(&req(b"x"), &replay, later),
        Err(AuthError::Skew { .. })
    ));
}

#[test]
fn key_files_are_private_and_checked() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("cluster.key");
    let key = ClusterKey::generate().unwrap();
    key.write_new(&path).unwrap();
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let loaded = ClusterKey::load(&path).unwrap();
    let mut v = Verifier::new(loaded, WINDOW);
    v.verify(&req(b"x"), &key.sign(&req(b"x"), NOW, "k"), NOW)
        .unwrap();
    // Never replaced by accident.
    assert!(
        key.write_new(&path)
            .unwrap_err()
            .to_string()
            .contains("cannot create it")
    );
    // Readable by others: refused, with the chmod to run.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = ClusterKey::load(&path).unwrap_err().to_string();
    assert!(
        err.contains("mode 644") && err.contains("chmod 600"),
        "{err}"
    );
    // Not a key.
    let bad = tmp.path().join("bad.key");
    std::fs::write(&bad, "hello\n").unwrap();
    std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(
        ClusterKey::load(&bad)
            .unwrap_err()
            .to_string()
            .contains("64 hex digits")
    );
    let missing = ClusterKey::load(&tmp.path().join("none"))
        .unwrap_err()
        .to_string();
    assert!(
        missing.contains("copy the controller's cluster.key"),
        "{missing}"
    );
    // Two generated keys differ.
    let a = ClusterKey::generate().unwrap();
    let b = ClusterKey::generate().unwrap();
    let mut va = Verifier::new(a, WINDOW);
    assert!(
        va.verify(&req(b"x"), &b.sign(&req(b"x"), NOW, "z"), NOW)
            .is_err()
    );
}
