//! `streamline matmul --owed-update`: a product whose `B` is weights with an SGD step owed
//! (the next forward product of a data-parallel training step), the step applied inside the
//! split-K product (`sgemm_after_sgd`) beside the update pass followed by the same product, on
//! the same inputs in the same run, the two results checked bit for bit.

use super::matmul::{median_time, operands_fit, MatmulArgs};
use anyhow::{bail, Context, Result};
use cudarc::driver::{CudaSlice, DeviceRepr};
use half::bf16;
use streamline::error::DriverContext;
use streamline::ops::hgemm::BLayout;
use streamline::ops::matmul::{
    sgemm, sgemm_after_sgd, sgemm_after_sgd_pair, Applied, Gemm, Kernel,
};
use streamline::ops::train::{sgd, sgd_pair, GradElement};
use streamline::Gpu;
use streamline_testing::data::randn_f32;

/// The gradients of an owed update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum OwedUpdate {
    /// One f32 gradient.
    F32,
    /// One bf16 gradient.
    Bf16,
    /// The mean of two f32 gradients (two GPUs' by peer copies).
    PairF32,
    /// The mean of two bf16 gradients.
    PairBf16,
}

/// Learning rate of the timed updates (small, so that repeated steps keep the weights near
/// their start).
const LR: f32 = 1e-4;

pub fn run(gpu: &Gpu, a: &MatmulArgs, owed: OwedUpdate) -> Result<()> {
    let (Some(m), Some(n), Some(k)) = (a.m, a.n, a.k) else {
        bail!("--owed-update times one shape: give --m, --n and --k");
    };
    if a.vs_cublas || a.check || a.kernel == "all" {
        bail!("--owed-update checks the fused product against the pass and the product, bit for bit: leave out --vs-cublas, --check and --kernel all");
    }
    let g = Gemm {
        alpha: a.alpha,
        beta: a.beta,
        ..Gemm::dense(m, n, k)
    };
    let kernel = Kernel::parse(&a.kernel)?;
    match owed {
        OwedUpdate::F32 => measure(gpu, a, &g, kernel, false, |x: f32| x),
        OwedUpdate::Bf16 => measure(gpu, a, &g, kernel, false, bf16::from_f32),
        OwedUpdate::PairF32 => measure(gpu, a, &g, kernel, true, |x: f32| x),
        OwedUpdate::PairBf16 => measure(gpu, a, &g, kernel, true, bf16::from_f32),
    }
}

fn measure<G: GradElement + DeviceRepr>(
    gpu: &Gpu,
    a: &MatmulArgs,
    g: &Gemm,
    kernel: Kernel,
    pair: bool,
    of: fn(f32) -> G,
) -> Result<()> {
    // A, the weights and C checked against the free memory; the gradients' allocations
    // report their own errors.
    let (na, nw, nc) = operands_fit(gpu, g, (BLayout::Rows, false), 4)?;
    let s = gpu.stream().clone();
    let grads = |seed: u64| -> Vec<G> { randn_f32(nw, seed).into_iter().map(of).collect() };
    let da = s
        .clone_htod(&randn_f32(na, a.seed))
        .context("uploading A")?;
    let w0 = randn_f32(nw, a.seed.wrapping_add(1));
    let dg0 = s
        .clone_htod(&grads(a.seed.wrapping_add(3)))
        .context("uploading a gradient")?;
    let dg1 = s
        .clone_htod(&grads(a.seed.wrapping_add(4)))
        .context("uploading a gradient")?;
    let c0 = randn_f32(nc, a.seed.wrapping_add(2));
    let mut c: CudaSlice<f32> = s.clone_htod(&c0).context("uploading C")?;
    let mut w: CudaSlice<f32> = s.clone_htod(&w0).context("uploading the weights")?;
    let fused = |w: &mut CudaSlice<f32>, c: &mut CudaSlice<f32>| {
        if pair {
            sgemm_after_sgd_pair(gpu, &s, kernel, g, &da, (w, (&dg0, &dg1), LR), c)
        } else {
            sgemm_after_sgd(gpu, &s, kernel, g, &da, (w, &dg0, LR), c)
        }
    };
    let by_pass = |w: &mut CudaSlice<f32>, c: &mut CudaSlice<f32>| {
        if pair {
            sgd_pair(gpu, &s, w, (&dg0, &dg1), LR)?;
        } else {
            sgd(gpu, &s, w, &dg0, LR)?;
        }
        sgemm(gpu, &s, kernel, g, &da, w, c)
    };
    // One step each way from the same weights and C: the same bits.
    let applied = fused(&mut w, &mut c)?;
    let (w_fused, c_fused) = (
        s.clone_dtoh(&w).op("cuMemcpyDtoH")?,
        s.clone_dtoh(&c).op("cuMemcpyDtoH")?,
    );
    s.memcpy_htod(&w0, &mut w).op("cuMemcpyHtoD")?;
    s.memcpy_htod(&c0, &mut c).op("cuMemcpyHtoD")?;
    by_pass(&mut w, &mut c)?;
    let (w_pass, c_pass) = (
        s.clone_dtoh(&w).op("cuMemcpyDtoH")?,
        s.clone_dtoh(&c).op("cuMemcpyDtoH")?,
    );
    let differ = |x: &[f32], y: &[f32]| {
        x.iter()
            .zip(y)
            .filter(|(p, q)| p.to_bits() != q.to_bits())
            .count()
    };
    let (dw, dc) = (differ(&w_fused, &w_pass), differ(&c_fused, &c_pass));
    let plan = kernel
        .plan(g.m, g.n, g.k, gpu.info().multiprocessors)
        .name();
    println!(
        "sgemm {} x {} x {} ({plan}) after an owed SGD step on B ({}{}), median of {} CUDA-event times after a warm-up",
        g.m,
        g.n,
        g.k,
        if pair { "the mean of two " } else { "one " },
        match (std::mem::size_of::<G>() == 2, pair) {
            (true, true) => "bf16 gradients",
            (true, false) => "bf16 gradient",
            (false, true) => "f32 gradients",
            (false, false) => "f32 gradient",
        },
        a.repeat
    );
    println!(
        "  check: {}; {dw} weights and {dc} elements of C differ from the pass then the product",
        match applied {
            Applied::InProduct => "the update ran inside the product",
            Applied::ByPass =>
                "the update ran as a pass before the product (no fused kernel takes it)",
        }
    );
    let fused_ms = median_time(&s, a.repeat, &mut || fused(&mut w, &mut c).map(|_| ()))?;
    let pass_ms = median_time(&s, a.repeat, &mut || by_pass(&mut w, &mut c))?;
    let product_ms = median_time(&s, a.repeat, &mut || {
        sgemm(gpu, &s, kernel, g, &da, &w, &mut c)
    })?;
    println!("{:<34} {:>10}", "", "ms");
    println!("{:<34} {:>10.4}", "update inside the product", fused_ms);
    println!("{:<34} {:>10.4}", "update pass, then the product", pass_ms);
    println!("{:<34} {:>10.4}", "the product alone", product_ms);
    println!(
        "the update inside the product takes {:.1}% of the pass and the product's time",
        100.0 * fused_ms / pass_ms
    );
    if dw + dc > 0 {
        bail!("the update inside the product differs from the pass then the product");
    }
    Ok(())
}
