//! The tensor-core kernels (bf16, f16, and f32 as TF32) against the f64 CPU reference
//! (`streamline_testing::reference::hgemm`, whose module documentation derives the bound used
//! here), under CUDA graph capture, and their argument checks.
//!
//! GPU cases place A, B and C at random 16-byte offsets inside larger buffers with padded row
//! strides. C's buffer is poisoned everywhere except, when `beta != 0`, the matrix elements
//! (which hold the old C); afterwards every matrix element must meet the bound (poison is a
//! NaN, so an unwritten element fails) and every other element must still be poison.

use cudarc::driver::CudaSlice;
use half::{bf16, f16};
use proptest::prelude::*;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::ops::hgemm::{check_alignment, hgemm, hgemm_bt, BLayout, Gemm, Half, HgemmKernel};
use streamline::runtime::{Gpu, KernelImage, KERNELS};
use streamline_abi::hgemm::{
    HGEMM_1_MMA, HGEMM_2_WGMMA, HGEMM_2_WGMMA_BF16, HGEMM_3_PERSISTENT, HGEMM_4_TMA_STORE,
    HGEMM_5_NARROW,
};
use streamline_testing::data::{randn_f32, POISON_BF16, POISON_F16, POISON_F32};
use streamline_testing::reference::hgemm::{self as reference, Rounding};
use streamline_testing::reference::matmul::compare;
use streamline_tests::{gpu, gpu_property};

const GUARD: usize = 24;

/// What a test needs of an element type.
trait Elem: Half + bytemuck::Pod + cudarc::driver::ValidAsZeroBits + Send + Sync {
    fn of(v: f32) -> Self;
    fn f32(self) -> f32;
    fn poison() -> Self;
    const ROUNDING: Rounding;
}

impl Elem for bf16 {
    fn of(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn f32(self) -> f32 {
        self.to_f32()
    }
    fn poison() -> Self {
        bf16::from_bits(POISON_BF16)
    }
    const ROUNDING: Rounding = reference::BF16;
}

impl Elem for f16 {
    fn of(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn f32(self) -> f32 {
        self.to_f32()
    }
    fn poison() -> Self {
        f16::from_bits(POISON_F16)
    }
    const ROUNDING: Rounding = reference::F16;
}

/// f32 matrices multiplied as TF32.
impl Elem for f32 {
    fn of(v: f32) -> Self {
        v
    }
    fn f32(self) -> f32 {
        self
    }
    fn poison() -> Self {
        f32::from_bits(POISON_F32)
    }
    const ROUNDING: Rounding = reference::TF32;
}

fn is_poison<T: Elem>(v: T) -> bool {
    bytemuck::bytes_of(&v) == bytemuck::bytes_of(&T::poison())
}

/// `n` standard-normal values of `T`, and the same values as f32.
fn values<T: Elem>(n: usize, seed: u64) -> (Vec<T>, Vec<f32>) {
    values_as::<T>(n, seed, |v| v)
}

/// [`values`] passed through `f` first.
fn values_as<T: Elem>(n: usize, seed: u64, f: fn(f32) -> f32) -> (Vec<T>, Vec<f32>) {
    let h: Vec<T> = randn_f32(n, seed)
        .into_iter()
        .map(|v| T::of(f(v)))
        .collect();
    let f = h.iter().map(|v| v.f32()).collect();
    (h, f)
}

/// `v` with the 13 low bits of its mantissa cleared: a value TF32 holds exactly.
fn tf32_exact(v: f32) -> f32 {
    f32::from_bits(v.to_bits() & !0x1fff)
}

#[derive(Clone, Debug)]
struct Case {
    g: Gemm,
    /// 0: the `mma.sync` step, 1: the `wgmma` step, 2: the persistent one, 3: its TMA-store
    /// variant (the last three where loaded), 4: auto, 5: step 4 with `K` cut into 3 slices,
    /// 6: step 3 into 5, 7: step 5 (narrow tiles), 8: step 5 into 3 slices. TF32 (Hopper only)
    /// runs the persistent step for 0 to 2, the TMA-store one for 3.
    kernel: usize,
    /// Offsets of A, B, C in their buffers, in elements.
    offsets: [usize; 3],
    /// How `B` is given (`g.ldb` the stride of its rows either way).
    layout: BLayout,
    seed: u64,
}

fn kernel_of<T: Elem>(gpu: &Gpu, c: &Case) -> Option<HgemmKernel> {
    let hopper = gpu.kernels().unwrap().has(HGEMM_2_WGMMA_BF16);
    if T::B_READ == BLayout::Transposed {
        return match c.kernel {
            _ if !hopper => None,
            0..=2 => Some(HgemmKernel::Step(&HGEMM_3_PERSISTENT)),
            3 => Some(HgemmKernel::Step(&HGEMM_4_TMA_STORE)),
            5 => Some(HgemmKernel::Split(&HGEMM_4_TMA_STORE, 3)),
            6 => Some(HgemmKernel::Split(&HGEMM_3_PERSISTENT, 5)),
            7 => Some(HgemmKernel::Step(&HGEMM_5_NARROW)),
            8 => Some(HgemmKernel::Split(&HGEMM_5_NARROW, 3)),
            _ => Some(HgemmKernel::Auto),
        };
    }
    match c.kernel {
        0 => Some(HgemmKernel::Step(&HGEMM_1_MMA)),
        1..=3 | 5..=8 if !hopper => None,
        1 => Some(HgemmKernel::Step(&HGEMM_2_WGMMA)),
        2 => Some(HgemmKernel::Step(&HGEMM_3_PERSISTENT)),
        3 => Some(HgemmKernel::Step(&HGEMM_4_TMA_STORE)),
        5 => Some(HgemmKernel::Split(&HGEMM_4_TMA_STORE, 3)),
        6 => Some(HgemmKernel::Split(&HGEMM_3_PERSISTENT, 5)),
        7 => Some(HgemmKernel::Step(&HGEMM_5_NARROW)),
        8 => Some(HgemmKernel::Split(&HGEMM_5_NARROW, 3)),
        _ => Some(HgemmKernel::Auto),
    }
}

fn run_case<T: Elem>(c: &Case) -> Result<(), TestCaseError> {
    run_case_as::<T>(c, |v| v, T::ROUNDING)
}

/// [`run_case`] with inputs passed through `f` and the bound of `rounding`.
fn run_case_as<T: Elem>(
    c: &Case,
    f: fn(f32) -> f32,
    rounding: Rounding,
) -> Result<(), TestCaseError> {
    let Some(gpu) = gpu() else { return Ok(()) };
    let Some(kernel) = kernel_of::<T>(gpu, c) else {
        return Ok(());
    };
    let s = gpu.stream();
    let g = &c.g;
    let (na, nb, nc) = g.validate_with(c.layout).unwrap();
    let [oa, ob, oc] = c.offsets;
    let (a, fa) = values_as::<T>(na, c.seed, f);
    let (b, fb) = values_as::<T>(nb, c.seed + 1, f);
    let (c0, fc0) = values_as::<T>(nc, c.seed + 2, f);
    let mut abuf = vec![T::of(1.0); oa + na + GUARD];
    abuf[oa..oa + na].copy_from_slice(&a);
    let mut bbuf = vec![T::of(1.0); ob + nb + GUARD];
    bbuf[ob..ob + nb].copy_from_slice(&b);
    let in_c = |i: usize| i >= oc && i < oc + nc && (i - oc) % g.ldc < g.n;
    let mut cbuf: Vec<T> = vec![T::poison(); oc + nc + GUARD];
    if g.beta != 0.0 {
        for (i, v) in cbuf.iter_mut().enumerate() {
            if in_c(i) {
                *v = c0[i - oc];
            }
        }
    }
    let da: CudaSlice<T> = s.clone_htod(&abuf).unwrap();
    let db: CudaSlice<T> = s.clone_htod(&bbuf).unwrap();
    let mut dc: CudaSlice<T> = s.clone_htod(&cbuf).unwrap();
    {
        let av = da.slice(oa..oa + na);
        let bv = db.slice(ob..ob + nb);
        let mut cv = dc.slice_mut(oc..oc + nc);
        match c.layout {
            BLayout::Rows => hgemm(gpu, s, kernel, g, &av, &bv, &mut cv).unwrap(),
            BLayout::Transposed => hgemm_bt(gpu, s, kernel, g, &av, &bv, &mut cv).unwrap(),
        }
    }
    let out = s.clone_dtoh(&dc).unwrap();
    let stray = (0..out.len())
        .filter(|&i| !in_c(i) && !is_poison(out[i]))
        .count();
    prop_assert_eq!(stray, 0, "{} elements outside C were written", stray);
    let got: Vec<f32> = out[oc..oc + nc].iter().map(|v| v.f32()).collect();
    let rows: Vec<usize> = (0..g.m).collect();
    let want = reference::rows_with(g, c.layout, &fa, &fb, &fc0, &rows, rounding);
    let cmp = compare(g, &got, &want);
    prop_assert!(cmp.outside == 0, "{}", cmp);
    Ok(())
}

/// Dimensions: 1, the tile sizes (16, 64, 128, 256) and their neighbours, random.
fn dim() -> impl Strategy<Value = usize> {
    prop_oneof![
        3 => 1usize..=300,
        2 => prop::sample::select(vec![
            1usize, 2, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257,
            383, 513,
        ]),
    ]
}

fn case() -> impl Strategy<Value = Case> {
    (
        (dim(), dim(), dim()),
        (0usize..3, 0usize..3, 0usize..3),
        prop::sample::select(vec![
            (1.0f32, 0.0f32),
            (1.0, 1.0),
            (-1.5, 0.0),
            (0.5, 2.0),
            (0.0, 1.0),
        ]),
        0usize..9,
        (0usize..3, 0usize..3, 0usize..3),
        any::<bool>(),
        any::<u64>(),
    )
        .prop_map(
            |((m, n, k), (pa, pb, pc), (alpha, beta), kernel, (oa, ob, oc), bt, seed)| {
                let pad = |x: usize, p: usize| x.next_multiple_of(8) + 8 * p;
                let layout = if bt {
                    BLayout::Transposed
                } else {
                    BLayout::Rows
                };
                Case {
                    g: Gemm {
                        m,
                        n,
                        k,
                        lda: pad(k, pa),
                        ldb: pad(if bt { k } else { n }, pb),
                        ldc: pad(n, pc),
                        alpha,
                        beta,
                    },
                    kernel,
                    offsets: [8 * oa, 8 * ob, 8 * oc],
                    layout,
                    seed: seed >> 8,
                }
            },
        )
}

#[test]
fn hgemm_bf16_matches_reference() {
    gpu_property(48, case(), |c| run_case::<bf16>(&c));
}

#[test]
fn hgemm_f16_matches_reference() {
    gpu_property(32, case(), |c| run_case::<f16>(&c));
}

#[test]
fn hgemm_tf32_matches_reference() {
    gpu_property(32, case(), |c| run_case::<f32>(&c));
}

/// TF32 on steps 3 and 4 on rows padded only to 16 bytes (4 f32), at the edges and deep enough
/// to split `K` (two output tiles, 129 stages; one tile of 32 stages by default), `B` given as
/// rows (through the transposition at odd sizes) and transposed (read where it is); step 4
/// through its TMA epilogue where `n` is a multiple of 4 and `beta` is 0.
#[test]
fn hgemm_tf32_edge_and_deep_shapes() {
    if gpu().is_none() {
        return;
    }
    for (m, n, k) in [
        (1usize, 1usize, 1usize),
        (1, 300, 9),
        (300, 1, 17),
        (129, 257, 1),
        (130, 250, 4100),
        (33, 65, 31),
        (70, 260, 50),
        (257, 512, 130),
        (2048, 4352, 64),
        (32, 10, 1024),
    ] {
        for (kernel, (alpha, beta)) in [
            (2, (1.0, 0.0)),
            (3, (1.0, 0.0)),
            (3, (0.5, 2.0)),
            (4, (1.0, 0.0)),
        ] {
            for layout in [BLayout::Rows, BLayout::Transposed] {
                let ldb = match layout {
                    BLayout::Rows => n.next_multiple_of(4),
                    BLayout::Transposed => k.next_multiple_of(4),
                };
                let c = Case {
                    g: Gemm {
                        lda: k.next_multiple_of(4),
                        ldb,
                        ldc: n.next_multiple_of(4),
                        alpha,
                        beta,
                        ..Gemm::dense(m, n, k)
                    },
                    kernel,
                    offsets: [8, 0, 16],
                    layout,
                    seed: (m * n + k) as u64,
                };
                run_case::<f32>(&c).unwrap_or_else(|e| {
                    panic!("{m}x{n}x{k} tf32 kernel {kernel} beta {beta} {layout:?}: {e}")
                });
            }
        }
    }
}

/// Inputs TF32 holds exactly leave only the f32 sum's error: both TF32 steps meet the bound
/// without the inputs' term, which a kernel reading fewer bits of them, or skipping part of `K`,
/// would not.
#[test]
fn hgemm_tf32_exact_inputs_meet_the_sum_only_bound() {
    if gpu().is_none() {
        return;
    }
    let exact = Rounding {
        input: 0.0,
        ..reference::TF32
    };
    for (m, n, k) in [(130usize, 250usize, 4100usize), (257, 512, 130)] {
        for kernel in [2, 3] {
            let c = Case {
                g: Gemm {
                    lda: k.next_multiple_of(4),
                    ldb: n.next_multiple_of(4),
                    ldc: n.next_multiple_of(4),
                    ..Gemm::dense(m, n, k)
                },
                kernel,
                offsets: [0, 8, 0],
                layout: BLayout::Rows,
                seed: (m + n * k) as u64,
            };
            run_case_as::<f32>(&c, tf32_exact, exact)
                .unwrap_or_else(|e| panic!("{m}x{n}x{k} kernel {kernel}: {e}"));
        }
    }
}

/// A step without a TF32 kernel, asked for one, names the step and the ones that have it.
#[test]
fn tf32_on_a_step_without_it_names_the_steps_that_have_it() {
    let Some(gpu) = gpu() else { return };
    let g = Gemm::dense(8, 8, 8);
    let e = HgemmKernel::Step(&HGEMM_1_MMA)
        .resolve::<f32>(gpu, &g)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("hgemm_1_mma") && e.contains("tf32") && e.contains("hgemm_3_persistent"),
        "{e}"
    );
}

/// Every step on shapes with every edge at once, and a deep product (many pipeline rounds,
/// the ring's phases wrapping many times), the persistent steps also with `K` cut into slices
/// (fewer stages than slices included), the default on one-tile products it splits, `B` given
/// as rows and transposed (through the transposition into the kernels' layout).
#[test]
fn hgemm_edge_and_deep_shapes_every_step() {
    if gpu().is_none() {
        return;
    }
    for (m, n, k) in [
        (1usize, 1usize, 1usize),
        (1, 300, 9),
        (300, 1, 17),
        (129, 257, 1),
        (130, 250, 4100),
        (32, 10, 1024),
        (64, 64, 2048),
    ] {
        for kernel in 0..9 {
            for layout in [BLayout::Rows, BLayout::Transposed] {
                let ldb = match layout {
                    BLayout::Rows => n.next_multiple_of(8),
                    BLayout::Transposed => k.next_multiple_of(8),
                };
                let c = Case {
                    g: Gemm {
                        lda: k.next_multiple_of(8),
                        ldb,
                        ldc: n.next_multiple_of(8),
                        ..Gemm::dense(m, n, k)
                    },
                    kernel,
                    offsets: [8, 0, 16],
                    layout,
                    seed: (m * n + k) as u64,
                };
                run_case::<bf16>(&c)
                    .unwrap_or_else(|e| panic!("{m}x{n}x{k} step {kernel} {layout:?}: {e}"));
            }
        }
    }
}

/// `B` given transposed must have rows of at least `k` elements: the error names `ldb` and the
/// range; the rows layout's check is unchanged.
#[test]
fn transposed_b_strides_are_checked_against_k() {
    let g = Gemm {
        ldb: 20,
        ..Gemm::dense(4, 20, 32)
    };
    g.validate().unwrap();
    let e = g
        .validate_with(BLayout::Transposed)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ldb") && e.contains("32..="), "{e}");
    let (_, nb, _) = Gemm { ldb: 40, ..g }
        .validate_with(BLayout::Transposed)
        .unwrap();
    assert_eq!(nb, 19 * 40 + 32, "an n x k B with row stride 40");
}

/// A product's tensor maps, uploaded and kept, serve the same product again on their stream,
/// and another stream gets its own: every run gives the first run's bits, every element
/// written.
#[test]
fn kept_tensor_maps_serve_repeated_products() {
    let Some(gpu) = gpu() else { return };
    if !gpu.kernels().unwrap().has(HGEMM_2_WGMMA_BF16) {
        return;
    }
    let g = Gemm::dense(200, 136, 312);
    let (na, nb, nc) = g.validate().unwrap();
    let (s1, s2) = (gpu.new_stream().unwrap(), gpu.new_stream().unwrap());
    let a: CudaSlice<bf16> = s1.clone_htod(&values::<bf16>(na + 8, 91).0).unwrap();
    let b: CudaSlice<bf16> = s1.clone_htod(&values::<bf16>(nb + 8, 92).0).unwrap();
    let poison = vec![bf16::poison(); nc];
    let mut c: CudaSlice<bf16> = s1.clone_htod(&poison).unwrap();
    let step = HgemmKernel::Step(&HGEMM_4_TMA_STORE);
    let (av, bv) = (a.slice(8..), b.slice(8..));
    let mut runs = Vec::new();
    for s in [&s1, &s1, &s2, &s2, &s1] {
        s.memcpy_htod(&poison, &mut c).unwrap();
        hgemm(gpu, s, step, &g, &av, &bv, &mut c).unwrap();
        runs.push(s.clone_dtoh(&c).unwrap());
    }
    assert!(
        runs[0].iter().all(|v| !is_poison(*v)),
        "elements left unwritten"
    );
    for (i, r) in runs.iter().enumerate() {
        let same = r
            .iter()
            .zip(&runs[0])
            .all(|(p, q)| p.to_bits() == q.to_bits());
        assert!(same, "run {i} differs from the first");
    }
}

/// Captured in the engine's CUDA graph and replayed with new inputs, each step gives the
/// eager call's result bit for bit, `B` given either way (the TMA step's tensor maps live in
/// memory the graph keeps, and so does a transposed copy of `B`),
/// split-K included: two output tiles with 65 `K` tiles make steps 3 and 4 cut `K` into slices,
/// whose partials the graph allocates and frees itself; with `beta` 0 step 4 writes through its
/// staging area and the TMA.
#[test]
fn hgemm_replays_under_capture_as_eager() {
    let Some(gpu) = gpu() else { return };
    for (m, n, k, beta) in [
        (200, 136, 312, 0.5),
        (200, 136, 65 * 64, 0.5),
        (200, 136, 312, 0.0),
    ] {
        let g = Gemm {
            alpha: 0.75,
            beta,
            ..Gemm::dense(m, n, k)
        };
        for layout in [BLayout::Rows, BLayout::Transposed] {
            let g = Gemm {
                ldb: if layout == BLayout::Rows { n } else { k },
                ..g
            };
            replays_as_eager::<bf16>(gpu, &g, layout);
            replays_as_eager::<f32>(gpu, &g, layout);
        }
    }
}

fn replays_as_eager<T: Elem>(gpu: &Gpu, g: &Gemm, layout: BLayout) {
    let pool = StreamPool::with_streams(gpu, 1).unwrap();
    let st = pool.stream(0).unwrap();
    let (na, nb, nc) = g.validate_with(layout).unwrap();
    let product = match layout {
        BLayout::Rows => hgemm::<T>,
        BLayout::Transposed => hgemm_bt::<T>,
    };
    for kernel in [
        HgemmKernel::Step(&HGEMM_1_MMA),
        HgemmKernel::Step(&HGEMM_2_WGMMA),
        HgemmKernel::Step(&HGEMM_3_PERSISTENT),
        HgemmKernel::Step(&HGEMM_4_TMA_STORE),
        HgemmKernel::Step(&HGEMM_5_NARROW),
    ] {
        let HgemmKernel::Step(t) = kernel else {
            unreachable!()
        };
        if T::kernel(t).is_none()
            || (kernel != HgemmKernel::Step(&HGEMM_1_MMA)
                && !gpu.kernels().unwrap().has(HGEMM_2_WGMMA_BF16))
        {
            continue;
        }
        let mut a = DeviceBuffer::<T>::zeros(&pool, 0, na).unwrap();
        let mut b = DeviceBuffer::<T>::zeros(&pool, 0, nb).unwrap();
        let mut c = DeviceBuffer::<T>::zeros(&pool, 0, nc).unwrap();
        let mut want = DeviceBuffer::<T>::zeros(&pool, 0, nc).unwrap();
        pool.synchronize().unwrap();
        let cap = pool.begin_capture(0).unwrap();
        product(gpu, st, kernel, g, &a, &b, &mut c).unwrap();
        let graph = cap.end().unwrap();
        for r in 0..3u64 {
            let c0 = values::<T>(nc, 30 + r).0;
            streamline::engine::memory::h2d(st, &values::<T>(na, 10 + r).0, &mut a).unwrap();
            streamline::engine::memory::h2d(st, &values::<T>(nb, 20 + r).0, &mut b).unwrap();
            streamline::engine::memory::h2d(st, &c0, &mut c).unwrap();
            streamline::engine::memory::h2d(st, &c0, &mut want).unwrap();
            product(gpu, st, kernel, g, &a, &b, &mut want).unwrap();
            graph.launch().unwrap();
            pool.synchronize().unwrap();
            let (y, e) = (c.to_vec(st).unwrap(), want.to_vec(st).unwrap());
            let same = y
                .iter()
                .zip(&e)
                .all(|(p, q)| bytemuck::bytes_of(p) == bytemuck::bytes_of(q));
            assert!(
                same,
                "{kernel:?} {} {}x{}x{} {layout:?} replay {r} differs from eager",
                T::DTYPE,
                g.m,
                g.n,
                g.k
            );
        }
    }
}

#[test]
fn misaligned_rows_and_addresses_name_the_argument() {
    let g = Gemm {
        lda: 20,
        ..Gemm::dense(4, 8, 20)
    };
    let e = check_alignment(&g, 2, 0, Some(0), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lda") && e.contains("multiple of 8"), "{e}");
    // f32 rows need 4 elements to 16 bytes.
    check_alignment(&g, 4, 0, Some(0), 0).unwrap();
    let e = check_alignment(&Gemm { lda: 18, ..g }, 4, 0, Some(0), 0)
        .unwrap_err()
        .to_string();
    assert!(e.contains("lda") && e.contains("multiple of 4"), "{e}");
    let g = Gemm::dense(4, 8, 16);
    check_alignment(&g, 2, 256, Some(512), 1024).unwrap();
    let e = check_alignment(&g, 2, 256, Some(514), 1024)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("`b`") || e.contains("b:") || e.contains(" b "),
        "{e}"
    );
    assert!(e.contains("16-byte aligned"), "{e}");
    // A `B` the kernels read only through a transposed copy may have any stride and address.
    let odd = Gemm { ldb: 9, ..g };
    let e = check_alignment(&odd, 2, 256, Some(514), 1024)
        .unwrap_err()
        .to_string();
    assert!(e.contains("ldb"), "{e}");
    check_alignment(&odd, 2, 256, None, 1024).unwrap();
}

/// A `B` that reaches the kernels through a transposed copy (bf16 given `n x k`, TF32 given
/// `k x n`) may start anywhere and have rows of any stride: the copy is aligned.
#[test]
fn copied_b_takes_any_stride_and_offset() {
    if gpu().is_none() {
        return;
    }
    for (m, n, k) in [(33usize, 70usize, 45usize), (129, 9, 200), (8, 300, 1030)] {
        for kernel in [0, 3, 4, 5] {
            let c = Case {
                g: Gemm {
                    lda: k.next_multiple_of(8),
                    ldb: k + 1,
                    ldc: n.next_multiple_of(8),
                    ..Gemm::dense(m, n, k)
                },
                kernel,
                offsets: [8, 3, 16],
                layout: BLayout::Transposed,
                seed: (m + n + k) as u64,
            };
            run_case::<bf16>(&c).unwrap_or_else(|e| panic!("bf16 {m}x{n}x{k} step {kernel}: {e}"));
            let c = Case {
                g: Gemm {
                    lda: k.next_multiple_of(4),
                    ldb: n + 1,
                    ldc: n.next_multiple_of(4),
                    ..Gemm::dense(m, n, k)
                },
                offsets: [4, 1, 8],
                layout: BLayout::Rows,
                ..c
            };
            run_case::<f32>(&c).unwrap_or_else(|e| panic!("tf32 {m}x{n}x{k} step {kernel}: {e}"));
        }
    }
}

#[test]
fn split_steps_parse_with_their_slice_count() {
    assert_eq!(
        HgemmKernel::parse("4_tma_store:4").unwrap(),
        HgemmKernel::Split(&HGEMM_4_TMA_STORE, 4)
    );
    assert_eq!(
        HgemmKernel::parse("hgemm_3_persistent:1").unwrap(),
        HgemmKernel::Split(&HGEMM_3_PERSISTENT, 1)
    );
    let e = HgemmKernel::parse("2_wgmma:2").unwrap_err().to_string();
    assert!(e.contains("cannot split K"), "{e}");
    let e = HgemmKernel::parse("auto:2").unwrap_err().to_string();
    assert!(e.contains("not with auto"), "{e}");
    for bad in ["4_tma_store:0", "4_tma_store:x", "4_tma_store:100000"] {
        let e = HgemmKernel::parse(bad).unwrap_err().to_string();
        assert!(e.contains("kernel") && e.contains("1..="), "{bad}: {e}");
    }
}

#[test]
fn step_names_parse() {
    assert_eq!(HgemmKernel::parse("auto").unwrap(), HgemmKernel::Auto);
    assert_eq!(
        HgemmKernel::parse("2_wgmma").unwrap(),
        HgemmKernel::Step(&HGEMM_2_WGMMA)
    );
    assert_eq!(
        HgemmKernel::parse("hgemm_1_mma").unwrap(),
        HgemmKernel::Step(&HGEMM_1_MMA)
    );
    let e = HgemmKernel::parse("3_magic").unwrap_err().to_string();
    assert!(e.contains("hgemm_2_wgmma") && e.contains("kernel"), "{e}");
}

/// The `wgmma` kernels exist only in the sm_90a build; asking another build for one says which
/// architecture it needs.
#[test]
fn hopper_only_kernels_are_missing_elsewhere_with_a_clear_error() {
    let hopper = KERNELS.image_for_driver(9, 0, None).unwrap();
    hopper.entry(HGEMM_2_WGMMA_BF16).unwrap();
    let ampere: KernelImage = KERNELS.image_for_driver(8, 0, None).unwrap();
    ampere.entry(HGEMM_1_MMA.bf16).unwrap();
    let e = ampere.entry(HGEMM_2_WGMMA_BF16).unwrap_err().to_string();
    assert!(e.contains("sm_90a only") && e.contains("sm_80"), "{e}");
    let portable = KERNELS.ptx_image_for(9, 0).unwrap();
    assert_eq!(portable.manifest.arch, "sm_90");
    assert!(portable.entry(HGEMM_2_WGMMA_BF16).is_err());
}
