//! The one backoff every retry loop in labpool uses, from the `backon` crate: waits that double
//! from a first delay up to a cap, without jitter, so that what a loop does is the same run
//! after run. Callers say what to retry (`when`), what to tell (`notify`) and for how long.

use backon::ExponentialBuilder;
use std::time::Duration;

/// Waits of `first`, then twice as long each time up to `max`, for as long as it takes.
pub fn backoff(first: Duration, max: Duration) -> ExponentialBuilder {
    ExponentialBuilder::new()
        .with_min_delay(first)
        .with_max_delay(max)
        .with_factor(2.0)
        .without_max_times()
}

/// Like [`backoff`], giving up once the waits would pass `total`.
pub fn backoff_within(first: Duration, max: Duration, total: Duration) -> ExponentialBuilder {
    backoff(first, max).with_total_delay(Some(total))
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::{BackoffBuilder, BlockingRetryable};

    #[test]
    fn waits_double_up_to_the_cap_and_stop_at_the_total() {
        let ms = |b: ExponentialBuilder, n: usize| -> Vec<u128> {
            b.build().take(n).map(|d| d.as_millis()).collect()
        };
        let forever = backoff(Duration::from_millis(100), Duration::from_secs(2));
        assert_eq!(ms(forever, 8), [100, 200, 400, 800, 1600, 2000, 2000, 2000]);
        let bounded = backoff_within(
            Duration::from_millis(50),
            Duration::from_millis(50),
            Duration::from_millis(200),
        );
        assert_eq!(ms(bounded, 10), [50, 50, 50, 50]);
    }

    #[test]
    fn a_blocking_retry_stops_at_the_first_error_it_should_not_retry() {
        let mut calls = 0;
        let result: Result<(), &str> = (|| {
            calls += 1;
            Err(if calls < 3 { "busy" } else { "broken" })
        })
        .retry(backoff(Duration::from_millis(1), Duration::from_millis(1)))
        .when(|e| *e == "busy")
        .call();
        assert_eq!((result, calls), (Err("broken"), 3));
    }
}
