//! Slurm's `%` output formats (`squeue -o`, `sinfo -o`): `%[.][WIDTH]X` fields among plain
//! text. A width pads the value (on the left with `.`, else on the right) and, as Slurm does,
//! cuts a longer value to the width. Headers are the fields' names in capitals.

/// The widest field: a wider one (`%99999999i`) is cut to this, so a typo cannot ask for
/// gigabytes of padding.
pub const MAX_WIDTH: usize = 1024;

/// One piece of a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Text as written.
    Text(String),
    /// A field.
    Field {
        /// Its letter.
        letter: char,
        /// Its width, if one was given.
        width: Option<usize>,
        /// `.`: right-justified.
        right: bool,
    },
}

/// Reads a format; `%%` is a literal `%`.
pub fn parse_format(text: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut chars = text.chars().peekable();
    let mut plain = String::new();
    while let Some(c) = chars.next() {
        if c != '%' {
            plain.push(c);
            continue;
        }
        if chars.peek() == Some(&'%') {
            chars.next();
            plain.push('%');
            continue;
        }
        let right = chars.peek() == Some(&'.');
        if right {
            chars.next();
        }
        let mut digits = String::new();
        while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            digits.push(*d);
            chars.next();
        }
        let Some(letter) = chars.next() else {
            plain.push('%');
            break;
        };
        if !plain.is_empty() {
            out.push(Piece::Text(std::mem::take(&mut plain)));
        }
        out.push(Piece::Field {
            letter,
            width: digits.parse().ok().map(|w: usize| w.min(MAX_WIDTH)),
            right,
        });
    }
    if !plain.is_empty() {
        out.push(Piece::Text(plain));
    }
    out
}

/// Lays out one line: `value` gives each field's text (its header, for the header line).
pub fn render(pieces: &[Piece], value: impl Fn(char) -> String) -> String {
    let mut line = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => line.push_str(t),
            Piece::Field {
                letter,
                width,
                right,
            } => {
                let v = value(*letter);
                match width {
                    None => line.push_str(&v),
                    Some(w) => {
                        let cut: String = v.chars().take(*w).collect();
                        if *right {
                            line.push_str(&format!("{cut:>w$}"));
                        } else {
                            line.push_str(&format!("{cut:<w$}"));
                        }
                    }
                }
            }
        }
    }
    line.trim_end().to_string()
}

/// Slurm's elapsed-time form: `0:05`, `1:02:03`, `2-03:04:05` (the units crate's printer).
pub use labpool_units::format_elapsed as slurm_elapsed;

/// Slurm's time-limit form: as [`slurm_elapsed`], `UNLIMITED` for none.
pub fn slurm_limit(secs: Option<u64>) -> String {
    secs.map_or_else(|| "UNLIMITED".to_string(), slurm_elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_pad_and_cut_as_slurm() {
        let f = parse_format("%.6i %5j|%u%%");
        let line = render(&f, |c| match c {
            'i' => "42".into(),
            'j' => "training".into(),
            _ => "root".into(),
        });
        assert_eq!(line, "    42 train|root%");
        let wide = render(&parse_format("%99999999999999999999i"), |_| "1".into());
        assert_eq!(wide.len(), 1, "padding on the right is trimmed");
        let wide = render(&parse_format("%.99999999i"), |_| "1".into());
        assert_eq!(wide.len(), MAX_WIDTH);
        assert_eq!(slurm_elapsed(5), "0:05");
        assert_eq!(slurm_elapsed(3723), "1:02:03");
        assert_eq!(slurm_elapsed(2 * 86_400 + 3 * 3600 + 245), "2-03:04:05");
        assert_eq!(slurm_limit(None), "UNLIMITED");
    }
}
