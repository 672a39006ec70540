//! The forecast backtested on the shipped trace (bench/traces/philly-gavel-a.csv: 1,181 jobs over
//! 12 weeks): for every week after the first four, the model's forecast of each hour's demand
//! against the naive seasonal one (last week again). Prints both errors; the model must be
//! nearer. `cargo test -p labpool-reports --test backtest -- --nocapture` shows the figures.
//! The model's knobs (3 weeks, smoothing, trend) were chosen on this same trace, so the margin
//! is in-sample; docs/benchmarks.md has the grid they were chosen from.

use labpool_reports::forecast::{Demand, backtest};

#[test]
fn the_forecast_beats_last_week_again_on_the_shipped_trace() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../bench/traces/philly-gavel-a.csv"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (submit, gpus, dur) = (col("submit_s"), col("gpus"), col("dur_v100_s"));
    let demand: Vec<Demand> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let num = |i: usize| f[i].parse::<f64>().unwrap();
            Demand {
                at_ms: (num(submit) * 1000.0) as i64,
                for_ms: (num(dur) * 1000.0) as i64,
                gpus: num(gpus),
            }
        })
        .collect();
    assert_eq!(demand.len(), 1181);
    let (model, naive, weeks) = backtest(&demand, 4);
    println!(
        "backtest over {weeks} weeks: model MAE {model:.3} GPUs per hour, naive seasonal {naive:.3} ({:.2}x)",
        naive / model
    );
    assert!(weeks >= 6, "{weeks}");
    assert!(model < naive, "model {model} against naive {naive}");
}
