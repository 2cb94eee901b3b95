//! `sgemm_after_sgd` and `sgemm_after_sgd_pair` (an owed SGD step on `B`, then the product):
//! where the update runs inside the split-K product (all but the mean of two bf16 gradients,
//! which takes the pass), the weights and `C` must have the bits of
//! the update pass followed by the same split-K product, and both must lie within the f64
//! references' bounds (`reference::train::sgd` / `sgd_pair` for each weight,
//! `reference::matmul::rows` for `C` of the updated weights).
//!
//! Shapes are awkward for the fused kernels: one row of blocks (`m` up to 128) over several
//! column blocks with ragged edges, depths that are no multiple of the tile's, odd `n` (no
//! 16-byte access to `B`), `A` at random element offsets and with padded rows, padded `C`.
//! The weights sit between poisoned guards and `C`'s padding is poisoned: neither may be
//! written.

use super::matmul::GUARD;
use cudarc::driver::CudaSlice;
use half::bf16;
use streamline::ops::matmul::{
    sgemm, sgemm_after_sgd, sgemm_after_sgd_pair, Applied, Gemm, Kernel,
};
use streamline::ops::train::{sgd, sgd_pair, GradElement};
use streamline_abi::matmul::SGEMM_SPLITK_WIDE_128X128;
use streamline_testing::data::{randn_f32, HeavyHost};
use streamline_testing::reference::matmul as reference;
use streamline_testing::reference::train as train_ref;
use streamline_tests::{gpu, gpu_property};

use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    g: Gemm,
    slices: usize,
    pair: bool,
    bf16: bool,
    /// Element offsets of `A` and of the weights in their buffers.
    offsets: [usize; 2],
    lr: f32,
    seed: u64,
}

fn case() -> impl Strategy<Value = Case> {
    (
        (1usize..=128, 1usize..=300, 1usize..=700),
        (0usize..3, 0usize..3),
        prop_oneof![Just((1.0f32, 0.0f32)), Just((0.5, 1.0)), Just((-1.5, 0.25))],
        2usize..=12,
        (any::<bool>(), any::<bool>()),
        (0usize..4, 0usize..4),
        prop_oneof![Just(0.01f32), Just(0.37), Just(-2.0)],
        any::<u64>(),
    )
        .prop_map(
            |((m, n, k), (pa, pc), (alpha, beta), slices, (pair, bf16), (oa, ow), lr, seed)| Case {
                g: Gemm {
                    lda: k + pa,
                    ldc: n + pc,
                    alpha,
                    beta,
                    ..Gemm::dense(m, n, k)
                },
                slices,
                pair,
                bf16,
                offsets: [oa, ow],
                lr,
                seed: seed >> 8,
            },
        )
}

/// The gradients in `G` (rounded from f32 by `of`), and their values as the kernels read them
/// (widened back by `back`).
fn grads<G: Copy>(n: usize, seed: u64, (of, back): Convert<G>) -> (Vec<G>, Vec<f32>) {
    let g: Vec<G> = randn_f32(n, seed).into_iter().map(of).collect();
    let v = g.iter().map(|&x| back(x)).collect();
    (g, v)
}

type Convert<G> = (fn(f32) -> G, fn(G) -> f32);

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    if c.bf16 {
        run_typed(c, (bf16::from_f32, bf16::to_f32))
    } else {
        run_typed(c, (|x| x, |x| x))
    }
}

fn run_typed<G: GradElement>(c: &Case, of: Convert<G>) -> Result<(), TestCaseError> {
    let Some(gpu) = gpu() else { return Ok(()) };
    let s = gpu.stream();
    let g = &c.g;
    let (na, nw, nc) = g.validate().unwrap();
    let [oa, ow] = c.offsets;
    let a = randn_f32(na, c.seed);
    let w0 = randn_f32(nw, c.seed + 1);
    let c0 = randn_f32(nc, c.seed + 2);
    let (g0, v0) = grads(nw, c.seed + 3, of);
    let (g1, v1) = grads(nw, c.seed + 4, of);
    let da: CudaSlice<f32> = s.clone_htod(&[vec![1.0; oa], a.clone()].concat()).unwrap();
    let wbuf = [
        vec![f32::poison(); ow],
        w0.clone(),
        vec![f32::poison(); GUARD],
    ]
    .concat();
    let in_c = |i: usize| i % g.ldc < g.n;
    let cbuf: Vec<f32> = (0..nc)
        .map(|i| {
            if in_c(i) && g.beta != 0.0 {
                c0[i]
            } else {
                f32::poison()
            }
        })
        .collect();
    let (dg0, dg1): (CudaSlice<G>, CudaSlice<G>) =
        (s.clone_htod(&g0).unwrap(), s.clone_htod(&g1).unwrap());
    let kernel = Kernel::Split(&SGEMM_SPLITK_WIDE_128X128, c.slices);
    // Fused, then the pass and the product, from the same inputs.
    let mut out = Vec::new();
    for fused in [true, false] {
        let mut dw: CudaSlice<f32> = s.clone_htod(&wbuf).unwrap();
        let mut dc: CudaSlice<f32> = s.clone_htod(&cbuf).unwrap();
        {
            let av = da.slice(oa..oa + na);
            let mut wv = dw.slice_mut(ow..ow + nw);
            if fused {
                let applied = if c.pair {
                    sgemm_after_sgd_pair(
                        gpu,
                        s,
                        kernel,
                        g,
                        &av,
                        (&mut wv, (&dg0, &dg1), c.lr),
                        &mut dc,
                    )
                } else {
                    sgemm_after_sgd(gpu, s, kernel, g, &av, (&mut wv, &dg0, c.lr), &mut dc)
                }
                .unwrap();
                // The mean of two bf16 gradients has no fused kernel.
                let inside = !(c.pair && c.bf16);
                let want = if inside {
                    Applied::InProduct
                } else {
                    Applied::ByPass
                };
                prop_assert_eq!(applied, want);
            } else {
                if c.pair {
                    sgd_pair(gpu, s, &mut wv, (&dg0, &dg1), c.lr).unwrap();
                } else {
                    sgd(gpu, s, &mut wv, &dg0, c.lr).unwrap();
                }
                sgemm(gpu, s, kernel, g, &av, &wv, &mut dc).unwrap();
            }
        }
        out.push((s.clone_dtoh(&dw).unwrap(), s.clone_dtoh(&dc).unwrap()));
    }
    let ((w, cm), (w_pass, c_pass)) = (&out[0], &out[1]);
    let stray = (0..w.len())
        .filter(|&i| (i < ow || i >= ow + nw) && !w[i].is_poison())
        .count();
    prop_assert_eq!(
        stray,
        0,
        "{} elements around the weights were written",
        stray
    );
    let stray = (0..nc).filter(|&i| !in_c(i) && !cm[i].is_poison()).count();
    prop_assert_eq!(stray, 0, "{} elements of C's padding were written", stray);
    for i in 0..nw {
        prop_assert_eq!(
            w[ow + i].to_bits(),
            w_pass[ow + i].to_bits(),
            "weight {}",
            i
        );
        let (want, bound) = if c.pair {
            train_ref::sgd_pair(w0[i], (v0[i], v1[i]), c.lr)
        } else {
            train_ref::sgd(w0[i], v0[i], c.lr)
        };
        let err = (w[ow + i] as f64 - want).abs();
        prop_assert!(
            err <= bound,
            "weight {}: {} against {} (bound {})",
            i,
            w[ow + i],
            want,
            bound
        );
    }
    for i in (0..nc).filter(|&i| in_c(i)) {
        prop_assert_eq!(cm[i].to_bits(), c_pass[i].to_bits(), "element {} of C", i);
    }
    let rows: Vec<usize> = (0..g.m).collect();
    let want = reference::rows(g, &a, &w[ow..ow + nw], &c0, &rows);
    let cmp = reference::compare(g, cm, &want);
    prop_assert!(cmp.outside == 0, "{}", cmp);
    Ok(())
}

#[test]
fn an_update_inside_the_product_has_the_bits_of_the_pass_then_the_product() {
    gpu_property(48, case(), |c| run_case(&c));
}

/// The shapes a training step gives, which random shapes seldom reach: everything 16-byte
/// aligned (the loops without bounds checks, the vector loads and stores), whole 128-row
/// tiles, and an edge block that crosses `n` with `n` a multiple of 4 (its fetches clamped),
/// for every gradient type and both ways of averaging.
#[test]
fn aligned_training_shapes_have_the_bits_of_the_pass_then_the_product() {
    let shapes = [
        (128, 1024, 4096, 33),
        (128, 200, 1000, 7),
        (96, 260, 517, 5),
    ];
    for (m, n, k, slices) in shapes {
        for (pair, bf16) in [(false, false), (false, true), (true, false), (true, true)] {
            let c = Case {
                g: Gemm::dense(m, n, k),
                slices,
                pair,
                bf16,
                offsets: [0, 0],
                lr: 0.37,
                seed: (m * n + k) as u64,
            };
            if let Err(e) = run_case(&c) {
                panic!("{c:?}: {e}");
            }
        }
    }
}

/// Products the fused kernels cannot take (more than one row of blocks, weights with padded
/// rows, a whole-product plan, a misaligned gradient) run the pass and then the product, and
/// say so.
#[test]
fn products_the_fused_kernels_cannot_take_run_the_pass_first() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let split = Kernel::Split(&SGEMM_SPLITK_WIDE_128X128, 4);
    let padded = Gemm {
        ldb: 40,
        ..Gemm::dense(8, 33, 64)
    };
    for (g, kernel, misaligned) in [
        (Gemm::dense(129, 64, 256), split, false),
        (padded, split, false),
        (Gemm::dense(8, 64, 256), Kernel::Auto, false),
        (Gemm::dense(8, 64, 256), split, true),
    ] {
        let (na, nw, nc) = g.validate().unwrap();
        let nw = if g.ldb > g.n { nw + g.ldb - g.n } else { nw };
        let a: CudaSlice<f32> = s.clone_htod(&randn_f32(na, 1)).unwrap();
        let w0 = randn_f32(nw, 2);
        let gr = randn_f32(nw + 1, 3);
        let dg: CudaSlice<f32> = s.clone_htod(&gr).unwrap();
        let gv = if misaligned {
            dg.slice(1..nw + 1)
        } else {
            dg.slice(0..nw)
        };
        let mut outs = Vec::new();
        for fused in [true, false] {
            let mut w: CudaSlice<f32> = s.clone_htod(&w0).unwrap();
            let mut c: CudaSlice<f32> = s.alloc_zeros(nc).unwrap();
            if fused {
                let applied = sgemm_after_sgd(gpu, s, kernel, &g, &a, (&mut w, &gv, 0.5), &mut c);
                assert_eq!(applied.unwrap(), Applied::ByPass, "{g:?} {kernel:?}");
            } else {
                sgd(gpu, s, &mut w, &gv, 0.5).unwrap();
                sgemm(gpu, s, kernel, &g, &a, &w, &mut c).unwrap();
            }
            outs.push((s.clone_dtoh(&w).unwrap(), s.clone_dtoh(&c).unwrap()));
        }
        assert_eq!(outs[0], outs[1], "{g:?}");
    }
}

/// Bad arguments are refused by name before anything runs: gradients of another length than
/// the weights, a learning rate that is not finite, short buffers.
#[test]
fn bad_arguments_are_refused_by_name_and_nothing_is_written() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let g = Gemm::dense(8, 64, 256);
    let kernel = Kernel::Split(&SGEMM_SPLITK_WIDE_128X128, 4);
    let a: CudaSlice<f32> = s.clone_htod(&randn_f32(8 * 256, 1)).unwrap();
    let w0 = randn_f32(256 * 64, 2);
    let mut w: CudaSlice<f32> = s.clone_htod(&w0).unwrap();
    let good: CudaSlice<bf16> = s.alloc_zeros(256 * 64).unwrap();
    let short: CudaSlice<bf16> = s.alloc_zeros(256 * 64 - 1).unwrap();
    let mut c: CudaSlice<f32> = s.clone_htod(&vec![f32::poison(); 8 * 64]).unwrap();
    let e = sgemm_after_sgd(gpu, s, kernel, &g, &a, (&mut w, &short, 0.1), &mut c);
    assert!(e.unwrap_err().to_string().contains("`g`"));
    let e = sgemm_after_sgd_pair(
        gpu,
        s,
        kernel,
        &g,
        &a,
        (&mut w, (&good, &short), 0.1),
        &mut c,
    );
    assert!(e.unwrap_err().to_string().contains("`g1`"));
    let e = sgemm_after_sgd(gpu, s, kernel, &g, &a, (&mut w, &good, f32::NAN), &mut c);
    assert!(e.unwrap_err().to_string().contains("`lr`"));
    let mut short_c: CudaSlice<f32> = s.alloc_zeros(8 * 64 - 1).unwrap();
    let e = sgemm_after_sgd(gpu, s, kernel, &g, &a, (&mut w, &good, 0.1), &mut short_c);
    assert!(e.unwrap_err().to_string().contains("`c`"));
    assert_eq!(s.clone_dtoh(&w).unwrap(), w0);
    assert!(s.clone_dtoh(&c).unwrap().iter().all(|v| v.is_poison()));
}
