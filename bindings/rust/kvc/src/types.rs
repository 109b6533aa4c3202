//! Enumerations of the C API as newtypes with associated constants. Like [`crate::Status`] they
//! are not Rust enums, so a value from a newer libkvc stays representable.
use kvc_sys as sys;

macro_rules! c_enum {
    ($(#[$doc:meta])* $ty:ident { $($name:ident = $c:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
        pub struct $ty(pub i32);

        impl $ty {
            $(
                #[doc = concat!("`", stringify!($c), "`")]
                pub const $name: $ty = $ty(sys::$c as i32);
            )*

            /// The constant's name without prefix, or "UNKNOWN".
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$name => stringify!($name),)*
                    _ => "UNKNOWN",
                }
            }

            /// The value with that name (see `name`).
            pub fn from_name(name: &str) -> Option<$ty> {
                match name {
                    $(stringify!($name) => Some($ty::$name),)*
                    _ => None,
                }
            }
        }
    };
}

c_enum! {
    /// Element type of the KV cache, of queries and of written K/V (`kvc_dtype`).
    Dtype { F32 = KVC_DTYPE_F32, F16 = KVC_DTYPE_F16, BF16 = KVC_DTYPE_BF16, FP8_E4M3 = KVC_DTYPE_FP8_E4M3 }
}

c_enum! {
    /// Where the KV storage lives (`kvc_backend`).
    Backend { NONE = KVC_BACKEND_NONE, CPU = KVC_BACKEND_CPU, CUDA = KVC_BACKEND_CUDA, AUTO = KVC_BACKEND_AUTO }
}

c_enum! {
    /// Answer of [`crate::Pool::can_alloc`] (vLLM v0 watermark rule).
    AllocVerdict { OK = KVC_ALLOC_OK, LATER = KVC_ALLOC_LATER, NEVER = KVC_ALLOC_NEVER }
}

c_enum! {
    /// Kind of a KV-cache group of a hybrid pool (`kvc_group_kind`, [`crate::GroupConfig::kind`]).
    GroupKind { FULL = KVC_GROUP_FULL, SLIDING = KVC_GROUP_SLIDING, SSM = KVC_GROUP_SSM }
}

c_enum! {
    /// Kind of a KV event (`kvc_event_type`).
    EventType {
        BLOCK_STORED = KVC_EVENT_BLOCK_STORED,
        BLOCK_REMOVED = KVC_EVENT_BLOCK_REMOVED,
        ALL_BLOCKS_CLEARED = KVC_EVENT_ALL_BLOCKS_CLEARED,
    }
}

impl Dtype {
    /// Bytes per element, or None for an unknown dtype.
    pub fn size(self) -> Option<usize> {
        match self {
            Dtype::F32 => Some(4),
            Dtype::F16 | Dtype::BF16 => Some(2),
            Dtype::FP8_E4M3 => Some(1),
            _ => None,
        }
    }
}

/// Priority bounds of [`crate::Keys::set_priority`].
pub const PRIORITY_MIN: i32 = sys::KVC_PRIORITY_MIN as i32;
/// Highest retention priority.
pub const PRIORITY_MAX: i32 = sys::KVC_PRIORITY_MAX as i32;
/// Priority of requests that set none.
pub const PRIORITY_DEFAULT: i32 = sys::KVC_PRIORITY_DEFAULT as i32;
/// Longest cache salt in bytes.
pub const MAX_SALT_LEN: usize = sys::KVC_MAX_SALT_LEN as usize;

/// An IEEE half-precision value by its bit pattern (Rust has no stable `f16`).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct F16(pub u16);

/// A bfloat16 value by its bit pattern.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
#[repr(transparent)]
pub struct Bf16(pub u16);

impl Bf16 {
    /// Rounds to nearest even (NaN stays NaN).
    pub fn from_f32(x: f32) -> Bf16 {
        let bits = x.to_bits();
        if x.is_nan() {
            return Bf16(((bits >> 16) as u16) | 0x40);
        }
        let round = 0x7fff + ((bits >> 16) & 1);
        Bf16((bits.wrapping_add(round) >> 16) as u16)
    }

    /// Exact widening.
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for super::F16 {}
    impl Sealed for super::Bf16 {}
}

/// Element types that host slices passed to the CPU kernels may hold; the dtype travels with the
/// type, so a slice cannot be misread as another dtype.
pub trait HostElement: sealed::Sealed + Copy {
    /// The dtype the C API is told.
    const DTYPE: Dtype;
}

impl HostElement for f32 {
    const DTYPE: Dtype = Dtype::F32;
}
impl HostElement for F16 {
    const DTYPE: Dtype = Dtype::F16;
}
impl HostElement for Bf16 {
    const DTYPE: Dtype = Dtype::BF16;
}
