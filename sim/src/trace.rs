//! The simulator's inputs: a job trace and dataset sizes, parsed from CSV text (opening files
//! is the caller's job).

use serde::Deserialize;
use std::collections::BTreeMap;
use std::io::Read;

/// One job of a trace.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct TraceJob {
    /// Its id in the trace.
    pub job_id: u64,
    /// Arrival, seconds from the start of the trace.
    pub submit_s: f64,
    /// Who submitted it.
    pub user: String,
    /// GPUs it asks for.
    pub gpus: u32,
    /// The dataset it reads (`none` for none).
    pub dataset: String,
    /// What it is, for people.
    pub job_type: String,
    /// Run time on V100s, seconds; empty when it cannot run there.
    pub dur_v100_s: Option<f64>,
    /// Run time on P100s, seconds; empty when it cannot run there.
    pub dur_p100_s: Option<f64>,
    /// Run time on K80s, seconds; empty when it cannot run there (too little memory).
    pub dur_k80_s: Option<f64>,
    /// A one-GPU job that fits `1/slice` of a card (an optional column): it holds such a slice
    /// where the cluster cuts cards so, and a whole GPU elsewhere.
    #[serde(default)]
    pub slice: Option<u32>,
}

impl TraceJob {
    /// Run time on GPUs of `gpu_type`, or `None` for a type the trace has no times for.
    pub fn duration_on(&self, gpu_type: &str) -> Option<f64> {
        match gpu_type {
            "v100" => self.dur_v100_s,
            "p100" => self.dur_p100_s,
            "k80" => self.dur_k80_s,
            _ => None,
        }
    }
}

/// The GPU types a trace has run times for.
pub const TRACE_GPU_TYPES: [&str; 3] = ["v100", "p100", "k80"];

/// Why an input file was refused.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// A row did not parse.
    #[error("{what}, line {line}: {message}")]
    Row {
        /// Which input.
        what: &'static str,
        /// 1-based line (the header is line 1).
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// A value is out of range.
    #[error("{what}, line {line}: {message}")]
    Value {
        /// Which input.
        what: &'static str,
        /// 1-based line.
        line: u64,
        /// What was wrong.
        message: String,
    },
    /// The trace has no jobs.
    #[error("the trace has no jobs")]
    Empty,
}

fn row_error(what: &'static str, e: csv::Error) -> TraceError {
    let line = e.position().map_or(0, |p| p.line());
    TraceError::Row {
        what,
        line,
        message: e.to_string(),
    }
}

/// Parses a trace in the columns of `philly-gavel-a.csv`.
pub fn parse_trace(reader: impl Read) -> Result<Vec<TraceJob>, TraceError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(reader);
    let mut jobs: Vec<TraceJob> = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for row in rdr.deserialize::<TraceJob>() {
        let job = row.map_err(|e| row_error("trace", e))?;
        let line = jobs.len() as u64 + 2;
        let bad = |message: String| TraceError::Value {
            what: "trace",
            line,
            message,
        };
        if !seen.insert(job.job_id) {
            return Err(bad(format!("job id {} appears twice", job.job_id)));
        }
        if job.gpus == 0 {
            return Err(bad(format!("job {} asks for 0 GPUs", job.job_id)));
        }
        if !(job.submit_s >= 0.0 && job.submit_s.is_finite()) {
            return Err(bad(format!(
                "job {} has submit time {}",
                job.job_id, job.submit_s
            )));
        }
        let durations = [job.dur_v100_s, job.dur_p100_s, job.dur_k80_s];
        if durations.iter().all(Option::is_none) {
            return Err(bad(format!(
                "job {} has no run time on any GPU type",
                job.job_id
            )));
        }
        for d in durations.into_iter().flatten() {
            if !(d > 0.0 && d.is_finite()) {
                return Err(bad(format!("job {} has a run time of {d} s", job.job_id)));
            }
        }
        jobs.push(job);
    }
    if jobs.is_empty() {
        return Err(TraceError::Empty);
    }
    Ok(jobs)
}

#[derive(Deserialize)]
struct DatasetRow {
    dataset: String,
    bytes: u64,
}

/// Parses dataset sizes (`dataset,bytes,...`): name → bytes.
pub fn parse_datasets(reader: impl Read) -> Result<BTreeMap<String, u64>, TraceError> {
    let mut rdr = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .flexible(true)
        .from_reader(reader);
    let mut out = BTreeMap::new();
    for row in rdr.deserialize::<DatasetRow>() {
        let row = row.map_err(|e| row_error("datasets", e))?;
        out.insert(row.dataset, row.bytes);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "job_id,submit_s,user,gpus,dataset,job_type,dur_v100_s,dur_p100_s,dur_k80_s\n\
        1,0.0,u09,1,translation,Transformer (batch size 128),17465.9,30948.4,96905.7\n\
        2,6.0,u03,4,ml-20m,Recommendation (batch size 8192),3519.3,1802.3,3705.4\n";

    #[test]
    fn parses_the_trace_columns() {
        let jobs = parse_trace(TRACE.as_bytes()).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[1].gpus, 4);
        assert_eq!(jobs[1].duration_on("p100"), Some(1802.3));
        let no_k80 = TRACE.replace("3519.3,1802.3,3705.4", "3519.3,1802.3,");
        assert_eq!(
            parse_trace(no_k80.as_bytes()).unwrap()[1].duration_on("k80"),
            None
        );
        assert_eq!(jobs[1].duration_on("a100"), None);
    }

    #[test]
    fn bad_rows_name_their_line() {
        let bad = TRACE.replace("2,6.0,u03,4", "2,6.0,u03,four");
        let e = parse_trace(bad.as_bytes()).unwrap_err().to_string();
        assert!(e.starts_with("trace, line 3"), "{e}");
        let zero = TRACE.replace("2,6.0,u03,4", "2,6.0,u03,0");
        assert!(
            parse_trace(zero.as_bytes())
                .unwrap_err()
                .to_string()
                .contains("0 GPUs")
        );
        assert!(matches!(
            parse_trace(
                "job_id,submit_s,user,gpus,dataset,job_type,dur_v100_s,dur_p100_s,dur_k80_s\n"
                    .as_bytes()
            ),
            Err(TraceError::Empty)
        ));
    }

    #[test]
    fn dataset_sizes() {
        let d = parse_datasets(
            "dataset,bytes,files,note\nimagenet,147000000000,1331167,JPEGs\nnone,0,0,x\n"
                .as_bytes(),
        )
        .unwrap();
        assert_eq!(d["imagenet"], 147_000_000_000);
    }
}
