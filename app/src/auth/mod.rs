//! Server-side authentication: password hashing, API token secrets, sessions, and the
//! sign-in rate limit. Nothing here is compiled into the browser bundle.

pub mod login_limit;
pub mod password;
pub mod secrets;
pub mod session;
