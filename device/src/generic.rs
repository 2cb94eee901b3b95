//! Generic kernels: one function, one PTX entry per element type it is instantiated for.
//!
//! ```ignore
//! kernel! {
//!     #[instances(f32, bf16)]
//!     #[launch_bounds(256)]                 // optional, after the instances
//!     /// Doc comment.
//!     pub unsafe fn softmax<T: Element>(p: SoftmaxParams<T>) { /* generic body */ }
//! }
//! ```
//!
//! On the GPU each listed type `X` gets the entry `softmax_X` (`softmax_f32`, `softmax_bf16`)
//! with its own declaration record, so the build pairs and checks each as any other kernel. On
//! the host `softmax::<X>()` is the typed handle `Kernel<SoftmaxParams<X>>` of that entry
//! (a `const fn`); a type not in the list does not compile (`softmax::Instance` is not
//! implemented for it). The types are named by one identifier each (import `bf16` first).
//!
//! The parameter struct is declared with [`params!`](crate::params!); a generic one
//! (`SoftmaxParams<T>`) has its fields recorded per instance, and must be `bytemuck::Pod`
//! for each listed type (with no byte between or after its fields, which the build checks).

/// One instance of a generic kernel: its declaration records and its entry.
#[doc(hidden)]
#[macro_export]
#[cfg_attr(target_arch = "nvptx64", allow_internal_unstable(abi_ptx))]
macro_rules! __kernel_instance {
    (($($bounds:tt)*) $name:ident $G:ident $I:ident $p:ident ($P:ty) $args:tt) => {
        #[cfg(target_arch = "nvptx64")]
        const _: () = {
            #[allow(non_camel_case_types, dead_code)]
            type $G = $I;

            #[export_name = concat!("__streamline_kernel_", stringify!($name), "_", stringify!($I))]
            #[used]
            static RECORD: [u32; $crate::KernelRecord::WORDS] =
                $crate::Kernel::<$P>::new("") $($bounds)* .record();

            $crate::__instance_params!($args $name $I $P);

            #[export_name = concat!(stringify!($name), "_", stringify!($I))]
            unsafe extern "ptx-kernel" fn entry($p: $P) {
                // SAFETY: this entry's contract is the generic kernel's, for this type.
                unsafe { $name::<$I>($p) }
            }
        };
    };
}

/// The parameter-struct records of one instance, under the instance's name.
#[doc(hidden)]
#[macro_export]
macro_rules! __instance_params {
    ($args:tt $name:ident $I:ident $P:ty) => {
        $crate::__param_records!(concat!(stringify!($name), "_", stringify!($I)), $P);
    };
}

/// A generic kernel: the generic function and its entries on the GPU, the handle function and
/// its instance list on the host.
#[doc(hidden)]
#[macro_export]
macro_rules! __kernel_generic {
    (
        $bounds:tt [$($I:ident),+] [$(#[$attr:meta])*] $vis:vis $name:ident $G:ident
        [$($bound:tt)*] $p:ident ($P:ty) $args:tt $body:block
    ) => {
        #[cfg(target_arch = "nvptx64")]
        $(#[$attr])*
        #[inline(always)]
        $vis unsafe fn $name<$G: $($bound)*>($p: $P) $body

        $( $crate::__kernel_instance!($bounds $name $G $I $p ($P) $args); )+

        #[cfg(not(target_arch = "nvptx64"))]
        $(#[$attr])*
        ///
        /// A generic kernel: this is the handle of its instance for `T`, one of the types of
        /// its `#[instances(..)]`.
        $vis const fn $name<$G: $name::Instance + $($bound)*>() -> $crate::Kernel<$P>
        where
            $P: $crate::params::ParamFields,
        {
            $crate::__with_bounds!(
                $crate::Kernel::<$P>::new(<$G as $name::Instance>::ENTRY), $bounds)
                .with_fields(<$P as $crate::params::ParamFields>::FIELDS)
        }

        #[cfg(not(target_arch = "nvptx64"))]
        #[doc = concat!("The types the generic kernel [`", stringify!($name), "()`] is built for.")]
        $vis mod $name {
            #[allow(unused_imports)]
            use super::*;

            /// A type the kernel has a PTX entry for.
            #[diagnostic::on_unimplemented(
                message = "this generic kernel has no instance for `{Self}`",
                label = "not one of the kernel's `#[instances(..)]`",
                note = "add the type to the kernel's `#[instances(..)]` to build an entry for it"
            )]
            pub trait Instance {
                /// The entry's name in the PTX.
                const ENTRY: &'static str;
            }
            $(
                impl Instance for $I {
                    const ENTRY: &'static str = concat!(stringify!($name), "_", stringify!($I));
                }
            )+
        }
    };
}

/// `$k` with the launch bounds of a `(.with_bounds(..))` group, or as it is for `()`.
#[doc(hidden)]
#[macro_export]
macro_rules! __with_bounds {
    ($k:expr, ($($bounds:tt)*)) => {
        $k $($bounds)*
    };
}

#[cfg(test)]
mod tests {
    use crate::element::{bf16, Element};
    use crate::params::{FieldKind, ParamFields, Pointer};
    use crate::{kernel, params, DevPtrMut, Kernel, KernelRecord};

    params! {
        /// A generic parameter struct, without padding for any `T`.
        #[derive(Clone, Copy)]
        pub struct FillParams<T: Element> {
            pub y: DevPtrMut<T>,
            pub n: u32,
            pub value: T,
            pub pad: [T; 3],
            pub pad2: u32,
        }
    }

    params! {
        /// A generic parameter struct with padding after `value` for 2-byte types.
        #[derive(Clone, Copy)]
        pub struct Padded<T: Element> {
            pub y: DevPtrMut<T>,
            pub n: u32,
            pub value: T,
        }
    }

    params! {
        /// A parameter struct that is not generic.
        #[derive(Clone, Copy)]
        pub struct Plain {
            pub x: u64,
        }
    }

    kernel! {
        #[instances(f32, bf16)]
        #[launch_bounds(128, 2)]
        /// A generic kernel.
        ///
        /// # Safety
        /// None needed: the body is not compiled for the host.
        pub unsafe fn fill<T: Element>(p: FillParams<T>) {}
    }

    kernel! {
        #[instances(i32, u8,)]
        /// Generic with a plain parameter struct.
        ///
        /// # Safety
        /// None needed: the body is not compiled for the host.
        unsafe fn touch<U: Element + Copy>(p: Plain) {}
    }

    #[test]
    fn each_instance_has_its_entry_name_and_parameter_type() {
        let k: Kernel<FillParams<bf16>> = fill::<bf16>();
        assert_eq!(k.name(), "fill_bf16");
        assert_eq!(fill::<f32>().name(), "fill_f32");
        assert_eq!(
            k.bounds().map(|b| (b.max_threads, b.min_blocks)),
            Some((128, 2))
        );
        assert_eq!(k.param_size(), 24);
        assert_eq!(fill::<f32>().param_size(), 32);
        let r = KernelRecord::decode(&fill::<f32>().record()).unwrap();
        assert_eq!(r.bounds, fill::<f32>().bounds());
        const TOUCH: Kernel<Plain> = touch::<u8>();
        assert_eq!(
            (TOUCH.name(), touch::<i32>().name()),
            ("touch_u8", "touch_i32")
        );
        assert_eq!(TOUCH.bounds(), None);
    }

    #[test]
    fn a_generic_struct_records_its_fields_per_type() {
        let f = <FillParams<bf16> as ParamFields>::FIELDS;
        assert_eq!(f.len(), 5);
        assert_eq!((f[2].name, f[2].offset, f[2].size), ("value", 12, 2));
        assert_eq!(f[2].kind, FieldKind::BF16);
        assert_eq!((f[0].kind, f[0].pointer), (FieldKind::BF16, Pointer::Mut));
        assert_eq!(
            <FillParams<f32> as ParamFields>::FIELDS[2].kind,
            FieldKind::F32
        );
        assert_eq!(
            fill::<f32>().fields(),
            Some(<FillParams<f32> as ParamFields>::FIELDS)
        );
    }
    #[test]
    fn a_struct_with_padding_is_refused() {
        extern crate std;
        use crate::params::padding_free;
        assert!(padding_free(<Padded<f32> as ParamFields>::FIELDS, 16));
        assert!(!padding_free(<Padded<bf16> as ParamFields>::FIELDS, 16));
        let refused = std::panic::catch_unwind(|| {
            Kernel::<Padded<bf16>>::new("k").with_fields(<Padded<bf16> as ParamFields>::FIELDS)
        });
        assert!(refused.is_err());
    }
}
