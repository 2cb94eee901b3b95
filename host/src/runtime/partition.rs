//! A device's SMs split in two with the driver's green contexts: most for the engine's work, a
//! few kept for side work whose kernels must not queue behind it (the JPEG decoder's).
//!
//! nvJPEG's hardware decoders still run CUDA kernels of their own, which wait for free SMs like
//! any other: beside a training step whose blocks hold every SM, a decode waits for them. A
//! stream of a green context runs its kernels on that context's SMs only, so with the engine's
//! streams in one context and the decoder's in another, neither waits for the other's blocks.
//! Memory is the device's, seen alike from both (and from the primary context), and a kernel of
//! a module loaded in one runs on the other's streams.
//!
//! A split lives as long as the process: the driver has no way to release a green context
//! through the ordinary context it is seen as, and each split is made once per device and size.
//!
//! The driver's documentation allows a green context to be current on one thread at a time,
//! with no internal synchronisation of calls from several. The engine's context here is bound by
//! every thread that queues its work (as cudarc binds a stream's context for each call): the
//! queueing thread, a thread decoding ahead, loader threads waiting for page-locked slots. The
//! runs and tests of BENCHMARKS.md (a 20,000-step run among them, and compute-sanitizer's
//! memcheck) showed no fault, but that is measurement, not the driver's promise. The design that
//! needs no such trust keeps the primary context current and makes only the streams in the
//! green contexts (`cuGreenCtxStreamCreate`), which cudarc's streams cannot yet own.

use crate::error::{DriverContext, Error, Result};
use cudarc::driver::sys::{self, CUdevResourceType, CUgreenCtxCreate_flags};
use cudarc::driver::CudaContext;
use std::sync::{Arc, Mutex};

/// Green contexts first came with CUDA 12.4's driver.
const FIRST_DRIVER: (i32, i32) = (12, 4);

/// One device's SMs split between the engine and side work.
#[derive(Debug)]
pub struct SmSplit {
    /// The context the engine's streams, buffers and kernels use: all SMs but the side's.
    pub engine: Arc<CudaContext>,
    /// The context side work uses.
    pub side: Arc<CudaContext>,
    /// SMs the engine's kernels run on.
    pub engine_sms: u32,
    /// SMs side work runs on (at least what was asked for: the driver splits in groups).
    pub side_sms: u32,
    /// The device's primary context, retained while the split lives (the driver's advice).
    primary_ctx: Arc<CudaContext>,
}

impl SmSplit {
    /// The device's primary context.
    pub(crate) fn primary(&self) -> &Arc<CudaContext> {
        &self.primary_ctx
    }
}

/// Every split made in this process, by device and the side's SMs asked for.
static SPLITS: Mutex<Vec<(usize, u32, Arc<SmSplit>)>> = Mutex::new(Vec::new());

/// Device `ordinal`'s SMs split so that side work has at least `side_sms` of its own, made on
/// first use and shared after.
pub fn split(ordinal: usize, side_sms: u32) -> Result<Arc<SmSplit>> {
    let mut splits = SPLITS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some((_, _, s)) = splits
        .iter()
        .find(|(o, n, _)| *o == ordinal && *n == side_sms)
    {
        return Ok(s.clone());
    }
    let s = Arc::new(make(ordinal, side_sms)?);
    splits.push((ordinal, side_sms, s.clone()));
    Ok(s)
}

/// A green context of `resource`'s SMs on `dev`, as the ordinary context the rest of the
/// driver API takes.
fn green(
    ordinal: usize,
    dev: sys::CUdevice,
    resource: &mut sys::CUdevResource,
) -> Result<Arc<CudaContext>> {
    let mut desc: sys::CUdevResourceDesc = std::ptr::null_mut();
    let mut g: sys::CUgreenCtx = std::ptr::null_mut();
    let mut ctx: sys::CUcontext = std::ptr::null_mut();
    // SAFETY: `resource` came from the driver's split of this device's SMs; each output is a
    // live local the driver writes on success.
    unsafe {
        sys::cuDevResourceGenerateDesc(&mut desc, resource, 1)
            .result()
            .op("cuDevResourceGenerateDesc")?;
        sys::cuGreenCtxCreate(
            &mut g,
            desc,
            dev,
            CUgreenCtxCreate_flags::CU_GREEN_CTX_DEFAULT_STREAM as u32,
        )
        .result()
        .op("cuGreenCtxCreate")?;
        if let Err(e) = sys::cuCtxFromGreenCtx(&mut ctx, g).result() {
            sys::cuGreenCtxDestroy(g);
            return Err(e).op("cuCtxFromGreenCtx");
        }
    }
    // SAFETY: `ctx` is the live context of the green context just made on `dev`. The wrapper
    // would destroy it when its last reference goes, which a green context's ordinary handle
    // must not be: one reference is forgotten at once, so that never happens, whatever path
    // the caller takes after.
    let wrapped =
        unsafe { CudaContext::from_raw_context(ordinal, dev, ctx) }.op("cuCtxSetCurrent")?;
    std::mem::forget(wrapped.clone());
    Ok(wrapped)
}

fn make(ordinal: usize, side_sms: u32) -> Result<SmSplit> {
    super::driver_present()?;
    let version = super::driver_version()?;
    if version < FIRST_DRIVER {
        return Err(Error::arg(
            "side_sms",
            format!(
                "splitting the SMs needs green contexts, which the driver ({}.{}) lacks: \
                 12.4 or later has them",
                version.0, version.1
            ),
        ));
    }
    let primary = CudaContext::new(ordinal).map_err(|e| Error::NoDevice {
        ordinal,
        reason: e.to_string(),
    })?;
    let dev = primary.cu_device();
    // SAFETY: a zeroed resource is a valid output for the driver to fill.
    let mut all: sys::CUdevResource = unsafe { std::mem::zeroed() };
    // SAFETY: `dev` is a valid device (its primary context was retained above).
    unsafe {
        sys::cuDeviceGetDevResource(dev, &mut all, CUdevResourceType::CU_DEV_RESOURCE_TYPE_SM)
    }
    .result()
    .op("cuDeviceGetDevResource")?;
    // SAFETY: the SM member is the one a `CU_DEV_RESOURCE_TYPE_SM` resource fills.
    let total = unsafe { all.__bindgen_anon_1.sm.smCount };
    if side_sms == 0 || side_sms >= total / 2 {
        return Err(Error::arg(
            "side_sms",
            format!(
                "{side_sms}: the SMs kept for side work are 1..={} (under half of the \
                 device's {total})",
                (total / 2).saturating_sub(1)
            ),
        ));
    }
    // SAFETY: zeroed resources are valid outputs.
    let (mut side, mut rest): (sys::CUdevResource, sys::CUdevResource) =
        unsafe { (std::mem::zeroed(), std::mem::zeroed()) };
    let mut groups = 1u32;
    // SAFETY: one group of at least `side_sms` SMs asked of the device's SM resource; the
    // outputs are live locals.
    unsafe {
        sys::cuDevSmResourceSplitByCount(&mut side, &mut groups, &all, &mut rest, 0, side_sms)
    }
    .result()
    .op("cuDevSmResourceSplitByCount")?;
    if groups != 1 {
        return Err(Error::arg(
            "side_sms",
            format!("{side_sms}: the driver could not split off a group of that many SMs"),
        ));
    }
    // SAFETY: both are SM resources, written by the split above.
    let (side_count, engine_count) = unsafe {
        (
            side.__bindgen_anon_1.sm.smCount,
            rest.__bindgen_anon_1.sm.smCount,
        )
    };
    // The driver splits in groups, rounding the side's count up.
    if engine_count <= side_count {
        return Err(Error::arg(
            "side_sms",
            format!(
                "{side_sms}: the driver's groups would keep {side_count} of {total} SMs for side \
                 work, leaving the rest fewer"
            ),
        ));
    }
    let side_ctx = green(ordinal, dev, &mut side)?;
    let engine = green(ordinal, dev, &mut rest)?;
    Ok(SmSplit {
        engine,
        side: side_ctx,
        engine_sms: engine_count,
        side_sms: side_count,
        primary_ctx: primary,
    })
}
