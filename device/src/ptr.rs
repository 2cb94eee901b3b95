//! Typed device addresses for parameter structs: [`DevPtr<T>`] for memory a kernel reads,
//! [`DevPtrMut<T>`] for memory it writes. Each is the 8-byte address the kernel receives, so a
//! struct keeps its layout, but its element type travels with it: the host's prepared launch
//! hands out `DevPtr<f16>` for an f16 buffer, which does not fit an `f32` field, and the
//! manifest records each pointer field with its element type (`*const f32`), which the loader
//! and Python's typed launch check.
//!
//! Making a pointer from a bare address ([`DevPtr::from_addr`]) is safe: nothing is read
//! through it on the host, and the launch that hands it to a kernel is `unsafe`, with the
//! addresses' validity in its contract.

use core::fmt;
use core::marker::PhantomData;

macro_rules! pointer {
    ($(#[$attr:meta])* $name:ident, $raw:ty, $as_raw:ident) => {
        $(#[$attr])*
        #[repr(transparent)]
        pub struct $name<T> {
            addr: u64,
            elem: PhantomData<fn() -> T>,
        }

        impl<T> $name<T> {
            /// The null address (a field the kernel does not use).
            pub const NULL: Self = Self::from_addr(0);

            /// The pointer to the device address `addr`, for memory holding `T`s.
            pub const fn from_addr(addr: u64) -> Self {
                $name {
                    addr,
                    elem: PhantomData,
                }
            }

            /// The device address.
            pub const fn addr(self) -> u64 {
                self.addr
            }

            /// The pointer `count` elements further (wrapping, like `<*const T>::wrapping_add`).
            pub const fn wrapping_add(self, count: u64) -> Self {
                Self::from_addr(
                    self.addr
                        .wrapping_add(count.wrapping_mul(core::mem::size_of::<T>() as u64)),
                )
            }

            /// The same address for elements of type `U` (a vector of `T`s, or their bits).
            pub const fn cast<U>(self) -> $name<U> {
                $name::from_addr(self.addr)
            }

            /// The pointer as the kernel uses it.
            #[inline(always)]
            pub fn $as_raw(self) -> $raw {
                self.addr as usize as $raw
            }
        }

        impl<T> Clone for $name<T> {
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<T> Copy for $name<T> {}

        impl<T> PartialEq for $name<T> {
            fn eq(&self, other: &Self) -> bool {
                self.addr == other.addr
            }
        }

        impl<T> Eq for $name<T> {}

        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}<{}>({:#x})", stringify!($name), core::any::type_name::<T>(), self.addr)
            }
        }

        impl<T> Default for $name<T> {
            fn default() -> Self {
                Self::NULL
            }
        }

        // SAFETY: the struct is `repr(transparent)` over a `u64` (the marker is zero-sized), so
        // every bit pattern, zeros included, is a valid value.
        unsafe impl<T: 'static> bytemuck::Zeroable for $name<T> {}
        // SAFETY: as above; it has no padding and no interior references.
        unsafe impl<T: 'static> bytemuck::Pod for $name<T> {}
    };
}

pointer! {
    /// The device address of memory a kernel reads as `T`s (`*const T` in the kernel).
    DevPtr, *const T, as_ptr
}

pointer! {
    /// The device address of memory a kernel writes (and may read) as `T`s (`*mut T` in the
    /// kernel).
    DevPtrMut, *mut T, as_mut_ptr
}

impl<T> DevPtrMut<T> {
    /// The same address, read only.
    pub const fn as_const(self) -> DevPtr<T> {
        DevPtr::from_addr(self.addr)
    }

    /// The pointer as a kernel that only reads it uses it.
    #[inline(always)]
    pub fn as_ptr(self) -> *const T {
        self.addr as usize as *const T
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_one_address() {
        assert_eq!(core::mem::size_of::<DevPtr<u8>>(), 8);
        assert_eq!(core::mem::align_of::<DevPtrMut<[f32; 4]>>(), 8);
        let p = DevPtrMut::<f32>::from_addr(0x1000);
        assert_eq!(bytemuck::bytes_of(&p), &0x1000u64.to_le_bytes());
        assert_eq!(p.wrapping_add(3).addr(), 0x100c);
        assert_eq!(p.cast::<u16>().wrapping_add(3).addr(), 0x1006);
        assert_eq!(p.as_const(), DevPtr::from_addr(0x1000));
        assert_eq!(DevPtr::<f32>::default(), DevPtr::NULL);
    }
}
