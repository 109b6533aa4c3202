//! Status codes and the error type.
//!
//! libkvc stores a failing call's message for the *calling OS thread* (`kvc_last_error`). Every
//! wrapper in this crate passes the status of its C call straight to [`check`], which reads that
//! message before the wrapper returns. That is correct in Rust because a Rust thread is an OS
//! thread and a synchronous function never migrates between threads: no other kvc_* call can run
//! on this thread between the failing call and the read (unlike Go goroutines, which the Go
//! binding must pin). Other threads failing at the same time have their own message.
use std::ffi::CStr;
use std::fmt;

use kvc_sys as sys;

/// A libkvc status code.
///
/// A newtype over the C value rather than a Rust enum: a newer libkvc may return a status this
/// crate does not know, and that value must stay representable (for an `enum` it would be
/// undefined behaviour). Compare against the associated constants.
#[derive(Copy, Clone, PartialEq, Eq, Hash)]
pub struct Status(pub u32);

macro_rules! statuses {
    ($($name:ident = $c:ident, $is:ident;)*) => {
        impl Status {
            /// `KVC_OK`
            pub const OK: Status = Status(sys::KVC_OK);
            $(
                #[doc = concat!("`", stringify!($c), "`")]
                pub const $name: Status = Status(sys::$c);
            )*

            /// The name without prefix ("OUT_OF_BLOCKS"), as used by the conformance scenario;
            /// "UNKNOWN" for a value this crate does not know.
            pub fn name(self) -> &'static str {
                match self {
                    Status::OK => "OK",
                    $(Status::$name => stringify!($name),)*
                    _ => "UNKNOWN",
                }
            }

            /// The status with that name (see [`Status::name`]).
            pub fn from_name(name: &str) -> Option<Status> {
                match name {
                    "OK" => Some(Status::OK),
                    $(stringify!($name) => Some(Status::$name),)*
                    _ => None,
                }
            }
        }

        impl Error {
            $(
                #[doc = concat!("True when the status is `", stringify!($c), "`.")]
                pub fn $is(&self) -> bool {
                    self.status == Status::$name
                }
            )*
        }
    };
}

statuses! {
    NULL_ARG = KVC_ERR_NULL_ARG, is_null_arg;
    INVALID_ARG = KVC_ERR_INVALID_ARG, is_invalid_arg;
    OVERFLOW = KVC_ERR_OVERFLOW, is_overflow;
    NO_MEMORY = KVC_ERR_NO_MEMORY, is_no_memory;
    OUT_OF_BLOCKS = KVC_ERR_OUT_OF_BLOCKS, is_out_of_blocks;
    UNKNOWN_SEQ = KVC_ERR_UNKNOWN_SEQ, is_unknown_seq;
    SEQ_EXISTS = KVC_ERR_SEQ_EXISTS, is_seq_exists;
    BUFFER_TOO_SMALL = KVC_ERR_BUFFER_TOO_SMALL, is_buffer_too_small;
    MAX_LEN = KVC_ERR_MAX_LEN, is_max_len;
    BUSY = KVC_ERR_BUSY, is_busy;
    UNSUPPORTED = KVC_ERR_UNSUPPORTED, is_unsupported;
    DEVICE = KVC_ERR_DEVICE, is_device;
    IO = KVC_ERR_IO, is_io;
    VERSION = KVC_ERR_VERSION, is_version;
    STATE = KVC_ERR_STATE, is_state;
    INTERNAL = KVC_ERR_INTERNAL, is_internal;
}

impl Status {
    /// The library's description of this status (`kvc_status_str`), e.g.
    /// "KVC_ERR_OUT_OF_BLOCKS: ...". Unknown values give a generic text.
    pub fn description(self) -> &'static str {
        crate::version::status_str(self.0 as i32)
    }
}

impl fmt::Debug for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            "UNKNOWN" => write!(f, "Status({})", self.0),
            name => f.write_str(name),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// A failed libkvc call: its status and the library's message for it.
#[derive(Clone, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

/// The result of every fallible call in this crate.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An error detected by this crate before calling C (for example a slice of the wrong length
    /// for the pool's shape), with the status libkvc itself uses for that kind of problem.
    pub(crate) fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    /// The error of a C call that just returned `status` on this thread.
    fn from_last_call(status: Status) -> Error {
        // SAFETY: kvc_last_error never returns NULL and the string stays valid until this
        // thread's next failing kvc_* call; it is copied before any other call is made.
        let message = unsafe { CStr::from_ptr(sys::kvc_last_error()) }.to_string_lossy().into_owned();
        Error { status, message }
    }

    /// The status code.
    pub fn status(&self) -> Status {
        self.status
    }

    /// The message libkvc gave for this failure (names the function and the bad value).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kvc::Error({:?}: {})", self.status, self.message)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status, self.message)
    }
}

impl std::error::Error for Error {}

/// Turns the status of a kvc_* call into a `Result`. Must be applied directly to the call's
/// return value (`check(unsafe { sys::kvc_x(..) })`) so the message read is that call's.
pub(crate) fn check(status: sys::kvc_status) -> Result<()> {
    if status == sys::KVC_OK {
        Ok(())
    } else {
        Err(Error::from_last_call(Status(status)))
    }
}

/// Converts a length reported by C into a buffer size.
pub(crate) fn to_len(n: i64, what: &str) -> Result<usize> {
    usize::try_from(n)
        .map_err(|_| Error::new(Status::INTERNAL, format!("libkvc reported a negative {}: {}", what, n)))
}
