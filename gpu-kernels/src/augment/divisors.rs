//! Division by counts that the whole block shares but that are known only at run time (a
//! window's columns, a staged row's entries, a tile's side), and the walk over a rectangle's
//! cells built on it. The steps share out their cells among the threads by such counts, and an
//! integer division per cell would add its cost to every cell of every step.

use super::{lane_for, threads};
use streamline_device::math::fast_div;

/// Division by a block-wide `d` of numerators below `2^16` (thread indices, cell counts): one
/// hardware reciprocal per divisor, then a multiply per quotient, where an integer division
/// costs a few tens of instructions. Exact: `(n + 1/2) / d` lies at least `1 / (2 d)` from an
/// integer, and the reciprocal (at most 2 ulp) and the product's rounding move it by at most
/// `2^16 / d * 5 * 2^-24`.
#[derive(Clone, Copy)]
pub(super) struct SmallDiv {
    pub(super) d: u32,
    inv: f32,
}

impl SmallDiv {
    /// Divisor `d` (at least 1, below `2^24`).
    #[inline(always)]
    pub(super) fn new(d: u32) -> SmallDiv {
        let d = d.max(1);
        SmallDiv {
            d,
            inv: fast_div(1.0, d as f32),
        }
    }

    /// `(n / d, n % d)` for `n < 2^16`.
    #[inline(always)]
    pub(super) fn divmod(self, n: u32) -> (u32, u32) {
        let q = ((n as f32 + 0.5) * self.inv) as u32;
        (q, n - q * self.d)
    }
}

/// Calls `cell(index, row, column)` for this thread's cells of a `rows x cols` rectangle, every
/// `threads(STRIP)`-th in row-major order, the row and column advanced without dividing; this
/// thread's index read afresh with `fresh` ([`lane_for`]).
#[inline(always)]
pub(super) fn for_cells<const STRIP: bool>(
    rows: u32,
    cols: u32,
    mut cell: impl FnMut(u32, u32, u32),
) {
    let div = SmallDiv::new(cols);
    let cols = div.d;
    let total = rows * cols;
    let (step_r, step_c) = div.divmod(threads(STRIP));
    let k0 = lane_for(!STRIP);
    let (mut r, mut c) = div.divmod(k0);
    let mut k = k0;
    while k < total {
        cell(k, r, c);
        k += threads(STRIP);
        r += step_r;
        c += step_c;
        if c >= cols {
            c -= cols;
            r += 1;
        }
    }
}
