//! `streamline matmul --dtype bf16|f16|tf32`: our tensor-core product beside cuBLAS's `GemmEx`
//! on the same inputs in the same run, optionally checked against the f64 CPU reference.

use crate::matmul::{check_rows, geomean_and_worst, median_time, operands_fit, MatmulArgs};
use anyhow::{bail, Context, Result};
use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use streamline::error::DriverContext;
use streamline::ops::hgemm::{
    hgemm, hgemm_bt, BLayout, CublasHalf, Gemm, Half, HgemmKernel, HALF_SWEEP,
};
use streamline::Gpu;
use streamline_abi::hgemm::HGEMM_ALL;
use streamline_testing::data::{randn_f32, POISON_BF16, POISON_F16, POISON_F32};
use streamline_testing::reference::hgemm::{self as reference, Rounding};
use streamline_testing::reference::matmul::compare;

/// The host side of an element type: conversions, poison and rounding.
pub trait HalfHost: Half + bytemuck::Pod + cudarc::driver::ValidAsZeroBits + Send + Sync {
    fn from_f32(v: f32) -> Self;
    fn to_f32(self) -> f32;
    /// The value unwritten elements keep.
    fn poison() -> Self;
    const ROUNDING: Rounding;
}

impl HalfHost for bf16 {
    fn from_f32(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn poison() -> Self {
        bf16::from_bits(POISON_BF16)
    }
    const ROUNDING: Rounding = reference::BF16;
}

impl HalfHost for f16 {
    fn from_f32(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn poison() -> Self {
        f16::from_bits(POISON_F16)
    }
    const ROUNDING: Rounding = reference::F16;
}

/// f32 matrices multiplied as TF32.
impl HalfHost for f32 {
    fn from_f32(v: f32) -> Self {
        v
    }
    fn to_f32(self) -> f32 {
        self
    }
    fn poison() -> Self {
        f32::from_bits(POISON_F32)
    }
    const ROUNDING: Rounding = reference::TF32;
}

/// Runs `a`'s shapes (or the tensor-core sweep) in `dtype`.
pub fn run(gpu: &Gpu, a: &MatmulArgs, dtype: &str) -> Result<()> {
    match dtype {
        "bf16" => run_typed::<bf16>(gpu, a),
        "f16" => run_typed::<f16>(gpu, a),
        "tf32" => run_typed::<f32>(gpu, a),
        other => bail!("--dtype must be f32, bf16, f16 or tf32, got `{other}`"),
    }
}

fn run_typed<T: HalfHost>(gpu: &Gpu, a: &MatmulArgs) -> Result<()> {
    let shapes: Vec<(usize, usize, usize)> = match (a.sweep, a.m, a.n, a.k) {
        (true, ..) => HALF_SWEEP.to_vec(),
        (false, Some(m), Some(n), Some(k)) => vec![(m, n, k)],
        _ => bail!("give --m, --n and --k, or --sweep"),
    };
    let kernels: Vec<HgemmKernel> = match a.kernel.as_str() {
        "all" => HGEMM_ALL
            .iter()
            .filter(|t| T::kernel(t).is_some())
            .map(HgemmKernel::Step)
            .collect(),
        s => vec![HgemmKernel::parse(s)?],
    };
    let mut failed = false;
    let mut summary = Vec::new();
    for (m, n, k) in shapes {
        // Rows padded to 16 bytes, as the tensor-core kernels need (cuBLAS gets the same).
        let pad = |x: usize| x.next_multiple_of(16 / std::mem::size_of::<T>());
        let g = Gemm {
            alpha: a.alpha,
            beta: a.beta,
            lda: pad(k),
            ldb: if a.b_transposed { pad(k) } else { pad(n) },
            ldc: pad(n),
            ..Gemm::dense(m, n, k)
        };
        let (f, rows) = one_shape::<T>(gpu, &g, a, &kernels)?;
        failed |= f;
        summary.extend(rows);
    }
    if summary.len() > 1 && a.vs_cublas {
        println!();
        println!(
            "{:>24} {:<22} {:>10} {:>10} {:>10}",
            "m x n x k", "ours", "ms", "cuBLAS ms", "of cuBLAS"
        );
        let mut ratios = Vec::new();
        for (shape, name, ours, blas) in &summary {
            ratios.push(blas / ours);
            println!(
                "{shape:>24} {name:<22} {ours:>10.4} {blas:>10.4} {:>9.1}%",
                100.0 * blas / ours
            );
        }
        let (geo, worst) = geomean_and_worst(&ratios);
        println!(
            "{} geometric mean {:.1}% of cuBLAS, worst {:.1}%, over {} runs",
            T::DTYPE,
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

type Row = (String, String, f64, f64);

fn one_shape<T: HalfHost>(
    gpu: &Gpu,
    g: &Gemm,
    a: &MatmulArgs,
    kernels: &[HgemmKernel],
) -> Result<(bool, Vec<Row>)> {
    let layout = if a.b_transposed {
        BLayout::Transposed
    } else {
        BLayout::Rows
    };
    let (na, nb, nc) = operands_fit(
        gpu,
        g,
        (layout, layout != T::B_READ),
        std::mem::size_of::<T>() as u128,
    )?;
    let stream = gpu.stream().clone();
    let round = |v: Vec<f32>| -> (Vec<T>, Vec<f32>) {
        let h: Vec<T> = v.into_iter().map(T::from_f32).collect();
        let f = h.iter().map(|x| x.to_f32()).collect();
        (h, f)
    };
    let (ha, fa) = round(randn_f32(na, a.seed));
    let (hb, fb) = round(randn_f32(nb, a.seed.wrapping_add(1)));
    let (hc0, fc0) = round(randn_f32(nc, a.seed.wrapping_add(2)));
    let da = stream.clone_htod(&ha).context("uploading A")?;
    let db = stream.clone_htod(&hb).context("uploading B")?;
    let dc0 = stream.clone_htod(&hc0).context("uploading C")?;
    let mut dc: CudaSlice<T> = stream.alloc_zeros(nc).context("allocating C")?;
    let cublas = if a.vs_cublas {
        Some(CublasHalf::new(stream.clone())?)
    } else {
        None
    };
    let reference_rows = if a.check {
        let rows = check_rows(g);
        eprintln!("computing the f64 reference for {} rows...", rows.len());
        Some(reference::rows_with(
            g,
            layout,
            &fa,
            &fb,
            &fc0,
            &rows,
            T::ROUNDING,
        ))
    } else {
        None
    };
    let poison: Vec<T> = vec![T::poison(); nc];

    println!(
        "{} gemm {} x {} x {} (lda {}, ldb {}{}, ldc {}, alpha {}, beta {}), median of {} CUDA-event times after a warm-up",
        T::DTYPE, g.m, g.n, g.k, g.lda, g.ldb,
        if a.b_transposed { ", B transposed" } else { "" },
        g.ldc, g.alpha, g.beta, a.repeat
    );
    println!(
        "{:<26} {:>10} {:>9} {:>10}",
        "kernel", "ms", "TFLOP/s", "of cuBLAS"
    );
    let time =
        |run: &mut dyn FnMut() -> streamline::Result<()>| median_time(&stream, a.repeat, run);
    let check = |name: &str,
                 dc: &mut CudaSlice<T>,
                 run: &mut dyn FnMut(&mut CudaSlice<T>) -> streamline::Result<()>|
     -> Result<bool> {
        let Some(rows) = &reference_rows else {
            return Ok(false);
        };
        if g.beta == 0.0 {
            stream.memcpy_htod(&poison, dc).op("cuMemcpyHtoD")?;
        } else {
            stream.memcpy_dtod(&dc0, dc).op("cuMemcpyDtoD")?;
        }
        run(dc)?;
        let hc = stream.clone_dtoh(dc).op("cuMemcpyDtoH")?;
        let unwritten = if g.beta == 0.0 {
            // Only the elements of C (the padding past each row's `n` is not C's).
            (0..g.m)
                .flat_map(|i| (0..g.n).map(move |j| i * g.ldc + j))
                .filter(|&i| bytemuck::bytes_of(&hc[i]) == bytemuck::bytes_of(&T::poison()))
                .count()
        } else {
            0
        };
        let hf: Vec<f32> = hc.iter().map(|x| x.to_f32()).collect();
        let cmp = compare(g, &hf, rows);
        println!(
            "  check {name}: {} elements, {} outside the bound, {} unwritten, worst err/bound {:.3} at {:?}",
            cmp.checked, cmp.outside, unwritten, cmp.worst_ratio, cmp.worst_at
        );
        Ok(cmp.outside > 0 || unwritten > 0)
    };
    let mut failed = false;
    let cublas_ms = match &cublas {
        Some(blas) => {
            // The peer is checked against the same bound, but only ours decides the exit code.
            if check("cublas", &mut dc, &mut |c| {
                blas.gemm(g, layout, &da, &db, c)
            })? {
                println!(
                    "  note: cuBLAS's result is outside the bound of one f32 sum rounded once (it may sum or keep partial sums in lower precision for this shape)"
                );
            }
            Some(time(&mut || blas.gemm(g, layout, &da, &db, &mut dc))?)
        }
        None => None,
    };
    let mut rows = Vec::new();
    for &kernel in kernels {
        let (step, _) = kernel.resolve::<T>(gpu, g)?;
        let name = match kernel {
            HgemmKernel::Auto => format!("{} (auto)", step.name()),
            HgemmKernel::Step(_) => step.name().to_string(),
            HgemmKernel::Split(_, slices) => format!("{}:{slices}", step.name()),
        };
        let product = match layout {
            BLayout::Rows => hgemm::<T>,
            BLayout::Transposed => hgemm_bt::<T>,
        };
        failed |= check(&name, &mut dc, &mut |c| {
            product(gpu, &stream, kernel, g, &da, &db, c)
        })?;
        let ms = time(&mut || product(gpu, &stream, kernel, g, &da, &db, &mut dc))?;
        let ratio = cublas_ms.map_or(String::new(), |c| format!("{:.1}%", 100.0 * c / ms));
        println!(
            "{:<26} {:>10.4} {:>9.1} {:>10}",
            name,
            ms,
            g.flops() / ms / 1e9,
            ratio
        );
        if let Some(blas) = cublas_ms {
            rows.push((format!("{} x {} x {}", g.m, g.n, g.k), name, ms, blas));
        }
    }
    if let Some(ms) = cublas_ms {
        println!(
            "{:<26} {:>10.4} {:>9.1}",
            "cublas",
            ms,
            g.flops() / ms / 1e9
        );
    }
    Ok((failed, rows))
}
