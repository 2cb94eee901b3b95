//! `streamline matmul`: our FP32 matmul, optionally beside cuBLAS SGEMM on the same inputs in
//! the same run, optionally checked against the f64 CPU reference; `--dtype bf16|f16|tf32` runs the
//! tensor-core kernels instead (`matmul_half`).

use super::parse_count;
use anyhow::{bail, Context, Result};
use cudarc::driver::{CudaSlice, CudaStream};
use std::sync::Arc;
use streamline::error::DriverContext;
use streamline::ops::hgemm::BLayout;
use streamline::ops::matmul::{sgemm, Cublas, Gemm, Kernel, SWEEP};
use streamline::timing::{median, time_on};
use streamline::Gpu;
use streamline_abi::matmul::SGEMM_ALL;
use streamline_testing::data::{count_unwritten, randn_f32, HeavyHost};
use streamline_testing::reference::matmul as reference;

#[derive(clap::Args, Debug)]
pub struct MatmulArgs {
    /// Element type: f32 (our FP32 kernels beside cuBLAS SGEMM), bf16 / f16 (tensor cores, f32
    /// accumulation, beside cuBLAS GemmEx), or tf32 (f32 matrices multiplied as TF32 on the
    /// tensor cores, beside cuBLAS GemmEx with its fast-TF32 compute); rows padded to 16 bytes.
    #[arg(long, default_value = "f32")]
    pub(crate) dtype: String,
    /// Rows of A and C.
    #[arg(long, value_parser = parse_count, required_unless_present = "sweep")]
    pub(crate) m: Option<usize>,
    /// Columns of B and C.
    #[arg(long, value_parser = parse_count, required_unless_present = "sweep")]
    pub(crate) n: Option<usize>,
    /// Columns of A, rows of B.
    #[arg(long, value_parser = parse_count, required_unless_present = "sweep")]
    pub(crate) k: Option<usize>,
    /// Instead of one shape, every shape of the sweep (squares 1024-8192, the skinny and deep
    /// products of training, flat products, non-multiples of the tiles) with the shape rule,
    /// beside cuBLAS, then the geometric mean and the worst fraction of cuBLAS.
    #[arg(long, conflicts_with_all = ["m", "n", "k"])]
    pub(crate) sweep: bool,
    /// `auto` (the shape rule), `all` (every step of the progression), one kernel such as
    /// `5_pipelined_128x128`, `3_blocked` or `dot_1x16`, or split-K with a tile and a slice
    /// count such as `splitk_128x128:2`.
    #[arg(long, default_value = "auto")]
    pub(crate) kernel: String,
    /// Scale of the product.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub(crate) alpha: f32,
    /// Scale of the old C (0: C is write-only).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub(crate) beta: f32,
    /// Also run cuBLAS SGEMM (FP32, no TF32) on the same inputs and print the ratio.
    #[arg(long)]
    pub(crate) vs_cublas: bool,
    /// Compare C with the f64 CPU reference (every row up to 2^31 multiply-adds, else a
    /// spread of 256 rows) and check that every element was written.
    #[arg(long)]
    pub(crate) check: bool,
    /// Timed repetitions per kernel (1..=10000) after one warm-up; the median is reported.
    #[arg(long, default_value_t = 20)]
    pub(crate) repeat: u32,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Give B transposed (`n x k` rows, as a linear layer keeps its weight), to ours and to
    /// cuBLAS alike; bf16, f16 and tf32 only.
    #[arg(long)]
    pub(crate) b_transposed: bool,
    /// Time the product with an SGD step owed to B (`B = B - lr g`, by one gradient or the mean
    /// of two, in f32 or bf16), applied inside the split-K product beside the update pass and
    /// then the product, on the same inputs; the two checked bit for bit.
    #[arg(long, value_enum)]
    pub(crate) owed_update: Option<crate::matmul_owed::OwedUpdate>,
}

/// The median of `repeat` CUDA-event times of `run` on `stream`, after one warm-up run.
pub(crate) fn median_time(
    stream: &Arc<CudaStream>,
    repeat: u32,
    run: &mut dyn FnMut() -> streamline::Result<()>,
) -> Result<f64> {
    run()?;
    stream.synchronize().op("cuStreamSynchronize")?;
    let mut t = Vec::with_capacity(repeat as usize);
    for _ in 0..repeat {
        t.push(time_on(stream, &mut *run)?);
    }
    Ok(median(&t))
}

/// The geometric mean and the smallest of `ratios` (of cuBLAS's time over ours).
pub(crate) fn geomean_and_worst(ratios: &[f64]) -> (f64, f64) {
    let geo = (ratios.iter().map(|r| r.ln()).sum::<f64>() / ratios.len() as f64).exp();
    (geo, ratios.iter().copied().fold(f64::INFINITY, f64::min))
}

/// The rows `--check` compares.
pub(crate) fn check_rows(g: &Gemm) -> Vec<usize> {
    if g.flops() / 2.0 <= (1u64 << 31) as f64 || g.m <= 256 {
        (0..g.m).collect()
    } else {
        // Evenly spread, including the first and last rows (tile edges).
        (0..256).map(|i| i * (g.m - 1) / 255).collect()
    }
}

pub fn run(device: usize, ptx: Option<&std::path::Path>, a: MatmulArgs) -> Result<()> {
    if !(1..=10_000).contains(&a.repeat) {
        bail!("--repeat must be in 1..=10000, got {}", a.repeat);
    }
    if a.owed_update.is_some() && (a.dtype != "f32" || a.b_transposed || a.sweep) {
        bail!("--owed-update updates f32 weights kept as k x n rows, one shape: leave out --dtype, --b-transposed and --sweep");
    }
    let gpu = Gpu::new(device, ptx)?;
    if let Some(owed) = a.owed_update {
        return crate::matmul_owed::run(&gpu, &a, owed);
    }
    if a.dtype != "f32" {
        return crate::matmul_half::run(&gpu, &a, &a.dtype);
    }
    if a.b_transposed {
        bail!("--b-transposed is for --dtype bf16, f16 and tf32; f32 takes B as k x n rows");
    }
    if a.sweep && a.kernel == "all" {
        bail!("--sweep compares one kernel choice with cuBLAS per shape: give --kernel auto (the default) or one kernel, not all");
    }
    let shapes: Vec<(usize, usize, usize)> = match (a.sweep, a.m, a.n, a.k) {
        (true, ..) => SWEEP.to_vec(),
        (false, Some(m), Some(n), Some(k)) => vec![(m, n, k)],
        _ => bail!("give --m, --n and --k, or --sweep"),
    };
    let mut failed = false;
    let mut ratios = Vec::new();
    let mut summary = Vec::new();
    for (m, n, k) in shapes {
        let g = Gemm {
            alpha: a.alpha,
            beta: a.beta,
            ..Gemm::dense(m, n, k)
        };
        let r = one_shape(&gpu, &g, &a)?;
        failed |= r.failed;
        if let (Some(blas), Some((name, ours))) = (r.cublas_ms, r.times.first()) {
            ratios.push(blas / ours);
            summary.push(format!(
                "{:>24} {:<24} {:>10.4} {:>10.4} {:>9.1}%",
                format!("{m} x {n} x {k}"),
                name,
                ours,
                blas,
                100.0 * blas / ours
            ));
        }
    }
    if a.sweep && !ratios.is_empty() {
        println!();
        println!(
            "{:>24} {:<24} {:>10} {:>10} {:>10}",
            "m x n x k", "ours", "ms", "cuBLAS ms", "of cuBLAS"
        );
        for line in &summary {
            println!("{line}");
        }
        let (geo, worst) = geomean_and_worst(&ratios);
        println!(
            "geometric mean {:.1}% of cuBLAS, worst {:.1}%, over {} shapes",
            100.0 * geo,
            100.0 * worst,
            ratios.len()
        );
    }
    if failed {
        bail!("the GPU result does not match the CPU reference");
    }
    Ok(())
}

/// The element counts of A, B and C (see [`Gemm::validate`]), refused unless A, B and two
/// C of `elem` bytes each fit in the device's free memory, and with `b_copied` the transposed
/// copy of `B` the product makes (its rows padded to 16 bytes).
pub fn operands_fit(
    gpu: &Gpu,
    g: &Gemm,
    (layout, b_copied): (BLayout, bool),
    elem: u128,
) -> Result<(usize, usize, usize)> {
    let (na, nb, nc) = g.validate_with(layout)?;
    let copy = if b_copied {
        let (rows, cols) = match layout {
            BLayout::Rows => (g.k, g.n),
            BLayout::Transposed => (g.n, g.k),
        };
        (rows as u128).next_multiple_of(16 / elem) * cols as u128
    } else {
        0
    };
    let bytes = elem * (na as u128 + nb as u128 + copy + 2 * nc as u128);
    let (free, _) = gpu.context().mem_get_info().op("cuMemGetInfo")?;
    if bytes > free as u128 {
        bail!(
            "the shape needs {} MiB of device memory, {} MiB are free",
            bytes >> 20,
            free >> 20
        );
    }
    Ok((na, nb, nc))
}

/// What one shape measured: each kernel's median ms (in the order run), cuBLAS's, and whether
/// a check failed.
struct ShapeResult {
    times: Vec<(String, f64)>,
    cublas_ms: Option<f64>,
    failed: bool,
}

fn one_shape(gpu: &Gpu, g: &Gemm, a: &MatmulArgs) -> Result<ShapeResult> {
    let kernels: Vec<Kernel> = match a.kernel.as_str() {
        "all" => SGEMM_ALL.iter().map(Kernel::Fixed).collect(),
        s => vec![Kernel::parse(s)?],
    };
    let (na, nb, nc) = operands_fit(gpu, g, (BLayout::Rows, false), 4)?;
    let stream = gpu.stream().clone();
    let ha = randn_f32(na, a.seed);
    let hb = randn_f32(nb, a.seed.wrapping_add(1));
    let hc0 = randn_f32(nc, a.seed.wrapping_add(2));
    let da = stream.clone_htod(&ha).context("uploading A")?;
    let db = stream.clone_htod(&hb).context("uploading B")?;
    let dc0 = stream.clone_htod(&hc0).context("uploading C")?;
    let mut dc: CudaSlice<f32> = stream.alloc_zeros(nc).context("allocating C")?;
    let cublas = if a.vs_cublas || a.sweep {
        Some(Cublas::new(stream.clone())?)
    } else {
        None
    };
    let reference_rows = if a.check {
        let rows = check_rows(g);
        eprintln!("computing the f64 reference for {} rows...", rows.len());
        Some(reference::rows(g, &ha, &hb, &hc0, &rows))
    } else {
        None
    };
    let poison = vec![f32::poison(); nc];

    println!(
        "sgemm {} x {} x {} (alpha {}, beta {}), median of {} CUDA-event times after a warm-up",
        g.m, g.n, g.k, g.alpha, g.beta, a.repeat
    );
    println!(
        "{:<30} {:>10} {:>9} {:>10}",
        "kernel", "ms", "TFLOP/s", "of cuBLAS"
    );
    let time =
        |run: &mut dyn FnMut() -> streamline::Result<()>| median_time(&stream, a.repeat, run);
    let cublas_ms = match &cublas {
        Some(blas) => Some(time(&mut || blas.sgemm(g, &da, &db, &mut dc))?),
        None => None,
    };
    let mut failed = false;
    let mut times = Vec::new();
    for kernel in kernels {
        let ran = kernel
            .plan(g.m, g.n, g.k, gpu.info().multiprocessors)
            .name();
        let name = match kernel {
            Kernel::Auto => format!("{ran} (auto)"),
            _ => ran,
        };
        if let Some(rows) = &reference_rows {
            // One run from a known C: poison when beta is 0 (every element must be
            // overwritten), the random C0 otherwise.
            if g.beta == 0.0 {
                stream.memcpy_htod(&poison, &mut dc).op("cuMemcpyHtoD")?;
            } else {
                stream.memcpy_dtod(&dc0, &mut dc).op("cuMemcpyDtoD")?;
            }
            sgemm(gpu, &stream, kernel, g, &da, &db, &mut dc)?;
            let hc = stream.clone_dtoh(&dc).op("cuMemcpyDtoH")?;
            let unwritten = if g.beta == 0.0 {
                count_unwritten(&hc)
            } else {
                0
            };
            let cmp = reference::compare(g, &hc, rows);
            println!(
                "  check {name}: {} elements, {} outside the bound, {} unwritten, worst err/bound {:.3} at {:?}",
                cmp.checked, cmp.outside, unwritten, cmp.worst_ratio, cmp.worst_at
            );
            failed |= cmp.outside > 0 || unwritten > 0;
        }
        let ms = time(&mut || sgemm(gpu, &stream, kernel, g, &da, &db, &mut dc))?;
        times.push((name.clone(), ms));
        let ratio = cublas_ms.map_or(String::new(), |c| format!("{:.1}%", 100.0 * c / ms));
        println!(
            "{:<30} {:>10.4} {:>9.2} {:>10}",
            name,
            ms,
            g.flops() / ms / 1e9,
            ratio
        );
    }
    if let Some(ms) = cublas_ms {
        println!(
            "{:<30} {:>10.4} {:>9.2}",
            "cublas",
            ms,
            g.flops() / ms / 1e9
        );
    }
    Ok(ShapeResult {
        times,
        cublas_ms,
        failed,
    })
}
