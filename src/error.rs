//! Errors that carry their exit code.
//!
//! Scripts and orchestrators branch on the exit code: 2 means the input or
//! the invocation is wrong and retrying will not help; 1 means the run failed
//! for another reason (I/O, resources) and may succeed when retried.

use std::fmt;

use datafusion::error::DataFusionError;

#[derive(Debug)]
pub enum Error {
    /// Bad input, usage or configuration: exit code 2.
    Input(String),
    /// Anything else that stopped the run: exit code 1.
    Runtime(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn input(msg: impl Into<String>) -> Error {
        Error::Input(msg.into())
    }
    pub fn runtime(msg: impl Into<String>) -> Error {
        Error::Runtime(msg.into())
    }

    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Input(_) => 2,
            Error::Runtime(_) => 1,
        }
    }

    /// Prefix the message with what was being done.
    pub fn context(self, what: impl fmt::Display) -> Error {
        match self {
            Error::Input(m) => Error::Input(format!("{what}: {m}")),
            Error::Runtime(m) => Error::Runtime(format!("{what}: {m}")),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Input(m) | Error::Runtime(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Error {}

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Error {
        let message = e.to_string();
        match e.find_root() {
            DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::Configuration(_)
            | DataFusionError::NotImplemented(_) => Error::Input(message),
            DataFusionError::ResourcesExhausted(_) => Error::Runtime(format!(
                "the engine ran out of memory under --memory-limit: raise the limit (or run without one); \
                 the operators that held it: {message}"
            )),
            _ if message.contains("No space left on device") => Error::Runtime(disk_full(&message)),
            _ => Error::Runtime(message),
        }
    }
}

/// The message for a full disk: where the run writes besides its output.
fn disk_full(message: &str) -> String {
    format!(
        "a disk is full ({message}). Spill files go to {} (set TMPDIR to a folder on a larger disk), work \
         files to the output's folder: free space there, or raise --memory-limit so less is spilled, and run again",
        std::env::temp_dir().display()
    )
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        match e.kind() {
            std::io::ErrorKind::StorageFull => Error::Runtime(disk_full(&e.to_string())),
            _ => Error::Runtime(e.to_string()),
        }
    }
}

impl From<datafusion::arrow::error::ArrowError> for Error {
    fn from(e: datafusion::arrow::error::ArrowError) -> Error {
        let message = e.to_string();
        if message.contains("No space left on device") {
            return Error::Runtime(disk_full(&message));
        }
        Error::Runtime(message)
    }
}

impl From<datafusion::parquet::errors::ParquetError> for Error {
    fn from(e: datafusion::parquet::errors::ParquetError) -> Error {
        Error::Runtime(e.to_string())
    }
}
