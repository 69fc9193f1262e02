//! The error type of every server function: what went wrong, in words a person can act
//! on, and the HTTP status it maps to.

use leptos::server_fn::codec::JsonEncoding;
use leptos::server_fn::error::{FromServerFnError, ServerFnErrorErr};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum AppError {
    /// 401: nobody is signed in.
    #[error("you are not signed in; sign in and try again")]
    Unauthorized,
    /// 401: the username or password was wrong (deliberately not saying which).
    #[error("wrong username or password")]
    BadCredentials,
    /// 403: the password was right but the account is disabled.
    #[error("this account is disabled; ask an administrator to enable it")]
    AccountDisabled,
    /// 403: signed in, but without the role this needs.
    #[error("this needs the {0} role, which your account does not have; ask an administrator")]
    Forbidden(String),
    /// 400: the input was wrong; the message says how.
    #[error("{0}")]
    Invalid(String),
    /// 404: the thing asked for does not exist.
    #[error("{0} not found")]
    NotFound(String),
    /// 409: the action conflicts with the current state.
    #[error("{0}")]
    Conflict(String),
    /// 429: too many attempts; the message says how long to wait.
    #[error("{0}")]
    TooManyAttempts(String),
    /// 500: something failed on the server; details are in the server log, never here.
    #[error("something went wrong on the server; the details are in the server log")]
    Internal,
    /// Transport and encoding failures raised by the server-function machinery.
    #[error("{0}")]
    ServerFn(ServerFnErrorErr),
}

impl AppError {
    pub fn status(&self) -> u16 {
        match self {
            AppError::Unauthorized | AppError::BadCredentials => 401,
            AppError::Forbidden(_) | AppError::AccountDisabled => 403,
            AppError::Invalid(_) => 400,
            AppError::NotFound(_) => 404,
            AppError::Conflict(_) => 409,
            AppError::TooManyAttempts(_) => 429,
            AppError::Internal => 500,
            // The request was wrong, not the server: arguments that do not decode, a
            // function that does not exist, a method it does not take.
            AppError::ServerFn(
                ServerFnErrorErr::Args(_) | ServerFnErrorErr::MissingArg(_) | ServerFnErrorErr::Deserialization(_),
            ) => 400,
            AppError::ServerFn(ServerFnErrorErr::Registration(_)) => 404,
            AppError::ServerFn(ServerFnErrorErr::UnsupportedRequestMethod(_)) => 405,
            AppError::ServerFn(_) => 500,
        }
    }
}

impl FromServerFnError for AppError {
    type Encoder = JsonEncoding;

    fn from_server_fn_error(value: ServerFnErrorErr) -> Self {
        AppError::ServerFn(value)
    }
}

#[cfg(feature = "ssr")]
impl From<sqlx::Error> for AppError {
    fn from(err: sqlx::Error) -> Self {
        // Database errors are logged here, once, and never shown to the client.
        tracing::error!(error = %err, "database error");
        AppError::Internal
    }
}

#[cfg(feature = "ssr")]
impl From<store::StoreError> for AppError {
    fn from(err: store::StoreError) -> Self {
        match err {
            store::StoreError::Invalid(m) => AppError::Invalid(m),
            store::StoreError::Conflict(m) => AppError::Conflict(m),
            store::StoreError::NotFound(m) => AppError::NotFound(m),
            store::StoreError::Database(e) => e.into(),
        }
    }
}
