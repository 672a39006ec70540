//! Slurm's host lists: `gn[1-3,7],login1` expanded into names, and names compressed back into
//! the form Slurm prints (`SLURM_JOB_NODELIST`, `squeue`'s NODELIST).
//!
//! Written here rather than taken from a crate: `hostlist` only expands, and `nodeset` follows
//! ClusterShell's grammar and brings a command line's dependencies into the scheduling core.

use std::collections::BTreeMap;

/// A host list that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid host list {text:?}: {why}; write names and ranges, e.g. gn1,gn[3-5]")]
pub struct HostlistError {
    /// The list as given.
    pub text: String,
    /// What is wrong.
    pub why: String,
}

/// Most names one list may expand to: a typo such as `gn[1-999999999]` is refused, not built.
const MAX_HOSTS: usize = 65_536;

/// Expands a host list into names, in the order written, without repeats.
///
/// ```
/// use labpool_scheduler::hostlist::expand;
/// assert_eq!(expand("gn[1-3],login1").unwrap(), ["gn1", "gn2", "gn3", "login1"]);
/// assert_eq!(expand("n[08-10]").unwrap(), ["n08", "n09", "n10"]);
/// ```
pub fn expand(text: &str) -> Result<Vec<String>, HostlistError> {
    let bad = |why: &str| HostlistError {
        text: text.to_string(),
        why: why.to_string(),
    };
    let mut out: Vec<String> = Vec::new();
    for item in split_top(text).map_err(|w| bad(&w))? {
        let item = item.trim();
        if item.is_empty() {
            continue;
        }
        let mut names = vec![String::new()];
        let mut rest = item;
        while !rest.is_empty() {
            match rest.find('[') {
                None => {
                    names.iter_mut().for_each(|n| n.push_str(rest));
                    rest = "";
                }
                Some(open) => {
                    let close = rest[open..]
                        .find(']')
                        .map(|c| open + c)
                        .ok_or_else(|| bad("a '[' is not closed"))?;
                    let prefix = &rest[..open];
                    let numbers = ranges(&rest[open + 1..close]).map_err(|w| bad(&w))?;
                    if names.len().saturating_mul(numbers.len()) > MAX_HOSTS {
                        return Err(bad(&format!("it names more than {MAX_HOSTS} hosts")));
                    }
                    names = names
                        .iter()
                        .flat_map(|n| numbers.iter().map(move |num| format!("{n}{prefix}{num}")))
                        .collect();
                    rest = &rest[close + 1..];
                }
            }
        }
        for n in names {
            if n.contains([']', ' ']) {
                return Err(bad(&format!("{n:?} is not a host name")));
            }
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    if out.is_empty() {
        return Err(bad("it names no host"));
    }
    Ok(out)
}

/// Splits at commas outside brackets.
fn split_top(text: &str) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in text.char_indices() {
        match c {
            '[' => depth += 1,
            ']' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("brackets do not match".into());
        }
    }
    if depth != 0 {
        return Err("a '[' is not closed".into());
    }
    parts.push(&text[start..]);
    Ok(parts)
}

/// `1-3,7` or `08-10` into the numbers, written with the range's zero padding.
fn ranges(spec: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for part in spec.split(',') {
        let (lo, hi) = part.split_once('-').unwrap_or((part, part));
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(lo) || !digits(hi) {
            return Err(format!("[{spec}] is not a list of numbers and ranges"));
        }
        let width = if lo.starts_with('0') && lo.len() > 1 {
            lo.len()
        } else {
            0
        };
        let (a, b): (u64, u64) = (
            lo.parse().map_err(|_| format!("{lo} is too large"))?,
            hi.parse().map_err(|_| format!("{hi} is too large"))?,
        );
        if a > b {
            return Err(format!("the range {part} runs backwards"));
        }
        if b - a >= MAX_HOSTS as u64 || out.len() + (b - a) as usize >= MAX_HOSTS {
            return Err(format!("it names more than {MAX_HOSTS} hosts"));
        }
        out.extend((a..=b).map(|n| format!("{n:0width$}")));
    }
    Ok(out)
}

/// Compresses names into Slurm's form: names that differ only in a trailing number share a
/// bracket (`gn[1-3,7]`), sorted by prefix and number; other names stand alone.
///
/// ```
/// use labpool_scheduler::hostlist::compress;
/// let names = ["gn3", "gn1", "gn2", "gn7", "login"].map(String::from);
/// assert_eq!(compress(&names), "gn[1-3,7],login");
/// assert_eq!(compress(&["box".to_string()]), "box");
/// ```
pub fn compress(names: &[String]) -> String {
    // (prefix, width) -> numbers; a name without a trailing number is its own group.
    let mut groups: BTreeMap<(String, usize), Vec<u64>> = BTreeMap::new();
    let mut plain: Vec<&str> = Vec::new();
    for name in names {
        let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let (prefix, number) = name.split_at(name.len() - digits);
        match number.parse::<u64>() {
            Ok(n) if digits > 0 => {
                let width = if number.starts_with('0') && digits > 1 {
                    digits
                } else {
                    0
                };
                groups
                    .entry((prefix.to_string(), width))
                    .or_default()
                    .push(n);
            }
            _ => plain.push(name),
        }
    }
    // An unpadded number as wide as a padded group's joins it: gpu08, gpu09, gpu10.
    let unpadded: Vec<String> = groups
        .keys()
        .filter(|(_, w)| *w == 0)
        .map(|(p, _)| p.clone())
        .collect();
    for prefix in unpadded {
        let Some(width) = groups
            .keys()
            .find(|(p, w)| *p == prefix && *w > 0)
            .map(|(_, w)| *w)
        else {
            continue;
        };
        let numbers = groups.remove(&(prefix.clone(), 0)).unwrap_or_default();
        let (wide, narrow): (Vec<u64>, Vec<u64>) = numbers
            .into_iter()
            .partition(|n| n.to_string().len() >= width);
        groups
            .entry((prefix.clone(), width))
            .or_default()
            .extend(wide);
        if !narrow.is_empty() {
            groups.insert((prefix, 0), narrow);
        }
    }
    let mut parts: Vec<(String, String)> = plain
        .into_iter()
        .map(|p| (p.to_string(), p.to_string()))
        .collect();
    for ((prefix, width), mut numbers) in groups {
        numbers.sort_unstable();
        numbers.dedup();
        if numbers.len() == 1 {
            parts.push((prefix.clone(), format!("{prefix}{:0width$}", numbers[0])));
            continue;
        }
        let mut runs: Vec<String> = Vec::new();
        let mut i = 0;
        while i < numbers.len() {
            let mut j = i;
            while j + 1 < numbers.len() && numbers[j + 1] == numbers[j] + 1 {
                j += 1;
            }
            runs.push(if i == j {
                format!("{:0width$}", numbers[i])
            } else {
                format!("{:0width$}-{:0width$}", numbers[i], numbers[j])
            });
            i = j + 1;
        }
        parts.push((prefix.clone(), format!("{prefix}[{}]", runs.join(","))));
    }
    parts.sort();
    parts.dedup();
    parts
        .into_iter()
        .map(|(_, shown)| shown)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_and_compresses_back() {
        let names = expand("gn[1-3,5],gpu[01-02]x,login").unwrap();
        assert_eq!(
            names,
            ["gn1", "gn2", "gn3", "gn5", "gpu01x", "gpu02x", "login"]
        );
        assert_eq!(compress(&expand("n[1-2],n3,n10").unwrap()), "n[1-3,10]");
        assert_eq!(compress(&expand("gpu[08-10]").unwrap()), "gpu[08-10]");
        assert_eq!(
            expand("a[1-2]b[1-2]").unwrap(),
            ["a1b1", "a1b2", "a2b1", "a2b2"]
        );
    }

    #[test]
    fn bad_lists_say_why() {
        for bad in [
            "gn[1-",
            "gn[3-1]",
            "gn[a-b]",
            "gn]1[",
            "",
            ",",
            "gn[1-999999999]",
        ] {
            assert!(expand(bad).is_err(), "{bad}");
        }
    }
}
