//! f32 math from NVIDIA's libdevice, and the byte dot product [`dp4a`]. The kernel build links
//! `libdevice.10.bc` into the kernels' bitcode, keeping only the functions used; the error
//! bounds quoted are libdevice's documented ones (CUDA Math API, full range unless said
//! otherwise).

extern "C" {
    fn __nv_sincosf(x: f32, sptr: *mut f32, cptr: *mut f32);
    fn __nv_fast_fdividef(x: f32, y: f32) -> f32;
}

/// `x / y` by the hardware reciprocal: at most 2 ulp for `2^-126 <= |y| <= 2^126` (libdevice's
/// documented bound), against about ten instructions for the IEEE division.
#[inline(always)]
pub fn fast_div(x: f32, y: f32) -> f32 {
    // SAFETY: a pure function of its arguments.
    unsafe { __nv_fast_fdividef(x, y) }
}

/// `(sin x, cos x)` with one shared argument reduction (libdevice's precise path: at most 2 ulp
/// each, full range including the Payne-Hanek reduction of huge arguments).
#[inline(always)]
pub fn sincosf(x: f32) -> (f32, f32) {
    let mut s = 0.0f32;
    let mut c = 0.0f32;
    // SAFETY: libdevice writes exactly one f32 through each pointer; both point to live locals.
    unsafe { __nv_sincosf(x, &mut s, &mut c) };
    (s, c)
}

extern "C" {
    fn __nv_sincospif(x: f32, sptr: *mut f32, cptr: *mut f32);
    fn __nv_expf(x: f32) -> f32;
    fn __nv_exp2f(x: f32) -> f32;
    fn __nv_floorf(x: f32) -> f32;
    fn __nv_ceilf(x: f32) -> f32;
}

/// `(sin(pi x), cos(pi x))`, at most 1 ulp each and exact at multiples of 1/2 (so rotations by
/// multiples of 90 degrees have exact zero and unit coefficients).
#[inline(always)]
pub fn sincospif(x: f32) -> (f32, f32) {
    let mut s = 0.0f32;
    let mut c = 0.0f32;
    // SAFETY: libdevice writes exactly one f32 through each pointer; both point to live locals.
    unsafe { __nv_sincospif(x, &mut s, &mut c) };
    (s, c)
}

/// `e^x`, at most 2 ulp (libdevice's documented bound).
#[inline(always)]
pub fn expf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_expf(x) }
}

/// `2^x`, at most 2 ulp (libdevice's documented bound), in a fraction of [`expf`]'s
/// instructions: for kernels that take `e^x` as `2^(x log2(e))` where the extra rounding of the
/// product is within their error budget.
#[inline(always)]
pub fn exp2f(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_exp2f(x) }
}

/// Largest integer not above `x` (exact).
#[inline(always)]
pub fn floorf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_floorf(x) }
}

/// Smallest integer not below `x` (exact).
#[inline(always)]
pub fn ceilf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_ceilf(x) }
}

extern "C" {
    fn __nv_float2int_rz(x: f32) -> i32;
    fn __nv_float2int_rd(x: f32) -> i32;
    fn __nv_float2int_rn(x: f32) -> i32;
}

/// `x` truncated toward zero to i32 in one instruction; out-of-range values saturate and NaN
/// gives 0 (the hardware conversion's rule, which is also Rust's `as`).
#[inline(always)]
pub fn trunc_i32(x: f32) -> i32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_float2int_rz(x) }
}

/// `floor(x)` as i32, saturating, NaN gives 0.
#[inline(always)]
pub fn floor_i32(x: f32) -> i32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_float2int_rd(x) }
}

/// `x` rounded to nearest (ties to even) as i32, saturating, NaN gives 0.
#[inline(always)]
pub fn rint_i32(x: f32) -> i32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_float2int_rn(x) }
}

extern "C" {
    fn __nv_sqrtf(x: f32) -> f32;
    fn __nv_rsqrtf(x: f32) -> f32;
    fn __nv_logf(x: f32) -> f32;
    fn __nv_powf(x: f32, y: f32) -> f32;
    fn __nv_tanhf(x: f32) -> f32;
    fn __nv_sinf(x: f32) -> f32;
    fn __nv_cosf(x: f32) -> f32;
    fn __nv_fminf(x: f32, y: f32) -> f32;
    fn __nv_fmaxf(x: f32, y: f32) -> f32;
    fn __nv_fabsf(x: f32) -> f32;
}

/// `x * y + z` with one rounding.
#[inline(always)]
pub fn fmaf(x: f32, y: f32, z: f32) -> f32 {
    core::intrinsics::fmaf32(x, y, z)
}

/// Square root, correctly rounded (0 ulp).
#[inline(always)]
pub fn sqrtf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_sqrtf(x) }
}

/// `1 / sqrt(x)`, at most 2 ulp.
#[inline(always)]
pub fn rsqrtf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_rsqrtf(x) }
}

/// Natural logarithm, at most 1 ulp.
#[inline(always)]
pub fn logf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_logf(x) }
}

/// `x^y`, at most 4 ulp.
#[inline(always)]
pub fn powf(x: f32, y: f32) -> f32 {
    // SAFETY: a pure function of its arguments.
    unsafe { __nv_powf(x, y) }
}

/// Hyperbolic tangent, at most 2 ulp.
#[inline(always)]
pub fn tanhf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_tanhf(x) }
}

/// Sine, at most 2 ulp.
#[inline(always)]
pub fn sinf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_sinf(x) }
}

/// Cosine, at most 2 ulp.
#[inline(always)]
pub fn cosf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_cosf(x) }
}

/// The smaller of `x` and `y`; a NaN argument gives the other (IEEE `minNum`).
#[inline(always)]
pub fn fminf(x: f32, y: f32) -> f32 {
    // SAFETY: a pure function of its arguments.
    unsafe { __nv_fminf(x, y) }
}

/// The larger of `x` and `y`; a NaN argument gives the other (IEEE `maxNum`).
#[inline(always)]
pub fn fmaxf(x: f32, y: f32) -> f32 {
    // SAFETY: a pure function of its arguments.
    unsafe { __nv_fmaxf(x, y) }
}

/// `|x|` (exact).
#[inline(always)]
pub fn fabsf(x: f32) -> f32 {
    // SAFETY: a pure function of its argument.
    unsafe { __nv_fabsf(x) }
}

/// `c + a.b0 * b.b0 + a.b1 * b.b1 + a.b2 * b.b2 + a.b3 * b.b3` over the unsigned bytes of `a`
/// and `b` (`dp4a.u32.u32`), wrapping at `2^32`: four byte products summed in one instruction.
#[inline(always)]
pub fn dp4a(a: u32, b: u32, c: u32) -> u32 {
    let d: u32;
    // SAFETY: an arithmetic instruction on registers only.
    unsafe {
        core::arch::asm!(
            "dp4a.u32.u32 {d}, {a}, {b}, {c};",
            d = out(reg32) d,
            a = in(reg32) a,
            b = in(reg32) b,
            c = in(reg32) c,
            options(pure, nomem, nostack, preserves_flags)
        );
    }
    d
}
