//! A kernel's parameter struct described field by field, for the manifest: each field's name,
//! offset, size and kind, so that the host can check its struct against the built module's
//! and a caller who has only the built module (Python's `sl.load_module`) can fill the struct
//! by field name, with each value checked against its field's type. Declare the struct with
//! [`params!`](crate::params!). A field is an integer, a float, an array of them, or a typed
//! device address ([`crate::ptr`]).

/// Kind of a parameter field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum FieldKind {
    U8 = 1,
    U16 = 2,
    U32 = 3,
    U64 = 4,
    I8 = 5,
    I16 = 6,
    I32 = 7,
    I64 = 8,
    F32 = 9,
    F64 = 10,
    /// An array: passed as its bytes.
    Bytes = 11,
    F16 = 12,
    BF16 = 13,
}

/// Whether a field is a device address, and of which access ([`crate::ptr`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Pointer {
    /// A value, not an address.
    No = 0,
    /// [`DevPtr<T>`](crate::ptr::DevPtr): memory the kernel reads.
    Const = 1,
    /// [`DevPtrMut<T>`](crate::ptr::DevPtrMut): memory the kernel writes.
    Mut = 2,
}

impl Pointer {
    /// The access of a manifest code.
    pub const fn from_code(code: u32) -> Option<Pointer> {
        Some(match code {
            0 => Pointer::No,
            1 => Pointer::Const,
            2 => Pointer::Mut,
            _ => return None,
        })
    }
}

impl FieldKind {
    /// The manifest's name of the kind.
    pub const fn name(self) -> &'static str {
        match self {
            FieldKind::U8 => "u8",
            FieldKind::U16 => "u16",
            FieldKind::U32 => "u32",
            FieldKind::U64 => "u64",
            FieldKind::I8 => "i8",
            FieldKind::I16 => "i16",
            FieldKind::I32 => "i32",
            FieldKind::I64 => "i64",
            FieldKind::F32 => "f32",
            FieldKind::F64 => "f64",
            FieldKind::Bytes => "bytes",
            FieldKind::F16 => "f16",
            FieldKind::BF16 => "bf16",
        }
    }

    /// The kind of a manifest code.
    pub const fn from_code(code: u32) -> Option<FieldKind> {
        Some(match code {
            1 => FieldKind::U8,
            2 => FieldKind::U16,
            3 => FieldKind::U32,
            4 => FieldKind::U64,
            5 => FieldKind::I8,
            6 => FieldKind::I16,
            7 => FieldKind::I32,
            8 => FieldKind::I64,
            9 => FieldKind::F32,
            10 => FieldKind::F64,
            11 => FieldKind::Bytes,
            12 => FieldKind::F16,
            13 => FieldKind::BF16,
            _ => return None,
        })
    }
}

/// A type a parameter field may have, with its [`FieldKind`] (for a device address, its
/// element's kind) and whether it is a device address.
pub trait Field {
    /// How the manifest records it.
    const KIND: FieldKind;
    /// Whether it is a device address.
    const POINTER: Pointer = Pointer::No;
}

/// A type a [`DevPtr`](crate::ptr::DevPtr) may point to: a number or an array of them.
pub trait Pointee {
    /// How the manifest records the elements.
    const KIND: FieldKind;
}

macro_rules! field {
    ($($t:ty => $k:ident),*) => {$(
        impl Field for $t {
            const KIND: FieldKind = FieldKind::$k;
        }
        impl Pointee for $t {
            const KIND: FieldKind = FieldKind::$k;
        }
    )*};
}
field!(u8 => U8, u16 => U16, u32 => U32, u64 => U64, i8 => I8, i16 => I16, i32 => I32,
    i64 => I64, f32 => F32, f64 => F64, crate::element::f16 => F16,
    crate::element::bf16 => BF16);

impl<T, const N: usize> Field for [T; N] {
    const KIND: FieldKind = FieldKind::Bytes;
}

impl<T, const N: usize> Pointee for [T; N] {
    const KIND: FieldKind = FieldKind::Bytes;
}

impl<T: Pointee> Field for crate::ptr::DevPtr<T> {
    const KIND: FieldKind = T::KIND;
    const POINTER: Pointer = Pointer::Const;
}

impl<T: Pointee> Field for crate::ptr::DevPtrMut<T> {
    const KIND: FieldKind = T::KIND;
    const POINTER: Pointer = Pointer::Mut;
}

/// One field of a parameter struct.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldInfo {
    pub name: &'static str,
    pub offset: usize,
    pub size: usize,
    pub kind: FieldKind,
    pub pointer: Pointer,
}

#[diagnostic::on_unimplemented(
    message = "`{Self}` is not declared with `streamline_device::params!`",
    label = "a kernel's parameter struct records its fields",
    note = "wrap the struct in `params! {{ .. }}` so that the manifest records its fields"
)]
/// A parameter struct that [`params!`](crate::params!) declared: its fields in order.
pub trait ParamFields {
    const FIELDS: &'static [FieldInfo];
}

/// The parameter-struct record as it travels through the PTX: a global named
/// [`PARAMS_PREFIX`]`KERNEL` of [`RECORD_WORDS`] u32: a version, the number of fields, then
/// per field its offset, size, kind (the element's kind in the low byte, the [`Pointer`] access
/// in the next) and name (its length, then [`NAME_WORDS`] words of bytes).
pub const PARAMS_PREFIX: &str = "__streamline_params_";
/// The global [`TYPE_PREFIX`]`KERNEL` naming the record of a kernel's fields (the kernel's
/// own name), as its length and [`NAME_WORDS`] words of its bytes.
pub const TYPE_PREFIX: &str = "__streamline_ptype_";
/// Record format version.
pub const VERSION: u32 = 2;
/// Most fields a recorded struct may have.
pub const MAX_FIELDS: usize = 32;
/// Words of a name (at most `4 * NAME_WORDS` bytes).
pub const NAME_WORDS: usize = 8;
/// Words per field: offset, size, kind, name length, name.
pub const FIELD_WORDS: usize = 4 + NAME_WORDS;
/// Words of a record.
pub const RECORD_WORDS: usize = 2 + MAX_FIELDS * FIELD_WORDS;

/// `s` as its length followed by its bytes, little-endian, in `NAME_WORDS` words.
const fn name_words(s: &str, what: &str) -> [u32; NAME_WORDS + 1] {
    let b = s.as_bytes();
    if b.len() > 4 * NAME_WORDS {
        panic!("{}", what);
    }
    let mut out = [0u32; NAME_WORDS + 1];
    out[0] = b.len() as u32;
    let mut i = 0;
    while i < b.len() {
        out[1 + i / 4] |= (b[i] as u32) << (8 * (i % 4));
        i += 1;
    }
    out
}

/// Whether `fields`, in order, cover a struct of `size` bytes with no byte between or after
/// them: `Pod` allows no padding, and a generic struct's `unsafe impl` of it rests on this.
pub const fn padding_free(fields: &[FieldInfo], size: usize) -> bool {
    let mut end = 0;
    let mut i = 0;
    while i < fields.len() {
        if fields[i].offset != end {
            return false;
        }
        end += fields[i].size;
        i += 1;
    }
    end == size
}

/// The record of `fields` (see [`PARAMS_PREFIX`]).
pub const fn encode(fields: &[FieldInfo]) -> [u32; RECORD_WORDS] {
    assert!(
        fields.len() <= MAX_FIELDS,
        "a params! struct has at most 32 fields"
    );
    let mut out = [0u32; RECORD_WORDS];
    out[0] = VERSION;
    out[1] = fields.len() as u32;
    let mut f = 0;
    while f < fields.len() {
        let at = 2 + f * FIELD_WORDS;
        out[at] = fields[f].offset as u32;
        out[at + 1] = fields[f].size as u32;
        out[at + 2] = fields[f].kind as u32 | (fields[f].pointer as u32) << 8;
        let name = name_words(fields[f].name, "a params! field name has at most 32 bytes");
        let mut w = 0;
        while w <= NAME_WORDS {
            out[at + 3 + w] = name[w];
            w += 1;
        }
        f += 1;
    }
    out
}

/// The record [`TYPE_PREFIX`]`KERNEL` holds: the name under which the kernel's fields are
/// recorded, which is the kernel's own (a path's last segment, without generic arguments).
pub const fn type_record(ty: &str) -> [u32; NAME_WORDS + 1] {
    let b = ty.as_bytes();
    let mut end = 0;
    while end < b.len() && b[end] != b'<' {
        end += 1;
    }
    let mut start = end;
    while start > 0 && b[start - 1] != b':' && b[start - 1] != b' ' {
        start -= 1;
    }
    let (head, _) = b.split_at(end);
    let (_, name) = head.split_at(start);
    match core::str::from_utf8(name) {
        Ok(s) => name_words(
            s,
            "a kernel's name (with its instance's type) has at most 32 bytes",
        ),
        Err(_) => [0; NAME_WORDS + 1],
    }
}

/// A record's name (length, then bytes) back as bytes, if well formed.
pub fn name_of(words: &[u32]) -> Option<&[u8]> {
    let len = *words.first()? as usize;
    if len > 4 * NAME_WORDS || words.len() < NAME_WORDS + 1 {
        return None;
    }
    // SAFETY: `words[1..=NAME_WORDS]` is `4 * NAME_WORDS` initialised bytes; u8 has no
    // alignment, and `len` is within them.
    let bytes = unsafe { core::slice::from_raw_parts(words[1..].as_ptr() as *const u8, len) };
    Some(bytes)
}
