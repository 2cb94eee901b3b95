//! The matmul kernels against the f64 CPU reference (`streamline_testing::reference::matmul`, whose
//! module documentation derives the bound `gamma_{k+2} (|alpha| S + |beta c|) + k 2^-149`
//! used here), and against cuBLAS.
//!
//! GPU cases place A, B and C at random element offsets inside larger buffers (so the 16-byte
//! paths and their scalar fallbacks both run), with padded row strides. C's buffer is poisoned
//! everywhere except, when `beta != 0`, the matrix elements (which hold the old C); afterwards
//! every matrix element must meet the bound (poison is a NaN, so an unwritten element fails)
//! and every other element must still be poison.

use cudarc::driver::CudaSlice;
use proptest::prelude::*;
use streamline::ops::matmul::{
    choose, plan, sgemm, Cublas, Gemm, Kernel, Plan, DOT_MAX_K, MAX_SLICES, MIN_K_SLICE,
};
use streamline::runtime::Gpu;
use streamline_abi::matmul::{
    SGEMM_DOT_1X16, SGEMM_SPLITK_ALL, SGEMM_SPLITK_WIDE_128X128, SGEMM_WHOLE,
};
use streamline_testing::data::{randn_f32, HeavyHost};
use streamline_testing::reference::matmul as reference;
use streamline_tests::{gpu, gpu_property};

pub(crate) const GUARD: usize = 13;

/// One GPU case; `kernel` indexes `SGEMM_WHOLE`, is `SGEMM_WHOLE.len()` for the shape rule, or
/// above that indexes `SGEMM_SPLITK_ALL`, split into `slices` slices of `K`.
#[derive(Clone, Debug)]
pub(crate) struct Case {
    pub(crate) g: Gemm,
    kernel: usize,
    slices: usize,
    pub(crate) offsets: [usize; 3],
    pub(crate) seed: u64,
}

/// Number of kernel choices of a [`Case`].
const KERNELS: usize = SGEMM_WHOLE.len() + 1 + SGEMM_SPLITK_ALL.len();

fn kernel_of(c: &Case) -> Kernel {
    match c.kernel.checked_sub(SGEMM_WHOLE.len() + 1) {
        Some(i) => Kernel::Split(&SGEMM_SPLITK_ALL[i], c.slices),
        None => SGEMM_WHOLE
            .get(c.kernel)
            .map_or(Kernel::Auto, Kernel::Fixed),
    }
}

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let Some(gpu) = gpu() else { return Ok(()) };
    let s = gpu.stream();
    let g = &c.g;
    let (na, nb, nc) = g.validate().unwrap();
    let [oa, ob, oc] = c.offsets;
    let a = randn_f32(na, c.seed);
    let b = randn_f32(nb, c.seed + 1);
    let c0 = randn_f32(nc, c.seed + 2);
    let mut abuf = vec![1.0f32; oa + na + GUARD];
    abuf[oa..oa + na].copy_from_slice(&a);
    let mut bbuf = vec![1.0f32; ob + nb + GUARD];
    bbuf[ob..ob + nb].copy_from_slice(&b);
    let in_c = |i: usize| i >= oc && i < oc + nc && (i - oc) % g.ldc < g.n;
    let mut cbuf = vec![f32::poison(); oc + nc + GUARD];
    if g.beta != 0.0 {
        for (i, v) in cbuf.iter_mut().enumerate() {
            if in_c(i) {
                *v = c0[i - oc];
            }
        }
    }
    let da: CudaSlice<f32> = s.clone_htod(&abuf).unwrap();
    let db: CudaSlice<f32> = s.clone_htod(&bbuf).unwrap();
    let mut dc: CudaSlice<f32> = s.clone_htod(&cbuf).unwrap();
    let kernel = kernel_of(c);
    {
        let av = da.slice(oa..oa + na);
        let bv = db.slice(ob..ob + nb);
        let mut cv = dc.slice_mut(oc..oc + nc);
        sgemm(gpu, s, kernel, g, &av, &bv, &mut cv).unwrap();
    }
    let out = s.clone_dtoh(&dc).unwrap();
    let stray = (0..out.len())
        .filter(|&i| !in_c(i) && !out[i].is_poison())
        .count();
    prop_assert_eq!(stray, 0, "{} elements outside C were written", stray);
    let rows: Vec<usize> = (0..g.m).collect();
    let want = reference::rows(g, &a, &b, &c0, &rows);
    let cmp = reference::compare(g, &out[oc..oc + nc], &want);
    prop_assert!(cmp.outside == 0, "{}", cmp);
    Ok(())
}

/// Dimensions: 1, primes, the tile sizes (8, 16, 32, 64, 128) and their neighbours, random.
pub(crate) fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 1usize..=300,
        2 => prop::sample::select(vec![
            1usize, 2, 3, 5, 7, 8, 9, 13, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 129,
            131, 191, 255, 256, 257, 293, 300,
        ]),
    ]
}

/// (alpha, beta): the plain product, accumulation, scaling both ways, a zero product.
pub(crate) fn scalars() -> impl Strategy<Value = (f32, f32)> {
    prop::sample::select(vec![
        (1.0f32, 0.0f32),
        (1.0, 1.0),
        (-1.5, 0.0),
        (0.5, 2.0),
        (2.0, -0.25),
        (0.0, 1.0),
    ])
}

pub(crate) fn case() -> impl Strategy<Value = Case> {
    (
        (dim(), dim(), dim()),
        (0usize..6, 0usize..6, 0usize..6),
        scalars(),
        (0..KERNELS, 1usize..=48),
        (0usize..4, 0usize..4, 0usize..4),
        any::<u64>(),
    )
        .prop_map(
            |((m, n, k), (pa, pb, pc), (alpha, beta), (kernel, slices), (oa, ob, oc), seed)| Case {
                g: Gemm {
                    m,
                    n,
                    k,
                    lda: k + pa,
                    ldb: n + pb,
                    ldc: n + pc,
                    alpha,
                    beta,
                },
                kernel,
                slices,
                offsets: [oa, ob, oc],
                seed: seed >> 8,
            },
        )
}

#[test]
fn sgemm_matches_reference() {
    gpu_property(96, case(), |c| run_case(&c));
}

/// Every kernel on shapes that exercise each edge at once: K = 1, one row, one column,
/// 1 x 1 x 1, and non-multiples of every tile in all three dimensions.
#[test]
fn sgemm_edge_shapes_every_kernel() {
    let shapes = [
        (1, 1, 1),
        (300, 257, 1),
        (1, 300, 129),
        (300, 1, 65),
        (129, 131, 257),
        (64, 64, 8),
    ];
    for (i, &(m, n, k)) in shapes.iter().enumerate() {
        for kernel in 0..KERNELS {
            // Split-K into 3 slices (uneven for most K) and into more slices than K has.
            for slices in [3, 2 * k + 7] {
                run_case(&Case {
                    g: Gemm {
                        alpha: 1.5,
                        beta: -0.5,
                        ..Gemm::dense(m, n, k)
                    },
                    kernel,
                    slices,
                    offsets: [0, 0, 0],
                    seed: 100 + i as u64,
                })
                .unwrap();
                if kernel <= SGEMM_WHOLE.len() {
                    break;
                }
            }
        }
    }
}

/// Ours (the shape rule, whole or split) against cuBLAS on the same inputs: relative Frobenius difference
/// below 1e-5. Both meet `|err| <= gamma_k S` elementwise; for random normal inputs the
/// rounding errors are close to independent, so the Frobenius difference grows like
/// `sqrt(k) u` (about 4e-6 at k = 4096) rather than `k u`.
#[test]
fn sgemm_agrees_with_cublas() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let blas = match Cublas::new(s.clone()) {
        Ok(b) => b,
        Err(e) => panic!("cuBLAS is needed for this comparison: {e}"),
    };
    for (i, size) in [1024usize, 2048, 4096].into_iter().enumerate() {
        let g = Gemm::dense(size, size, size);
        let a = randn_f32(size * size, 40 + i as u64);
        let b = randn_f32(size * size, 50 + i as u64);
        let da = s.clone_htod(&a).unwrap();
        let db = s.clone_htod(&b).unwrap();
        let mut ours: CudaSlice<f32> = s.clone_htod(&vec![f32::poison(); size * size]).unwrap();
        let mut theirs: CudaSlice<f32> = s.alloc_zeros(size * size).unwrap();
        sgemm(gpu, s, Kernel::Auto, &g, &da, &db, &mut ours).unwrap();
        blas.sgemm(&g, &da, &db, &mut theirs).unwrap();
        let x = s.clone_dtoh(&ours).unwrap();
        let y = s.clone_dtoh(&theirs).unwrap();
        let rel = reference::relative_frobenius(&x, &y, size, size, size);
        let plan_name = plan(size, size, size, gpu.info().multiprocessors).name();
        let chosen = plan_name.as_str();
        assert!(
            rel < 1e-5,
            "{size}: {chosen} vs cuBLAS relative error {rel:e}"
        );
        // And both against the f64 reference on a spread of rows, elementwise.
        let rows: Vec<usize> = (0..16).map(|r| r * (size - 1) / 15).collect();
        let want = reference::rows(&g, &a, &b, &[], &rows);
        for (name, c) in [(chosen, &x), ("cublas", &y)] {
            let cmp = reference::compare(&g, c, &want);
            assert_eq!(cmp.outside, 0, "{size} {name}: {cmp:?}");
        }
    }
}

/// Runs the shape rule on `g` three times from the same random inputs (`seed`, `seed + 1`) into
/// a poisoned C: the same bits every time, and within the bound.
fn repeatable_within_the_bound(gpu: &Gpu, g: &Gemm, seed: u64) {
    let s = gpu.stream();
    let a = randn_f32(g.m * g.k, seed);
    let b = randn_f32(g.k * g.n, seed + 1);
    let da = s.clone_htod(&a).unwrap();
    let db = s.clone_htod(&b).unwrap();
    let mut runs = Vec::new();
    for _ in 0..3 {
        let mut dc: CudaSlice<f32> = s.clone_htod(&vec![f32::poison(); g.m * g.n]).unwrap();
        sgemm(gpu, s, Kernel::Auto, g, &da, &db, &mut dc).unwrap();
        runs.push(s.clone_dtoh(&dc).unwrap());
    }
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&runs[0]), bits(&runs[1]), "{g:?}");
    assert_eq!(bits(&runs[0]), bits(&runs[2]), "{g:?}");
    let rows: Vec<usize> = (0..g.m).collect();
    let want = reference::rows(g, &a, &b, &[], &rows);
    let cmp = reference::compare(g, &runs[0], &want);
    assert_eq!(cmp.outside, 0, "{g:?}: {cmp:?}");
}

/// Split-K chosen by the shape rule for a skinny, deep product: within the bound, and the
/// same bits on every run (the slices are added in a fixed order, no atomics).
#[test]
fn split_k_is_deterministic_and_within_the_bound() {
    let Some(gpu) = gpu() else { return };
    let g = Gemm::dense(32, 130, 20_000);
    let chosen = plan(g.m, g.n, g.k, gpu.info().multiprocessors);
    assert!(
        matches!(chosen, Plan::Split { slices, .. } if slices >= 2),
        "{chosen:?}"
    );
    repeatable_within_the_bound(gpu, &g, 61);
}

/// The shape rule's kernel for a small product (a batch of 32 through a 10-way layer) splits
/// `K` inside its blocks: within the bound, and the same bits on every run.
#[test]
fn small_products_are_deterministic_and_within_the_bound() {
    let Some(gpu) = gpu() else { return };
    for (i, g) in [Gemm::dense(32, 10, 1024), Gemm::dense(7, 37, 16381)]
        .into_iter()
        .enumerate()
    {
        let chosen = plan(g.m, g.n, g.k, gpu.info().multiprocessors);
        assert_eq!(chosen, Plan::Whole(&SGEMM_DOT_1X16), "{g:?}");
        repeatable_within_the_bound(gpu, &g, 71 + 10 * i as u64);
    }
}

/// Buffers shorter than the shape are refused with an error naming the buffer, and nothing
/// is written.
#[test]
fn sgemm_rejects_short_buffers() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let g = Gemm::dense(4, 5, 6);
    let a: CudaSlice<f32> = s.clone_htod(&[1.0f32; 24]).unwrap();
    let b: CudaSlice<f32> = s.clone_htod(&[1.0f32; 30]).unwrap();
    let mut c: CudaSlice<f32> = s.clone_htod(&[f32::poison(); 19]).unwrap();
    let e = sgemm(gpu, s, Kernel::Auto, &g, &a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`c`") && e.contains("19"), "{e}");
    assert!(s.clone_dtoh(&c).unwrap().iter().all(|v| v.is_poison()));
    let short_b: CudaSlice<f32> = s.clone_htod(&[1.0f32; 29]).unwrap();
    let mut c: CudaSlice<f32> = s.alloc_zeros(20).unwrap();
    let e = sgemm(gpu, s, Kernel::Auto, &g, &a, &short_b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`b`"), "{e}");
}

// CPU-only checks of the argument rules and the launch rule.

#[test]
fn validation_names_the_argument() {
    let msg = |g: Gemm| g.validate().unwrap_err().to_string();
    assert!(msg(Gemm::dense(0, 4, 4)).contains("`m`"));
    assert!(msg(Gemm::dense(4, 0, 4)).contains("`n`"));
    assert!(msg(Gemm::dense(4, 4, 0)).contains("`k`"));
    assert!(msg(Gemm::dense(1 << 31, 4, 4)).contains("1..=2147483647"));
    let e = msg(Gemm {
        lda: 3,
        ..Gemm::dense(4, 4, 4)
    });
    assert!(e.contains("`lda`") && e.contains("4..="), "{e}");
    let e = msg(Gemm {
        ldc: 2,
        ..Gemm::dense(4, 4, 4)
    });
    assert!(e.contains("`ldc`"), "{e}");
    // Fits i32 per dimension but the buffer of A would exceed the address space.
    let huge = (i32::MAX) as usize;
    let e = msg(Gemm {
        lda: huge,
        ..Gemm::dense(huge, 1, 1)
    });
    assert!(e.contains("`a`") && e.contains("overflows"), "{e}");
    assert_eq!(
        Gemm::dense(3, 5, 7).validate().unwrap(),
        (3 * 7, 7 * 5, 3 * 5)
    );
    let padded = Gemm {
        lda: 9,
        ldb: 6,
        ldc: 8,
        ..Gemm::dense(3, 5, 7)
    };
    assert_eq!(
        padded.validate().unwrap(),
        (2 * 9 + 7, 6 * 6 + 5, 2 * 8 + 5)
    );
    let e = padded.check_lengths(25, 41, 20).unwrap_err().to_string();
    assert!(e.contains("`c`") && e.contains("21"), "{e}");
}

#[test]
fn kernel_names_parse() {
    assert_eq!(Kernel::parse("auto").unwrap(), Kernel::Auto);
    for t in &SGEMM_WHOLE {
        assert_eq!(Kernel::parse(t.spec.name()).unwrap(), Kernel::Fixed(t));
        let short = t.spec.name().trim_start_matches("sgemm_");
        assert_eq!(Kernel::parse(short).unwrap(), Kernel::Fixed(t));
    }
    assert_eq!(
        Kernel::parse("splitk_128x128:2").unwrap(),
        Kernel::Split(&SGEMM_SPLITK_ALL[0], 2)
    );
    for bad in ["splitk_128x128:0", "splitk_9x9:2", "splitk_64x64:x"] {
        let e = Kernel::parse(bad).unwrap_err().to_string();
        assert!(
            e.contains("`kernel`") && e.contains("splitk_128x128:2"),
            "{e}"
        );
    }
    let e = Kernel::parse("7_magic").unwrap_err().to_string();
    assert!(e.contains("`kernel`") && e.contains("1_naive"), "{e}");
}

proptest! {
    /// Split-K only where 128 x 128 tiles leave SMs idle, with 128 x 128 tiles when both sides
    /// exceed 64 (never more blocks than one resident wave holds), else only where even 64 x 64
    /// tiles do; its slices cover `K` exactly, each a multiple of the tile depth and at least
    /// `MIN_K_SLICE` deep, at most `MAX_SLICES`. In its place, `dot_1x16` only for products
    /// whose blocks fit the SMs and whose `K` is at most `DOT_MAX_K`.
    #[test]
    fn split_rule_covers_k(m in 1usize..5_000, n in 1usize..5_000, k in 1usize..400_000, sms in 1u32..200) {
        let enough = (sms as usize * 9).div_ceil(10);
        let blocks = |bm: usize, bn: usize| m.div_ceil(bm) * n.div_ceil(bn);
        match plan(m, n, k, sms) {
            // In place of split-K, small products only.
            Plan::Whole(t) if *t == SGEMM_DOT_1X16 => {
                prop_assert!(blocks(64, 64) < enough && (m <= 64 || n <= 64));
                prop_assert!(m * n.div_ceil(16) <= sms as usize);
                prop_assert!((2 * MIN_K_SLICE..=DOT_MAX_K).contains(&k));
            }
            Plan::Whole(t) => prop_assert_eq!(t, choose(m, n, sms)),
            Plan::Split { tiling, k_slice, slices } => {
                prop_assert!(blocks(128, 128) < enough);
                if m > 64 && n > 64 {
                    prop_assert_eq!(tiling.bm * tiling.bn, 128 * 128);
                } else {
                    prop_assert!(blocks(64, 64) < enough);
                }
                prop_assert!((2..=MAX_SLICES).contains(&slices));
                // Step 8's tile only for eight slices or more.
                prop_assert!(*tiling != SGEMM_SPLITK_WIDE_128X128 || slices >= 8);
                // Both sides longer than 64: no more blocks than one wave of two per SM
                // holds, unless even two slices exceed it.
                if m > 64 && n > 64 {
                    prop_assert!(slices == 2 || blocks(128, 128) * slices <= 2 * sms as usize);
                }
                prop_assert_eq!(k_slice % tiling.bk as usize, 0);
                prop_assert!(k_slice >= MIN_K_SLICE);
                prop_assert!((slices - 1) * k_slice < k && k <= slices * k_slice);
                prop_assert!(m > 32 || tiling.bm == 32);
            }
        }
    }

    /// The shape rule picks the largest tile that gives at least 90% of the SMs a block (step
    /// 8's 128 x 128, else step 5's 128 x 64), and step 5's smallest tile when none does.
    #[test]
    fn launch_rule_fills_the_gpu(m in 1usize..20_000, n in 1usize..20_000, sms in 1u32..200) {
        let t = choose(m, n, sms);
        let blocks = |bm: usize, bn: usize| m.div_ceil(bm) * n.div_ceil(bn);
        let enough = (sms as usize * 9).div_ceil(10);
        if blocks(128, 128) >= enough {
            prop_assert_eq!(t.spec.name(), "sgemm_8_wide_128x128");
        } else if blocks(128, 64) >= enough {
            prop_assert!(t.spec.name().starts_with("sgemm_5_"));
            prop_assert_eq!((t.bm, t.bn), (128, 64));
        } else {
            prop_assert!(t.spec.name().starts_with("sgemm_5_"));
            prop_assert_eq!((t.bm, t.bn), (64, 64));
        }
    }
}
