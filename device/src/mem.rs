//! Global- and shared-memory accesses with an explicit state space and width.
//!
//! A Rust pointer becomes a generic PTX address, and LLVM may split or merge loads it cannot
//! prove aligned; these helpers pin down the instruction a hot loop relies on: a read-only
//! (`.nc`) global load of 1, 4 or 16 bytes, from a generic address converted to a global one;
//! 16-byte loads and stores marked evict-first, for data touched once; shared-memory loads and
//! stores; and asynchronous global-to-shared copies (`cp.async`).
use core::arch::asm;

/// The qualifier of [`ldg_line`] and [`ldg_at_line`]'s loads: the L2 prefetch hint on sm_90;
/// none elsewhere, since the hint needs PTX ISA 7.4, which the sm_80 build does not target.
#[cfg(target_feature = "sm_90")]
macro_rules! line_hint {
    () => {
        ".L2::256B"
    };
}
#[cfg(not(target_feature = "sm_90"))]
macro_rules! line_hint {
    () => {
        ""
    };
}

/// Four 4-byte values of type `$t` from the 16 bytes at the generic address `$p`, in one global
/// load by the instruction `$ins` (`ld.global.nc.v4.f32`, ...); `pure` where the memory cannot
/// change while the kernel runs (`.nc`), so that the compiler may move or merge the load.
macro_rules! ld_global_v4 {
    ($p:expr, $ins:literal, $t:ty) => {
        ld_global_v4!($p, $ins, $t, readonly, nostack, preserves_flags)
    };
    ($p:expr, $ins:literal, $t:ty, pure) => {
        ld_global_v4!($p, $ins, $t, pure, readonly, nostack, preserves_flags)
    };
    ($p:expr, $ins:literal, $t:ty, $($opt:ident),+) => {{
        let (a, b, c, d): ($t, $t, $t, $t);
        // SAFETY: guaranteed by the caller; the instruction only reads `[p, p + 16)`.
        unsafe {
            asm!(
                concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ", $ins, " {{{a}, {b}, {c}, {d}}}, [g]; }}"),
                a = out(reg32) a,
                b = out(reg32) b,
                c = out(reg32) c,
                d = out(reg32) d,
                p = in(reg64) $p,
                options($($opt),+)
            );
        }
        [a, b, c, d]
    }};
}

/// Writes the four 4-byte values `$v` to the 16 bytes at the generic address `$p` in one global
/// store by the instruction `$ins` (`st.global.v4.f32`, ...).
macro_rules! st_global_v4 {
    ($p:expr, $v:expr, $ins:literal) => {{
        let v = $v;
        // SAFETY: guaranteed by the caller; the instruction only writes `[p, p + 16)`.
        unsafe {
            asm!(
                concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ", $ins, " [g], {{{a}, {b}, {c}, {d}}}; }}"),
                p = in(reg64) $p,
                a = in(reg32) v[0],
                b = in(reg32) v[1],
                c = in(reg32) v[2],
                d = in(reg32) v[3],
                options(nostack, preserves_flags)
            );
        }
    }};
}

/// `ld.global.nc` of one f32 at the generic address `$p`, with the qualifier `$q` (a string
/// literal or a macro giving one) after `.nc`.
macro_rules! ld_nc_f32 {
    ($p:expr, $($q:tt)*) => {{
        let v: f32;
        // SAFETY: guaranteed by the caller; the instruction only reads `[p]`.
        unsafe {
            asm!(
                concat!("{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc", $($q)*, ".f32 {v}, [g]; }}"),
                v = out(reg32) v,
                p = in(reg64) $p,
                options(pure, readonly, nostack, preserves_flags)
            );
        }
        v
    }};
}

/// [`ld_nc_f32`] at `$base + 4 $i` for a 32-bit index: the address is one wide multiply-add
/// (which the assembler fuses from the widening multiply and the add) rather than a widening,
/// a shift and a 64-bit add.
macro_rules! ld_nc_f32_at {
    ($base:expr, $i:expr, $($q:tt)*) => {{
        let v: f32;
        // SAFETY: guaranteed by the caller; the instruction only reads `[base + 4 i]`.
        unsafe {
            asm!(
                concat!("{{ .reg .u64 a; mul.wide.u32 a, {i}, 4; add.s64 a, a, {p}; cvta.to.global.u64 a, a; ld.global.nc", $($q)*, ".f32 {v}, [a]; }}"),
                v = out(reg32) v,
                i = in(reg32) $i,
                p = in(reg64) $base,
                options(pure, readonly, nostack, preserves_flags)
            );
        }
        v
    }};
}

/// One f32 through the read-only global path.
///
/// # Safety
/// `p` must point to a readable f32 in global memory that no thread writes while the kernel
/// runs.
#[inline(always)]
pub unsafe fn ldg(p: *const f32) -> f32 {
    ld_nc_f32!(p, "")
}

/// `base[i]` through the read-only global path, for a 32-bit index, addressed by one wide
/// multiply-add.
///
/// # Safety
/// As for [`ldg`], for `base + i`.
#[inline(always)]
pub unsafe fn ldg_at(base: *const f32, i: u32) -> f32 {
    ld_nc_f32_at!(base, i, "")
}

/// [`ldg_at`] whose miss in L2 fetches the 256 bytes around it (`.L2::256B`, on sm_90; plain
/// [`ldg_at`] elsewhere), for gathers whose neighbouring sectors other warps read soon after: a
/// rotation's source rows, a resize's input rows.
///
/// # Safety
/// As for [`ldg_at`].
#[inline(always)]
pub unsafe fn ldg_at_line(base: *const f32, i: u32) -> f32 {
    ld_nc_f32_at!(base, i, line_hint!())
}

/// [`ldg`] with [`ldg_at_line`]'s L2 prefetch hint: for gathers through pointers whose
/// neighbours are a constant offset apart (the assembler folds the offset into the load).
///
/// # Safety
/// As for [`ldg`].
#[inline(always)]
pub unsafe fn ldg_line(p: *const f32) -> f32 {
    ld_nc_f32!(p, line_hint!())
}

/// `base[i]` through the ordinary (coherent) global path, for a 32-bit index. Unlike
/// [`ldg_at`] the load stays ordered after the thread's earlier global stores, so a kernel that
/// alternates batches of loads and stores keeps one batch in registers at a time.
///
/// # Safety
/// `base + i` must point to a readable f32 in global memory.
#[inline(always)]
pub unsafe fn ld_at(base: *const f32, i: u32) -> f32 {
    let v: f32;
    // SAFETY: guaranteed by the caller; the instruction only reads `[base + 4 i]`.
    unsafe {
        asm!(
            "{{ .reg .u64 a; mul.wide.u32 a, {i}, 4; add.s64 a, a, {p}; cvta.to.global.u64 a, a; ld.global.f32 {v}, [a]; }}",
            v = out(reg32) v,
            i = in(reg32) i,
            p = in(reg64) base,
            options(readonly, nostack, preserves_flags)
        );
    }
    v
}

/// Writes `base[i] = v` to global memory, for a 32-bit index (see [`ldg_at`]).
///
/// # Safety
/// `base + i` must point to a writable f32 in global memory that no other thread accesses
/// while the kernel runs.
#[inline(always)]
pub unsafe fn stg_at(base: *mut f32, i: u32, v: f32) {
    // SAFETY: guaranteed by the caller; the instruction only writes `[base + 4 i]`.
    unsafe {
        asm!(
            "{{ .reg .u64 a; mul.wide.u32 a, {i}, 4; add.s64 a, a, {p}; cvta.to.global.u64 a, a; st.global.f32 [a], {v}; }}",
            v = in(reg32) v,
            i = in(reg32) i,
            p = in(reg64) base,
            options(nostack, preserves_flags)
        );
    }
}

/// Writes `v` to `base[i]` and `base[i + 1]` with one 8-byte global store.
///
/// # Safety
/// `base + i` must be 8-byte aligned and point to two writable f32 in global memory that no
/// other thread accesses while the kernel runs.
#[inline(always)]
pub unsafe fn stg2_at(base: *mut f32, i: u32, v: [f32; 2]) {
    // SAFETY: guaranteed by the caller; the instruction only writes `[base + 4 i, base + 4 i + 8)`.
    unsafe {
        asm!(
            "{{ .reg .u64 a; mul.wide.u32 a, {i}, 4; add.s64 a, a, {p}; cvta.to.global.u64 a, a; st.global.v2.f32 [a], {{{x}, {y}}}; }}",
            x = in(reg32) v[0],
            y = in(reg32) v[1],
            i = in(reg32) i,
            p = in(reg64) base,
            options(nostack, preserves_flags)
        );
    }
}

/// Four f32 in one 16-byte read-only global load.
///
/// # Safety
/// `p` must be 16-byte aligned and point to four readable f32 in global memory that no thread
/// writes while the kernel runs.
#[inline(always)]
pub unsafe fn ldg4(p: *const f32) -> [f32; 4] {
    ld_global_v4!(p, "ld.global.nc.v4.f32", f32, pure)
}

/// Two 4-byte words in one 8-byte read-only global load (four bf16, say).
///
/// # Safety
/// `p` must be 8-byte aligned and point to 8 readable bytes in global memory that no thread
/// writes while the kernel runs.
#[inline(always)]
pub unsafe fn ldg8(p: *const [u32; 2]) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: guaranteed by the caller; the instruction only reads `[p, p + 8)`.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.v2.u32 {{{a}, {b}}}, [g]; }}",
            a = out(reg32) a,
            b = out(reg32) b,
            p = in(reg64) p,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    [a, b]
}

/// Loads a byte through the read-only data cache (`ld.global.nc`).
///
/// # Safety
/// `p` must point to a readable byte in global memory that nothing writes while the kernel
/// runs.
#[inline(always)]
pub unsafe fn ldg_u8(p: *const u8) -> u8 {
    let v: u16;
    // SAFETY: as for `ldg`.
    unsafe {
        asm!(
            "{{ .reg .u64 g; cvta.to.global.u64 g, {p}; ld.global.nc.u8 {v}, [g]; }}",
            v = out(reg16) v,
            p = in(reg64) p,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    v as u8
}

/// The 32-bit shared-memory address of `p`, a generic pointer into the block's shared memory.
/// Shared-memory accesses through 32-bit addresses take one register each instead of two.
#[inline(always)]
pub fn shared_addr(p: *const f32) -> u32 {
    let a: u32;
    // SAFETY: converts an address; touches no memory.
    unsafe {
        asm!(
            "{{ .reg .u64 s; cvta.to.shared.u64 s, {p}; cvt.u32.u64 {a}, s; }}",
            a = out(reg32) a,
            p = in(reg64) p,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    a
}

/// The f32 at shared-memory address `a`.
///
/// # Safety
/// `a` must be a 4-byte aligned address of the block's shared memory, written before the last
/// barrier (or by this thread).
#[inline(always)]
pub unsafe fn lds(a: u32) -> f32 {
    let v: f32;
    // SAFETY: guaranteed by the caller; the instruction only reads `[a]`.
    unsafe {
        asm!(
            "ld.shared.f32 {v}, [{a}];",
            v = out(reg32) v,
            a = in(reg32) a,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    v
}

/// The two f32 at shared-memory address `a`, with one 8-byte access.
///
/// # Safety
/// `a` must be an 8-byte aligned address of the block's shared memory, written before the last
/// barrier (or by this thread).
#[inline(always)]
pub unsafe fn lds2(a: u32) -> [f32; 2] {
    let (x, y): (f32, f32);
    // SAFETY: guaranteed by the caller; the instruction only reads `[a, a + 8)`.
    unsafe {
        asm!(
            "ld.shared.v2.f32 {{{x}, {y}}}, [{a}];",
            x = out(reg32) x,
            y = out(reg32) y,
            a = in(reg32) a,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    [x, y]
}

/// The 16 bytes at shared-memory address `a`, as four 32-bit words, with one access.
///
/// # Safety
/// `a` must be a 16-byte aligned address of the block's shared memory, written before the last
/// barrier (or by this thread).
#[inline(always)]
pub unsafe fn lds4(a: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    // SAFETY: guaranteed by the caller; the instruction only reads `[a, a + 16)`.
    unsafe {
        asm!(
            "ld.shared.v4.b32 {{{x}, {y}, {z}, {w}}}, [{a}];",
            x = out(reg32) x,
            y = out(reg32) y,
            z = out(reg32) z,
            w = out(reg32) w,
            a = in(reg32) a,
            options(pure, readonly, nostack, preserves_flags)
        );
    }
    [x, y, z, w]
}

/// Stores `v` at shared-memory address `a`.
///
/// # Safety
/// `a` must be a 4-byte aligned address of the block's shared memory that no other thread
/// accesses before the next barrier.
#[inline(always)]
pub unsafe fn sts(a: u32, v: f32) {
    // SAFETY: guaranteed by the caller; the instruction only writes `[a]`.
    unsafe {
        asm!(
            "st.shared.f32 [{a}], {v};",
            a = in(reg32) a,
            v = in(reg32) v,
            options(nostack, preserves_flags)
        );
    }
}

/// Starts copying `base[i]` (global memory, 32-bit index) to shared-memory address `dst`
/// without passing through a register (`cp.async`): a thread can have all its copies in flight
/// at once and wait for them together, with [`copy_wait`].
///
/// # Safety
/// `base + i` must point to a readable f32 in global memory that no thread writes while the
/// kernel runs; `dst` must be a 4-byte aligned address of the block's shared memory that no
/// other thread accesses until the barrier after the copy's [`copy_wait`].
#[inline(always)]
pub unsafe fn copy_async(dst: u32, base: *const f32, i: u32) {
    // SAFETY: guaranteed by the caller; the instruction reads `[base + 4 i]` and writes `[dst]`.
    unsafe {
        asm!(
            "{{ .reg .u64 a; mul.wide.u32 a, {i}, 4; add.s64 a, a, {p}; cvta.to.global.u64 a, a; cp.async.ca.shared.global [{d}], [a], 4; }}",
            d = in(reg32) dst,
            i = in(reg32) i,
            p = in(reg64) base,
            options(nostack, preserves_flags)
        );
    }
}

/// Waits until every copy this thread started with [`copy_async`] has landed in shared memory
/// (other threads see them after the next barrier).
///
/// # Safety
/// Only a kernel built for `sm_80` or newer may call it.
#[inline(always)]
pub unsafe fn copy_wait() {
    // SAFETY: guaranteed by the caller; waits, touching no memory of its own.
    unsafe { asm!("cp.async.wait_all;", options(nostack, preserves_flags)) }
}

/// Writes four f32 with one 16-byte global store.
///
/// # Safety
/// `p` must be 16-byte aligned and point to four writable f32 in global memory that no other
/// thread accesses while the kernel runs.
#[inline(always)]
pub unsafe fn stg4(p: *mut f32, v: [f32; 4]) {
    st_global_v4!(p, v, "st.global.v4.f32")
}

/// Sixteen bytes in one global load marked evict-first (`ld.global.cs`, streaming): for data
/// a kernel reads once, so that it leaves L2 to data that is used again.
///
/// # Safety
/// `p` must be 16-byte aligned and point to 16 readable bytes in global memory.
#[inline(always)]
pub unsafe fn ld_stream16(p: *const [u32; 4]) -> [u32; 4] {
    ld_global_v4!(p, "ld.global.cs.v4.u32", u32)
}

/// Writes sixteen bytes with one global store marked evict-first (`st.global.cs`, streaming):
/// for output nothing in the kernel reads again.
///
/// # Safety
/// `p` must be 16-byte aligned and point to 16 writable bytes in global memory that no other
/// thread accesses while the kernel runs.
#[inline(always)]
pub unsafe fn st_stream16(p: *mut [u32; 4], v: [u32; 4]) {
    st_global_v4!(p, v, "st.global.cs.v4.u32")
}

/// Starts copying 16 bytes from `src` (global memory) to shared-memory address `dst` with
/// `cp.async`, of which only the first `src_bytes` are read and the rest of the 16 are zero
/// (a tile's edge past a matrix's end costs no branch).
///
/// # Safety
/// `src` must be 16-byte aligned and its first `src_bytes` (0, 4, 8, 12 or 16) readable global
/// memory that no thread writes while the kernel runs; `dst` must be a 16-byte aligned address
/// of the block's shared memory that no other thread accesses until a barrier after the copy's
/// wait ([`copy_wait_groups`]). Only kernels built for `sm_80` or newer may call it.
#[inline(always)]
pub unsafe fn copy_async16(dst: u32, src: *const f32, src_bytes: u32) {
    // SAFETY: guaranteed by the caller; reads `[src, src + src_bytes)`, writes `[dst, dst + 16)`.
    unsafe {
        asm!(
            "{{ .reg .u64 a; cvta.to.global.u64 a, {p}; cp.async.cg.shared.global [{d}], [a], 16, {n}; }}",
            d = in(reg32) dst,
            p = in(reg64) src,
            n = in(reg32) src_bytes,
            options(nostack, preserves_flags)
        );
    }
}

/// [`copy_async16`] for four floats of any alignment: four 4-byte copies, the `j`-th reading
/// `src + j` if `j < count` and writing zero otherwise.
///
/// # Safety
/// As for [`copy_async16`], with `src` 4-byte aligned and its first `count` floats readable.
#[inline(always)]
pub unsafe fn copy_async4x1(dst: u32, src: *const f32, count: u32) {
    for j in 0..4u32 {
        let n = if j < count { 4 } else { 0 };
        // An address that is never read (n = 0) still has to be a global one: the first float.
        let p = if j < count {
            src.wrapping_add(j as usize)
        } else {
            src
        };
        // SAFETY: guaranteed by the caller; reads `n` bytes at `p`, writes `[dst + 4 j]`.
        unsafe {
            asm!(
                "{{ .reg .u64 a; cvta.to.global.u64 a, {p}; cp.async.ca.shared.global [{d}], [a], 4, {n}; }}",
                d = in(reg32) dst + 4 * j,
                p = in(reg64) p,
                n = in(reg32) n,
                options(nostack, preserves_flags)
            );
        }
    }
}

/// Closes the group of this thread's copies started since the last commit.
///
/// # Safety
/// Only kernels built for `sm_80` or newer may call it.
#[inline(always)]
pub unsafe fn copy_commit() {
    // SAFETY: guaranteed by the caller; marks a group, touching no memory.
    unsafe { asm!("cp.async.commit_group;", options(nostack, preserves_flags)) }
}

/// Waits until at most `N` of this thread's committed copy groups are still in flight (the
/// older ones have landed; other threads see them after the next barrier).
///
/// # Safety
/// Only kernels built for `sm_80` or newer may call it.
#[inline(always)]
pub unsafe fn copy_wait_groups<const N: u32>() {
    // SAFETY: guaranteed by the caller; waits, touching no memory of its own.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack, preserves_flags)) }
}
