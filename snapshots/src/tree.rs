//! Trees: content-addressed directory listings. A directory whose entries did not change has the
//! same tree id in every snapshot, so it is stored once and skipped by `diff`.

use crate::blob::BlobId;
use crate::error::{Result, SnapshotError};
use serde::{Deserialize, Serialize};

/// What kind of file a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum NodeKind {
    /// A regular file; its content is a list of data blobs.
    File,
    /// A directory; its entries are in a subtree.
    Dir,
    /// A symbolic link, kept as a link (never followed).
    Symlink,
    /// A named pipe.
    Fifo,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// A Unix socket (recorded, not restored: it is meaningless without its server).
    Socket,
}

impl NodeKind {
    /// One letter, as `ls -l` prints it.
    pub fn letter(self) -> char {
        match self {
            NodeKind::File => '-',
            NodeKind::Dir => 'd',
            NodeKind::Symlink => 'l',
            NodeKind::Fifo => 'p',
            NodeKind::CharDevice => 'c',
            NodeKind::BlockDevice => 'b',
            NodeKind::Socket => 's',
        }
    }
}

/// One directory entry as it was at backup time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Node {
    /// The name, as raw bytes (file names need not be UTF-8).
    pub name: Vec<u8>,
    /// File, directory, link…
    pub kind: NodeKind,
    /// Permission bits, including setuid, setgid and sticky.
    pub mode: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Status change time, nanoseconds since the epoch (for the unchanged-file check).
    pub ctime_ns: i64,
    /// Size in bytes (files) or link target length.
    pub size: u64,
    /// Device of the file system it was on.
    pub dev: u64,
    /// Inode number (for the unchanged-file check and hard links).
    pub inode: u64,
    /// Hard link count.
    pub links: u64,
    /// Device number, for device nodes.
    pub rdev: u64,
    /// Content chunks, in order (files).
    pub content: Vec<BlobId>,
    /// The listing of a directory.
    pub subtree: Option<BlobId>,
    /// Where a symlink points.
    pub target: Vec<u8>,
}

impl Node {
    /// The name for display.
    pub fn display_name(&self) -> String {
        String::from_utf8_lossy(&self.name).into_owned()
    }

    /// Whether this node is one of several hard links to the same file.
    pub fn is_hard_linked(&self) -> bool {
        self.kind != NodeKind::Dir && self.links > 1
    }
}

/// A directory listing, sorted by name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tree {
    /// The entries, sorted by name bytes.
    pub nodes: Vec<Node>,
}

impl Tree {
    /// The serialized form (its id is the hash of this).
    pub fn encode(&self) -> Vec<u8> {
        postcard::to_stdvec(self).expect("a tree always serializes")
    }

    /// Parses a stored tree and checks that its names are safe to create.
    pub fn decode(bytes: &[u8]) -> Result<Tree> {
        let tree: Tree = postcard::from_bytes(bytes).map_err(|e| SnapshotError::Corrupt {
            pack: "-".into(),
            what: format!("a tree does not parse: {e}"),
        })?;
        for n in &tree.nodes {
            check_name(&n.name)?;
        }
        Ok(tree)
    }

    /// The entry called `name`.
    pub fn get(&self, name: &[u8]) -> Option<&Node> {
        self.nodes
            .binary_search_by(|n| n.name.as_slice().cmp(name))
            .ok()
            .map(|i| &self.nodes[i])
    }
}

/// A name may not be empty, `.`, `..`, or contain `/` or NUL: any of those would let a restore
/// write outside its target.
pub fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.contains(&0)
    {
        return Err(SnapshotError::UnsafeName {
            name: String::from_utf8_lossy(name).into_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(name: &[u8]) -> Node {
        Node {
            name: name.to_vec(),
            kind: NodeKind::File,
            mode: 0o644,
            uid: 1,
            gid: 1,
            mtime_ns: 5,
            ctime_ns: 6,
            size: 0,
            dev: 1,
            inode: 2,
            links: 1,
            rdev: 0,
            content: vec![],
            subtree: None,
            target: vec![],
        }
    }

    #[test]
    fn trees_round_trip_and_refuse_escaping_names() {
        let t = Tree {
            nodes: vec![node(b"a"), node(b"b\xff")],
        };
        let back = Tree::decode(&t.encode()).unwrap();
        assert_eq!(back, t);
        assert!(back.get(b"b\xff").is_some());
        for bad in [&b".."[..], b"x/y", b"", b"."] {
            let t = Tree {
                nodes: vec![node(bad)],
            };
            assert!(matches!(
                Tree::decode(&t.encode()),
                Err(SnapshotError::UnsafeName { .. })
            ));
        }
    }
}
