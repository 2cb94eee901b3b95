//! The libdevice functions the kernels call. The build links NVIDIA's `libdevice.10.bc` into
//! the kernels' bitcode, keeping only the functions used; these are its documented signatures.

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
