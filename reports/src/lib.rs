//! Usage reports for the lab and its funding body: what the pool was used for over a range,
//! computed from its job history and credit ledger. [`compute`] gives the figures (every one
//! defined in docs/admin/reports.md); [`csv`] and [`html`] write them out.

pub mod charts;
pub mod compute;
pub mod csv;
pub mod forecast;
pub mod html;
pub mod model;

pub use compute::compute;
pub use csv::to_csv;
pub use html::to_html;
pub use model::*;
