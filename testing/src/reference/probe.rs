//! CPU references of the tensor-core probes: what each lane of `ldmatrix.x4` holds, as the PTX
//! ISA lays the fragments out (written here from the layout, independently of the device
//! code), and the 16 x 8 product of one `mma.sync` with its error bound.
//!
//! # Error analysis
//!
//! `ldmatrix` moves bits: the probe must match exactly. The product's operands are bf16, f16 or
//! tf32 values, exact in f32 and f64, and their products are exact in f32 (at most 11 + 11
//! significant bits), so the only error is the f32 accumulation, which tensor cores may
//! truncate: with `S_ij = sum_k |a_ik| |b_kj|` it is within `gamma'_K S_ij`
//! ([`crate::reference::hgemm::gamma_truncating`]), plus `K 2^-149` for sums that leave f32's
//! normal range.

use crate::reference::hgemm::gamma_truncating;
use crate::reference::train::Bounded;

/// Lane `l`'s register `j` after `ldmatrix.x4` on the four row-major 8 x 8 matrices `m` (256
/// values, matrix after matrix), at `out[4 l + j]`: matrix `j`'s elements `(l / 4, 2 (l % 4))`
/// (low half) and `(l / 4, 2 (l % 4) + 1)` (high half); with `transposed`, the elements
/// `(2 (l % 4), l / 4)` and `(2 (l % 4) + 1, l / 4)`.
pub fn ldmatrix_x4(m: &[u16], transposed: bool) -> Vec<u32> {
    assert_eq!(m.len(), 256, "four 8 x 8 matrices");
    let at = |j: usize, r: usize, c: usize| m[64 * j + 8 * r + c] as u32;
    let mut out = Vec::with_capacity(128);
    for l in 0..32 {
        let (g, t) = (l / 4, l % 4);
        for j in 0..4 {
            let (lo, hi) = if transposed {
                (at(j, 2 * t, g), at(j, 2 * t + 1, g))
            } else {
                (at(j, g, 2 * t), at(j, g, 2 * t + 1))
            };
            out.push(lo | hi << 16);
        }
    }
    out
}

/// `d = a b` in f64 for the row-major `16 x k` matrix `a` and `k x 8` matrix `b` (values as
/// f32), with the bound of an `mma.sync` (module documentation).
pub fn mma(a: &[f32], b: &[f32], k: usize) -> Vec<Bounded> {
    assert_eq!(
        (a.len(), b.len()),
        (16 * k, k * 8),
        "a is 16 x k, b is k x 8"
    );
    let g = gamma_truncating(k);
    let mut d = Vec::with_capacity(128);
    for i in 0..16 {
        for j in 0..8 {
            let (mut v, mut s) = (0.0f64, 0.0f64);
            for q in 0..k {
                let p = a[k * i + q] as f64 * b[8 * q + j] as f64;
                v += p;
                s += p.abs();
            }
            d.push(Bounded {
                value: v,
                bound: g * s + k as f64 * f64::powi(2.0, -149),
            });
        }
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lane 5 (`g = 1`, `t = 1`) of matrix 2 holds elements (1, 2) and (1, 3), or (2, 1) and
    /// (3, 1) transposed.
    #[test]
    fn layouts_by_hand() {
        let m: Vec<u16> = (0..256).collect();
        let v = ldmatrix_x4(&m, false)[4 * 5 + 2];
        assert_eq!(v, (128 + 8 + 2) | (128 + 8 + 3) << 16);
        let v = ldmatrix_x4(&m, true)[4 * 5 + 2];
        assert_eq!(v, (128 + 16 + 1) | (128 + 24 + 1) << 16);
        let d = mma(&[1.0; 16 * 8], &[2.0; 64], 8);
        assert!(d.iter().all(|x| x.value == 16.0));
    }
}
