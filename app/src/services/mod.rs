//! Services: the long-running parts that orchestrate domain rules and storage on the
//! server, outside any request. Domain modules stay pure and storage only stores; these
//! join them (as server functions and the server crate do for requests).

pub mod alert_evaluation;
pub mod alert_test;
pub mod approval_hub;
pub mod approvals;
pub mod calls;
pub mod long_poll;
