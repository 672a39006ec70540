//! Reading one line of shell well enough to tell whether it sets a variable: quote-aware
//! comment stripping, splitting into simple commands and words, and the ways a command sets or
//! removes an environment variable.

/// Words skipped before a command's name: reserved words, and prefixes that run the rest.
const PREFIXES: [&str; 16] = [
    "if", "then", "else", "elif", "do", "while", "until", "!", "{", "}", "time", "exec", "command",
    "builtin", "nohup", "nice",
];

/// Commands that set variables named in their arguments.
const DECLARES: [&str; 5] = ["export", "declare", "typeset", "local", "readonly"];

/// How deep `bash -c '...'` is looked into.
const MAX_DEPTH: usize = 3;

/// One word of a command: as written, and with quotes removed.
#[derive(Debug, Clone)]
struct Word {
    raw: String,
    text: String,
}

/// `line` without its comment: from a `#` that starts a word, outside quotes.
pub(crate) fn strip_comment(line: &str) -> &str {
    let mut quote = None;
    let mut escaped = false;
    let mut prev = ' ';
    for (i, c) in line.char_indices() {
        match (quote, c) {
            _ if escaped => escaped = false,
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '#') if prev.is_whitespace() || ";&|(".contains(prev) => return &line[..i],
            _ => {}
        }
        prev = c;
    }
    line
}

/// True when some command on `line` sets or removes `var` in the environment.
pub(crate) fn sets(line: &str, var: &str) -> bool {
    sets_at(line, var, 0)
}

fn sets_at(line: &str, var: &str, depth: usize) -> bool {
    commands(line)
        .iter()
        .any(|words| command_sets(words, var, depth))
}

/// Whether one simple command sets `var`.
fn command_sets(words: &[Word], var: &str, depth: usize) -> bool {
    let mut rest = words;
    while let Some((first, tail)) = rest.split_first() {
        if PREFIXES.contains(&first.raw.as_str()) {
            rest = tail;
        } else if let Some(name) = assigned_name(&first.raw) {
            if name == var {
                return true;
            }
            rest = tail;
        } else {
            break;
        }
    }
    let Some((name, args)) = rest.split_first() else {
        return false;
    };
    let program = name.text.rsplit('/').next().unwrap_or("");
    let options = || {
        args.iter()
            .take_while(|a| a.text.starts_with('-'))
            .map(|a| a.text.as_str())
    };
    let operands = || args.iter().filter(|a| !a.text.starts_with('-'));
    match program {
        // Builtins and `env` see their arguments after quote removal: `export "V=1"` sets V.
        "export" => operands().any(|a| a.text == var || assigned_name(&a.text) == Some(var)),
        p if DECLARES.contains(&p) => {
            let exported = options().any(|o| !o.starts_with("--") && o.contains('x'));
            operands().any(|a| assigned_name(&a.text) == Some(var) || (exported && a.text == var))
        }
        "env" | "sudo" => {
            let mut i = 0;
            while i < args.len() && args[i].text.starts_with('-') {
                // Options with a separate value: `env -u NAME`, `env -C DIR`, `sudo -u USER`.
                let takes_value = matches!(args[i].text.as_str(), "-u" | "-C" | "-g" | "-S");
                i += if takes_value { 2 } else { 1 };
            }
            let unsets = args
                .windows(2)
                .any(|w| w[0].text == "-u" && w[1].text == var)
                || args.iter().any(|a| a.text == format!("--unset={var}"));
            unsets
                || args
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .map_while(|a| assigned_name(&a.text))
                    .any(|n| n == var)
        }
        "setenv" | "unsetenv" | "unset" => operands().any(|a| a.text == var),
        // fish: `set -x NAME VALUE`, `set -gx NAME VALUE`, `set --export NAME VALUE`.
        "set" => {
            let exported =
                options().any(|o| o == "--export" || (!o.starts_with("--") && o.contains('x')));
            exported && operands().next().is_some_and(|a| a.text == var)
        }
        "sh" | "bash" | "dash" | "zsh" | "ksh" if depth < MAX_DEPTH => args
            .windows(2)
            .find(|w| w[0].text == "-c" || (w[0].text.starts_with('-') && w[0].text.ends_with('c')))
            .is_some_and(|w| sets_at(&w[1].text, var, depth + 1)),
        _ => false,
    }
}

/// The variable a word assigns (`NAME=...`, `NAME+=...`, `NAME[i]=...`), when the name is
/// unquoted as the shell requires.
fn assigned_name(raw: &str) -> Option<&str> {
    let end = raw.find('=')?;
    let name = raw[..end].trim_end_matches('+');
    let name = name.split('[').next().unwrap_or(name);
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then_some(name)
}

/// The simple commands of `line`, split at unquoted `;`, `&`, `|`, `(`, `)` and backquotes,
/// each as its words.
fn commands(line: &str) -> Vec<Vec<Word>> {
    let mut commands = Vec::new();
    let mut words = Vec::new();
    let mut word: Option<Word> = None;
    let mut quote = None;
    let mut escaped = false;
    for c in line.chars() {
        let w = word.get_or_insert_with(|| Word {
            raw: String::new(),
            text: String::new(),
        });
        if escaped {
            escaped = false;
            w.raw.push(c);
            w.text.push(c);
            continue;
        }
        match (quote, c) {
            (Some(q), _) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => escaped = true,
            (Some(_), _) => w.text.push(c),
            (None, '"' | '\'') => quote = Some(c),
            (None, c) if c.is_whitespace() || ";&|()`".contains(c) => {
                if let Some(w) = word.take().filter(|w| !w.raw.is_empty()) {
                    words.push(w);
                }
                if !c.is_whitespace() && !words.is_empty() {
                    commands.push(std::mem::take(&mut words));
                }
                continue;
            }
            (None, _) => w.text.push(c),
        }
        w.raw.push(c);
    }
    if let Some(w) = word.filter(|w| !w.raw.is_empty()) {
        words.push(w);
    }
    if !words.is_empty() {
        commands.push(words);
    }
    commands
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_end_at_an_unquoted_word_start() {
        assert_eq!(strip_comment("echo a # b"), "echo a ");
        assert_eq!(strip_comment("echo 'a # b' c#d"), "echo 'a # b' c#d");
    }

    #[test]
    fn words_keep_quotes_in_raw_only() {
        let cmds = commands(r#"A=1 "B=2" && echo 'x y'; f"#);
        let raws: Vec<Vec<&str>> = cmds
            .iter()
            .map(|c| c.iter().map(|w| w.raw.as_str()).collect())
            .collect();
        assert_eq!(
            raws,
            [vec!["A=1", "\"B=2\""], vec!["echo", "'x y'"], vec!["f"]]
        );
        assert_eq!(cmds[1][1].text, "x y");
        assert_eq!(assigned_name("\"B=2\""), None);
    }
}
