//! A numeric element trait over the tensor storage types, and macros dispatching a
//! [`TensorData`] to generic code.
//!
//! Float kernels do their arithmetic in `f32` (see [`crate::float`]); the generic
//! [`Elem`] path serves ops that must also work on integer tensors (shape arithmetic,
//! comparisons, reductions of integer data) and keeps `f64` at full precision.

use rtq_ir::TensorData;

/// A numeric element type stored in a [`TensorData`] variant.
pub(crate) trait Elem: Copy + Send + Sync + PartialOrd + Default + 'static {
    /// Whether this is a floating-point type.
    const IS_FLOAT: bool;
    /// The elements, if `data` holds this type.
    fn slice(data: &TensorData) -> Option<&[Self]>;
    /// Storage holding `values`.
    fn wrap(values: Vec<Self>) -> TensorData;
    /// The value as f64 (exact for all but very large 64-bit integers).
    fn to_f64(self) -> f64;
    /// The nearest value of this type (integers truncate toward zero and saturate).
    fn from_f64(v: f64) -> Self;
    /// The value as i64 (floats truncate toward zero, saturating).
    fn to_i64(self) -> i64;
    /// The additive identity.
    fn zero() -> Self;
    /// The multiplicative identity.
    fn one() -> Self;
    /// The smallest value (negative infinity for floats).
    fn lowest() -> Self;
    /// The largest value (infinity for floats).
    fn highest() -> Self;
    /// Addition (integers wrap).
    fn add(self, o: Self) -> Self;
    /// Subtraction (integers wrap).
    fn sub(self, o: Self) -> Self;
    /// Multiplication (integers wrap).
    fn mul(self, o: Self) -> Self;
    /// Division; integers truncate toward zero and yield 0 for a zero divisor (callers
    /// reject zero divisors before calling).
    fn div(self, o: Self) -> Self;
    /// Remainder with the sign of the dividend (C `fmod`).
    fn fmod(self, o: Self) -> Self;
    /// Remainder with the sign of the divisor (Python `%`).
    fn pymod(self, o: Self) -> Self;
    /// Negation (integers wrap; unsigned types wrap too).
    fn neg(self) -> Self;
    /// Absolute value (integers wrap at the minimum).
    fn abs(self) -> Self;
    /// Whether the value is NaN (never for integers).
    fn is_nan(self) -> bool;
}

/// The larger of two values; NaN propagates.
pub(crate) fn max_elem<T: Elem>(a: T, b: T) -> T {
    if a.is_nan() || a >= b {
        a
    } else {
        b
    }
}

/// The smaller of two values; NaN propagates.
pub(crate) fn min_elem<T: Elem>(a: T, b: T) -> T {
    if a.is_nan() || a <= b {
        a
    } else {
        b
    }
}

macro_rules! impl_int {
    ($t:ty, $variant:ident, $signed:expr) => {
        impl Elem for $t {
            const IS_FLOAT: bool = false;
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(values: Vec<Self>) -> TensorData {
                TensorData::$variant(values)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn zero() -> Self {
                0
            }
            fn one() -> Self {
                1
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            fn add(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            fn sub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            fn mul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            fn div(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_div(o)
                }
            }
            fn fmod(self, o: Self) -> Self {
                if o == 0 {
                    0
                } else {
                    self.wrapping_rem(o)
                }
            }
            fn pymod(self, o: Self) -> Self {
                if o == 0 {
                    return 0;
                }
                let r = self.wrapping_rem(o);
                #[allow(unused_comparisons)]
                let signs_differ = (r < 0) != (o < 0);
                if r != 0 && $signed && signs_differ {
                    r.wrapping_add(o)
                } else {
                    r
                }
            }
            fn neg(self) -> Self {
                (0 as $t).wrapping_sub(self)
            }
            fn abs(self) -> Self {
                #[allow(unused_comparisons)]
                if self < 0 {
                    self.neg()
                } else {
                    self
                }
            }
            fn is_nan(self) -> bool {
                false
            }
        }
    };
}

impl_int!(i8, I8, true);
impl_int!(u8, U8, false);
impl_int!(i16, I16, true);
impl_int!(u16, U16, false);
impl_int!(i32, I32, true);
impl_int!(u32, U32, false);
impl_int!(i64, I64, true);
impl_int!(u64, U64, false);

macro_rules! impl_float {
    ($t:ty, $variant:ident) => {
        impl Elem for $t {
            const IS_FLOAT: bool = true;
            fn slice(data: &TensorData) -> Option<&[Self]> {
                match data {
                    TensorData::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn wrap(values: Vec<Self>) -> TensorData {
                TensorData::$variant(values)
            }
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn zero() -> Self {
                0.0
            }
            fn one() -> Self {
                1.0
            }
            fn lowest() -> Self {
                <$t>::NEG_INFINITY
            }
            fn highest() -> Self {
                <$t>::INFINITY
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn fmod(self, o: Self) -> Self {
                self % o
            }
            fn pymod(self, o: Self) -> Self {
                let r = self % o;
                if r != 0.0 && ((r < 0.0) != (o < 0.0)) {
                    r + o
                } else {
                    r
                }
            }
            fn neg(self) -> Self {
                -self
            }
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
        }
    };
}

impl_float!(f32, F32);
impl_float!(f64, F64);

/// Any tensor element type (numeric, half, bool or byte string), for data-movement
/// kernels that only copy elements.
pub(crate) trait Storage: Clone + Default + Send + Sync + 'static {
    /// The elements, if `data` holds this type.
    fn of(data: &TensorData) -> Option<&[Self]>;
    /// Storage holding `values`.
    fn into_data(values: Vec<Self>) -> TensorData;
}

macro_rules! impl_storage {
    ($($t:ty => $variant:ident),* $(,)?) => {
        $(
            impl Storage for $t {
                fn of(data: &TensorData) -> Option<&[Self]> {
                    match data {
                        TensorData::$variant(v) => Some(v),
                        _ => None,
                    }
                }
                fn into_data(values: Vec<Self>) -> TensorData {
                    TensorData::$variant(values)
                }
            }
        )*
    };
}

impl_storage!(
    f32 => F32, half::f16 => F16, half::bf16 => BF16, rtq_ir::F8E4M3 => F8E4M3, f64 => F64,
    i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64,
    u64 => U64, bool => Bool, Vec<u8> => String,
);

/// Runs `$body` with `$T` naming the element type of `$data` (any type) and `$v` bound
/// to its elements (INT4 as [`crate::int4::Int4`], so that `T::into_data` gives INT4).
macro_rules! with_any {
    ($data:expr, $T:ident, $v:ident => $body:expr) => {
        match $data {
            rtq_ir::TensorData::F32($v) => {
                type $T = f32;
                $body
            }
            rtq_ir::TensorData::F16($v) => {
                type $T = half::f16;
                $body
            }
            rtq_ir::TensorData::BF16($v) => {
                type $T = half::bf16;
                $body
            }
            rtq_ir::TensorData::F8E4M3($v) => {
                type $T = rtq_ir::F8E4M3;
                $body
            }
            rtq_ir::TensorData::F64($v) => {
                type $T = f64;
                $body
            }
            rtq_ir::TensorData::I8($v) => {
                type $T = i8;
                $body
            }
            rtq_ir::TensorData::I4(raw) => {
                type $T = crate::int4::Int4;
                let $v = crate::int4::Int4::view(raw);
                $body
            }
            rtq_ir::TensorData::U8($v) => {
                type $T = u8;
                $body
            }
            rtq_ir::TensorData::I16($v) => {
                type $T = i16;
                $body
            }
            rtq_ir::TensorData::U16($v) => {
                type $T = u16;
                $body
            }
            rtq_ir::TensorData::I32($v) => {
                type $T = i32;
                $body
            }
            rtq_ir::TensorData::U32($v) => {
                type $T = u32;
                $body
            }
            rtq_ir::TensorData::I64($v) => {
                type $T = i64;
                $body
            }
            rtq_ir::TensorData::U64($v) => {
                type $T = u64;
                $body
            }
            rtq_ir::TensorData::Bool($v) => {
                type $T = bool;
                $body
            }
            rtq_ir::TensorData::String($v) => {
                type $T = Vec<u8>;
                $body
            }
        }
    };
}
pub(crate) use with_any;

/// Runs `$body` with `$v` bound to the elements of a numeric [`TensorData`] (`f32`,
/// `f64` and the integer types; `$T` names the element type), or evaluates `$other`
/// for any other type (f16, bf16, FP8, INT4, bool, string).
macro_rules! with_numeric {
    ($data:expr, $T:ident, $v:ident => $body:expr, _ => $other:expr) => {
        match $data {
            rtq_ir::TensorData::F32($v) => {
                type $T = f32;
                $body
            }
            rtq_ir::TensorData::F64($v) => {
                type $T = f64;
                $body
            }
            rtq_ir::TensorData::I8($v) => {
                type $T = i8;
                $body
            }
            rtq_ir::TensorData::U8($v) => {
                type $T = u8;
                $body
            }
            rtq_ir::TensorData::I16($v) => {
                type $T = i16;
                $body
            }
            rtq_ir::TensorData::U16($v) => {
                type $T = u16;
                $body
            }
            rtq_ir::TensorData::I32($v) => {
                type $T = i32;
                $body
            }
            rtq_ir::TensorData::U32($v) => {
                type $T = u32;
                $body
            }
            rtq_ir::TensorData::I64($v) => {
                type $T = i64;
                $body
            }
            rtq_ir::TensorData::U64($v) => {
                type $T = u64;
                $body
            }
            #[allow(unreachable_patterns)]
            _ => $other,
        }
    };
}
pub(crate) use with_numeric;

/// Maps a [`TensorData`] of any type to new storage of the same type: `$body` is
/// generic code producing a `Vec` of the element type from `$v: &Vec<T>` with
/// `T: Clone + Send + Sync`.
macro_rules! map_any {
    ($data:expr, $v:ident => $body:expr) => {
        match $data {
            rtq_ir::TensorData::F32($v) => rtq_ir::TensorData::F32($body),
            rtq_ir::TensorData::F16($v) => rtq_ir::TensorData::F16($body),
            rtq_ir::TensorData::BF16($v) => rtq_ir::TensorData::BF16($body),
            rtq_ir::TensorData::F8E4M3($v) => rtq_ir::TensorData::F8E4M3($body),
            rtq_ir::TensorData::F64($v) => rtq_ir::TensorData::F64($body),
            rtq_ir::TensorData::I8($v) => rtq_ir::TensorData::I8($body),
            rtq_ir::TensorData::I4($v) => rtq_ir::TensorData::I4($body),
            rtq_ir::TensorData::U8($v) => rtq_ir::TensorData::U8($body),
            rtq_ir::TensorData::I16($v) => rtq_ir::TensorData::I16($body),
            rtq_ir::TensorData::U16($v) => rtq_ir::TensorData::U16($body),
            rtq_ir::TensorData::I32($v) => rtq_ir::TensorData::I32($body),
            rtq_ir::TensorData::U32($v) => rtq_ir::TensorData::U32($body),
            rtq_ir::TensorData::I64($v) => rtq_ir::TensorData::I64($body),
            rtq_ir::TensorData::U64($v) => rtq_ir::TensorData::U64($body),
            rtq_ir::TensorData::Bool($v) => rtq_ir::TensorData::Bool($body),
            rtq_ir::TensorData::String($v) => rtq_ir::TensorData::String($body),
        }
    };
}
pub(crate) use map_any;

/// Like [`map_any!`] but over two storages that must hold the same type: `$body`
/// sees `$a` and `$b` as `&Vec<T>`; evaluates `$mismatch` when the types differ.
macro_rules! map_any2 {
    ($x:expr, $y:expr, $a:ident, $b:ident => $body:expr, _ => $mismatch:expr) => {
        match ($x, $y) {
            (rtq_ir::TensorData::F32($a), rtq_ir::TensorData::F32($b)) => {
                rtq_ir::TensorData::F32($body)
            }
            (rtq_ir::TensorData::F16($a), rtq_ir::TensorData::F16($b)) => {
                rtq_ir::TensorData::F16($body)
            }
            (rtq_ir::TensorData::BF16($a), rtq_ir::TensorData::BF16($b)) => {
                rtq_ir::TensorData::BF16($body)
            }
            (rtq_ir::TensorData::F8E4M3($a), rtq_ir::TensorData::F8E4M3($b)) => {
                rtq_ir::TensorData::F8E4M3($body)
            }
            (rtq_ir::TensorData::F64($a), rtq_ir::TensorData::F64($b)) => {
                rtq_ir::TensorData::F64($body)
            }
            (rtq_ir::TensorData::I8($a), rtq_ir::TensorData::I8($b)) => {
                rtq_ir::TensorData::I8($body)
            }
            (rtq_ir::TensorData::I4($a), rtq_ir::TensorData::I4($b)) => {
                rtq_ir::TensorData::I4($body)
            }
            (rtq_ir::TensorData::U8($a), rtq_ir::TensorData::U8($b)) => {
                rtq_ir::TensorData::U8($body)
            }
            (rtq_ir::TensorData::I16($a), rtq_ir::TensorData::I16($b)) => {
                rtq_ir::TensorData::I16($body)
            }
            (rtq_ir::TensorData::U16($a), rtq_ir::TensorData::U16($b)) => {
                rtq_ir::TensorData::U16($body)
            }
            (rtq_ir::TensorData::I32($a), rtq_ir::TensorData::I32($b)) => {
                rtq_ir::TensorData::I32($body)
            }
            (rtq_ir::TensorData::U32($a), rtq_ir::TensorData::U32($b)) => {
                rtq_ir::TensorData::U32($body)
            }
            (rtq_ir::TensorData::I64($a), rtq_ir::TensorData::I64($b)) => {
                rtq_ir::TensorData::I64($body)
            }
            (rtq_ir::TensorData::U64($a), rtq_ir::TensorData::U64($b)) => {
                rtq_ir::TensorData::U64($body)
            }
            (rtq_ir::TensorData::Bool($a), rtq_ir::TensorData::Bool($b)) => {
                rtq_ir::TensorData::Bool($body)
            }
            (rtq_ir::TensorData::String($a), rtq_ir::TensorData::String($b)) => {
                rtq_ir::TensorData::String($body)
            }
            _ => $mismatch,
        }
    };
}
pub(crate) use map_any2;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_division_and_modulo_follow_onnx() {
        assert_eq!(Elem::div(-7i64, 2), -3);
        assert_eq!(Elem::fmod(-7i64, 2), -1);
        assert_eq!(Elem::pymod(-7i64, 2), 1);
        assert_eq!(Elem::pymod(7i64, -2), -1);
        assert_eq!(Elem::pymod(7u8, 3), 1);
        assert_eq!(Elem::div(i64::MIN, -1), i64::MIN);
        assert_eq!(Elem::pymod(-7.5f32, 2.0), 0.5);
        assert_eq!(Elem::fmod(-7.5f32, 2.0), -1.5);
    }

    #[test]
    fn integer_arithmetic_wraps_instead_of_panicking() {
        assert_eq!(Elem::add(i8::MAX, 1), i8::MIN);
        assert_eq!(Elem::neg(i8::MIN), i8::MIN);
        assert_eq!(Elem::abs(-5i32), 5);
        assert_eq!(Elem::mul(u8::MAX, 2), 254);
    }

    #[test]
    fn max_and_min_propagate_nan() {
        assert!(max_elem(f32::NAN, 1.0).is_nan());
        assert!(max_elem(1.0, f32::NAN).is_nan());
        assert!(min_elem(1.0f32, f32::NAN).is_nan());
        assert_eq!(max_elem(3i64, 4), 4);
        assert_eq!(min_elem(3i64, 4), 3);
    }

    #[test]
    fn dispatch_macros_reach_generic_code() {
        fn total<T: Elem>(v: &[T]) -> f64 {
            v.iter().map(|x| x.to_f64()).sum()
        }
        let d = TensorData::I32(vec![1, 2, 3]);
        let s = with_numeric!(&d, T, v => total::<T>(v), _ => -1.0);
        assert_eq!(s, 6.0);
        let b = TensorData::Bool(vec![true]);
        let s = with_numeric!(&b, T, v => total::<T>(v), _ => -1.0);
        assert_eq!(s, -1.0);
        let doubled = map_any!(&d, v => v.iter().chain(v.iter()).cloned().collect());
        assert_eq!(doubled, TensorData::I32(vec![1, 2, 3, 1, 2, 3]));
    }
}
