//! Writing GPU kernels for Streamline in Rust.
//!
//! A kernel is one parameter struct, declared with [`params!`], and one function inside
//! [`kernel!`]. The crate
//! that holds them is compiled twice: for `nvptx64-nvidia-cuda` (by `streamline-builder`, from
//! the host crate's `build.rs`), where [`kernel!`] emits the PTX entry point, and for the host,
//! where the same [`kernel!`] emits a typed handle, a [`Kernel<P>`] constant of the same name.
//! The host can only launch that handle with a `P`, so a launch whose parameters differ from the
//! kernel's does not compile, and the PTX's manifest (checked when the module is loaded) ties
//! the handle to the entry point that was built.
//!
//! ```ignore
//! #![no_std]
//! use streamline_device::prelude::*;
//!
//! params! {
//!     #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
//!     pub struct SaxpyParams {
//!         pub x: DevPtr<f32>, pub y: DevPtrMut<f32>, pub n: u64, pub a: f32, pub pad: u32
//!     }
//! }
//!
//! kernel! {
//!     /// `y = a x + y`.
//!     ///
//!     /// # Safety
//!     /// `x` and `y` must address `n` f32 each on the device.
//!     pub unsafe fn saxpy(p: SaxpyParams) {
//!         let (x, y) = (p.x.as_ptr(), p.y.as_mut_ptr());
//!         for i in grid_stride(p.n) {
//!             // SAFETY: `i < n`, inside both arrays by the contract.
//!             unsafe { *y.add(i) = p.a * *x.add(i) + *y.add(i) };
//!         }
//!     }
//! }
//! ```
//!
//! The device-only modules ([`thread`], [`mem`], [`math`], [`warp`], [`atomic`], [`shared`])
//! exist only when compiling for `nvptx64`; the tensor-core ones only for the architectures
//! that have their instructions: `mma` (warp-level `mma.sync`, `ldmatrix`) from sm_80,
//! `barrier` (`mbarrier`) and `tma` (bulk tensor copies) from sm_90, `wgmma` (warpgroup
//! products) on sm_90a; wrap helper functions of a kernel crate that use
//! them in [`device!`] so that the crate still compiles for the host.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(
        stdarch_nvptx,
        asm_experimental_arch,
        core_intrinsics,
        gpu_intrinsics,
        gpu_launch_sized_workgroup_mem,
        allow_internal_unstable
    )
)]
#![cfg_attr(target_arch = "nvptx64", allow(internal_features))]
// Documented for the host, the device-only modules these docs link to do not exist.
#![cfg_attr(not(target_arch = "nvptx64"), allow(rustdoc::broken_intra_doc_links))]

use core::marker::PhantomData;

pub use element::{bf16, f16};
pub use ptr::{DevPtr, DevPtrMut};

#[cfg(target_arch = "nvptx64")]
pub mod atomic;
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
pub mod barrier;
pub mod element;
mod generic;
#[cfg(target_arch = "nvptx64")]
pub mod half2;
#[cfg(target_arch = "nvptx64")]
pub mod math;
#[cfg(target_arch = "nvptx64")]
pub mod mem;
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_80"))]
pub mod mma;
pub mod params;
pub mod ptr;
pub mod random;
#[cfg(target_arch = "nvptx64")]
pub mod reduce;
#[cfg(target_arch = "nvptx64")]
pub mod shared;
mod static_shared;
#[cfg(target_arch = "nvptx64")]
pub mod thread;
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90"))]
pub mod tma;
#[cfg(target_arch = "nvptx64")]
pub mod warp;
#[cfg(all(target_arch = "nvptx64", target_feature = "sm_90a"))]
pub mod wgmma;

/// What a kernel file needs: the macros and [`Kernel`] on both targets, and the device helpers
/// when compiling for the GPU.
pub mod prelude {
    pub use crate::{declare, device, kernel, params, DevPtr, DevPtrMut, Kernel, LaunchBounds};
    pub use crate::{element::Element, element::Float, shared_array};

    #[cfg(target_arch = "nvptx64")]
    pub use crate::{
        atomic::*,
        math::*,
        mem::*,
        shared::*,
        thread::*,
        warp::{
            ballot, lane_id, shfl_down, shfl_idx, shfl_xor, sync_warp, vote_all, vote_any,
            warp_sum_f32, FULL_MASK, WARP_SIZE,
        },
    };
    #[cfg(target_arch = "nvptx64")]
    pub use crate::{reduce::Block, warp::Warp};
}

/// A kernel's promise to the assembler (PTX `.maxntid` and `.minnctapersm`): it is never
/// launched with more than `max_threads` threads per block, and `min_blocks` blocks should fit
/// on one multiprocessor at once, which caps the registers per thread accordingly. The host
/// refuses launches that would break the promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBounds {
    /// Most threads per block any launch uses.
    pub max_threads: u32,
    /// Blocks per multiprocessor the register allocation must allow.
    pub min_blocks: u32,
}

/// The typed handle of a kernel entry point whose one by-value parameter is `P`.
///
/// Made by [`kernel!`] (or [`declare!`]); the host launches it with a `P` and nothing else.
pub struct Kernel<P> {
    name: &'static str,
    bounds: Option<LaunchBounds>,
    only_on: Option<&'static str>,
    fields: Option<&'static [params::FieldInfo]>,
    params: PhantomData<fn(P)>,
}

impl<P> Kernel<P> {
    /// A kernel named `name` (its PTX entry) taking `P`.
    pub const fn new(name: &'static str) -> Self {
        Kernel {
            name,
            bounds: None,
            only_on: None,
            fields: None,
            params: PhantomData,
        }
    }

    /// This kernel with its parameter struct's fields, which the host checks against the
    /// fields the built module records for the entry ([`kernel!`] and [`declare!`] add them).
    /// They must cover `P` with no byte left over (see [`params::padding_free`]).
    pub const fn with_fields(self, fields: &'static [params::FieldInfo]) -> Self {
        assert!(
            params::padding_free(fields, core::mem::size_of::<P>()),
            "a kernel's parameter struct has bytes no field covers: add explicit `pad` fields"
        );
        Kernel {
            fields: Some(fields),
            ..self
        }
    }

    /// The parameter struct's fields, where known (see [`Kernel::with_fields`]).
    pub const fn fields(&self) -> Option<&'static [params::FieldInfo]> {
        self.fields
    }

    /// This kernel with launch bounds (see [`LaunchBounds`]).
    pub const fn with_bounds(self, max_threads: u32, min_blocks: u32) -> Self {
        assert!(
            max_threads >= 1 && max_threads <= 1024,
            "launch bounds: max_threads must be in 1..=1024"
        );
        assert!(
            min_blocks >= 1,
            "launch bounds: min_blocks must be at least 1"
        );
        Kernel {
            bounds: Some(LaunchBounds {
                max_threads,
                min_blocks,
            }),
            ..self
        }
    }

    /// This kernel, built for the architecture-specific target `arch` only (`"sm_90a"`: it uses
    /// instructions of exactly that architecture, such as `wgmma`). A module built for another
    /// architecture has no such entry, and the host's error says which architecture it needs.
    pub const fn only_on(self, arch: &'static str) -> Self {
        Kernel {
            only_on: Some(arch),
            ..self
        }
    }

    /// The architecture this kernel is built for only, if any (see [`Kernel::only_on`]).
    pub const fn arch(&self) -> Option<&'static str> {
        self.only_on
    }

    /// Entry-point name in the PTX.
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// The launch bounds compiled into the PTX, if any.
    pub const fn bounds(&self) -> Option<LaunchBounds> {
        self.bounds
    }

    /// Size in bytes of the parameter struct.
    pub const fn param_size(&self) -> usize {
        core::mem::size_of::<P>()
    }

    /// Alignment in bytes of the parameter struct.
    pub const fn param_align(&self) -> usize {
        core::mem::align_of::<P>()
    }

    /// The declaration as the kernel build reads it from the PTX (see [`KernelRecord`]).
    pub const fn record(&self) -> [u32; KernelRecord::WORDS] {
        let (max_threads, min_blocks) = match self.bounds {
            Some(b) => (b.max_threads, b.min_blocks),
            None => (0, 0),
        };
        [
            KernelRecord::VERSION,
            self.param_size() as u32,
            self.param_align() as u32,
            max_threads,
            min_blocks,
        ]
    }
}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P> Copy for Kernel<P> {}

impl<P> PartialEq for Kernel<P> {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.bounds == other.bounds && self.only_on == other.only_on
    }
}
impl<P> Eq for Kernel<P> {}

impl<P> core::fmt::Debug for Kernel<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Kernel")
            .field("name", &self.name)
            .field("param_size", &self.param_size())
            .field("param_align", &self.param_align())
            .field("bounds", &self.bounds)
            .field("only_on", &self.only_on)
            .finish()
    }
}

/// A kernel's declaration as it travels through the PTX: a global named
/// [`KernelRecord::PREFIX`]`NAME` holding [`KernelRecord::WORDS`] little-endian u32 (a version,
/// the parameter's size and alignment, and the launch bounds, zero for none). The kernel build
/// reads these to apply launch bounds, check that declarations and entry points match, and
/// write the manifest, then removes them from the PTX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelRecord {
    /// Size in bytes of the parameter struct.
    pub param_size: u32,
    /// Alignment in bytes of the parameter struct.
    pub param_align: u32,
    /// Launch bounds, if declared.
    pub bounds: Option<LaunchBounds>,
}

impl KernelRecord {
    /// Prefix of the record globals' names; the rest is the kernel's name.
    pub const PREFIX: &'static str = "__streamline_kernel_";
    /// Format version of a record.
    pub const VERSION: u32 = 1;
    /// Number of u32 in a record.
    pub const WORDS: usize = 5;

    /// Reads a record from its words; `None` for another format version or a short record.
    pub fn decode(words: &[u32]) -> Option<KernelRecord> {
        if words.len() != Self::WORDS || words[0] != Self::VERSION {
            return None;
        }
        Some(KernelRecord {
            param_size: words[1],
            param_align: words[2],
            bounds: (words[3] != 0).then_some(LaunchBounds {
                max_threads: words[3],
                min_blocks: words[4],
            }),
        })
    }
}

/// Byte-wise string equality usable in constants (the declaration checks of [`kernel!`]).
#[doc(hidden)]
pub const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Declares a kernel and defines it, in one item.
///
/// ```ignore
/// kernel! {
///     /// Doc comment, shown on the host handle too.
///     #[launch_bounds(256, 4)]          // optional: max threads per block, min blocks per SM
///     pub unsafe fn name(p: Params) { /* body, compiled only for the GPU */ }
/// }
/// ```
///
/// On `nvptx64` this is the `extern "ptx-kernel"` entry `name` plus its declaration record; on
/// the host it is `pub const name: Kernel<Params>` and nothing of the body. The function is
/// `unsafe` because its parameters hold raw device addresses: its `# Safety` section says what
/// they must address.
///
/// A kernel declared elsewhere with [`declare!`] (when the host cannot compile the kernel crate)
/// is defined with `#[declared(PATH)]` first instead; the build then fails unless the function
/// has the declaration's name and parameter type.
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! kernel {
    (
        #[instances($($I:ident),+ $(,)?)]
        #[launch_bounds($max:expr $(, $min:expr)?)]
        $(#[$attr:meta])*
        $vis:vis unsafe fn $name:ident <$G:ident $(: $($B0:ident)::+ $(+ $($B:ident)::+)*)?>
            ($p:ident : $($P:ident)::+ $(<$($A:ty),+ $(,)?>)?) $body:block
    ) => {
        $crate::__kernel_generic! {
            (.with_bounds($max, $crate::__or_one!($($min)?)))
            [$($I),+] [$(#[$attr])*] $vis $name $G [$($($B0)::+ $(+ $($B)::+)*)?]
            $p ($($P)::+ $(<$($A),+>)?) [$($($A),+)?] $body
        }
    };
    (
        #[instances($($I:ident),+ $(,)?)]
        $(#[$attr:meta])*
        $vis:vis unsafe fn $name:ident <$G:ident $(: $($B0:ident)::+ $(+ $($B:ident)::+)*)?>
            ($p:ident : $($P:ident)::+ $(<$($A:ty),+ $(,)?>)?) $body:block
    ) => {
        $crate::__kernel_generic! {
            ()
            [$($I),+] [$(#[$attr])*] $vis $name $G [$($($B0)::+ $(+ $($B)::+)*)?]
            $p ($($P)::+ $(<$($A),+>)?) [$($($A),+)?] $body
        }
    };
    (
        #[declared($decl:expr)]
        $(#[$attr:meta])*
        $vis:vis unsafe fn $name:ident($p:ident : $P:ty) $body:block
    ) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            let declared: $crate::Kernel<$P> = $decl;
            assert!(
                $crate::str_eq(declared.name(), stringify!($name)),
                concat!(
                    "kernel `",
                    stringify!($name),
                    "` does not have the name of its declaration `",
                    stringify!($decl),
                    "`"
                )
            );
        };
        #[cfg(target_arch = "nvptx64")]
        #[no_mangle]
        $(#[$attr])*
        $vis unsafe extern "ptx-kernel" fn $name($p: $P) $body
    };
    (
        #[launch_bounds($max:expr $(, $min:expr)?)]
        $(#[$attr:meta])*
        $vis:vis unsafe fn $name:ident($p:ident : $P:ty) $body:block
    ) => {
        $crate::__kernel_here! {
            ($crate::Kernel::<$P>::new(stringify!($name))
                .with_bounds($max, $crate::__or_one!($($min)?)))
            $(#[$attr])* $vis $name $p ($P) $body
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis unsafe fn $name:ident($p:ident : $P:ty) $body:block
    ) => {
        $crate::__kernel_here! {
            ($crate::Kernel::<$P>::new(stringify!($name)))
            $(#[$attr])* $vis $name $p ($P) $body
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis unsafe fn $name:ident < $($rest:tt)*
    ) => {
        ::core::compile_error!(concat!(
            "generic kernel `",
            stringify!($name),
            "` needs the types to build it for: put `#[instances(f32, bf16, ..)]` first, ",
            "before `#[launch_bounds(..)]` and the doc comment"
        ));
    };
}

#[doc(hidden)]
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! __kernel_here {
    (($decl:expr) $(#[$attr:meta])* $vis:vis $name:ident $p:ident ($P:ty) $body:block) => {
        #[cfg(not(target_arch = "nvptx64"))]
        $(#[$attr])*
        #[allow(non_upper_case_globals)]
        $vis const $name: $crate::Kernel<$P> =
            $decl.with_fields(<$P as $crate::params::ParamFields>::FIELDS);

        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[export_name = concat!("__streamline_kernel_", stringify!($name))]
            #[used]
            static RECORD: [u32; $crate::KernelRecord::WORDS] = $crate::Kernel::<$P>::record(&$decl);
            $crate::__param_records!(stringify!($name), $P);
        };

        #[cfg(target_arch = "nvptx64")]
        #[no_mangle]
        $(#[$attr])*
        $vis unsafe extern "ptx-kernel" fn $name($p: $P) $body
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __or_one {
    () => {
        1
    };
    ($e:expr) => {
        $e
    };
}

/// Declares a kernel's parameter struct (`#[repr(C)]` is added) and describes its fields: each
/// field's name, offset, size and kind ([`params::FieldKind`]: integers, floats, arrays, which
/// pass as bytes, and typed device addresses, [`DevPtr`] and [`DevPtrMut`]). Every kernel's
/// struct is declared with it: [`kernel!`] and [`declare!`] record the fields in the manifest
/// under the kernel's name, the host checks them when it looks the kernel up, and a caller
/// holding only the built module, such as Python's `sl.load_module`, fills the struct by field
/// name with each value checked.
///
/// ```ignore
/// params! {
///     /// Parameters of `saxpy`.
///     #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
///     pub struct SaxpyParams {
///         pub x: DevPtr<f32>, pub y: DevPtrMut<f32>, pub n: u64, pub a: f32, pub pad: u32
///     }
/// }
/// ```
///
/// At most 32 fields, names of at most 32 bytes (a longer one fails the build).
///
/// A generic struct (`pub struct FillParams<T: Element> { pub y: DevPtrMut<T>, .. }`) is
/// recorded for each instance of the generic kernel that takes it (see [`kernel!`]); its
/// fields' types must each be a [`params::Field`] for every instance.
#[macro_export]
macro_rules! params {
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident
            < $($G:ident $(: $($B0:ident)::+ $(+ $($B:ident)::+)*)?),+ $(,)? > {
            $( $(#[$fattr:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        #[repr(C)]
        $vis struct $name<$($G $(: $($B0)::+ $(+ $($B)::+)*)?),+> {
            $( $(#[$fattr])* $fvis $field: $ty ),*
        }

        impl<$($G $(: $($B0)::+ $(+ $($B)::+)*)?),+> $crate::params::ParamFields
            for $name<$($G),+>
        where
            $($ty: $crate::params::Field),*
        {
            const FIELDS: &'static [$crate::params::FieldInfo] = &[
                $( $crate::params::FieldInfo {
                    name: stringify!($field),
                    offset: ::core::mem::offset_of!(Self, $field),
                    size: ::core::mem::size_of::<$ty>(),
                    kind: <$ty as $crate::params::Field>::KIND,
                    pointer: <$ty as $crate::params::Field>::POINTER,
                } ),*
            ];
        }
    };
    (
        $(#[$attr:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fattr:meta])* $fvis:vis $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$attr])*
        #[repr(C)]
        $vis struct $name { $( $(#[$fattr])* $fvis $field: $ty ),* }

        impl $crate::params::ParamFields for $name {
            const FIELDS: &'static [$crate::params::FieldInfo] = &[
                $( $crate::params::FieldInfo {
                    name: stringify!($field),
                    offset: ::core::mem::offset_of!($name, $field),
                    size: ::core::mem::size_of::<$ty>(),
                    kind: <$ty as $crate::params::Field>::KIND,
                    pointer: <$ty as $crate::params::Field>::POINTER,
                } ),*
            ];
        }
    };
}

/// The records of kernel `$name`'s parameter struct `$P` for the manifest: its fields, under
/// the kernel's name (see [`params::PARAMS_PREFIX`]).
#[doc(hidden)]
#[macro_export]
macro_rules! __param_records {
    ($name:expr, $P:ty) => {
        #[export_name = concat!("__streamline_ptype_", $name)]
        #[used]
        static PTYPE: [u32; $crate::params::NAME_WORDS + 1] = $crate::params::type_record($name);
        #[export_name = concat!("__streamline_params_", $name)]
        #[used]
        static FIELDS: [u32; $crate::params::RECORD_WORDS] = {
            assert!(
                $crate::params::padding_free(
                    <$P as $crate::params::ParamFields>::FIELDS,
                    ::core::mem::size_of::<$P>()
                ),
                concat!(
                    "the parameter struct of kernel `",
                    $name,
                    "` has bytes no field covers: add explicit `pad` fields"
                )
            );
            $crate::params::encode(<$P as $crate::params::ParamFields>::FIELDS)
        };
    };
}

/// Declares kernels whose functions live in a crate the host does not compile: typed
/// [`Kernel`] constants for both sides, and on `nvptx64` the declaration records the build
/// checks the PTX against (a declaration without its `#[declared(..)]` function in [`kernel!`]
/// fails the build, naming the kernel).
///
/// ```ignore
/// declare! {
///     /// Doc comment.
///     pub const SAXPY: Kernel<SaxpyParams> = Kernel::new("saxpy");
///     pub const BLUR: Kernel<BlurParams> = Kernel::new("blur").with_bounds(256, 4);
///     /// Built for Hopper's architecture-specific target only (its function sits behind
///     /// `#[cfg(target_feature = "sm_90a")]` in the kernel crate).
///     pub const MMA: Kernel<MmaParams> = Kernel::new("mma").with_bounds(384, 1).only_on("sm_90a");
/// }
/// ```
#[macro_export]
macro_rules! declare {
    ($(
        $(#[$attr:meta])*
        $vis:vis const $c:ident : Kernel<$P:ty> =
            Kernel::new($name:literal) $(.with_bounds($max:expr, $min:expr))?
            $(.only_on($arch:literal))?;
    )*) => {$(
        $(#[$attr])*
        $vis const $c: $crate::Kernel<$P> =
            $crate::Kernel::<$P>::new($name) $(.with_bounds($max, $min))? $(.only_on($arch))?
                .with_fields(<$P as $crate::params::ParamFields>::FIELDS);

        #[cfg(target_arch = "nvptx64")]
        $(#[cfg(target_feature = $arch)])?
        const _: () = {
            #[export_name = concat!("__streamline_kernel_", $name)]
            #[used]
            static RECORD: [u32; $crate::KernelRecord::WORDS] = $crate::Kernel::<$P>::record(&$c);
            $crate::__param_records!($name, $P);
        };
    )*};
}

/// Items compiled only for the GPU: the helper functions of a kernel crate that use the
/// device modules, so that the crate also compiles for the host (where only the kernels'
/// handles exist).
#[macro_export]
macro_rules! device {
    ($($item:item)*) => {$(
        #[cfg(target_arch = "nvptx64")]
        $item
    )*};
}

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // SAFETY: `trap` aborts the kernel; the host sees a launch failure instead of a hang.
    unsafe { core::arch::nvptx::trap() }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct P3 {
        _a: u64,
        _b: u32,
    }

    #[test]
    fn record_round_trips() {
        let k = Kernel::<P3>::new("k").with_bounds(256, 3);
        let r = KernelRecord::decode(&k.record()).unwrap();
        assert_eq!(r.param_size, 16);
        assert_eq!(r.param_align, 8);
        assert_eq!(r.bounds, k.bounds());
        let plain = KernelRecord::decode(&Kernel::<u32>::new("u").record()).unwrap();
        assert_eq!(plain.bounds, None);
        assert_eq!(KernelRecord::decode(&[2, 4, 4, 0, 0]), None);
        assert_eq!(KernelRecord::decode(&[1, 4, 4]), None);
    }

    #[test]
    fn str_eq_compares_bytes() {
        assert!(str_eq("saxpy", "saxpy"));
        assert!(!str_eq("saxpy", "saxpz"));
        assert!(!str_eq("saxpy", "saxp"));
    }
}
