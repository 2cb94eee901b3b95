//! Products whose `B` is a layer's weights with an SGD step owed: `W = W - lr g` (or by the mean
//! of two gradients), then `C = alpha A W + beta C`. A training step's next forward product
//! reads the weights anyway; where it runs split-K with step 8's tiles in one row of blocks
//! (a batch of at most 128 against many inputs), the update is applied as the product reads
//! each weight (`gpu-kernels/src/matmul/sgd.rs`), sparing the update's own pass over them.
//! Otherwise the update pass ([`crate::ops::train::sgd`]) runs first. Either way the weights
//! and `C` come out with the same bits.

use super::{sgemm, split_k_frame, split_k_sum, Gemm, Kernel, Plan};
use crate::error::{Error, Result};
use crate::ops::train::{sgd, sgd_pair, GradElement};
use crate::runtime::{Gpu, LaunchConfig};
use cudarc::driver::{CudaStream, DevicePtr, DevicePtrMut};
use streamline_abi::matmul::{SplitKParams, SplitKSgdParams, SGEMM_SPLITK_WIDE_128X128};
use streamline_device::DevPtrMut;

/// Where an owed update was applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Applied {
    /// By the product, as it read the weights.
    InProduct,
    /// By a pass of its own before the product.
    ByPass,
}

/// `W = W - lr g` over all of `w` (as [`sgd`] does), then `C = alpha A W + beta C` with
/// `kernel` (as [`sgemm`] does), `W` being the product's `B`. The update is applied inside the
/// product where `kernel` plans it as split-K with `splitk_wide_128x128`, `m` is at most 128,
/// `w` holds exactly the `k x n` matrix (`ldb = n`) and the gradient is aligned to four of its
/// elements; the result says which way it ran.
pub fn sgemm_after_sgd<G: GradElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    kernel: Kernel,
    g: &Gemm,
    a: &impl DevicePtr<f32>,
    (w, grad, lr): (
        &mut (impl DevicePtrMut<f32> + DevicePtr<f32>),
        &impl DevicePtr<G>,
        f32,
    ),
    c: &mut impl DevicePtrMut<f32>,
) -> Result<Applied> {
    check(g, (a.len(), w.len(), c.len()), [("g", grad.len())], lr)?;
    if fused(gpu, stream, kernel, g, a, (w, (grad, grad), false, lr), c)? {
        return Ok(Applied::InProduct);
    }
    sgd(gpu, stream, w, grad, lr)?;
    sgemm(gpu, stream, kernel, g, a, w, c)?;
    Ok(Applied::ByPass)
}

/// [`sgemm_after_sgd`] by the mean of two gradients, `W = W - lr (g0 + g1) / 2` as
/// [`sgd_pair`] takes it (the sum rounded once, halved exactly); inside the product for f32
/// gradients only.
pub fn sgemm_after_sgd_pair<G: GradElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    kernel: Kernel,
    g: &Gemm,
    a: &impl DevicePtr<f32>,
    (w, (g0, g1), lr): (
        &mut (impl DevicePtrMut<f32> + DevicePtr<f32>),
        (&impl DevicePtr<G>, &impl DevicePtr<G>),
        f32,
    ),
    c: &mut impl DevicePtrMut<f32>,
) -> Result<Applied> {
    let grads = [("g0", g0.len()), ("g1", g1.len())];
    check(g, (a.len(), w.len(), c.len()), grads, lr)?;
    if fused(gpu, stream, kernel, g, a, (w, (g0, g1), true, lr), c)? {
        return Ok(Applied::InProduct);
    }
    sgd_pair(gpu, stream, w, (g0, g1), lr)?;
    sgemm(gpu, stream, kernel, g, a, w, c)?;
    Ok(Applied::ByPass)
}

/// The arguments' checks: the product's lengths, gradients as long as the weights, `lr`
/// finite.
fn check<const N: usize>(
    g: &Gemm,
    (a, w, c): (usize, usize, usize),
    grads: [(&'static str, usize); N],
    lr: f32,
) -> Result<()> {
    g.check_lengths(a, w, c)?;
    for (arg, len) in grads {
        if len != w {
            return Err(Error::arg(
                arg,
                format!("length {len} differs from the length of the weights, {w}"),
            ));
        }
    }
    if !lr.is_finite() {
        return Err(Error::arg("lr", format!("{lr}: must be finite")));
    }
    Ok(())
}

/// The split of `K` of a product that can apply the update as it reads `B`, if this one can.
pub fn fused_split(
    kernel: Kernel,
    g: &Gemm,
    w_len: usize,
    multiprocessors: u32,
) -> Option<(usize, usize)> {
    let wide = &SGEMM_SPLITK_WIDE_128X128;
    match kernel.plan(g.m, g.n, g.k, multiprocessors) {
        Plan::Split {
            tiling,
            k_slice,
            slices,
        } if tiling.spec.name() == wide.spec.name()
            && g.m <= wide.bm as usize
            && g.ldb == g.n
            && Some(w_len) == g.k.checked_mul(g.n) =>
        {
            Some((k_slice, slices))
        }
        _ => None,
    }
}

/// Queues the product that applies the update as it reads `B` and the sum of its partial
/// products, if [`fused_split`] allows it and the gradients are aligned to four elements;
/// false (no kernel queued) otherwise. The arguments are checked.
fn fused<G: GradElement>(
    gpu: &Gpu,
    stream: &CudaStream,
    kernel: Kernel,
    g: &Gemm,
    a: &impl DevicePtr<f32>,
    (w, (g0, g1), pair, lr): (
        &mut (impl DevicePtrMut<f32> + DevicePtr<f32>),
        (&impl DevicePtr<G>, &impl DevicePtr<G>),
        bool,
        f32,
    ),
    c: &mut impl DevicePtrMut<f32>,
) -> Result<bool> {
    let Some((k_slice, slices)) = fused_split(kernel, g, w.len(), gpu.info().multiprocessors)
    else {
        return Ok(false);
    };
    let spec = match (pair, G::SPLITK_SGD_PAIR) {
        (false, _) => G::SPLITK_SGD,
        (true, Some(k)) => k,
        (true, None) => return Ok(false),
    };
    let t = &SGEMM_SPLITK_WIDE_128X128;
    let module = gpu.kernels()?;
    let mut launch = module.prepare(stream, spec);
    let (g0p, g1p) = (launch.read(g0), launch.read(g1));
    let four = 4 * std::mem::size_of::<G>() as u64;
    if (g0p.addr() | g1p.addr()) % four != 0 {
        return Ok(false);
    }
    let (grid, scratch) = split_k_frame(stream, g, t, slices)?;
    let ap = launch.read(a);
    let wp = launch.write(w);
    let params = SplitKSgdParams {
        split: SplitKParams {
            gemm: g.params(ap, wp.as_const(), DevPtrMut::NULL),
            partials: scratch.floats(),
            k_slice: k_slice as u32,
            slices: slices as u32,
        },
        w: wp,
        g0: g0p,
        g1: g1p,
        lr,
        pad: 0,
    };
    let cfg = LaunchConfig::new(grid, (t.threads, 1, 1)).with_shared(t.shared_bytes);
    // SAFETY: `check` proved A and W hold their matrices and the gradients as many elements as
    // W, which holds exactly the dense `k x n` matrix (`fused_split`), so the gradients are laid
    // out as B and, aligned to four elements (checked), wherever B is to 16 bytes; `w` is
    // borrowed exclusively, so neither the gradients nor A overlap it, and the partials are
    // fresh scratch; one row of blocks (`m <= 128`) reads and writes each element of B in one
    // thread; every slice starts inside K; the shared size and block are the tiling's.
    unsafe { launch.run(cfg, params)? };
    split_k_sum(gpu, stream, g, slices, &scratch, c)?;
    Ok(true)
}
