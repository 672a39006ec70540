//! Delta transfer between nodes: the bytes a peer sends for a changed file are close to the
//! bytes that changed; a corrupted delta is caught by the manifest's BLAKE3 and repaired by a
//! whole-file fetch; a peer with other data is refused; no old version, or a file too large
//! for a delta, travels whole.

use labpool_cache::delta::{DeltaError, DeltaOptions, Peer, delta, fetch};
use std::cell::Cell;
use std::io;

use labpool_testkit::bytes as random;

fn hash(b: &[u8]) -> String {
    blake3::hash(b).to_hex().to_string()
}

/// A peer that holds `new`; `corrupt` flips a byte in the delta it sends.
struct LocalPeer {
    new: Vec<u8>,
    corrupt: bool,
    whole_calls: Cell<u32>,
}

impl LocalPeer {
    fn new(new: Vec<u8>) -> LocalPeer {
        LocalPeer {
            new,
            corrupt: false,
            whole_calls: Cell::new(0),
        }
    }
}

impl Peer for LocalPeer {
    fn delta(&self, signature: &[u8]) -> io::Result<Vec<u8>> {
        let mut d = delta(signature, &self.new)?;
        if self.corrupt {
            let at = d.len() - 10;
            d[at] ^= 0x5a;
        }
        Ok(d)
    }
    fn whole(&self) -> io::Result<Vec<u8>> {
        self.whole_calls.set(self.whole_calls.get() + 1);
        Ok(self.new.clone())
    }
}

/// Bytes the peer sent per byte changed.
fn ratio(old: &[u8], new: Vec<u8>, changed: usize) -> f64 {
    let expected = hash(&new);
    let peer = LocalPeer::new(new.clone());
    let (got, t) = fetch(Some(old), &expected, &peer, DeltaOptions::default()).unwrap();
    assert_eq!(got, new);
    assert!(!t.whole && t.fell_back.is_none(), "{t:?}");
    assert_eq!(peer.whole_calls.get(), 0);
    t.bytes_down as f64 / changed as f64
}

#[test]
fn bytes_sent_for_a_changed_file_are_close_to_the_changed_bytes() {
    let old = random(1, 8 << 20);
    // 64 KiB rewritten in place.
    let mut edited = old.clone();
    edited[3_000_000..3_065_536].copy_from_slice(&random(2, 65_536));
    let r = ratio(&old, edited, 65_536);
    assert!(r <= 1.1, "in-place edit: {r:.3} bytes per changed byte");
    // 64 KiB inserted: everything after it shifts.
    let mut inserted = old[..5_000_000].to_vec();
    inserted.extend(random(3, 65_536));
    inserted.extend(&old[5_000_000..]);
    let r = ratio(&old, inserted, 65_536);
    assert!(r <= 1.1, "insertion: {r:.3} bytes per changed byte");
    // 1 MiB appended (a log, a growing shard).
    let mut appended = old.clone();
    appended.extend(random(4, 1 << 20));
    let r = ratio(&old, appended, 1 << 20);
    assert!(r <= 1.02, "append: {r:.3} bytes per changed byte");
}

#[test]
fn a_corrupted_delta_is_caught_by_the_hash_and_repaired() {
    let old = random(5, 1 << 20);
    let mut new = old.clone();
    new[100_000..120_000].copy_from_slice(&random(6, 20_000));
    let mut peer = LocalPeer::new(new.clone());
    peer.corrupt = true;
    let (got, t) = fetch(Some(&old), &hash(&new), &peer, DeltaOptions::default()).unwrap();
    assert_eq!(got, new, "the repaired file is the new version");
    assert!(t.whole, "{t:?}");
    assert_eq!(peer.whole_calls.get(), 1);
    let why = t.fell_back.unwrap();
    assert!(
        why.contains("BLAKE3") || why.contains("delta failed"),
        "{why}"
    );
}

#[test]
fn a_peer_with_other_data_is_refused_and_whole_files_are_checked_too() {
    let old = random(7, 1 << 20);
    let peer = LocalPeer::new(random(8, 1 << 20));
    let expected = hash(&random(9, 1 << 20));
    let err = fetch(Some(&old), &expected, &peer, DeltaOptions::default()).unwrap_err();
    assert!(matches!(err, DeltaError::Mismatch { .. }), "{err}");
    assert!(err.to_string().contains("shared source"), "{err}");
}

#[test]
fn no_old_version_or_a_large_file_travels_whole() {
    let new = random(10, 300_000);
    let peer = LocalPeer::new(new.clone());
    let (got, t) = fetch(None, &hash(&new), &peer, DeltaOptions::default()).unwrap();
    assert_eq!(
        (got, t.whole, t.bytes_up, t.bytes_down),
        (new.clone(), true, 0, 300_000)
    );
    let old = random(11, 300_000);
    let small = DeltaOptions {
        max_delta_bytes: 100_000,
    };
    let (_, t) = fetch(Some(&old), &hash(&new), &peer, small).unwrap();
    assert!(t.whole && t.fell_back.is_none() && t.bytes_up == 0, "{t:?}");
}
