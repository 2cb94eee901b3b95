//! `softmax [ROWS COLS]`: runs both instances on a `ROWS x COLS` matrix (default 4096 x 1000)
//! and checks every element against the f64 reference.
//!
//! `softmax bench`: CUDA-event times of both instances on 4096 x 1000 and larger shapes, the
//! median of many runs after a warm-up, each run on another of several input buffers that
//! together exceed L2, beside a device-to-device copy of the same bytes; prints ms and GB/s
//! (bytes read plus bytes written) of a call timed alone, which counts the caller's launch
//! path where the GPU waits for it, and per call of a stream of calls queued back to back,
//! which counts the device's time. `examples/python/softmax_bench.py` times `torch.softmax`
//! on the same shapes the same two ways.

use anyhow::{bail, Context, Result};
use softmax::{bf16, softmax, Elem, KERNELS};
use std::sync::Arc;
use streamline::cudarc::driver::{CudaSlice, CudaStream};
use streamline::error::DriverContext;
use streamline::timing::time_on;
use streamline::{Gpu, Module};

/// Shapes the bench times: the common one, then larger.
const SHAPES: [(usize, usize); 5] = [
    (4096, 1000),
    (16384, 1000),
    (8192, 4096),
    (4096, 16384),
    (4096, 32768),
];
/// The inputs of one shape and type together exceed this (above any current GPU's L2).
const ROTATE_BYTES: usize = 256 << 20;
/// Calls queued back to back for the "in a stream" times, where no caller's launch path
/// leaves the GPU waiting.
const STREAMED: usize = 16;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let gpu = Gpu::new(0, None)?;
    let module = gpu.load(&KERNELS)?;
    let stream = gpu.stream();
    if args.first().map(String::as_str) == Some("bench") {
        println!(
            "shape, type, kernel ms, kernel GB/s, copy ms, copy GB/s, \
             in a stream: kernel ms, kernel GB/s, copy ms, copy GB/s"
        );
        for shape in SHAPES {
            bench::<f32>(&module, stream, shape, "f32")?;
            bench::<bf16>(&module, stream, shape, "bf16")?;
        }
        return Ok(());
    }
    let dim = |i: usize, d: usize| -> Result<usize> {
        args.get(i).map_or(Ok(d), |a| {
            a.parse().context("ROWS COLS: expected two counts")
        })
    };
    let (rows, cols) = (dim(0, 4096)?, dim(1, 1000)?);
    check::<f32>(&module, stream, rows, cols, |v| v)?;
    check::<bf16>(&module, stream, rows, cols, bf16::from_f32)?;
    println!(
        "softmax: {rows} x {cols}, f32 and bf16, on {} match the f64 reference",
        gpu.info().name
    );
    Ok(())
}

/// Inputs in [-8, 8): a spread of at most 16 per row.
fn input(n: usize, salt: usize) -> Vec<f32> {
    (0..n)
        .map(|i| ((i * 7919 + salt * 104_729) % 4096) as f32 / 256.0 - 8.0)
        .collect()
}

fn check<T: Elem>(
    module: &Module,
    stream: &Arc<CudaStream>,
    rows: usize,
    cols: usize,
    from: impl Fn(f32) -> T,
) -> Result<()>
where
    f64: From<T>,
{
    let x: Vec<T> = input(rows * cols, 1).into_iter().map(from).collect();
    let xd = stream.clone_htod(&x)?;
    let mut yd = stream.clone_htod(&x)?;
    softmax(module, stream, (rows, cols), &xd, &mut yd)?;
    let got: Vec<f32> = stream
        .clone_dtoh(&yd)?
        .into_iter()
        .map(|v| f64::from(v) as f32)
        .collect();
    let want = softmax::reference(&x.iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), cols);
    if let Err(e) = streamline_testing::compare(&got, &want, softmax::tolerance::<T>(cols, 16.0)) {
        bail!(
            "softmax {rows} x {cols} ({}): {e}",
            std::any::type_name::<T>()
        );
    }
    Ok(())
}

fn bench<T: Elem + Default>(
    module: &Module,
    stream: &Arc<CudaStream>,
    (rows, cols): (usize, usize),
    name: &str,
) -> Result<()> {
    let n = rows * cols;
    let bytes = n * std::mem::size_of::<T>();
    let count = ROTATE_BYTES.div_ceil(bytes).max(2);
    let x: Vec<CudaSlice<T>> = (0..count)
        .map(|_| stream.clone_htod(&vec![T::default(); n]))
        .collect::<Result<_, _>>()?;
    let mut y = stream.clone_htod(&vec![T::default(); n])?;
    // Milliseconds per call of `calls` calls queued back to back between two events, each on
    // the next input after `run`'s.
    let mut timed = |run: usize, calls: usize, kernel: bool| {
        time_on(stream, || {
            for k in 0..calls {
                let src = &x[(run * calls + k) % count];
                if kernel {
                    softmax(module, stream, (rows, cols), src, &mut y)?;
                } else {
                    stream.memcpy_dtod(src, &mut y).op("cuMemcpyDtoDAsync")?;
                }
            }
            Ok(())
        })
        .map(|ms| ms / calls as f64)
    };
    let mut t = [(); 4].map(|_| Vec::new());
    for run in 0..(count * 10).max(50) {
        let each = [
            timed(run, 1, true)?,
            timed(run, 1, false)?,
            timed(run, STREAMED, true)?,
            timed(run, STREAMED, false)?,
        ];
        if run >= count {
            t.iter_mut().zip(each).for_each(|(v, ms)| v.push(ms));
        }
    }
    let [k, c, ks, cs] = t.map(|mut v| median(&mut v));
    let gbs = |ms: f64| 2.0 * bytes as f64 / (ms * 1e6);
    println!(
        "{rows} x {cols}, {name}, {k:.4}, {:.1}, {c:.4}, {:.1}, {ks:.4}, {:.1}, {cs:.4}, {:.1}",
        gbs(k),
        gbs(c),
        gbs(ks),
        gbs(cs)
    );
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}
