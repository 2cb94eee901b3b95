//! Beyond one GPU: collectives over NCCL between the GPUs of one process or of many, in the
//! order a multi-GPU program meets them:
//!
//! 1. [`library`]: finding NCCL (`STREAMLINE_NCCL`, the system's library path, or the
//!    `nvidia-nccl-cu13` wheel) and loading the calls Streamline makes.
//! 2. [`rendezvous`]: handing rank 0's NCCL id to the other processes (an address or a shared
//!    file), with a deadline and a clear error for a mismatched or missing rank.
//! 3. [`comm`]: one communicator per GPU, made by one process for all its GPUs or by each
//!    process for its own; joining and every wait for their collectives have a deadline,
//!    after which they are aborted, and a collective is queued without waiting for a peer.
//! 4. [`collective`]: all-reduce, broadcast, all-gather, reduce-scatter, send and receive of
//!    tracked buffers on engine streams, queued together in a [`Batch`].
//!
//! Each GPU keeps its own [`crate::Gpu`] and stream pool; a collective is ordered with the
//! buffers it touches like a kernel launch, so compute on other streams overlaps it.

pub mod collective;
pub mod comm;
pub mod library;
pub mod rendezvous;

pub use collective::{Batch, Element, ReduceOp};
pub use comm::{Comm, DEFAULT_TIMEOUT};
pub use library::{origin, version};
pub use rendezvous::Rendezvous;
