//! What the quota tables hold (limits, each file system's last scan and its grace records),
//! kept in memory between changes. The submit check reads all of it on every submit, and a
//! stored scan is a JSON report to parse: reading the tables each time cost five database
//! round trips per submit. Only [`QuotaService`](crate::quotas::QuotaService) writes those
//! tables, and each of its writes forgets the copy; a read that began before a write is not
//! kept, so no submit after a write is judged by what was there before it.

use crate::quotas::db::StoredScan;
use labpool_quotas::limits::Limit;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The quota tables' rows, for the file systems named when they were read.
#[derive(Debug, Default)]
pub(crate) struct Stored {
    /// (user or `*`, fs) -> limit.
    pub limits: BTreeMap<(String, String), Limit>,
    /// File system name -> its last scan and since when each uid is over a soft limit.
    pub filesystems: BTreeMap<String, StoredFs>,
}

/// One file system's rows.
#[derive(Debug, Default)]
pub(crate) struct StoredFs {
    pub scan: Option<StoredScan>,
    pub grace: BTreeMap<u32, i64>,
}

/// The copy, and a count of writes that tells a read begun before a write from one after it.
#[derive(Debug, Default)]
pub(crate) struct StoredCopy {
    inner: Mutex<(u64, Option<Arc<Stored>>)>,
}

impl StoredCopy {
    /// The copy, if there is one and it holds every file system in `names`; else the write
    /// count to hand back to [`StoredCopy::keep`] with what is read instead.
    pub fn get(&self, names: &[&str]) -> Result<Arc<Stored>, u64> {
        let inner = self.inner.lock().expect("not poisoned");
        match &inner.1 {
            Some(s) if names.iter().all(|n| s.filesystems.contains_key(*n)) => Ok(Arc::clone(s)),
            _ => Err(inner.0),
        }
    }

    /// Keeps `stored`, read after [`StoredCopy::get`] returned `writes`, unless a write came
    /// in between.
    pub fn keep(&self, writes: u64, stored: Arc<Stored>) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if inner.0 == writes {
            inner.1 = Some(stored);
        }
    }

    /// A write to the quota tables: the copy is stale.
    pub fn forget(&self) {
        let mut inner = self.inner.lock().expect("not poisoned");
        inner.0 += 1;
        inner.1 = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(names: &[&str]) -> Arc<Stored> {
        Arc::new(Stored {
            limits: BTreeMap::new(),
            filesystems: names
                .iter()
                .map(|n| (n.to_string(), StoredFs::default()))
                .collect(),
        })
    }

    #[test]
    fn a_read_begun_before_a_write_is_not_kept() {
        let copy = StoredCopy::default();
        let writes = copy.get(&["home"]).unwrap_err();
        copy.forget();
        copy.keep(writes, with(&["home"]));
        let again = copy.get(&["home"]).unwrap_err();
        assert_ne!(writes, again);
        copy.keep(again, with(&["home"]));
        assert!(copy.get(&["home"]).is_ok());
        copy.forget();
        assert!(copy.get(&["home"]).is_err());
    }

    #[test]
    fn a_file_system_the_copy_lacks_is_read_again() {
        let copy = StoredCopy::default();
        let writes = copy.get(&["home"]).unwrap_err();
        copy.keep(writes, with(&["home"]));
        assert!(copy.get(&["home"]).is_ok());
        assert!(copy.get(&["home", "scratch"]).is_err());
    }
}
