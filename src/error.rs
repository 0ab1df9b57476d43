//! Errors that carry their exit code.
//!
//! Scripts and orchestrators branch on the exit code: 2 means the input or
//! the invocation is wrong and retrying will not help; 1 means the run failed
//! for another reason (I/O, resources) and may succeed when retried.
//!
//! An error's [`Kind`] is decided where it arises, from the type of what
//! failed (an engine error's variant, an I/O error's kind, an object
//! store's error variant), never from its text. The error it comes from is
//! kept as its [`std::error::Error::source`].

use std::fmt;

use datafusion::error::DataFusionError;

/// What kind of failure an [`Error`] is: it decides the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Bad input, usage or configuration: exit code 2.
    Input,
    /// Anything else that stopped the run: exit code 1.
    Runtime,
    /// The engine could not decode data it read (a damaged page, text that
    /// is not UTF-8): exit code 1, and the runner looks for the file to name.
    Unreadable,
}

#[derive(Debug)]
pub struct Error {
    kind: Kind,
    /// What went wrong, in the user's terms, with what was being done.
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub fn new(kind: Kind, message: impl Into<String>) -> Error {
        Error { kind, message: message.into(), source: None }
    }
    pub fn input(message: impl Into<String>) -> Error {
        Error::new(Kind::Input, message)
    }
    pub fn runtime(message: impl Into<String>) -> Error {
        Error::new(Kind::Runtime, message)
    }

    /// The same error, coming from `source`.
    pub fn from_source(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Error {
        self.source = Some(Box::new(source));
        self
    }

    /// Whether an error of type `T` is in this error's chain: a caller that
    /// has another way (the SimHash join when the sort's pairs do not fit)
    /// asks by type, not by text.
    pub fn caused_by<T: std::error::Error + 'static>(&self) -> bool {
        chain(self).any(|e| e.is::<T>())
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn exit_code(&self) -> i32 {
        match self.kind {
            Kind::Input => 2,
            Kind::Runtime | Kind::Unreadable => 1,
        }
    }

    /// The message and, below it, each error of its chain whose text the
    /// lines above do not already hold: what the user reads.
    pub fn report(&self) -> String {
        let mut report = self.message.clone();
        for cause in chain(self).skip(1) {
            let text = cause.to_string();
            if !report.contains(&text) {
                report += &format!("\n  caused by: {text}");
            }
        }
        report
    }

    /// Prefix the message with what was being done.
    pub fn context(mut self, what: impl fmt::Display) -> Error {
        self.message = format!("{what}: {}", self.message);
        self
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_deref().map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<DataFusionError> for Error {
    fn from(e: DataFusionError) -> Error {
        let message = e.to_string();
        let error = match e.find_root() {
            DataFusionError::SQL(..)
            | DataFusionError::Plan(_)
            | DataFusionError::SchemaError(..)
            | DataFusionError::Configuration(_)
            | DataFusionError::NotImplemented(_) => Error::input(message),
            DataFusionError::ResourcesExhausted(_) => Error::runtime(format!(
                "the engine ran out of memory under --memory-limit: raise the limit (or run without one); \
                 the operators that held it: {message}"
            )),
            _ => from_chain(&e, message),
        };
        error.from_source(e)
    }
}

/// The errors `e` comes from, itself first.
pub fn chain<'a>(e: &'a (dyn std::error::Error + 'static)) -> impl Iterator<Item = &'a (dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e), |e| e.source())
}

/// An engine, Arrow or Parquet error, classified by the errors it comes
/// from: a full disk, a decoding failure, or another runtime failure.
fn from_chain(e: &(dyn std::error::Error + 'static), message: String) -> Error {
    let storage_full = |c: &(dyn std::error::Error + 'static)| {
        c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::StorageFull)
    };
    let decoding = |c: &(dyn std::error::Error + 'static)| {
        c.is::<datafusion::arrow::error::ArrowError>() || c.is::<datafusion::parquet::errors::ParquetError>()
    };
    if chain(e).any(storage_full) {
        Error::runtime(disk_full(&message))
    } else if chain(e).any(decoding) {
        Error::new(Kind::Unreadable, message)
    } else {
        Error::runtime(message)
    }
}

/// The message for a full disk: where the run writes besides its output.
pub fn disk_full(message: &str) -> String {
    format!(
        "a disk is full ({message}). Spill files go to {} (set TMPDIR to a folder on a larger disk), work \
         files to the output's folder: free space there, or raise --memory-limit so less is spilled, and run again",
        std::env::temp_dir().display()
    )
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Error {
        let error = match e.kind() {
            std::io::ErrorKind::StorageFull => Error::runtime(disk_full(&e.to_string())),
            _ => Error::runtime(e.to_string()),
        };
        error.from_source(e)
    }
}

impl From<datafusion::arrow::error::ArrowError> for Error {
    fn from(e: datafusion::arrow::error::ArrowError) -> Error {
        let message = e.to_string();
        from_chain(&e, message).from_source(e)
    }
}

impl From<datafusion::parquet::errors::ParquetError> for Error {
    fn from(e: datafusion::parquet::errors::ParquetError) -> Error {
        let message = e.to_string();
        from_chain(&e, message).from_source(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::error::ArrowError;

    #[test]
    fn kinds_come_from_the_types_of_what_failed() {
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        let spill = DataFusionError::ArrowError(Box::new(ArrowError::IoError("spill".into(), full)), None);
        let e = Error::from(spill);
        assert_eq!((e.kind(), e.exit_code()), (Kind::Runtime, 1));
        assert!(e.to_string().starts_with("a disk is full") && e.to_string().contains("TMPDIR"), "{e}");
        let utf8 = DataFusionError::ArrowError(Box::new(ArrowError::InvalidArgumentError("invalid utf-8".into())), None);
        assert_eq!(Error::from(DataFusionError::Context("reading".into(), Box::new(utf8))).kind(), Kind::Unreadable);
        assert_eq!(Error::from(DataFusionError::Plan("no column x".into())).exit_code(), 2);
        // A message that only mentions a full disk is not one.
        assert_eq!(Error::from(DataFusionError::Execution("No space left on device".into())).to_string(), "Execution error: No space left on device");
    }

    #[test]
    fn the_report_adds_only_causes_not_yet_told() {
        let e = Error::from(DataFusionError::Execution("boom".into())).context("stage");
        assert_eq!(e.report(), "stage: Execution error: boom");
        let io = std::io::Error::other("the disk went away");
        let e = Error::runtime("cannot write 'x'").from_source(io);
        assert_eq!(e.report(), "cannot write 'x'\n  caused by: the disk went away");
    }

    #[test]
    fn an_error_keeps_its_source() {
        let e = Error::from(DataFusionError::Execution("boom".into())).context("stage");
        assert_eq!(e.to_string(), "stage: Execution error: boom");
        let source = std::error::Error::source(&e).expect("a source");
        assert!(source.downcast_ref::<DataFusionError>().is_some());
    }
}
