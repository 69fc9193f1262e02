//! Server-side authentication: password hashing, API token secrets, sessions, and the
//! sign-in rate limit, and the client's address behind trusted proxies. Nothing here is compiled into the browser bundle.

pub mod client_address;
pub mod login_limit;
pub mod password;
pub mod secrets;
pub mod session;
