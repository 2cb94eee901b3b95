//! Separable Gaussian blur with reflect padding, like
//! `torchvision.transforms.v2.functional.gaussian_blur(img, [kx, ky], [sigma_x, sigma_y])`,
//! for a whole batch, optionally with per-image sigmas.
//!
//! A block copies its output tile and the halo (reflected at the image border) into shared
//! memory once, with `cp.async`: every copy of a thread is in flight at once, and none passes
//! through a register. The weights are `exp(-0.5 ((t - r) / sigma)^2)`; their normalisation by
//! the sum is applied to the result.
//!
//! Square kernels up to radius [`BLUR_FAST_MAX_RADIUS`] (the common case, seed 003's 7 x 7
//! included) take the fast path (`gaussian_blur_fast`): two neighbouring output columns per
//! thread over 16 rows, a block's threads side by side over whole rows of 256 (planes 129 to
//! 256 wide, so that a block reads whole rows, the reflected halo columns among them) or over
//! 128 x 64 tiles; each thread blurs rows of shared memory into two values, reading the
//! `2r + 2` taps of both columns as `r + 1` pairs, and keeps the last `2r + 1` of each column
//! in registers, so the vertical pass reads no memory. Other kernels blur 32 x 32 tiles
//! through a second shared tile ([`blur_tile`], also used by the fused augmentation).
//!
//! NHWC images (`_nhwc` kernels): the fast path takes each image as one plane of `width *
//! channels` interleaved values whose horizontal taps lie `channels` apart (reflected pixel by
//! pixel at the border), so its tiles are read and written whole, like NCHW planes; the other
//! path blurs one channel of a tile per block, through the layout's strides.

use crate::sampling::{gauss, reflect};
use core::intrinsics::fmaf32 as fmaf;
use core::intrinsics::gpu::gpu_launch_sized_workgroup_mem;
use streamline_abi::image::{
    blur_fast_tile, GaussianBlurParams, BLUR_FAST_MAX_RADIUS, BLUR_FAST_MAX_W,
    BLUR_FAST_NHWC_MAX_CHANNELS, BLUR_FAST_ROWS, BLUR_FAST_VALUES, IMAGE_BLOCK_X, IMAGE_BLOCK_Y,
    TILE,
};
use streamline_abi::image::{
    GAUSSIAN_BLUR, GAUSSIAN_BLUR_FAST, GAUSSIAN_BLUR_FAST_NHWC, GAUSSIAN_BLUR_NHWC,
};
use streamline_device::mem::{copy_async, copy_wait, lds, lds2, shared_addr, stg2_at, stg_at};
use streamline_device::thread::{block_x, sync_block, thread_xy};
use streamline_device::warp::{shfl_idx, FULL_MASK};
use streamline_device::{kernel, DevPtr};

/// Blurs one `TILE x TILE` output tile whose top-left pixel is `(y0, x0)` of a plane of
/// `h x w`. `fill_input(buf, rows, cols)` must write the tile and its halo (reflected at the
/// border) into `input`, a shared tile of `(TILE + 2 ry) x (TILE + 2 rx)`; `hbuf` is a shared
/// tile of `(TILE + 2 ry) x TILE`; `wx`/`wy` hold the unnormalised weights (written before the
/// call, read only after its first barrier). `store(row, col, value)` receives the normalised
/// result of every pixel of the tile inside the plane.
///
/// # Safety
/// Called by every thread of a 32 x 8 block with the same arguments; the shared buffers must
/// be as large as stated and not in use by anything else; it synchronises the block.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub unsafe fn blur_tile(
    (h, w): (i32, i32),
    (y0, x0): (i32, i32),
    (rx, ry): (i32, i32),
    input: *mut f32,
    hbuf: *mut f32,
    wx: *const f32,
    wy: *const f32,
    fill_input: impl Fn(*mut f32, usize, usize),
    mut store: impl FnMut(i32, i32, f32),
) {
    let (tx, ty) = thread_xy();
    let (tx, ty) = (tx as usize, ty as usize);
    let t = TILE as usize;
    let kx = 2 * rx as usize + 1;
    let ky = 2 * ry as usize + 1;
    let in_rows = t + 2 * ry as usize;
    let in_cols = t + 2 * rx as usize;
    // 1. The tile and its halo.
    fill_input(input, in_rows, in_cols);
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { sync_block() };
    // torchvision normalises each 1-D kernel by its sum; the product of both normalisations is
    // applied once to the result.
    // SAFETY: the weights were written before the barrier above.
    let norm = unsafe { (1.0 / sum(wx, kx as u32)) * (1.0 / sum(wy, ky as u32)) };
    // 2. Rows: hbuf[r][c] = sum_k wx[k] * input[r][c + k].
    let mut r = ty;
    while r < in_rows {
        let mut c = tx;
        while c < t {
            let mut acc = 0.0f32;
            let mut k = 0;
            while k < kx {
                // SAFETY: `r < in_rows`, `c + k < in_cols`, `k < kx`.
                acc += unsafe { *input.add(r * in_cols + c + k) * *wx.add(k) };
                k += 1;
            }
            // SAFETY: `r < in_rows`, `c < TILE`.
            unsafe { *hbuf.add(r * t + c) = acc };
            c += IMAGE_BLOCK_X as usize;
        }
        r += IMAGE_BLOCK_Y as usize;
    }
    // SAFETY: every thread of the block reaches this barrier.
    unsafe { sync_block() };
    // 3. Columns: out[r][c] = sum_k wy[k] * hbuf[r + k][c].
    let mut r = ty;
    while r < t {
        let c = tx;
        let (gy, gx) = (y0 + r as i32, x0 + c as i32);
        if gy < h && gx < w {
            let mut acc = 0.0f32;
            let mut k = 0;
            while k < ky {
                // SAFETY: `r + k < in_rows`, `c < TILE`, `k < ky`.
                acc += unsafe { *hbuf.add((r + k) * t + c) * *wy.add(k) };
                k += 1;
            }
            store(gy, gx, acc * norm);
        }
        r += IMAGE_BLOCK_Y as usize;
    }
    // SAFETY: every thread of the block reaches this barrier (the buffers may be reused next).
    unsafe { sync_block() };
}

/// Writes the unnormalised weights of a kernel of size `k` and deviation `sigma` into `dst`,
/// one tap per thread of the first `k` threads (x index + 32 * y index).
///
/// # Safety
/// `dst` must hold `k` f32 of shared memory not read before the next barrier.
#[inline(always)]
pub unsafe fn write_weights(dst: *mut f32, k: u32, sigma: f32) {
    let (tx, ty) = thread_xy();
    let lin = ty * IMAGE_BLOCK_X + tx;
    let mut t = lin;
    while t < k {
        // SAFETY: `t < k`.
        unsafe { *dst.add(t as usize) = gauss(t, k / 2, sigma) };
        t += IMAGE_BLOCK_X * IMAGE_BLOCK_Y;
    }
}

/// Sum of `k` values in shared memory.
///
/// # Safety
/// `src` must hold `k` f32 written before the last barrier.
#[inline(always)]
pub unsafe fn sum(src: *const f32, k: u32) -> f32 {
    let mut s = 0.0f32;
    let mut t = 0;
    while t < k as usize {
        // SAFETY: `t < k`.
        s += unsafe { *src.add(t) };
        t += 1;
    }
    s
}

/// Plane index of block `block_x()` for an output tile of `tw x th` (the tile `p.tiles` and
/// `p.tiles_x` count) of `planes` planes, that tile's top-left output value `(y0, x0)` and the
/// sigmas of the plane's image (`p.planes` divides a plane index into image and channel);
/// `None` for a block past the last plane.
#[inline(always)]
fn block_plane(
    p: &GaussianBlurParams,
    (tw, th): (u32, u32),
    planes: u32,
) -> Option<(u32, (u32, u32), (f32, f32))> {
    let (plane, t) = p.tiles.divmod(block_x());
    if plane >= planes {
        return None;
    }
    let (ty, tx) = p.tiles_x.divmod(t);
    let at = (ty * th, tx * tw);
    let n = p.planes.divmod(plane).0;
    let sig = if p.sigmas == DevPtr::NULL {
        (p.sigma_x, p.sigma_y)
    } else {
        let s = p.sigmas.as_ptr();
        // SAFETY: `n < batch`; `sigmas` holds `2 * batch` f32.
        unsafe {
            (
                s.add(2 * n as usize).read(),
                s.add(2 * n as usize + 1).read(),
            )
        }
    };
    Some((plane, at, sig))
}

kernel! {
    #[declared(GAUSSIAN_BLUR_FAST)]
    /// Square kernels up to radius `BLUR_FAST_MAX_RADIUS` (see the module documentation).
    ///
    /// # Safety
    /// `p.x`, `p.y` must address `batch * channels * height * width` f32; `p.sigmas` 0 or
    /// `2 * batch` f32; `kx == ky` odd, `kx / 2 <= BLUR_FAST_MAX_RADIUS`, with `kx / 2` below
    /// the width and the height; grid one block per `blur_fast_tile(width)` tile of each of the
    /// `batch * channels` planes, blocks of 32 x 8 threads with `blur_shared_bytes(kx, ky,
    /// width)` bytes of dynamic shared memory; `tiles`, `tiles_x` and `planes` divide by those
    /// tiles per plane, per row of tiles and by `channels`.
    pub unsafe fn gaussian_blur_fast(p: GaussianBlurParams) {
        // SAFETY: forwarded.
        unsafe { fast_kernel::<false>(&p) }
    }
}

kernel! {
    #[declared(GAUSSIAN_BLUR_FAST_NHWC)]
    /// [`gaussian_blur_fast`] of NHWC images.
    ///
    /// # Safety
    /// As for [`gaussian_blur_fast`], the buffers `batch * height * width * channels` f32 in
    /// NHWC.
    pub unsafe fn gaussian_blur_fast_nhwc(p: GaussianBlurParams) {
        // SAFETY: forwarded.
        unsafe { fast_kernel::<true>(&p) }
    }
}

/// The fast kernels' body, NHWC when `NHWC`.
///
/// # Safety
/// As for [`gaussian_blur_fast`] in the layout.
#[inline(always)]
unsafe fn fast_kernel<const NHWC: bool>(p: &GaussianBlurParams) {
    // An NHWC image is one plane of interleaved values (`p.planes` divides by 1).
    let (cs, planes) = if NHWC {
        (p.channels, p.batch)
    } else {
        (1, p.batch * p.channels)
    };
    let tile = blur_fast_tile(p.width * cs);
    // The whole block takes the same branch: it depends on the block only.
    let Some((plane, at, sig)) = block_plane(p, tile, planes) else {
        return;
    };
    let plane = plane as usize * p.height as usize * p.width as usize * cs as usize;
    // One instance per radius and tile width, so that each tile's geometry is constant.
    macro_rules! radius {
        ($w:expr) => {
            match p.kx / 2 {
                0 => fast::<0, { $w }, NHWC>(p, plane, at, sig),
                1 => fast::<1, { $w }, NHWC>(p, plane, at, sig),
                2 => fast::<2, { $w }, NHWC>(p, plane, at, sig),
                3 => fast::<3, { $w }, NHWC>(p, plane, at, sig),
                4 => fast::<4, { $w }, NHWC>(p, plane, at, sig),
                5 => fast::<5, { $w }, NHWC>(p, plane, at, sig),
                6 => fast::<6, { $w }, NHWC>(p, plane, at, sig),
                _ => fast::<7, { $w }, NHWC>(p, plane, at, sig),
            }
        };
    }
    // SAFETY: the host sized the shared memory with `blur_shared_bytes` for these kernel
    // sizes and this width and validated the planes; the radius and the tile are uniform
    // over the block.
    unsafe {
        if tile.0 == BLUR_FAST_MAX_W {
            radius!(BLUR_FAST_MAX_W as usize)
        } else {
            radius!(BLUR_FAST_MAX_W as usize / 2)
        }
    }
}

kernel! {
    #[declared(GAUSSIAN_BLUR)]
    /// Any kernel sizes, 32 x 32 tiles.
    ///
    /// # Safety
    /// `p.x`, `p.y` must address `batch * channels * height * width` f32; `p.sigmas` 0 or
    /// `2 * batch` f32; `kx`, `ky` odd and at most `MAX_KERNEL_SIZE` with `kx / 2 < width` and
    /// `ky / 2 < height`; grid `ceil(width / 32) * ceil(height / 32) * batch * channels` blocks of
    /// 32 x 8 threads with `blur_shared_bytes(kx, ky, width)` bytes of dynamic shared memory;
    /// `tiles`, `tiles_x` and `planes` divide by those tiles per plane, per row of tiles and by
    /// `channels`.
    pub unsafe fn gaussian_blur(p: GaussianBlurParams) {
        // SAFETY: forwarded.
        unsafe { general::<false>(&p) }
    }
}

kernel! {
    #[declared(GAUSSIAN_BLUR_NHWC)]
    /// [`gaussian_blur`] of NHWC images.
    ///
    /// # Safety
    /// As for [`gaussian_blur`], the buffers `batch * height * width * channels` f32 in NHWC.
    pub unsafe fn gaussian_blur_nhwc(p: GaussianBlurParams) {
        // SAFETY: forwarded.
        unsafe { general::<true>(&p) }
    }
}

/// The general kernels' body, NHWC when `NHWC`.
///
/// # Safety
/// As for [`gaussian_blur`] in the layout.
#[inline(always)]
unsafe fn general<const NHWC: bool>(p: &GaussianBlurParams) {
    let p = *p;
    // The whole block takes the same branch: it depends on the block only.
    let Some((plane, (y0, x0), (sx, sy))) = block_plane(&p, (TILE, TILE), p.batch * p.channels)
    else {
        return;
    };
    // One channel of an image: NCHW planes follow each other, NHWC channels interleave.
    let hw = p.height as usize * p.width as usize;
    let (base, px) = if NHWC {
        let (n, c) = p.planes.divmod(plane);
        (
            n as usize * hw * p.channels as usize + c as usize,
            p.channels,
        )
    } else {
        (plane as usize * hw, 1)
    };
    let (y0, x0) = (y0 as i32, x0 as i32);
    let (rx, ry) = ((p.kx / 2) as i32, (p.ky / 2) as i32);
    let tile = TILE as usize;
    let in_rows = tile + 2 * ry as usize;
    let in_cols = tile + 2 * rx as usize;
    let smem = gpu_launch_sized_workgroup_mem::<f32>();
    let input = smem;
    let hbuf = smem.wrapping_add(in_rows * in_cols);
    let wx = hbuf.wrapping_add(in_rows * tile);
    let wy = wx.wrapping_add(p.kx as usize);
    // SAFETY: `wx`, `wy` are `kx`, `ky` f32 of the launch's shared memory, read after the
    // barrier inside `blur_tile`.
    unsafe {
        write_weights(wx, p.kx, sx);
        write_weights(wy, p.ky, sy);
    }
    let (h, w) = (p.height as i32, p.width as i32);
    let src = p.x.as_ptr().wrapping_add(base);
    let dst = p.y.as_mut_ptr().wrapping_add(base);
    // Copies straight to shared memory (`cp.async`), all of a thread's in flight at once.
    let fill = |buf: *mut f32, rows: usize, cols: usize| {
        let (tx, ty) = thread_xy();
        let stage = shared_addr(buf);
        let mut r = ty as usize;
        while r < rows {
            let gy = reflect(y0 - ry + r as i32, h) as u32;
            let mut c = tx as usize;
            while c < cols {
                let gx = reflect(x0 - rx + c as i32, w) as u32;
                // SAFETY: `reflect` keeps indices inside the plane, whose offsets fit 32 bits;
                // `r < rows`, `c < cols`: a slot of `buf` only this thread writes, read after
                // `blur_tile`'s barrier.
                let at = (gy * p.width + gx) * px;
                unsafe { copy_async(stage + 4 * (r * cols + c) as u32, src, at) };
                c += IMAGE_BLOCK_X as usize;
            }
            r += IMAGE_BLOCK_Y as usize;
        }
        // SAFETY: the kernels are built for sm_80 and newer.
        unsafe { copy_wait() };
    };
    let wout = p.width as usize;
    // SAFETY: all threads call it with the same arguments; the buffers are sized by the host
    // (`blur_shared_bytes`) and the weights were written above.
    unsafe {
        blur_tile(
            (h, w),
            (y0, x0),
            (rx, ry),
            input,
            hbuf,
            wx,
            wy,
            fill,
            // SAFETY: `blur_tile` stores only pixels inside the plane.
            |r, c, v| {
                dst.add((r as usize * wout + c as usize) * px as usize)
                    .write(v)
            },
        )
    };
}

/// The fast path for a square kernel of radius `R` and an output tile `W` wide (and
/// `BLUR_FAST_VALUES / W` high, `(W, H)` of [`blur_fast_tile`]): the block computes rows
/// `y0..y0 + H` and columns `x0..x0 + W` of plane `plane`.
///
/// # Safety
/// Called by every thread of a 32 x 8 block with the same arguments; the launch provides
/// `blur_shared_bytes(2R + 1, 2R + 1, width)` bytes of shared memory for a `width` whose tile
/// is `W` wide; `R` is below the plane's height and width (reflect padding needs that) and the
/// plane lies inside `p.x` and `p.y`.
#[inline(always)]
unsafe fn fast<const R: usize, const W: usize, const NHWC: bool>(
    p: &GaussianBlurParams,
    plane: usize,
    (y0, x0): (u32, u32),
    (sx, sy): (f32, f32),
) {
    const MAX_K: usize = 2 * BLUR_FAST_MAX_RADIUS as usize + 1;
    let k = 2 * R + 1;
    // Values between a pixel's value and its neighbour's along a row (NHWC: the channels), the
    // plane's width in values and the halo's.
    let cs = if NHWC { p.channels as usize } else { 1 };
    let wv = p.width * cs as u32;
    let halo = R * cs;
    let (tw, th) = (W, BLUR_FAST_VALUES as usize / W);
    let cols = tw + 2 * halo;
    let rows = th + 2 * R;
    let (h, w) = (p.height as i32, p.width as i32);
    let src = p.x.as_ptr().wrapping_add(plane);
    let dst = p.y.as_mut_ptr().wrapping_add(plane);
    let tile = gpu_launch_sized_workgroup_mem::<f32>();
    let (tx, ty) = thread_xy();
    let (tx, ty) = (tx as usize, ty as usize);

    // 1. Tile and halo, rows `y0 - R ..`, columns `x0 - halo ..`, reflected at the border
    // (pixel by pixel, each channel in its place). A thread loads the same few columns on every
    // row, so their reflection is found once.
    const MAX_SPAN: usize = (BLUR_FAST_MAX_W as usize
        + 2 * BLUR_FAST_MAX_RADIUS as usize * BLUR_FAST_NHWC_MAX_CHANNELS as usize)
        .div_ceil(IMAGE_BLOCK_X as usize);
    let span = cols.div_ceil(IMAGE_BLOCK_X as usize);
    // Sized for the widest tile; the loops run over all of it with constant indices (and, in
    // NCHW, `m < span` known when each instance is built), so that the array stays in
    // registers.
    let mut src_col = [0u32; MAX_SPAN];
    for (m, g) in src_col.iter_mut().enumerate() {
        if m < span {
            let v = x0 as i32 - halo as i32 + (tx + m * IMAGE_BLOCK_X as usize) as i32;
            *g = if NHWC {
                let c = cs as i32;
                (reflect(v.div_euclid(c), w) * c + v.rem_euclid(c)) as u32
            } else {
                reflect(v, w) as u32
            };
        }
    }
    // The copies go straight to shared memory (`cp.async`), all of a thread's in flight at once.
    let stage = shared_addr(tile);
    let mut r = ty;
    while r < rows {
        let gy = reflect(y0 as i32 - R as i32 + r as i32, h) as u32;
        for (m, &gx) in src_col.iter().enumerate() {
            let c = tx + m * IMAGE_BLOCK_X as usize;
            if m < span && c < cols {
                // SAFETY: `reflect` keeps `(gy, gx)` inside the plane, whose offsets fit 32
                // bits (an image's values `c * h * w <= 2^32 - 1`); `r < rows`, `c < cols`: a
                // slot of the tile that only this thread writes, read after the barrier below.
                unsafe { copy_async(stage + 4 * (r * cols + c) as u32, src, gy * wv + gx) };
            }
        }
        r += IMAGE_BLOCK_Y as usize;
    }
    // Weights in registers while the loads land: lane `t` computes tap `t` of the horizontal
    // kernel and lane `16 + t` tap `t` of the vertical one (`k <= 15`), and every lane takes
    // them from those lanes, instead of each thread evaluating all `2k` exponentials.
    let lane = tx as u32;
    let (tap, sigma) = if lane < 16 {
        (lane, sx)
    } else {
        (lane - 16, sy)
    };
    let mine = gauss(tap.min(2 * R as u32), R as u32, sigma).to_bits();
    let mut wx = [0.0f32; MAX_K];
    let mut wy = [0.0f32; MAX_K];
    let (mut sum_x, mut sum_y) = (0.0f32, 0.0f32);
    for t in 0..k {
        // SAFETY: the whole warp is here (the caller's branch is uniform over the block).
        unsafe {
            wx[t] = f32::from_bits(shfl_idx(FULL_MASK, mine, t as u32));
            wy[t] = f32::from_bits(shfl_idx(FULL_MASK, mine, 16 + t as u32));
        }
        sum_x += wx[t];
        sum_y += wy[t];
    }
    let norm = (1.0 / sum_x) * (1.0 / sum_y);
    // SAFETY: the kernels are built for sm_80 and newer; every thread of the block reaches this
    // barrier (the caller's branch is uniform).
    unsafe {
        copy_wait();
        sync_block();
    }

    // 2. This thread's two columns and its `BLUR_FAST_ROWS` rows: horizontal taps from shared
    // memory, the vertical windows in registers.
    let pairs_x = W / (2 * IMAGE_BLOCK_X as usize);
    let col = 2 * ((ty % pairs_x) * IMAGE_BLOCK_X as usize + tx);
    let first = (ty / pairs_x) * BLUR_FAST_ROWS as usize;
    let gx = x0 + col as u32;
    if gx >= wv {
        return;
    }
    // Output rows of this thread inside the plane (the tile may run past its bottom).
    let rows_out = (p.height - y0)
        .saturating_sub(first as u32)
        .min(BLUR_FAST_ROWS) as usize;
    let at = (y0 + first as u32) * wv + gx;
    // Both columns in one 8-byte store where the plane's rows keep them 8-byte aligned; the
    // same for every thread of the block, as `gx` is even.
    let paired = wv % 2 == 0 && (dst as usize + 4 * at as usize) % 8 == 0;
    let second = gx + 1 < wv;
    // The same call with the row check and the store compiled in or out.
    macro_rules! columns {
        ($full:literal, $paired:literal) => {
            blur_columns::<R, $full, $paired, NHWC>(
                shared_addr(tile.add(first * cols + col)),
                (cols, cs),
                (wx, wy),
                norm,
                (dst, at, wv),
                (rows_out, second),
            )
        };
    }
    // SAFETY: forwarded; a thread whose rows are all inside the plane stores without checks,
    // in pairs where both columns are inside it and the stores aligned.
    unsafe {
        match (rows_out == BLUR_FAST_ROWS as usize, paired && second) {
            (true, true) => columns!(true, true),
            (true, false) => columns!(true, false),
            (false, true) => columns!(false, true),
            (false, false) => columns!(false, false),
        }
    }
}

/// Step 2 of [`fast`] for one thread: the vertical blur of the horizontal blurs of two
/// neighbouring columns of the tile, whose first row starts at shared-memory address `src`
/// (rows `cols` apart, taps `cs` columns apart), stored to `out[at]`, `out[at + stride]`, ...
/// (and the next column when `second`) for the first `rows_out` of [`BLUR_FAST_ROWS`] rows (all
/// of them when `FULL`), with one 8-byte store per row when `PAIRED`.
///
/// # Safety
/// `src` must be 8-byte aligned, its column even, with `BLUR_FAST_ROWS + 2R` rows and `2R cs +
/// 2` columns from it inside the tile; `cs == 1` unless `NHWC`; `out[at + r * stride]` (and
/// `out[at + r * stride + 1]` when `second`) inside the plane for `r < rows_out`; `PAIRED` only
/// where `second` holds and those pairs are 8-byte aligned.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn blur_columns<const R: usize, const FULL: bool, const PAIRED: bool, const NHWC: bool>(
    src: u32,
    (cols, cs): (usize, usize),
    (wx, wy): (
        [f32; 2 * BLUR_FAST_MAX_RADIUS as usize + 1],
        [f32; 2 * BLUR_FAST_MAX_RADIUS as usize + 1],
    ),
    norm: f32,
    (out, mut at, stride): (*mut f32, u32, u32),
    (rows_out, second): (usize, bool),
) {
    const MAX_K: usize = 2 * BLUR_FAST_MAX_RADIUS as usize + 1;
    let k = 2 * R + 1;
    let mut left = [0.0f32; MAX_K];
    let mut right = [0.0f32; MAX_K];
    for i in 0..BLUR_FAST_ROWS as usize + 2 * R {
        // Taps `0..2R + 2` of row `i`: column `t` feeds tap `t` of the left output and tap
        // `t - 1` of the right one.
        let row = src + 4 * (i * cols) as u32;
        let (mut acc_l, mut acc_r) = (0.0f32, 0.0f32);
        // NHWC: tap `t` of the left output lies `t cs` columns on, of the right one a column
        // further.
        for t in 0..if NHWC { k } else { 0 } {
            let a = row + 4 * (t * cs) as u32;
            // SAFETY: columns `t cs` and `t cs + 1 < 2R cs + 2` of row `i` (the caller's
            // contract).
            let (a, b) = unsafe { (lds(a), lds(a + 4)) };
            acc_l = fmaf(a, wx[t], acc_l);
            acc_r = fmaf(b, wx[t], acc_r);
        }
        for j in 0..if NHWC { 0 } else { R + 1 } {
            // SAFETY: columns `2j, 2j + 1 < 2R + 2` of row `i` (the caller's contract).
            let [a, b] = unsafe { lds2(row + 8 * j as u32) };
            acc_l = fmaf(a, wx[2 * j], acc_l);
            if 2 * j + 1 < k {
                acc_l = fmaf(b, wx[2 * j + 1], acc_l);
            }
            if j > 0 {
                acc_r = fmaf(a, wx[2 * j - 1], acc_r);
            }
            acc_r = fmaf(b, wx[2 * j], acc_r);
        }
        for t in 1..k {
            left[t - 1] = left[t];
            right[t - 1] = right[t];
        }
        left[k - 1] = acc_l;
        right[k - 1] = acc_r;
        if i >= 2 * R && (FULL || i - 2 * R < rows_out) {
            let (mut vl, mut vr) = (0.0f32, 0.0f32);
            for t in 0..k {
                vl = fmaf(left[t], wy[t], vl);
                vr = fmaf(right[t], wy[t], vr);
            }
            let (vl, vr) = (vl * norm, vr * norm);
            // SAFETY: output row `i - 2R < rows_out` of the thread (the caller's contract).
            unsafe {
                if PAIRED {
                    stg2_at(out, at, [vl, vr]);
                } else {
                    stg_at(out, at, vl);
                    if second {
                        stg_at(out, at + 1, vr);
                    }
                }
            }
            at += stride;
        }
    }
}
