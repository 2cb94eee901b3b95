//! The library's one error type.

use cudarc::driver::DriverError;

/// Everything that can go wrong in Streamline's library. Variants that wrap a lower-level error
/// expose it as their `source()` (printed after the message by `{:#}` in `anyhow`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The CUDA driver library could not be loaded.
    #[error("no CUDA driver found (libcuda.so.1): {0}")]
    NoDriver(String),
    /// The driver loaded but has no usable device with that ordinal.
    #[error("no CUDA device {ordinal}: {reason}")]
    NoDevice { ordinal: usize, reason: String },
    /// A driver call failed.
    #[error("CUDA error in {op}")]
    Driver {
        op: &'static str,
        #[source]
        source: DriverError,
    },
    /// A kernel launch failed; names the kernel and its launch configuration.
    #[error("launch of kernel `{kernel}` failed (grid {grid:?}, block {block:?})")]
    Launch {
        kernel: String,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        #[source]
        source: DriverError,
    },
    /// A launch configuration the kernel's declaration or the device does not allow.
    #[error("cannot launch kernel `{kernel}`: {reason}")]
    LaunchConfig { kernel: String, reason: String },
    /// An argument is out of its allowed range; names the argument.
    #[error("invalid argument `{arg}`: {reason}")]
    InvalidArgument { arg: &'static str, reason: String },
    /// The PTX image is unusable: stale, built from other sources, missing a kernel, or its
    /// parameter layout differs from what this binary was compiled against.
    #[error("kernel image {origin}: {reason}")]
    KernelImage { origin: String, reason: String },
    /// A pipeline description is inconsistent (unknown names, two writers, a cycle, ...):
    /// `part` names what is wrong (`depth`, `lanes`, `stages`, `stage x`, `resource y`).
    #[error("invalid pipeline: {part}: {reason}")]
    InvalidPipeline { part: String, reason: String },
    /// A CUDA graph capture was misused (nested, launched while capturing, empty, ...):
    /// `during` says what was attempted.
    #[error("graph capture: cannot {during}: {reason}")]
    Capture {
        during: &'static str,
        reason: &'static str,
    },
    /// An optional CUDA library (cuBLAS) could not be loaded.
    #[error("{library} is not available: {reason}")]
    MissingLibrary {
        library: &'static str,
        reason: String,
    },
    /// A cuBLAS call failed.
    #[error("cuBLAS error in {op}")]
    Cublas {
        op: &'static str,
        #[source]
        source: cudarc::cublas::result::CublasError,
    },
    /// A stop was requested (Ctrl-C) and the run stopped early; says how far it got.
    #[error("interrupted: {0}")]
    Interrupted(String),
    /// An NCCL call failed (`code` is its `ncclResult_t`; -1 for a communicator already
    /// aborted).
    #[error("NCCL error in {op} (code {code}): {reason}")]
    Nccl {
        op: &'static str,
        code: i32,
        reason: String,
    },
    /// A wait had a deadline and it passed (a peer that never joined, died or stalled); what
    /// was waited on was aborted.
    #[error("timed out after {seconds:.0} s: {during}")]
    Timeout { during: String, seconds: f64 },
    /// An nvJPEG call failed (`code` is its `nvjpegStatus_t`).
    #[error("nvJPEG error in {op} (code {code}): {reason}")]
    Jpeg {
        op: &'static str,
        code: i32,
        reason: String,
    },
    /// The processes of a multi-process run could not meet.
    #[error("rendezvous at {address}: {reason}")]
    Rendezvous { address: String, reason: String },
    /// A file could not be read or written.
    #[error("cannot access {path}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// Result with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An [`Error::InvalidArgument`].
    pub fn arg(arg: &'static str, reason: impl Into<String>) -> Self {
        Error::InvalidArgument {
            arg,
            reason: reason.into(),
        }
    }
}

/// Attaches the name of the driver operation to a [`DriverError`].
pub trait DriverContext<T> {
    /// Converts into [`Error::Driver`] naming `op`.
    fn op(self, op: &'static str) -> Result<T>;
}

impl<T> DriverContext<T> for std::result::Result<T, DriverError> {
    fn op(self, op: &'static str) -> Result<T> {
        self.map_err(|source| Error::Driver { op, source })
    }
}
