//! The matrix product's vocabulary: its shape, strides and scalars, and their checks (no
//! device needed). The launchers ([`crate::ops::matmul`]) and the f64 reference
//! (`streamline_testing::reference::matmul`) both build on it.

use crate::error::{Error, Result};

/// Largest dimension or leading dimension a kernel accepts (`i32::MAX`, cuBLAS's limit too).
pub const MAX_DIM: usize = i32::MAX as usize;

/// How `B` lies in memory; `ldb` is the stride of its rows either way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BLayout {
    /// `k x n`, row-major like `A` and `C`.
    #[default]
    Rows,
    /// `n x k`: `B` transposed, the way a linear layer keeps its weight (`y = x W^T`).
    Transposed,
}

/// The shape, strides and scalars of one product `C = alpha * A @ B + beta * C`.
///
/// `A` is `m x k` with row stride `lda`, `B` is `k x n` with row stride `ldb` (or `n x k` where
/// a [`BLayout`] says so: [`Gemm::validate_with`]), `C` is `m x n` with row stride `ldc` (all
/// in elements, row-major). With `beta == 0`, `C` is write-only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub lda: usize,
    pub ldb: usize,
    pub ldc: usize,
    pub alpha: f32,
    pub beta: f32,
}

impl Gemm {
    /// `C = A @ B` for dense (unpadded) matrices.
    pub fn dense(m: usize, n: usize, k: usize) -> Gemm {
        Gemm {
            m,
            n,
            k,
            lda: k,
            ldb: n,
            ldc: n,
            alpha: 1.0,
            beta: 0.0,
        }
    }

    /// Floating-point operations of the product (`2 m n k`).
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Elements a buffer must hold for a `rows x cols` matrix with row stride `ld`.
    fn span(arg: &'static str, rows: usize, cols: usize, ld: usize) -> Result<usize> {
        (rows - 1)
            .checked_mul(ld)
            .and_then(|v| v.checked_add(cols))
            .filter(|&v| v <= isize::MAX as usize / 4)
            .ok_or_else(|| {
                Error::arg(
                    arg,
                    format!(
                        "a {rows} x {cols} matrix with row stride {ld} overflows the address space"
                    ),
                )
            })
    }

    /// Checks dimensions and strides; returns the elements `A`, `B` and `C` must hold.
    pub fn validate(&self) -> Result<(usize, usize, usize)> {
        self.validate_with(BLayout::Rows)
    }

    /// [`Gemm::validate`] for `B` laid out as `b` says (`ldb` the stride of its rows).
    pub fn validate_with(&self, b: BLayout) -> Result<(usize, usize, usize)> {
        let (b_rows, b_cols) = match b {
            BLayout::Rows => (self.k, self.n),
            BLayout::Transposed => (self.n, self.k),
        };
        for (arg, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v == 0 || v > MAX_DIM {
                return Err(Error::arg(
                    arg,
                    format!("{v} is outside the allowed range 1..={MAX_DIM}"),
                ));
            }
        }
        for (arg, ld, cols) in [
            ("lda", self.lda, self.k),
            ("ldb", self.ldb, b_cols),
            ("ldc", self.ldc, self.n),
        ] {
            if ld < cols || ld > MAX_DIM {
                return Err(Error::arg(
                    arg,
                    format!("{ld} is outside the allowed range {cols}..={MAX_DIM} (at least the row length)"),
                ));
            }
        }
        Ok((
            Self::span("a", self.m, self.k, self.lda)?,
            Self::span("b", b_rows, b_cols, self.ldb)?,
            Self::span("c", self.m, self.n, self.ldc)?,
        ))
    }

    /// Checks that buffers of these lengths hold the matrices.
    pub fn check_lengths(&self, a: usize, b: usize, c: usize) -> Result<()> {
        self.check_lengths_with(BLayout::Rows, a, b, c)
    }

    /// [`Gemm::check_lengths`] for `B` laid out as `layout` says.
    pub fn check_lengths_with(&self, layout: BLayout, a: usize, b: usize, c: usize) -> Result<()> {
        let (na, nb, nc) = self.validate_with(layout)?;
        for (arg, have, need) in [("a", a, na), ("b", b, nb), ("c", c, nc)] {
            if have < need {
                return Err(Error::arg(
                    arg,
                    format!(
                        "holds {have} elements; the shape {}x{}x{} with its strides needs at least {need}",
                        self.m, self.n, self.k
                    ),
                ));
            }
        }
        Ok(())
    }
}
