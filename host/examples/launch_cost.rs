//! Host time of the parts of a single-op call (`rotate` at seed 003's b32): the whole call,
//! the launch alone, cudarc's per-buffer event wait and record, and the call with buffers
//! made without cudarc's events. Each figure is the median over 30 runs of 200 calls.
//!
//! `cargo run --release -p streamline --example launch_cost` (needs a GPU).

use cudarc::driver::{CudaSlice, DevicePtr, DevicePtrMut, DeviceRepr, PushKernelArg};
use std::time::Instant;
use streamline::ops::image::{rotate, Interp, PerImage, Shape};
use streamline::{DevPtr, DevPtrMut, Gpu, LaunchConfig};
use streamline_abi::image::{RotateParams, IMAGE_BLOCK_X, IMAGE_BLOCK_Y, ROTATE_NEAREST};

/// The parameter struct as cudarc's launch builder takes it.
#[repr(transparent)]
struct ByValue(RotateParams);

// SAFETY: `RotateParams` is `#[repr(C)]` plain data, passed to the kernel by value.
unsafe impl DeviceRepr for ByValue {}

/// Prints the median host time per call of `f` over 30 runs of 200 calls, the stream drained
/// between runs.
fn per_call(
    name: &str,
    gpu: &Gpu,
    mut f: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    let st = gpu.stream();
    for _ in 0..200 {
        f()?;
    }
    st.synchronize()?;
    let mut v = Vec::with_capacity(30);
    for _ in 0..30 {
        let t = Instant::now();
        for _ in 0..200 {
            f()?;
        }
        v.push(t.elapsed().as_secs_f64() * 1e6 / 200.0);
        st.synchronize()?;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    println!(
        "{name:36} {:.3} us per call (fastest run {:.3})",
        v[v.len() / 2],
        v[0]
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let gpu = Gpu::new(0, None)?;
    let st = gpu.stream().clone();
    let shape = Shape {
        n: 32,
        c: 3,
        h: 256,
        w: 256,
    };
    let len = shape.len();
    let x: CudaSlice<f32> = st.alloc_zeros(len)?;
    let mut y: CudaSlice<f32> = st.alloc_zeros(len)?;
    let angles = PerImage::upload(&st, "angles", &vec![10.0f32; shape.n])?;
    st.synchronize()?;
    per_call("rotate()", &gpu, || {
        Ok(rotate(
            &gpu,
            &st,
            shape,
            &x,
            &angles,
            Interp::Nearest,
            None,
            &mut y,
        )?)
    })?;
    // The same kernel launched with its parameters made once (the angles read from `x`, which
    // holds zeros: a rotation by 0 degrees) on a grid of one output row per thread, where
    // `rotate()` picks its rows per thread for the device: the host's work is the same.
    let p = {
        let (xp, _r) = x.device_ptr(&st);
        let (yp, _w) = y.device_ptr_mut(&st);
        RotateParams {
            x: DevPtr::from_addr(xp),
            y: DevPtrMut::from_addr(yp),
            angles: DevPtr::from_addr(xp),
            batch: shape.n as u32,
            channels: shape.c as u32,
            height: shape.h as u32,
            width: shape.w as u32,
            fill: 0.0,
            has_fill: 0,
            rows: 1,
            layout: 0,
        }
    };
    let grid = (
        (shape.w as u32).div_ceil(IMAGE_BLOCK_X),
        (shape.h as u32).div_ceil(IMAGE_BLOCK_Y),
        shape.n as u32,
    );
    let block = (IMAGE_BLOCK_X, IMAGE_BLOCK_Y, 1);
    let module = gpu.kernels()?;
    // SAFETY: the parameters address `x` and `y`, which outlive every launch below, and the
    // grid covers every output pixel with one row per thread.
    per_call("Module::launch", &gpu, || unsafe {
        Ok(module.launch(&st, ROTATE_NEAREST, LaunchConfig::new(grid, block), p)?)
    })?;
    let f = gpu.kernels()?.function(ROTATE_NEAREST)?.clone();
    let cfg = cudarc::driver::LaunchConfig {
        grid_dim: grid,
        block_dim: block,
        shared_mem_bytes: 0,
    };
    let arg = ByValue(p);
    // SAFETY: as above.
    per_call("cudarc launch builder", &gpu, || unsafe {
        let mut b = st.launch_builder(&f);
        b.arg(&arg);
        b.launch(cfg)?;
        Ok(())
    })?;
    per_call("device_ptr (a read)", &gpu, || {
        let (_p, _record_on_drop) = x.device_ptr(&st);
        Ok(())
    })?;
    per_call("device_ptr_mut (a write)", &gpu, || {
        let (_p, _record_on_drop) = y.device_ptr_mut(&st);
        Ok(())
    })?;
    let ev = st.record_event(None)?;
    per_call("cuStreamWaitEvent", &gpu, || Ok(st.wait(&ev)?))?;
    per_call("cuEventRecord", &gpu, || Ok(ev.record(&st)?))?;
    // Buffers made while cudarc's event tracking is off carry no events.
    let ctx = gpu.context().clone();
    // SAFETY: the slices made until tracking is enabled again are used on `st` alone.
    unsafe { ctx.disable_event_tracking() };
    let made = (|| -> anyhow::Result<_> {
        let x: CudaSlice<f32> = st.alloc_zeros(len)?;
        let y: CudaSlice<f32> = st.alloc_zeros(len)?;
        let angles = PerImage::upload(&st, "angles", &vec![10.0f32; shape.n])?;
        Ok((x, y, angles))
    })();
    // SAFETY: restores the tracking the other slices rely on.
    unsafe { ctx.enable_event_tracking() };
    let (x2, mut y2, angles2) = made?;
    st.synchronize()?;
    per_call("rotate(), buffers without events", &gpu, || {
        Ok(rotate(
            &gpu,
            &st,
            shape,
            &x2,
            &angles2,
            Interp::Nearest,
            None,
            &mut y2,
        )?)
    })?;
    Ok(())
}
