//! Reusable pieces of the UI.

pub mod badges;
pub mod chart;
pub mod empty_state;
pub mod layout;
pub mod numbers;
pub mod payload;
pub mod status;
pub mod time;
