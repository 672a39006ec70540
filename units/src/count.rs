//! Counts written as English: `1 file`, `2 files`, `0 GPUs`, `3 directories`.

/// `n` and the noun, plural unless `n` is 1. The noun is a regular English one: its plural adds
/// `s` (`job`, `file`, `GPU`), or turns a `y` after a consonant into `ies` (`directory`,
/// `entry`).
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        return format!("1 {noun}");
    }
    let mut chars = noun.chars().rev();
    match (chars.next(), chars.next()) {
        (Some('y'), Some(c)) if !"aeiou".contains(c) => {
            format!("{n} {}ies", &noun[..noun.len() - 1])
        }
        _ => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(super::count(1, "file"), "1 file");
        assert_eq!(super::count(0, "GPU"), "0 GPUs");
        assert_eq!(super::count(21, "job"), "21 jobs");
        assert_eq!(super::count(3, "directory"), "3 directories");
        assert_eq!(super::count(2, "day"), "2 days");
        assert_eq!(super::count(1, "entry"), "1 entry");
    }
}
