//! CPU reference for `C = alpha * A @ B + beta * C` and the error bound FP32 kernels must meet.
//!
//! # Error analysis
//!
//! Let `u = 2^-24` (unit roundoff of f32) and `S_ij = sum_k |a_ik| |b_kj|`. The kernels
//! accumulate `acc = sum_k a_ik b_kj` as a chain of `k` fused multiply-adds, each rounding once,
//! so (Higham, *Accuracy and Stability of Numerical Algorithms*, §3.1)
//! `|acc - sum_k a_ik b_kj| <= gamma_k * S_ij`, with `gamma_k = k u / (1 - k u)`. The same bound
//! holds for any summation order (cuBLAS's included), so it also bounds the difference between
//! two correct implementations (twice over). The epilogue `fma(beta, c, alpha * acc)` adds two
//! more roundings, each at most `u` times a value bounded by `|alpha| S_ij (1 + gamma_k) +
//! |beta c_ij|`. Altogether
//!
//! `|C_ij - C*_ij| <= gamma_{k+2} * (|alpha| S_ij + |beta c_ij|) + k * 2^-149`,
//!
//! where the last term covers products that underflow to subnormals (each loses at most half
//! the smallest subnormal, 2^-150, plus the same in the sum). The reference evaluates
//! `C*` and `S` in f64 (53-bit), whose own error (about `k * 2^-53 * S`) is below 2^-29 of the
//! bound, so the comparison tests the kernel and not the reference.

use rayon::prelude::*;
use streamline::spec::matmul::Gemm;

/// `gamma_n = n u / (1 - n u)` for f32's unit roundoff.
pub fn gamma(n: usize) -> f64 {
    let nu = n as f64 * f64::powi(2.0, -24);
    nu / (1.0 - nu)
}

/// One row of the exact product: values and the per-element bound.
#[derive(Clone, Debug)]
pub struct RowCheck {
    /// Row index in `C`.
    pub row: usize,
    /// `alpha * sum_k a_ik b_kj + beta * c_ij` in f64, for each column.
    pub value: Vec<f64>,
    /// The error bound of the module documentation, for each column.
    pub bound: Vec<f64>,
}

/// Reference values and bounds for the listed rows of `C`, in parallel over rows. `c0` is `C`
/// before the product (ignored when `beta == 0`, as the kernels ignore it). Buffers use the
/// strides of `g`; their lengths must be at least what `g` needs.
pub fn rows(g: &Gemm, a: &[f32], b: &[f32], c0: &[f32], rows: &[usize]) -> Vec<RowCheck> {
    let gam = gamma(g.k + 2);
    let underflow = g.k as f64 * f64::powi(2.0, -149);
    rows.par_iter()
        .map(|&i| {
            let (sum, abs) = row_sums(g, a, b, i);
            let alpha = g.alpha as f64;
            let beta = g.beta as f64;
            let mut value = Vec::with_capacity(g.n);
            let mut bound = Vec::with_capacity(g.n);
            for j in 0..g.n {
                let old = if g.beta == 0.0 {
                    0.0
                } else {
                    beta * c0[i * g.ldc + j] as f64
                };
                value.push(alpha * sum[j] + old);
                bound.push(gam * (alpha.abs() * abs[j] + old.abs()) + underflow);
            }
            RowCheck {
                row: i,
                value,
                bound,
            }
        })
        .collect()
}

/// `reference` for a product whose f32 result is then rounded once to bf16 (to nearest): each
/// bound widened by that rounding.
///
/// With `r` the f32 result, `|r - C*| <= e` (the bound above). bf16 keeps 8 significant bits,
/// so rounding `r` to nearest errs by at most `2^-8 |r| <= 2^-8 (|C*| + e)` where the result
/// is normal, and by at most half the smallest bf16 subnormal, `2^-134`, below that (bf16 has
/// f32's exponent range). Altogether `|RN(r) - C*| <= e + 2^-8 (|C*| + e) + 2^-134`.
pub fn rounded_to_bf16(mut reference: Vec<RowCheck>) -> Vec<RowCheck> {
    for r in &mut reference {
        for (b, v) in r.bound.iter_mut().zip(&r.value) {
            *b += f64::powi(2.0, -8) * (v.abs() + *b) + f64::powi(2.0, -134);
        }
    }
    reference
}

/// Row `i` of `A @ B` in f64, `sum_k a_ik b_kj`, and of `S_ij = sum_k |a_ik| |b_kj|`, for
/// every column `j` (buffers with `g`'s strides).
pub(crate) fn row_sums(g: &Gemm, a: &[f32], b: &[f32], i: usize) -> (Vec<f64>, Vec<f64>) {
    let mut sum = vec![0.0f64; g.n];
    let mut abs = vec![0.0f64; g.n];
    for kk in 0..g.k {
        let aik = a[i * g.lda + kk] as f64;
        let brow = &b[kk * g.ldb..kk * g.ldb + g.n];
        for j in 0..g.n {
            let p = aik * brow[j] as f64;
            sum[j] += p;
            abs[j] += p.abs();
        }
    }
    (sum, abs)
}

/// Worst element of a comparison of `C` (with `g`'s strides) against reference rows.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Comparison {
    /// Elements compared.
    pub checked: usize,
    /// Elements outside their bound (NaN counts as outside).
    pub outside: usize,
    /// Largest `|C - C*| / bound` (1 is the bound itself).
    pub worst_ratio: f64,
    /// Where the worst ratio occurred (row, column).
    pub worst_at: (usize, usize),
}

impl std::fmt::Display for Comparison {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} of {} outside the bound (unwritten elements count too); worst err/bound {} at {:?}",
            self.outside, self.checked, self.worst_ratio, self.worst_at
        )
    }
}

/// Compares `c` against the reference rows.
pub fn compare(g: &Gemm, c: &[f32], reference: &[RowCheck]) -> Comparison {
    let mut out = Comparison::default();
    for r in reference {
        for j in 0..g.n {
            let got = c[r.row * g.ldc + j] as f64;
            let err = (got - r.value[j]).abs();
            let ratio = if r.bound[j] > 0.0 {
                err / r.bound[j]
            } else if err == 0.0 {
                0.0
            } else {
                f64::INFINITY
            };
            out.checked += 1;
            if ratio.is_nan() || ratio > 1.0 {
                out.outside += 1;
            }
            if ratio.is_nan() || ratio > out.worst_ratio {
                out.worst_ratio = if ratio.is_nan() { f64::INFINITY } else { ratio };
                out.worst_at = (r.row, j);
            }
        }
    }
    out
}

/// `||x - y||_F / ||y||_F` over the `m x n` matrices stored with row stride `ld`.
pub fn relative_frobenius(x: &[f32], y: &[f32], m: usize, n: usize, ld: usize) -> f64 {
    let (num, den) = (0..m)
        .into_par_iter()
        .map(|i| {
            let (mut num, mut den) = (0.0f64, 0.0f64);
            for j in 0..n {
                let (a, b) = (x[i * ld + j] as f64, y[i * ld + j] as f64);
                num += (a - b) * (a - b);
                den += b * b;
            }
            (num, den)
        })
        .reduce(|| (0.0, 0.0), |p, q| (p.0 + q.0, p.1 + q.1));
    (num / den).sqrt()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_product_by_hand() {
        // [1 2; 3 4] @ [5 6; 7 8] = [19 22; 43 50]; alpha 2, beta -1 with C0 = 1.
        let g = Gemm {
            alpha: 2.0,
            beta: -1.0,
            ..Gemm::dense(2, 2, 2)
        };
        let r = rows(&g, &[1., 2., 3., 4.], &[5., 6., 7., 8.], &[1.0; 4], &[0, 1]);
        assert_eq!(r[0].value, vec![37.0, 43.0]);
        assert_eq!(r[1].value, vec![85.0, 99.0]);
        // Bound: gamma_4 * (2 * S + 1); S_00 = 5 + 14.
        assert!(
            (r[0].bound[0] - gamma(4) * (2.0 * 19.0 + 1.0) - 2.0 * 2f64.powi(-149)).abs() < 1e-20
        );
    }

    #[test]
    fn strides_are_respected() {
        // A is 1x2 inside rows of 3, B is 2x1 inside rows of 2; padding holds garbage.
        let g = Gemm {
            lda: 3,
            ldb: 2,
            ldc: 4,
            ..Gemm::dense(1, 1, 2)
        };
        let r = rows(&g, &[2., 3., 99.], &[4., 99., 5., 99.], &[], &[0]);
        assert_eq!(r[0].value, vec![23.0]);
    }

    #[test]
    fn beta_zero_ignores_nan_in_c() {
        let g = Gemm::dense(1, 1, 1);
        let r = rows(&g, &[3.0], &[4.0], &[f32::NAN], &[0]);
        assert_eq!(r[0].value, vec![12.0]);
        let cmp = compare(&g, &[12.0], &r);
        assert_eq!((cmp.checked, cmp.outside), (1, 0));
        let cmp = compare(&g, &[f32::NAN], &r);
        assert_eq!(cmp.outside, 1);
    }
}
