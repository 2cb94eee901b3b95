//! Probes of the tensor-core building blocks ([`streamline_device::mma`]): one warp runs one
//! `ldmatrix` or one `mma.sync` on given inputs and writes what its lanes hold, so that the
//! fragment layouts the device API documents are tested against plain CPU loops
//! (`testing/src/reference/probe.rs`).

use streamline_abi::probe::{LdmatrixProbeParams, MmaProbeParams};
use streamline_abi::probe::{
    PROBE_LDMATRIX_X4, PROBE_LDMATRIX_X4_TRANS, PROBE_MMA_BF16, PROBE_MMA_F16, PROBE_MMA_TF32,
};
use streamline_device::element::{bf16, f16};
use streamline_device::mem::shared_addr;
use streamline_device::mma::{
    ldmatrix_x4, ldmatrix_x4_trans, mma_m16n8k16_bf16, mma_m16n8k16_f16, mma_m16n8k8_tf32,
};
use streamline_device::thread::sync_block;
use streamline_device::warp::lane_id;
use streamline_device::{kernel, shared_array};

/// One row of an 8 x 8 matrix of 16-bit values, aligned as `ldmatrix` wants it.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct Row([u16; 8]);

/// Stages the 32 rows at `p.src` in shared memory and writes lane `l`'s registers of
/// `load(row l)` to `p.out[4 l..4 l + 4]`.
///
/// # Safety
/// One block of 32 threads; `p.src` must address 256 readable `u16` and `p.out` 128 writable
/// `u32`.
#[inline(always)]
unsafe fn ldmatrix_probe(p: LdmatrixProbeParams, load: unsafe fn(u32) -> [u32; 4]) {
    let tile = shared_array!(TILE: [Row; 32]) as *mut Row;
    let l = lane_id() as usize;
    let (src, out) = (p.src.as_ptr(), p.out.as_mut_ptr());
    // SAFETY: `l < 32`: row `l` of the tile and of the input (8 values each) exist; each lane
    // writes its own row, and the barrier makes every row visible before the loads.
    unsafe {
        let row = tile.add(l) as *mut u16;
        let mut c = 0;
        while c < 8 {
            *row.add(c) = *src.add(8 * l + c);
            c += 1;
        }
        sync_block();
        // Lane `l` gives row `l % 8` of matrix `l / 8`: row `l` of the tile.
        let r = load(shared_addr(row as *const f32));
        let mut j = 0;
        while j < 4 {
            *out.add(4 * l + j) = r[j];
            j += 1;
        }
    }
}

kernel! {
    #[declared(PROBE_LDMATRIX_X4)]
    /// What each lane holds after one `ldmatrix.x4`.
    ///
    /// # Safety
    /// One block of 32 threads; `p.src` must address 256 readable `u16` and `p.out` 128
    /// writable `u32`.
    pub unsafe fn probe_ldmatrix_x4(p: LdmatrixProbeParams) {
        // SAFETY: forwarded from this function's contract; all 32 lanes load together.
        unsafe { ldmatrix_probe(p, ldmatrix_x4) }
    }
}

kernel! {
    #[declared(PROBE_LDMATRIX_X4_TRANS)]
    /// What each lane holds after one `ldmatrix.x4.trans`.
    ///
    /// # Safety
    /// As for `probe_ldmatrix_x4`.
    pub unsafe fn probe_ldmatrix_x4_trans(p: LdmatrixProbeParams) {
        // SAFETY: forwarded from this function's contract; all 32 lanes load together.
        unsafe { ldmatrix_probe(p, ldmatrix_x4_trans) }
    }
}

/// Two 16-bit values in one register, `lo` in the low half.
#[inline(always)]
fn pack(lo: u16, hi: u16) -> u32 {
    lo as u32 | (hi as u32) << 16
}

/// Writes the accumulator fragment `d` of lane (`g`, `t`) to the row-major 16 x 8 `out`: rows
/// `g` and `g + 8`, columns `2t` and `2t + 1`.
///
/// # Safety
/// `out` must address 128 writable f32; `g < 8`, `t < 4`.
#[inline(always)]
unsafe fn store_d(out: *mut f32, g: usize, t: usize, d: [f32; 4]) {
    // SAFETY: every index is below 16 * 8 for `g < 8`, `t < 4`.
    unsafe {
        *out.add(8 * g + 2 * t) = d[0];
        *out.add(8 * g + 2 * t + 1) = d[1];
        *out.add(8 * (g + 8) + 2 * t) = d[2];
        *out.add(8 * (g + 8) + 2 * t + 1) = d[3];
    }
}

/// `d = a b` for 16-bit operands (`m16n8k16`), each lane building its fragments from the
/// documented layout: `A` rows `g`, `g + 8`, `g`, `g + 8` and columns `2t, 2t + 1` (plus 8 for
/// `a[2]`, `a[3]`); `B` rows `2t, 2t + 1` (plus 8 for `b[1]`), column `g`.
///
/// # Safety
/// One block of 32 threads; `a` must address 256 readable values, `b` 128 and `d` 128
/// writable f32.
#[inline(always)]
unsafe fn mma16_probe(
    a: *const u16,
    b: *const u16,
    d: *mut f32,
    mma: unsafe fn([f32; 4], [u32; 4], [u32; 2]) -> [f32; 4],
) {
    let l = lane_id() as usize;
    let (g, t) = (l / 4, l % 4);
    // SAFETY: rows below 16 and columns below 16 of `a`, rows below 16 and columns below 8 of
    // `b`, for `g < 8`, `t < 4`; all 32 lanes run the product together.
    unsafe {
        let at = |r: usize, c: usize| *a.add(16 * r + c);
        let bt = |k: usize, n: usize| *b.add(8 * k + n);
        let af = [
            pack(at(g, 2 * t), at(g, 2 * t + 1)),
            pack(at(g + 8, 2 * t), at(g + 8, 2 * t + 1)),
            pack(at(g, 2 * t + 8), at(g, 2 * t + 9)),
            pack(at(g + 8, 2 * t + 8), at(g + 8, 2 * t + 9)),
        ];
        let bf = [
            pack(bt(2 * t, g), bt(2 * t + 1, g)),
            pack(bt(2 * t + 8, g), bt(2 * t + 9, g)),
        ];
        store_d(d, g, t, mma([0.0; 4], af, bf));
    }
}

kernel! {
    #[declared(PROBE_MMA_BF16)]
    /// One `mma.sync.m16n8k16` on bf16 fragments built from the documented layout.
    ///
    /// # Safety
    /// One block of 32 threads; `p.a` must address 256 readable bf16, `p.b` 128 and `p.d` 128
    /// writable f32.
    pub unsafe fn probe_mma_bf16(p: MmaProbeParams<bf16>) {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            mma16_probe(
                p.a.cast::<u16>().as_ptr(),
                p.b.cast::<u16>().as_ptr(),
                p.d.as_mut_ptr(),
                mma_m16n8k16_bf16,
            )
        }
    }
}

kernel! {
    #[declared(PROBE_MMA_F16)]
    /// One `mma.sync.m16n8k16` on f16 fragments built from the documented layout.
    ///
    /// # Safety
    /// As for `probe_mma_bf16`, with f16 operands.
    pub unsafe fn probe_mma_f16(p: MmaProbeParams<f16>) {
        // SAFETY: forwarded from this function's contract.
        unsafe {
            mma16_probe(
                p.a.cast::<u16>().as_ptr(),
                p.b.cast::<u16>().as_ptr(),
                p.d.as_mut_ptr(),
                mma_m16n8k16_f16,
            )
        }
    }
}

kernel! {
    #[declared(PROBE_MMA_TF32)]
    /// One `mma.sync.m16n8k8` on tf32 fragments built from the documented layout: `A` rows
    /// `g`, `g + 8`, `g`, `g + 8`, columns `t`, `t`, `t + 4`, `t + 4`; `B` rows `t` and `t + 4`,
    /// column `g`.
    ///
    /// # Safety
    /// One block of 32 threads; `p.a` must address 128 readable f32 (16 x 8), `p.b` 64 (8 x 8)
    /// and `p.d` 128 writable f32.
    pub unsafe fn probe_mma_tf32(p: MmaProbeParams<f32>) {
        let l = lane_id() as usize;
        let (g, t) = (l / 4, l % 4);
        let (a, b) = (p.a.as_ptr(), p.b.as_ptr());
        // SAFETY: rows below 16 and columns below 8 of `a`, rows and columns below 8 of `b`, for
        // `g < 8`, `t < 4`; all 32 lanes run the product together.
        unsafe {
            let at = |r: usize, c: usize| (*a.add(8 * r + c)).to_bits();
            let bt = |k: usize, n: usize| (*b.add(8 * k + n)).to_bits();
            let af = [at(g, t), at(g + 8, t), at(g, t + 4), at(g + 8, t + 4)];
            let bf = [bt(t, g), bt(t + 4, g)];
            store_d(p.d.as_mut_ptr(), g, t, mma_m16n8k8_tf32([0.0; 4], af, bf));
        }
    }
}
