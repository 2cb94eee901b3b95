//! Row-wise softmax of a row-major `rows x cols` matrix, generic over the element type: three
//! kernels, each built for f32 and bf16 (`softmax_f32`, `softmax_held_bf16`, ...). On the host
//! `softmax::<T>()`, `softmax_held::<T>()` and `softmax_long::<T>()` are the handles of the
//! instances for `T`.
//!
//! Every element is read as f32 and every sum and maximum is taken in f32; a bf16 output is
//! rounded once, when stored. [`softmax`] takes any shape and alignment: rows of at most
//! [`WARP_COLS`] columns take one warp each (eight rows per block), longer ones a whole block,
//! so short rows leave no thread idle and long ones are spread over [`BLOCK`] threads; where
//! input and output rows share their alignment, the middle of each row moves in 16-byte
//! chunks, and each pass reads the row again. [`softmax_held`] takes the common case of short
//! rows that start 16-byte aligned in both matrices: each warp reads its row once, into its
//! lanes' registers, and writes it once, so every byte crosses the memory system once, and a
//! kernel of its own keeps those registers from the block rows' launches. [`softmax_long`]
//! takes the longer rows of the same alignment: a larger block per row, which holds fewer rows
//! at once, reads each row twice, the second time from L2.
//!
//! [`softmax`]: fn@softmax
//! [`softmax_held`]: fn@softmax_held
//! [`softmax_long`]: fn@softmax_long
#![no_std]

use streamline_device::bf16;
use streamline_device::prelude::*;

/// Threads per block of every launch.
pub const BLOCK: u32 = 256;
/// Rows of at most this many columns take one warp each; longer rows one block each.
pub const WARP_COLS: u32 = 1024;
/// Rows per block when each row takes one warp.
pub const WARP_ROWS: u32 = BLOCK / 32;
/// Threads per block of [`softmax_long`](fn@softmax_long): at most two such blocks fit on a
/// multiprocessor, so the rows being read at once fit in L2 until their second read (for rows up
/// to about L2's size over twice the multiprocessors, some 190 KiB on an H200; longer rows read
/// part of the second pass from memory).
pub const LONG_BLOCK: u32 = 1024;
/// The most chunks each thread of [`softmax_long`](fn@softmax_long) loads before using any
/// (each type's [`Lanes::GROUP`]).
pub const LONG_GROUP: usize = 4;

params! {
    /// Parameters of [`softmax`] over elements `T`: the matrices' addresses and shape.
    #[derive(Clone, Copy, Debug)]
    pub struct SoftmaxParams<T: Element> {
        /// Device address of the input, `rows x cols` elements, row-major.
        pub x: DevPtr<T>,
        /// Device address of the output, `rows x cols` elements, row-major.
        pub y: DevPtrMut<T>,
        /// Number of rows.
        pub rows: u32,
        /// Number of columns (at least 1).
        pub cols: u32,
    }
}

// SAFETY: two 8-byte addresses and two u32 whatever `T` is: no padding, and every bit pattern
// is a valid value. (bytemuck's derive does not take generic structs.)
unsafe impl<T: Element> bytemuck::Zeroable for SoftmaxParams<T> {}
// SAFETY: as above.
unsafe impl<T: Element> bytemuck::Pod for SoftmaxParams<T> {}

/// Sixteen bytes of a row, loaded or stored with one access.
#[derive(Clone, Copy)]
#[repr(C, align(16))]
pub struct Chunk(pub [u32; 4]);

/// An element type the kernel reads in [`Chunk`]s: how a chunk holds its elements.
pub trait Lanes: Float {
    /// Elements per chunk.
    const LANES: usize = 16 / core::mem::size_of::<Self>();
    /// A lane's share of a row of at most [`WARP_COLS`] elements that its warp holds: every
    /// 32nd chunk.
    type Held: Copy + AsRef<[Chunk]> + AsMut<[Chunk]>;
    /// [`Lanes::Held`] before the row is read.
    const HELD: Self::Held;
    /// Chunks each thread of [`softmax_long`](fn@softmax_long) loads before using any, at most
    /// [`LONG_GROUP`]: fewer for types whose chunks unpack to more values, so that two blocks'
    /// threads keep them in registers.
    const GROUP: usize;
    /// A chunk of negative infinities: in a lane's share past the row's end it leaves the
    /// maximum as it is and adds nothing to the sum, so no step between the load and the store
    /// asks which chunks are the row's.
    const NEG_INF: Chunk;
    /// Calls `f` on each element of `c`, widened to f32, in order.
    fn each(c: Chunk, f: impl FnMut(f32));
    /// The chunk of `f` of each element of `c` (called in order), each result rounded to this
    /// type.
    fn map(c: Chunk, f: impl FnMut(f32) -> f32) -> Chunk;
}

impl Lanes for f32 {
    type Held = [Chunk; WARP_COLS as usize / 4 / 32];
    const HELD: Self::Held = [Chunk([0; 4]); WARP_COLS as usize / 4 / 32];
    const NEG_INF: Chunk = Chunk([0xff80_0000; 4]);
    const GROUP: usize = LONG_GROUP;
    #[inline(always)]
    fn each(c: Chunk, mut f: impl FnMut(f32)) {
        c.0.iter().for_each(|&w| f(f32::from_bits(w)));
    }
    #[inline(always)]
    fn map(c: Chunk, mut f: impl FnMut(f32) -> f32) -> Chunk {
        Chunk(c.0.map(|w| f(f32::from_bits(w)).to_bits()))
    }
}

impl Lanes for bf16 {
    type Held = [Chunk; WARP_COLS as usize / 8 / 32];
    const HELD: Self::Held = [Chunk([0; 4]); WARP_COLS as usize / 8 / 32];
    const NEG_INF: Chunk = Chunk([0xff80_ff80; 4]);
    const GROUP: usize = LONG_GROUP / 2;
    #[inline(always)]
    fn each(c: Chunk, mut f: impl FnMut(f32)) {
        c.0.iter().for_each(|&w| {
            f(bf16::from_bits(w as u16).to_acc());
            f(bf16::from_bits((w >> 16) as u16).to_acc());
        });
    }
    #[inline(always)]
    fn map(c: Chunk, mut f: impl FnMut(f32) -> f32) -> Chunk {
        Chunk(c.0.map(|w| {
            let lo = bf16::from_acc(f(bf16::from_bits(w as u16).to_acc()));
            let hi = bf16::from_acc(f(bf16::from_bits((w >> 16) as u16).to_acc()));
            lo.to_bits() as u32 | (hi.to_bits() as u32) << 16
        }))
    }
}

device! {
    /// The threads that share one row: a warp or a block.
    trait Team: Copy {
        /// This thread's place in the team and the team's size.
        fn rank_size(self) -> (usize, usize);
        /// The team's largest `v`, on every thread.
        fn max(self, v: f32) -> f32;
        /// The team's sum of `v`, on every thread.
        fn sum(self, v: f32) -> f32;
    }

    impl Team for Warp {
        #[inline(always)]
        fn rank_size(self) -> (usize, usize) {
            (self.lane() as usize, 32)
        }
        #[inline(always)]
        fn max(self, v: f32) -> f32 {
            Warp::max(self, v)
        }
        #[inline(always)]
        fn sum(self, v: f32) -> f32 {
            Warp::sum(self, v)
        }
    }

    impl Team for Block {
        #[inline(always)]
        fn rank_size(self) -> (usize, usize) {
            (thread_xy().0 as usize, BLOCK as usize)
        }
        #[inline(always)]
        fn max(self, v: f32) -> f32 {
            Block::max(self, v)
        }
        #[inline(always)]
        fn sum(self, v: f32) -> f32 {
            Block::sum(self, v)
        }
    }

    /// Calls `f(i, true)` for the team member's 16-byte chunks of the row (starting at element
    /// `i`) and `f(i, false)` for its single elements before and after them; together the
    /// team covers `0..cols` once. `head` elements precede the chunks, `chunks` of them.
    #[inline(always)]
    fn visit<T: Lanes>(
        team: impl Team,
        (head, chunks, cols): (usize, usize, usize),
        mut f: impl FnMut(usize, bool),
    ) {
        let (rank, size) = team.rank_size();
        let mut i = rank;
        while i < head {
            f(i, false);
            i += size;
        }
        let mut c = rank;
        while c < chunks {
            f(head + c * T::LANES, true);
            c += size;
        }
        let mut i = head + chunks * T::LANES + rank;
        while i < cols {
            f(i, false);
            i += size;
        }
    }

    /// Softmax of one row of `cols` elements from `x` to `y`, by `team`: maximum, sum of
    /// exponentials, then the normalised exponentials.
    ///
    /// # Safety
    /// `x` and `y` address `cols` elements each; every member of `team` calls this with the
    /// same row.
    #[inline(always)]
    unsafe fn row<T: Lanes>(team: impl Team, x: *const T, y: *mut T, cols: usize) {
        let size = core::mem::size_of::<T>();
        // Chunks only where both rows reach 16-byte alignment after the same elements.
        let split = if (x as usize ^ y as usize) % 16 == 0 {
            let head = ((16 - x as usize % 16) % 16 / size).min(cols);
            (head, (cols - head) / T::LANES, cols)
        } else {
            (cols, 0, cols)
        };
        let mut m = f32::NEG_INFINITY;
        // SAFETY: `visit` gives indices below `cols`, and chunks that end at or before `cols`
        // and start 16-byte aligned in both rows (the same holds for the two passes below).
        visit::<T>(team, split, |i, chunk| unsafe {
            if chunk {
                T::each(*(x.add(i) as *const Chunk), |v| m = m.max(v));
            } else {
                m = m.max((*x.add(i)).to_acc());
            }
        });
        let m = team.max(m);
        let mut s = 0.0f32;
        // SAFETY: as for the first pass.
        visit::<T>(team, split, |i, chunk| unsafe {
            if chunk {
                T::each(*(x.add(i) as *const Chunk), |v| s += expf(v - m));
            } else {
                s += expf((*x.add(i)).to_acc() - m);
            }
        });
        let inv = 1.0 / team.sum(s);
        // SAFETY: as for the first pass; `y`'s row has the same length and chunk alignment.
        visit::<T>(team, split, |i, chunk| unsafe {
            if chunk {
                let out = T::map(*(x.add(i) as *const Chunk), |v| expf(v - m) * inv);
                *(y.add(i) as *mut Chunk) = out;
            } else {
                *y.add(i) = T::from_acc(expf((*x.add(i)).to_acc() - m) * inv);
            }
        });
    }
}

kernel! {
    #[instances(f32, bf16)]
    #[launch_bounds(BLOCK)]
    /// `y[r][c] = exp(x[r][c] - max_r) / sum_c' exp(x[r][c'] - max_r)` for every row `r`.
    ///
    /// Launch with blocks of [`BLOCK`] threads: `ceil(rows / WARP_ROWS)` blocks where
    /// `cols <= WARP_COLS`, else `rows` blocks.
    ///
    /// # Safety
    /// `p.x` and `p.y` must each address `p.rows * p.cols` elements of `T` on the device, not
    /// overlapping, with `p.cols >= 1`, launched as said above.
    pub unsafe fn softmax<T: Lanes>(p: SoftmaxParams<T>) {
        let cols = p.cols as usize;
        // SAFETY: blocks of BLOCK threads (a multiple of 32); every thread reaches each use
        // below together (the branches depend on the launch's parameters, or on the row, which
        // is the same across each warp that uses only its warp).
        let block = unsafe { Block::new() };
        let (x, y) = (p.x.as_ptr(), p.y.as_mut_ptr());
        if p.cols <= WARP_COLS {
            let r = block_x() * WARP_ROWS + thread_xy().0 / 32;
            if r < p.rows {
                let at = r as usize * cols;
                // SAFETY: row `r` lies inside both matrices (contract); the whole warp has it.
                unsafe { row(block.warp(), x.add(at), y.add(at), cols) };
            }
        } else {
            let at = block_x() as usize * cols;
            // SAFETY: one block per row (contract), so the row lies inside both matrices.
            unsafe { row(block, x.add(at), y.add(at), cols) };
        }
    }
}

kernel! {
    #[instances(f32, bf16)]
    #[launch_bounds(BLOCK)]
    /// [`softmax`] of rows that one warp holds in its registers: each element is read once and
    /// written once.
    ///
    /// Launch with blocks of [`BLOCK`] threads, `ceil(rows / WARP_ROWS)` of them.
    ///
    /// # Safety
    /// As for [`softmax`], and besides: `p.cols <= WARP_COLS`, each row a whole number of
    /// 16-byte chunks (`p.cols * size_of::<T>()` a multiple of 16), and `p.x` and `p.y`
    /// 16-byte aligned.
    pub unsafe fn softmax_held<T: Lanes>(p: SoftmaxParams<T>) {
        // SAFETY: blocks of BLOCK threads (a multiple of 32); a warp leaves below as a whole
        // (the row is the same across it), so the warps that go on are whole.
        let warp = unsafe { Block::new() }.warp();
        let r = block_x() * WARP_ROWS + thread_xy().0 / 32;
        if r >= p.rows {
            return;
        }
        let (chunks, at) = (p.cols as usize / T::LANES, r as usize * p.cols as usize);
        // SAFETY: row `r` lies inside both matrices (contract), and starts 16-byte aligned in
        // both, as each row is whole chunks and the matrices are aligned.
        let (x, y) = unsafe {
            (
                p.x.as_ptr().add(at) as *const Chunk,
                p.y.as_mut_ptr().add(at) as *mut Chunk,
            )
        };
        let lane = warp.lane() as usize;
        // Lane `l` holds chunks `l`, `l + 32`, ...: every load is issued before any is used.
        let mine = |j: usize| lane + 32 * j < chunks;
        let mut held = T::HELD;
        for (j, h) in held.as_mut().iter_mut().enumerate() {
            *h = if mine(j) {
                // SAFETY: a chunk of the row (`chunks * LANES == cols`), 16-byte aligned. Read
                // once, so marked evict-first.
                Chunk(unsafe { ld_stream16(x.add(lane + 32 * j) as *const [u32; 4]) })
            } else {
                T::NEG_INF
            };
        }
        let mut m = f32::NEG_INFINITY;
        for &h in held.as_ref() {
            T::each(h, |v| m = m.max(v));
        }
        let m = warp.max(m);
        // Each element's exponential, taken once for the sum and the output (as a power of
        // two: a few instructions where `expf` takes about ten, the lanes all computing at
        // once between the row's load and its store): element `i` of held chunk `j` is
        // `e[j * LANES + i]`.
        let mut e = [0.0f32; WARP_COLS as usize / 32];
        let mut s = 0.0f32;
        for (j, &h) in held.as_ref().iter().enumerate() {
            let mut k = j * T::LANES;
            T::each(h, |v| {
                e[k] = exp2f((v - m) * core::f32::consts::LOG2_E);
                s += e[k];
                k += 1;
            });
        }
        let inv = 1.0 / warp.sum(s);
        for (j, &h) in held.as_ref().iter().enumerate() {
            if mine(j) {
                let mut k = j * T::LANES;
                let out = T::map(h, |_| {
                    k += 1;
                    e[k - 1] * inv
                });
                // SAFETY: as for the loads; `y`'s row has the same chunks, written once.
                unsafe { st_stream16(y.add(lane + 32 * j) as *mut [u32; 4], out.0) };
            }
        }
    }
}

device! {
    /// Chunk `k` of group `g` of a [`softmax_long`] thread whose first chunk is `first`: a
    /// thread's chunks lie [`LONG_BLOCK`] apart, [`Lanes::GROUP`] of them to a group.
    #[inline(always)]
    fn long_chunk<T: Lanes>(first: usize, g: usize, k: usize) -> usize {
        first + LONG_BLOCK as usize * (T::GROUP * g + k)
    }

    /// Group `g` of a [`softmax_long`] thread's chunks of a row of `chunks` chunks at `x`
    /// ([`long_chunk`]), each read with `load` before any is used, in the first
    /// [`Lanes::GROUP`] entries; past the row's end, negative infinities (no weight in the
    /// maximum or the sum).
    ///
    /// # Safety
    /// `x` addresses `chunks` chunks, 16-byte aligned, and `load` reads the chunk it is given.
    #[inline(always)]
    unsafe fn group<T: Lanes>(
        x: *const Chunk,
        (first, g, chunks): (usize, usize, usize),
        load: impl Fn(*const Chunk) -> Chunk,
    ) -> [Chunk; LONG_GROUP] {
        let mut h = [T::NEG_INF; LONG_GROUP];
        for (k, h) in h[..T::GROUP].iter_mut().enumerate() {
            let c = long_chunk::<T>(first, g, k);
            if c < chunks {
                // SAFETY: chunk `c < chunks` of the row (the caller's).
                *h = load(unsafe { x.add(c) });
            }
        }
        h
    }
}

kernel! {
    #[instances(f32, bf16)]
    #[launch_bounds(LONG_BLOCK, 2)]
    /// [`softmax`] of rows longer than [`WARP_COLS`], one row per block of [`LONG_BLOCK`]
    /// threads, reading the row twice: once for its maximum and its sum of exponentials together
    /// (each thread's sum rescaled as its maximum grows), once for the output, that read and the
    /// output's write marked evict-first.
    ///
    /// Launch with blocks of [`LONG_BLOCK`] threads, `rows` of them. Rows of fewer than
    /// `LONG_BLOCK * LONG_GROUP` chunks come out right too, but [`softmax`]'s smaller blocks
    /// serve them better.
    ///
    /// # Safety
    /// `p.x` and `p.y` must each address `p.rows * p.cols` elements of `T` on the device, not
    /// overlapping, 16-byte aligned, with `p.cols > WARP_COLS` and each row a whole number of
    /// 16-byte chunks (`p.cols * size_of::<T>()` a multiple of 16), launched as said above.
    pub unsafe fn softmax_long<T: Lanes>(p: SoftmaxParams<T>) {
        // SAFETY: blocks of LONG_BLOCK threads (whole warps); no thread leaves early and the
        // two reductions below lie outside every branch.
        let block = unsafe { Block::new() };
        let (chunks, at) = (p.cols as usize / T::LANES, block_x() as usize * p.cols as usize);
        // SAFETY: row `block_x()` lies inside both matrices (one block per row), and starts
        // 16-byte aligned in both, as each row is whole chunks and the matrices are aligned.
        let (x, y) = unsafe {
            (
                p.x.as_ptr().add(at) as *const Chunk,
                p.y.as_mut_ptr().add(at) as *mut Chunk,
            )
        };
        let first = thread_xy().0 as usize;
        let log2e = core::f32::consts::LOG2_E;
        let groups = chunks.div_ceil(LONG_BLOCK as usize * T::GROUP);
        let (mut m, mut s) = (f32::NEG_INFINITY, 0.0f32);
        for g in 0..groups {
            // SAFETY: `x` is the row of `chunks` chunks (above).
            let h = unsafe { group::<T>(x, (first, g, chunks), |c| *c) };
            let mut top = m;
            let h = &h[..T::GROUP];
            h.iter().for_each(|&c| T::each(c, |v| top = top.max(v)));
            if top > f32::NEG_INFINITY {
                // The sum so far moves to the new maximum (a factor of 0 from an empty sum's
                // negative infinity, and of 1 when the maximum stays); a NaN makes it NaN.
                s *= exp2f((m - top) * log2e);
                h.iter()
                    .for_each(|&c| T::each(c, |v| s += exp2f((v - top) * log2e)));
                m = top;
            } else {
                // Nothing but negative infinities and NaN so far (the maximum ignores NaN): a
                // NaN still makes the row's sum, and so all its outputs, NaN, as in the
                // reference.
                h.iter().for_each(|&c| {
                    T::each(c, |v| {
                        if v.is_nan() {
                            s = f32::NAN;
                        }
                    })
                });
            }
        }
        let top = block.max(m);
        // A thread whose maximum is still negative infinity holds a sum of 0, or NaN.
        let mine = if m > f32::NEG_INFINITY {
            s * exp2f((m - top) * log2e)
        } else {
            s
        };
        let inv = 1.0 / block.sum(mine);
        for g in 0..groups {
            // SAFETY: as above. The row's last read, so marked evict-first (`group` passes
            // only 16-byte aligned chunks of the row).
            let h = unsafe {
                group::<T>(x, (first, g, chunks), |c| {
                    Chunk(ld_stream16(c as *const [u32; 4]))
                })
            };
            for (k, &h) in h[..T::GROUP].iter().enumerate() {
                let c = long_chunk::<T>(first, g, k);
                if c < chunks {
                    let out = T::map(h, |v| exp2f((v - top) * log2e) * inv);
                    // SAFETY: as for the loads; `y`'s row has the same chunks, written once.
                    unsafe { st_stream16(y.add(c) as *mut [u32; 4], out.0) };
                }
            }
        }
    }
}
