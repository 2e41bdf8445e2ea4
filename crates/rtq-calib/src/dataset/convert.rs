//! Element-type conversion of loaded arrays, refusing any that loses information.

use half::{bf16, f16};
use rtq_ir::{DType, TensorData};

/// Why an array cannot be converted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ConvertError {
    /// No conversion between these types (strings, booleans with numbers).
    Unsupported,
    /// `count` elements would change value, the first one being `example`.
    Lossy {
        /// Elements whose value would change.
        count: usize,
        /// The first such value.
        example: f64,
    },
}

/// Number of NaN or infinite elements (0 for non-float data).
pub(crate) fn count_non_finite(data: &TensorData) -> usize {
    match data {
        TensorData::F32(v) => v.iter().filter(|x| !x.is_finite()).count(),
        TensorData::F64(v) => v.iter().filter(|x| !x.is_finite()).count(),
        TensorData::F16(v) => v.iter().filter(|x| !x.is_finite()).count(),
        TensorData::BF16(v) => v.iter().filter(|x| !x.is_finite()).count(),
        TensorData::F8E4M3(v) => v.iter().filter(|x| x.is_nan()).count(),
        _ => 0,
    }
}

/// An element's exact value.
#[derive(Clone, Copy)]
enum Exact {
    Int(i128),
    Float(f64),
}

impl Exact {
    fn as_f64(self) -> f64 {
        match self {
            Exact::Int(i) => i as f64,
            Exact::Float(f) => f,
        }
    }

    /// The value as f64 if that is exact.
    fn to_f64_exact(self) -> Option<f64> {
        match self {
            Exact::Float(f) => Some(f),
            Exact::Int(i) => {
                let f = i as f64;
                // `as` saturates, so compare in i128, which holds every u64/i64.
                (f.is_finite() && f as i128 == i && f.abs() < 1.8e38).then_some(f)
            }
        }
    }

    /// The value as an integer if it is one.
    fn to_int_exact(self) -> Option<i128> {
        match self {
            Exact::Int(i) => Some(i),
            Exact::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1.7e38 => {
                Some(f as i128)
            }
            Exact::Float(_) => None,
        }
    }
}

/// Element `i` of a numeric array; `None` for booleans and strings.
fn exact_at(data: &TensorData, i: usize) -> Option<Exact> {
    Some(match data {
        TensorData::F32(v) => Exact::Float(v[i] as f64),
        TensorData::F16(v) => Exact::Float(v[i].to_f64()),
        TensorData::BF16(v) => Exact::Float(v[i].to_f64()),
        TensorData::F8E4M3(v) => Exact::Float(v[i].to_f64()),
        TensorData::F64(v) => Exact::Float(v[i]),
        TensorData::I8(v) | TensorData::I4(v) => Exact::Int(v[i] as i128),
        TensorData::U8(v) => Exact::Int(v[i] as i128),
        TensorData::I16(v) => Exact::Int(v[i] as i128),
        TensorData::U16(v) => Exact::Int(v[i] as i128),
        TensorData::I32(v) => Exact::Int(v[i] as i128),
        TensorData::U32(v) => Exact::Int(v[i] as i128),
        TensorData::I64(v) => Exact::Int(v[i] as i128),
        TensorData::U64(v) => Exact::Int(v[i] as i128),
        TensorData::Bool(_) | TensorData::String(_) => return None,
    })
}

/// Tracks the elements a conversion changes.
#[derive(Default)]
struct Losses {
    count: usize,
    example: Option<f64>,
}

impl Losses {
    fn note(&mut self, value: Exact) {
        self.count += 1;
        self.example.get_or_insert(value.as_f64());
    }

    fn finish(self, data: TensorData) -> Result<TensorData, ConvertError> {
        match self.example {
            None => Ok(data),
            Some(example) => Err(ConvertError::Lossy {
                count: self.count,
                example,
            }),
        }
    }
}

/// `data` converted to `to`, if every element keeps its exact value.
///
/// Numbers convert between any numeric types (float<->int included, e.g.
/// float64 image data to a float32 input, int32 ids to an int64 input) as
/// long as no element changes; booleans and strings only stay as they are.
pub(crate) fn convert_lossless(data: TensorData, to: DType) -> Result<TensorData, ConvertError> {
    if data.dtype() == to {
        return Ok(data);
    }
    let n = data.len();
    if matches!(data, TensorData::Bool(_) | TensorData::String(_))
        || matches!(to, DType::Bool | DType::String)
    {
        return Err(ConvertError::Unsupported);
    }
    let mut losses = Losses::default();

    macro_rules! to_float {
        ($variant:ident, $conv:expr, $back:expr) => {{
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let e = exact_at(&data, i).ok_or(ConvertError::Unsupported)?;
                let f = e.to_f64_exact();
                let t = $conv(f.unwrap_or(f64::NAN));
                if f.is_none_or(|f| $back(t) != f) {
                    losses.note(e);
                }
                out.push(t);
            }
            TensorData::$variant(out)
        }};
    }
    macro_rules! to_int {
        ($variant:ident, $t:ty) => {{
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let e = exact_at(&data, i).ok_or(ConvertError::Unsupported)?;
                match e.to_int_exact().and_then(|v| <$t>::try_from(v).ok()) {
                    Some(v) => out.push(v),
                    None => {
                        losses.note(e);
                        out.push(0);
                    }
                }
            }
            TensorData::$variant(out)
        }};
    }
    let converted = match to {
        DType::F32 => to_float!(F32, |f: f64| f as f32, |t: f32| t as f64),
        DType::F64 => to_float!(F64, |f: f64| f, |t: f64| t),
        DType::F16 => to_float!(F16, f16::from_f64, |t: f16| t.to_f64()),
        DType::BF16 => to_float!(BF16, bf16::from_f64, |t: bf16| t.to_f64()),
        DType::I8 => to_int!(I8, i8),
        DType::U8 => to_int!(U8, u8),
        DType::I16 => to_int!(I16, i16),
        DType::U16 => to_int!(U16, u16),
        DType::I32 => to_int!(I32, i32),
        DType::U32 => to_int!(U32, u32),
        DType::I64 => to_int!(I64, i64),
        DType::U64 => to_int!(U64, u64),
        // Loaded arrays are never FP8 or INT4 (NumPy has no such types), and the loader
        // refuses such inputs (`InputSpec::from_graph`); converting to FP8 would round.
        DType::Bool | DType::String | DType::F8E4M3 | DType::I4 => {
            return Err(ConvertError::Unsupported)
        }
    };
    losses.finish(converted)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widening_and_exact_narrowing_succeed() {
        let d = TensorData::F16(vec![f16::from_f32(0.5), f16::from_f32(-2.0)]);
        assert_eq!(
            convert_lossless(d, DType::F32).unwrap(),
            TensorData::F32(vec![0.5, -2.0])
        );
        let d = TensorData::F64(vec![0.25, 255.0]);
        assert_eq!(
            convert_lossless(d, DType::F32).unwrap(),
            TensorData::F32(vec![0.25, 255.0])
        );
        let d = TensorData::U8(vec![0, 255]);
        assert_eq!(
            convert_lossless(d, DType::F16).unwrap(),
            TensorData::F16(vec![f16::ZERO, f16::from_f32(255.0)])
        );
        let d = TensorData::I32(vec![7, -1]);
        assert_eq!(
            convert_lossless(d, DType::I64).unwrap(),
            TensorData::I64(vec![7, -1])
        );
        let d = TensorData::F64(vec![3.0]);
        assert_eq!(
            convert_lossless(d, DType::I64).unwrap(),
            TensorData::I64(vec![3])
        );
    }

    #[test]
    fn lossy_conversions_fail_with_count() {
        let d = TensorData::F64(vec![0.1, 0.5, 0.3]);
        assert_eq!(
            convert_lossless(d, DType::F32),
            Err(ConvertError::Lossy {
                count: 2,
                example: 0.1
            })
        );
        let d = TensorData::F32(vec![70000.0]);
        assert!(matches!(
            convert_lossless(d, DType::F16),
            Err(ConvertError::Lossy { count: 1, .. })
        ));
        let d = TensorData::I64(vec![i64::MAX]);
        assert!(matches!(
            convert_lossless(d, DType::F64),
            Err(ConvertError::Lossy { .. })
        ));
        let d = TensorData::I64(vec![300]);
        assert!(matches!(
            convert_lossless(d, DType::U8),
            Err(ConvertError::Lossy { .. })
        ));
        let d = TensorData::F32(vec![1.5]);
        assert!(matches!(
            convert_lossless(d, DType::I32),
            Err(ConvertError::Lossy { .. })
        ));
    }

    #[test]
    fn booleans_and_strings_do_not_convert() {
        let b = TensorData::Bool(vec![true]);
        assert_eq!(convert_lossless(b.clone(), DType::Bool).unwrap(), b);
        assert_eq!(
            convert_lossless(b, DType::F32),
            Err(ConvertError::Unsupported)
        );
        let f = TensorData::F32(vec![1.0]);
        assert_eq!(
            convert_lossless(f, DType::Bool),
            Err(ConvertError::Unsupported)
        );
    }

    #[test]
    fn counts_non_finite() {
        assert_eq!(
            count_non_finite(&TensorData::F32(vec![1.0, f32::NAN, f32::INFINITY])),
            2
        );
        assert_eq!(count_non_finite(&TensorData::F16(vec![f16::NAN])), 1);
        assert_eq!(count_non_finite(&TensorData::I32(vec![1])), 0);
    }
}
