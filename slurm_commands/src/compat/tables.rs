//! Slurm 22.05's options that each command's own parser does not read (see `CMD --help` of
//! Slurm 22.05 and its man pages), with what labpool does with each.

use super::{Extra, How, Takes};

const fn x(long: &'static str, short: Option<char>, takes: Takes, how: How) -> Extra {
    Extra {
        long,
        short,
        takes,
        how,
    }
}

use How::{Refused, Same, Warned};
use Takes::{Nothing, Optional, Value};

const ONE_CLUSTER: How = Same("one pool is one cluster, with no federation");
const NO_HIDDEN: How = Same("no partition is hidden here");
const VERBOSE: How = Same("labpool's commands print what they print; there is no debug output");
const NO_CONVERT: How = Same("sizes are printed as Slurm prints them unconverted");
const STRUCTURED: How = Refused(
    "Slurm's data_parser output is not produced; `labpool queue --json`, `labpool nodes --json` and `labpool history --json` give JSON",
);
const ITERATE: How = Warned("printed once; run it under `watch -n SECONDS` to repeat");
const SORT: How = Warned("printed in labpool's order (by job id, or by partition and node)");
const LONG_FORMAT: How = Warned("printed with the -o/--format columns given, or the default ones");

/// `squeue`'s.
pub const SQUEUE: &[Extra] = &[
    x("all", Some('a'), Nothing, NO_HIDDEN),
    x("hide", None, Nothing, NO_HIDDEN),
    x(
        "array",
        Some('r'),
        Nothing,
        Same("each array task is listed on its own line already"),
    ),
    x(
        "array-unique",
        None,
        Nothing,
        Warned("each array task is listed on its own line"),
    ),
    x("federation", None, Nothing, ONE_CLUSTER),
    x("local", None, Nothing, ONE_CLUSTER),
    x("sibling", None, Nothing, ONE_CLUSTER),
    x("clusters", Some('M'), Value, ONE_CLUSTER),
    x("iterate", Some('i'), Value, ITERATE),
    x("json", None, Optional, STRUCTURED),
    x("yaml", None, Optional, STRUCTURED),
    x(
        "licenses",
        Some('L'),
        Value,
        Refused("labpool counts no licenses, so no job would be listed as holding one"),
    ),
    x("noconvert", None, Nothing, NO_CONVERT),
    x(
        "Format",
        Some('O'),
        Value,
        Refused("write the columns with -o/--format (%i %j %T …)"),
    ),
    x(
        "qos",
        Some('q'),
        Value,
        Refused("labpool has no QOS; filter by partition (-p) or account (-A)"),
    ),
    x(
        "reservation",
        Some('R'),
        Value,
        Refused("list a reservation's jobs with `labpool reservation list`"),
    ),
    x(
        "step",
        Some('s'),
        Optional,
        Refused("steps are listed by `sacct -j ID` and `labpool show ID`"),
    ),
    x("sort", Some('S'), Value, SORT),
    x("verbose", Some('v'), Nothing, VERBOSE),
];

/// `sinfo`'s.
pub const SINFO: &[Extra] = &[
    x("all", Some('a'), Nothing, NO_HIDDEN),
    x("hide", None, Nothing, NO_HIDDEN),
    x(
        "exact",
        Some('e'),
        Nothing,
        Same("nodes are grouped by partition and state"),
    ),
    x("federation", None, Nothing, ONE_CLUSTER),
    x("local", None, Nothing, ONE_CLUSTER),
    x("clusters", Some('M'), Value, ONE_CLUSTER),
    x("iterate", Some('i'), Value, ITERATE),
    x("json", None, Optional, STRUCTURED),
    x("yaml", None, Optional, STRUCTURED),
    x("long", Some('l'), Nothing, LONG_FORMAT),
    x("noconvert", None, Nothing, NO_CONVERT),
    x(
        "Format",
        Some('O'),
        Value,
        Refused("write the columns with -o/--format (%P %a %l %D %t %N …)"),
    ),
    x(
        "list-reasons",
        Some('R'),
        Nothing,
        Refused("`labpool nodes` gives each node's state and why it is down or drained"),
    ),
    x(
        "reservation",
        Some('T'),
        Nothing,
        Refused("`labpool reservation list` lists the reservations"),
    ),
    x(
        "summarize",
        Some('s'),
        Nothing,
        Warned("printed by state, as without -s"),
    ),
    x("sort", Some('S'), Value, SORT),
    x("verbose", Some('v'), Nothing, VERBOSE),
];

/// `sacct`'s.
pub const SACCT: &[Extra] = &[
    x("allclusters", Some('L'), Nothing, ONE_CLUSTER),
    x("federation", None, Nothing, ONE_CLUSTER),
    x("local", None, Nothing, ONE_CLUSTER),
    x(
        "completion",
        Some('c'),
        Nothing,
        Same("labpool keeps one record of each job; it is read either way"),
    ),
    x(
        "duplicates",
        Some('D'),
        Nothing,
        Same("a requeued job is one record here, its last run"),
    ),
    x(
        "whole-hetjob",
        None,
        Optional,
        Same("there are no heterogeneous jobs here"),
    ),
    x("noconvert", None, Nothing, NO_CONVERT),
    x(
        "truncate",
        Some('T'),
        Nothing,
        Same("times are the jobs' own; a job is listed whole"),
    ),
    x("json", None, Optional, STRUCTURED),
    x("yaml", None, Optional, STRUCTURED),
    x("long", Some('l'), Nothing, LONG_FORMAT),
    x(
        "units",
        None,
        Value,
        Warned("sizes are printed as Slurm prints them unconverted"),
    ),
    x("verbose", Some('v'), Nothing, VERBOSE),
    x(
        "associations",
        Some('x'),
        Value,
        Refused("labpool has no associations; filter by account (-A) or user (-u)"),
    ),
    x(
        "batch-script",
        Some('B'),
        Nothing,
        Refused("`labpool show ID` shows the job's script"),
    ),
    x(
        "env-vars",
        None,
        Nothing,
        Refused("labpool does not keep a job's environment for others to read"),
    ),
    x(
        "file",
        Some('f'),
        Value,
        Refused("labpool's history is in its database; there is no job completion file"),
    ),
    x(
        "gid",
        Some('g'),
        Value,
        Refused("filter by user (-u) or account (-A)"),
    ),
    x(
        "group",
        None,
        Value,
        Refused("filter by user (-u) or account (-A)"),
    ),
    x(
        "nnodes",
        Some('i'),
        Value,
        Refused("filter the output (NNodes) instead"),
    ),
    x(
        "ncpus",
        Some('I'),
        Value,
        Refused("filter the output (AllocCPUS) instead"),
    ),
    x(
        "timelimit-min",
        Some('k'),
        Value,
        Refused("filter the output (Timelimit) instead"),
    ),
    x(
        "timelimit-max",
        Some('K'),
        Value,
        Refused("filter the output (Timelimit) instead"),
    ),
    x(
        "nodelist",
        Some('N'),
        Value,
        Refused("filter the output (NodeList) instead"),
    ),
    x(
        "qos",
        Some('q'),
        Value,
        Refused("labpool has no QOS; filter by partition (-r) or account (-A)"),
    ),
    x(
        "wckeys",
        Some('W'),
        Value,
        Refused("labpool accounts by account (-A), not by workload key"),
    ),
];

/// `scancel`'s: a filter it cannot apply is refused, since cancelling without it would cancel
/// more than asked.
pub const SCANCEL: &[Extra] = &[
    x("clusters", Some('M'), Value, ONE_CLUSTER),
    x(
        "hurry",
        Some('H'),
        Nothing,
        Same("no job has a stage-out to skip"),
    ),
    x(
        "interactive",
        Some('i'),
        Nothing,
        Refused("scancel asks no questions here; name the jobs to cancel"),
    ),
    x(
        "quiet",
        Some('Q'),
        Nothing,
        Same("scancel prints only errors"),
    ),
    x("verbose", Some('v'), Nothing, VERBOSE),
    x(
        "qos",
        Some('q'),
        Value,
        Refused("labpool has no QOS; cancelling without the filter would cancel more"),
    ),
    x(
        "reservation",
        Some('R'),
        Value,
        Refused("name the jobs; cancelling without the filter would cancel more"),
    ),
    x(
        "nodelist",
        Some('w'),
        Value,
        Refused("name the jobs; cancelling without the filter would cancel more"),
    ),
    x(
        "wckey",
        None,
        Value,
        Refused("labpool has no workload keys; cancelling without the filter would cancel more"),
    ),
    x(
        "sibling",
        None,
        Value,
        Refused("one pool is one cluster, with no federated jobs"),
    ),
];

/// `scontrol`'s options (its commands are its own words).
pub const SCONTROL: &[Extra] = &[
    x("all", Some('a'), Nothing, NO_HIDDEN),
    x("hide", None, Nothing, NO_HIDDEN),
    x(
        "details",
        Some('d'),
        Nothing,
        Same("jobs and nodes are shown with what labpool has"),
    ),
    x("federation", None, Nothing, ONE_CLUSTER),
    x("local", None, Nothing, ONE_CLUSTER),
    x("sibling", None, Nothing, ONE_CLUSTER),
    x("cluster", Some('M'), Value, ONE_CLUSTER),
    x(
        "future",
        Some('F'),
        Nothing,
        Same("there are no nodes in the FUTURE state here"),
    ),
    x(
        "quiet",
        Some('Q'),
        Nothing,
        Same("scontrol prints only errors"),
    ),
    x("verbose", Some('v'), Nothing, VERBOSE),
    x(
        "uid",
        Some('u'),
        Value,
        Refused("a job is updated by its owner or an admin, as themselves"),
    ),
];

/// `salloc`'s own, beyond `labpool alloc`'s.
pub const SALLOC: &[Extra] = &[
    x(
        "bell",
        None,
        Nothing,
        Same("the session says when its allocation is granted"),
    ),
    x(
        "no-bell",
        None,
        Nothing,
        Same("the terminal bell is not rung"),
    ),
    x(
        "immediate",
        Some('I'),
        Optional,
        Warned("the session waits for its allocation; interrupt it to give up"),
    ),
    x(
        "kill-command",
        Some('K'),
        Optional,
        Same("the allocation ends with its shell"),
    ),
];
