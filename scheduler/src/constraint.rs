//! `--constraint`: which node features a job needs, as Slurm writes them. `a100&ib` needs both,
//! `a100|h100` either, parentheses group, and `[rack1|rack2]` (matching OR) needs every node
//! of the job to have the same one of the alternatives. `&` binds tighter than `|`.
//!
//! Node features come from the config: `[node] features` on each node (its agent's config, or
//! the embedded node's). Slurm's counts (`a100*2`) are refused with a reason.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// A parsed `--constraint`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Constraint {
    /// A node feature.
    Feature(String),
    /// Every part holds.
    All(Vec<Constraint>),
    /// At least one part holds.
    Any(Vec<Constraint>),
    /// `[a|b]`: one alternative, the same on every node of the job.
    Matching(Vec<Constraint>),
}

/// A `--constraint` that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid --constraint {text:?}: {why}; write features joined by & (all), | (any), with ( ) or [a|b] (the same on every node), e.g. \"a100&ib\""
)]
pub struct ConstraintError {
    /// The constraint as given.
    pub text: String,
    /// What is wrong.
    pub why: String,
}

impl Constraint {
    /// Parses Slurm's `--constraint` syntax.
    ///
    /// ```
    /// use labpool_scheduler::constraint::Constraint;
    /// let c = Constraint::parse("a100&(ib|roce)").unwrap();
    /// assert!(c.holds(&["a100", "roce"]));
    /// assert!(!c.holds(&["a100"]));
    /// ```
    pub fn parse(text: &str) -> Result<Constraint, ConstraintError> {
        let mut p = Parser {
            text,
            chars: text.char_indices().peekable(),
        };
        let c = p.any()?;
        match p.chars.next() {
            None => Ok(c),
            Some((i, ch)) => Err(p.bad(format!("unexpected {ch:?} at character {}", i + 1))),
        }
    }

    /// True when a node with `features` satisfies the constraint on its own.
    pub fn holds<S: AsRef<str>>(&self, features: &[S]) -> bool {
        match self {
            Constraint::Feature(f) => features.iter().any(|g| g.as_ref() == f),
            Constraint::All(parts) => parts.iter().all(|c| c.holds(features)),
            Constraint::Any(parts) | Constraint::Matching(parts) => {
                parts.iter().any(|c| c.holds(features))
            }
        }
    }

    /// The alternatives of a matching OR (`[a|b]`) at the top, for a job of several nodes
    /// that must all take the same one; `None` when the constraint has none.
    pub fn matching_alternatives(&self) -> Option<&[Constraint]> {
        match self {
            Constraint::Matching(parts) => Some(parts),
            Constraint::All(parts) => parts.iter().find_map(|c| c.matching_alternatives()),
            _ => None,
        }
    }

    /// Every feature the constraint names.
    pub fn features(&self) -> BTreeSet<&str> {
        match self {
            Constraint::Feature(f) => BTreeSet::from([f.as_str()]),
            Constraint::All(p) | Constraint::Any(p) | Constraint::Matching(p) => {
                p.iter().flat_map(|c| c.features()).collect()
            }
        }
    }
}

/// As Slurm writes it; reads back to the same constraint.
impl std::fmt::Display for Constraint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let join = |parts: &[Constraint], sep: &str| {
            parts
                .iter()
                .map(|c| match (sep, c) {
                    ("&", Constraint::Any(_)) => format!("({c})"),
                    _ => c.to_string(),
                })
                .collect::<Vec<_>>()
                .join(sep)
        };
        match self {
            Constraint::Feature(name) => f.write_str(name),
            Constraint::All(parts) => f.write_str(&join(parts, "&")),
            Constraint::Any(parts) => f.write_str(&join(parts, "|")),
            Constraint::Matching(parts) => write!(f, "[{}]", join(parts, "|")),
        }
    }
}

struct Parser<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
}

impl Parser<'_> {
    fn bad(&self, why: String) -> ConstraintError {
        ConstraintError {
            text: self.text.to_string(),
            why,
        }
    }

    fn any(&mut self) -> Result<Constraint, ConstraintError> {
        let mut parts = vec![self.all()?];
        while self.chars.next_if(|(_, c)| *c == '|').is_some() {
            parts.push(self.all()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Constraint::Any(parts)
        })
    }

    fn all(&mut self) -> Result<Constraint, ConstraintError> {
        let mut parts = vec![self.atom()?];
        while self
            .chars
            .next_if(|(_, c)| *c == '&' || *c == ',')
            .is_some()
        {
            parts.push(self.atom()?);
        }
        Ok(if parts.len() == 1 {
            parts.remove(0)
        } else {
            Constraint::All(parts)
        })
    }

    fn atom(&mut self) -> Result<Constraint, ConstraintError> {
        match self.chars.peek().copied() {
            Some((_, open @ ('(' | '['))) => {
                self.chars.next();
                let inner = self.any()?;
                let close = if open == '(' { ')' } else { ']' };
                if self.chars.next_if(|(_, c)| *c == close).is_none() {
                    return Err(self.bad(format!("a '{open}' is not closed")));
                }
                self.no_count()?;
                Ok(match (open, inner) {
                    ('[', Constraint::Any(parts)) => Constraint::Matching(parts),
                    (_, c) => c,
                })
            }
            Some((start, c)) if is_feature_char(c) => {
                let mut end = start;
                while let Some((i, c)) = self.chars.next_if(|(_, c)| is_feature_char(*c)) {
                    end = i + c.len_utf8();
                }
                self.no_count()?;
                Ok(Constraint::Feature(self.text[start..end].to_string()))
            }
            Some((i, c)) => Err(self.bad(format!("unexpected {c:?} at character {}", i + 1))),
            None => Err(self.bad("it ends where a feature should be".into())),
        }
    }

    fn no_count(&mut self) -> Result<(), ConstraintError> {
        if self.chars.next_if(|(_, c)| *c == '*').is_some() {
            return Err(self.bad(
                "node counts per feature (FEATURE*N) are not supported; ask for the feature on every node".into(),
            ));
        }
        Ok(())
    }
}

fn is_feature_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '+' | '=')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_slurms_operators() {
        let c = Constraint::parse("a100&ib|v100").unwrap();
        assert!(c.holds(&["v100"]) && c.holds(&["a100", "ib"]) && !c.holds(&["a100"]));
        let m = Constraint::parse("gpu&[rack1|rack2]").unwrap();
        assert_eq!(m.matching_alternatives().unwrap().len(), 2, "{m:?}");
        assert!(m.holds(&["gpu", "rack2"]));
        for text in ["a100&(ib|roce)", "gpu&[rack1|rack2]", "a|b&c"] {
            let c = Constraint::parse(text).unwrap();
            assert_eq!(Constraint::parse(&c.to_string()).unwrap(), c, "{text}");
        }
        assert_eq!(
            m.features().into_iter().collect::<Vec<_>>(),
            ["gpu", "rack1", "rack2"]
        );
    }

    #[test]
    fn refuses_what_it_cannot_read() {
        for bad in ["", "a100&", "(a100", "[a|b", "a100*2", "a b", "&x"] {
            assert!(Constraint::parse(bad).is_err(), "{bad}");
        }
    }
}
