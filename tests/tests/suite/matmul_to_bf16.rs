//! `sgemm_to_bf16` (step 8 writing `C` in bf16) against the f64 CPU reference, with the bound of
//! `streamline_testing::reference::matmul::rounded_to_bf16` (the f32 bound plus one rounding to
//! bf16), and bit for bit against the f32 kernel's result rounded on the CPU: the fused
//! rounding must be exactly the rounding of the f32 result.
//!
//! Cases are the f32 tests' (awkward shapes, padded strides, random element offsets, so that
//! both the 8-byte stores and their one-element fallback run). `C`'s buffer is poisoned except,
//! when `beta != 0`, the matrix elements, which hold the old `C` in bf16; every other element
//! must still be poison afterwards.

use super::matmul::{case, Case, GUARD};
use cudarc::driver::CudaSlice;
use half::bf16;
use streamline::ops::matmul::{sgemm, sgemm_to_bf16, Gemm, Kernel};
use streamline_abi::matmul::SGEMM_8_WIDE_128X128;
use streamline_testing::data::{randn_f32, HeavyHost};
use streamline_testing::reference::matmul as reference;
use streamline_testing::reference::train::round_bf16;
use streamline_tests::{gpu, gpu_property};

use proptest::prelude::*;

fn run_case(c: &Case) -> Result<(), TestCaseError> {
    let Some(gpu) = gpu() else { return Ok(()) };
    let s = gpu.stream();
    let g = &c.g;
    let (na, nb, nc) = g.validate().unwrap();
    let [oa, ob, oc] = c.offsets;
    let a = randn_f32(na, c.seed);
    let b = randn_f32(nb, c.seed + 1);
    // The old C as the kernel reads it: bf16 values.
    let c0: Vec<f32> = randn_f32(nc, c.seed + 2)
        .into_iter()
        .map(|v| bf16::from_f32(v).to_f32())
        .collect();
    let da: CudaSlice<f32> = s.clone_htod(&[vec![1.0; oa], a.clone()].concat()).unwrap();
    let db: CudaSlice<f32> = s.clone_htod(&[vec![1.0; ob], b.clone()].concat()).unwrap();
    let in_c = |i: usize| i >= oc && i < oc + nc && (i - oc) % g.ldc < g.n;
    let old = |i: usize| {
        if g.beta != 0.0 && in_c(i) {
            bf16::from_f32(c0[i - oc])
        } else {
            bf16::poison()
        }
    };
    let cbuf: Vec<bf16> = (0..oc + nc + GUARD).map(old).collect();
    let mut dc: CudaSlice<bf16> = s.clone_htod(&cbuf).unwrap();
    // The same product into f32 by step 8, from the same old C.
    let c32: Vec<f32> = (0..nc)
        .map(|i| if g.beta != 0.0 { c0[i] } else { f32::poison() })
        .collect();
    let mut d32: CudaSlice<f32> = s.clone_htod(&c32).unwrap();
    {
        let av = da.slice(oa..oa + na);
        let bv = db.slice(ob..ob + nb);
        let mut cv = dc.slice_mut(oc..oc + nc);
        sgemm_to_bf16(gpu, s, g, &av, &bv, &mut cv).unwrap();
        let wide = Kernel::Fixed(&SGEMM_8_WIDE_128X128);
        sgemm(gpu, s, wide, g, &av, &bv, &mut d32).unwrap();
    }
    let out = s.clone_dtoh(&dc).unwrap();
    let out32 = s.clone_dtoh(&d32).unwrap();
    let stray = (0..out.len())
        .filter(|&i| !in_c(i) && !out[i].is_poison())
        .count();
    prop_assert_eq!(stray, 0, "{} elements outside C were written", stray);
    for i in (0..nc).filter(|&i| (i % g.ldc) < g.n) {
        let want = round_bf16(out32[i]);
        prop_assert_eq!(
            out[oc + i].to_bits(),
            want,
            "element {} of C: {} is not the f32 result {} rounded",
            i,
            out[oc + i],
            out32[i]
        );
    }
    let widened: Vec<f32> = out[oc..oc + nc].iter().map(|v| v.to_f32()).collect();
    let rows: Vec<usize> = (0..g.m).collect();
    let want = reference::rounded_to_bf16(reference::rows(g, &a, &b, &c0, &rows));
    let cmp = reference::compare(g, &widened, &want);
    prop_assert!(cmp.outside == 0, "{}", cmp);
    Ok(())
}

#[test]
fn sgemm_to_bf16_is_the_rounded_f32_product_within_the_bound() {
    gpu_property(64, case(), |c| run_case(&c));
}

/// Buffers shorter than the shape are refused with an error naming the buffer, and nothing
/// is written.
#[test]
fn sgemm_to_bf16_rejects_short_buffers() {
    let Some(gpu) = gpu() else { return };
    let s = gpu.stream();
    let g = Gemm::dense(5, 7, 3);
    let a: CudaSlice<f32> = s.clone_htod(&[1.0f32; 15]).unwrap();
    let b: CudaSlice<f32> = s.clone_htod(&[1.0f32; 21]).unwrap();
    let mut c: CudaSlice<bf16> = s.clone_htod(&[bf16::poison(); 34]).unwrap();
    let e = sgemm_to_bf16(gpu, s, &g, &a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`c`") && e.contains("34"), "{e}");
    assert!(s.clone_dtoh(&c).unwrap().iter().all(|v| v.is_poison()));
    let short_a: CudaSlice<f32> = s.clone_htod(&[1.0f32; 14]).unwrap();
    let mut c: CudaSlice<bf16> = s.alloc_zeros(35).unwrap();
    let e = sgemm_to_bf16(gpu, s, &g, &short_a, &b, &mut c)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`a`"), "{e}");
}
