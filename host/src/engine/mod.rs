//! Running work concurrently over CUDA streams, safely and visibly.
//!
//! - [`pool`]: a pool of streams (with priorities), events for cross-stream dependencies
//!   (`wait_stream` / `wait_event`) and timing events; CUDA graph capture of work spread over
//!   the pool.
//! - [`memory`]: device buffers and page-locked host buffers whose every access is tracked per
//!   stream, so that a write (or the free) waits on *every* stream still reading, and a read
//!   waits on the last write, without synchronizing the device. cudarc's own `CudaSlice` keeps
//!   one read event, which the last reader overwrites: with two readers on different streams a
//!   later writer waits for only one of them. These buffers close that gap.
//! - [`external`]: device memory another library owns (a PyTorch tensor), taken by the same
//!   launchers and ordered by the stream it is used on.
//! - [`params`]: per-call parameter arrays on the device, copied in stream order, or while
//!   the stream is being captured into a CUDA graph, into memory the graph keeps alive.
//! - [`loader`]: a data loader, host threads filling page-locked slots with batches ahead of
//!   the pipeline, each slot owned by one side at a time.
//! - [`interrupt`]: a process-wide stop request (Ctrl-C) that pipelines check between
//!   iterations, so a long run stops within one iteration and frees everything.
//! - [`pipeline`]: a pipeline description (stages, the stream each runs on, rings of buffers
//!   for double/triple buffering) from which the cross-stream events and buffer lifetimes are
//!   derived.
//! - [`schedule`]: running a plan eagerly, captured into a CUDA graph, or as a stream of any
//!   length whose steady state replays two captured windows in turn.
//! - [`timeline`]: per-operation event timestamps per stream, exported as Chrome/Perfetto trace
//!   JSON and as an SVG Gantt chart, with overlap metrics.

pub mod external;
pub mod interrupt;
pub mod loader;
pub mod memory;
pub mod params;
pub mod pipeline;
pub mod pool;
pub mod schedule;
pub mod timeline;
pub(crate) mod tracking;

pub use external::External;
pub use loader::{HostSlot, Loader, LoaderStats};
pub use memory::{DeviceBuffer, PinnedBuffer};
pub use pipeline::{PipelineSpec, Plan};
pub use pool::{Graph, StreamPool};
pub use schedule::{StageCall, SteadyGraphs, Streamed};
pub use timeline::{OpKind, Recorder, Timeline};
