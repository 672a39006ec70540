//! A multi-node attempt waiting for each of its nodes to answer an order (its datasets staged,
//! its environment in place): the nodes still to answer, and the notes of those that did.

use std::collections::BTreeSet;

/// The nodes of one attempt still to answer, and what those done said.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    waiting: BTreeSet<String>,
    notes: Vec<String>,
}

impl Answers {
    /// Waits for every one of `nodes`.
    pub(crate) fn from_nodes(nodes: &[String]) -> Answers {
        Answers {
            waiting: nodes.iter().cloned().collect(),
            notes: Vec::new(),
        }
    }

    /// `node` answered with `notes`: every node's notes once the last has answered, else
    /// `None`.
    pub(crate) fn answered(&mut self, node: &str, mut notes: Vec<String>) -> Option<Vec<String>> {
        self.waiting.remove(node);
        self.notes.append(&mut notes);
        self.waiting
            .is_empty()
            .then(|| std::mem::take(&mut self.notes))
    }
}
