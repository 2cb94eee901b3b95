//! CPU reference for the tensor-core product `C = alpha * A @ B + beta * C` (bf16 or f16
//! matrices, or f32 matrices multiplied as TF32; f32 accumulation) and the error bound its
//! kernels must meet.
//!
//! # Error analysis
//!
//! The inputs are bf16 or f16 values, exact in f32 and f64, and their products are exact in f32
//! (8 + 8 or 11 + 11 significant bits), so the only errors are those of the f32 sum, the
//! epilogue and the final rounding to the output type. Tensor cores add several products at
//! once and may truncate instead of rounding to nearest, so each f32 addition is taken to err
//! by less than `2u` (`u = 2^-24`) relative: with `S_ij = sum_k |a_ik| |b_kj|` the accumulated
//! sum is within `gamma'_k S_ij`, `gamma'_n = 2 n u / (1 - 2 n u)`, in any order and grouping.
//! The epilogue `alpha * acc + beta * c` in f32 adds two roundings of at most `u` each (covered
//! by `gamma'_{k+2}`, as in `reference::matmul`). Rounding the f32 result `r` to the output
//! type (to nearest even, unit roundoff `u_T`: 2^-8 for bf16, 2^-11 for f16) adds at most
//! `u_T |r|`, or half the type's smallest subnormal `t_T` (2^-25 for f16, 2^-134 for bf16)
//! below its normal range. With `E = gamma'_{k+2} (|alpha| S_ij + |beta c_ij|) + k 2^-149` the
//! error of the f32 result,
//!
//! `|C_ij - C*_ij| <= E + u_T (|C*_ij| + E) + t_T`.
//!
//! TF32: the inputs are f32, of which the tensor cores read 11 significant bits, rounded or
//! (in our kernels) truncated: each input errs by less than `v = 2^-10` relative, so each
//! product `a b` by less than `(2 v + v^2) |a b|`; products of TF32 values are exact in f32, and
//! the sum is as above. The output is f32, the epilogue's own result (`u_T = t_T = 0`). So
//! `E = (p + gamma'_{k+2} (1 + p)) |alpha| S_ij + gamma'_{k+2} |beta c_ij| + k 2^-149` with
//! `p = 2 v + v^2` (0 for bf16 and f16, whose inputs are exact). The relative bounds assume
//! normal inputs: a subnormal the tensor cores flush to zero is not covered.
//!
//! The reference computes `C*` and `S` in f64 from the same inputs (the half-precision ones,
//! or the f32 ones TF32 reads part of), so its own error is negligible against the bound.

use crate::reference::matmul::{row_sums, RowCheck};
use rayon::prelude::*;
use streamline::spec::matmul::{BLayout, Gemm};

/// A type's rounding: of the output (unit roundoff and half its smallest subnormal) and of
/// each input as the tensor cores read it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rounding {
    /// Unit roundoff `u_T` of the output type.
    pub unit: f64,
    /// Half the output type's smallest subnormal, `t_T`.
    pub tiny: f64,
    /// Relative error `v` of an input as the tensor cores read it (0 when exact).
    pub input: f64,
}

/// bf16: 8 significant bits, f32's exponent range.
pub const BF16: Rounding = Rounding {
    unit: 1.0 / 256.0,
    tiny: 1.0 / (1u128 << 126) as f64 / 256.0,
    input: 0.0,
};

/// f16: 11 significant bits, smallest subnormal 2^-24.
pub const F16: Rounding = Rounding {
    unit: 1.0 / 2048.0,
    tiny: 1.0 / (1u64 << 25) as f64,
    input: 0.0,
};

/// f32 matrices multiplied as TF32: inputs read to 11 significant bits (truncated at worst),
/// the f32 output the epilogue's own.
pub const TF32: Rounding = Rounding {
    unit: 0.0,
    tiny: 0.0,
    input: 1.0 / 1024.0,
};

/// `gamma'_n = 2 n u / (1 - 2 n u)` for f32 additions that may truncate.
pub fn gamma_truncating(n: usize) -> f64 {
    let nu = 2.0 * n as f64 * f64::powi(2.0, -24);
    nu / (1.0 - nu)
}

/// [`rows`] for `B` laid out as `layout` says (`g.ldb` the stride of its rows either way).
pub fn rows_with(
    g: &Gemm,
    layout: BLayout,
    a: &[f32],
    b: &[f32],
    c0: &[f32],
    rows_of_c: &[usize],
    out: Rounding,
) -> Vec<RowCheck> {
    match layout {
        BLayout::Rows => rows(g, a, b, c0, rows_of_c, out),
        BLayout::Transposed => {
            // `B` as `k x n` rows: row `j` of the given `n x k` is column `j`.
            let kn: Vec<f32> = (0..g.k * g.n)
                .map(|i| b[(i % g.n) * g.ldb + i / g.n])
                .collect();
            rows(&Gemm { ldb: g.n, ..*g }, a, &kn, c0, rows_of_c, out)
        }
    }
}

/// Reference values and bounds (module documentation) for the listed rows of `C`; `a`, `b`,
/// `c0` hold the half-precision inputs as f32 (exactly), with `g`'s strides. `c0` is ignored
/// when `beta == 0`.
pub fn rows(
    g: &Gemm,
    a: &[f32],
    b: &[f32],
    c0: &[f32],
    rows: &[usize],
    out: Rounding,
) -> Vec<RowCheck> {
    let gam = gamma_truncating(g.k + 2);
    let underflow = g.k as f64 * f64::powi(2.0, -149);
    let p = 2.0 * out.input + out.input * out.input;
    rows.par_iter()
        .map(|&i| {
            let (sum, abs) = row_sums(g, a, b, i);
            let (alpha, beta) = (g.alpha as f64, g.beta as f64);
            let mut value = Vec::with_capacity(g.n);
            let mut bound = Vec::with_capacity(g.n);
            for j in 0..g.n {
                let old = if g.beta == 0.0 {
                    0.0
                } else {
                    beta * c0[i * g.ldc + j] as f64
                };
                let v = alpha * sum[j] + old;
                let e = (p + gam * (1.0 + p)) * alpha.abs() * abs[j] + gam * old.abs() + underflow;
                value.push(v);
                bound.push(e + out.unit * (v.abs() + e) + out.tiny);
            }
            RowCheck {
                row: i,
                value,
                bound,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transposed_b_gives_the_rows_layouts_values_and_bounds() {
        // 2 x 3 x 4: `B` as 4 x 3 rows (stride 3) and as 3 x 4 rows padded to stride 6.
        let g = Gemm::dense(2, 3, 4);
        let a: Vec<f32> = (0..8).map(|i| i as f32 - 3.5).collect();
        let b: Vec<f32> = (0..12).map(|i| 0.25 * i as f32 - 1.0).collect();
        let mut bt = vec![f32::NAN; 3 * 6];
        for kk in 0..4 {
            for j in 0..3 {
                bt[j * 6 + kk] = b[kk * 3 + j];
            }
        }
        let want = rows(&g, &a, &b, &[], &[0, 1], BF16);
        let got = rows_with(
            &Gemm { ldb: 6, ..g },
            BLayout::Transposed,
            &a,
            &bt,
            &[],
            &[0, 1],
            BF16,
        );
        assert_eq!(format!("{want:?}"), format!("{got:?}"));
    }

    #[test]
    fn bound_covers_the_output_rounding_of_an_exact_product() {
        // A 1 x 1 x 2 product: 1.5 * 1 + 2 * 0.25 = 2, exact; the bound is the f32 term plus
        // 2 u_T (both of the output rounding) plus t_T.
        let g = Gemm::dense(1, 1, 2);
        let r = rows(&g, &[1.5, 2.0], &[1.0, 0.25], &[0.0], &[0], BF16);
        assert_eq!(r[0].value, vec![2.0]);
        let e = gamma_truncating(4) * 2.0 + 2.0 * f64::powi(2.0, -149);
        let want = e + BF16.unit * (2.0 + e) + BF16.tiny;
        assert!(
            (r[0].bound[0] - want).abs() < 1e-18,
            "{} vs {want}",
            r[0].bound[0]
        );
        assert_eq!(F16.tiny, f64::powi(2.0, -25));
        assert_eq!(BF16.tiny, f64::powi(2.0, -134));
    }
}
