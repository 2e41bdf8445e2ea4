//! Cast and CastLike. Float to integer truncates toward zero (saturating, NaN to 0),
//! integer to integer wraps like a C cast, anything to bool tests for non-zero, and
//! float narrowing (e.g. to f16) rounds to nearest even. Strings parse and format.
//! FP8 E4M3 targets round to nearest even through `f32` and follow the `saturate`
//! attribute (opset 19, default 1: clamp to ±448; 0: out-of-range values become NaN).
//! INT4 targets: floats round half to even and saturate to [-8, 7], integers keep their
//! low four bits (see [`crate::int4`]); INT4 sources convert exactly, as INT8 would.

use crate::ctx::OpCtx;
use crate::float::{f32_view, from_f32};
use crate::fp8::f8_vec_from_f32;
use crate::int4::int4_wrapping;
use crate::registry::Kernel;
use crate::ExecError;
use half::{bf16, f16};
use rtq_ir::{int4_from_f64, DType, Tensor, TensorData};

/// Cast kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Cast", cast), ("CastLike", cast_like)];

/// Formats element `i` of numeric storage as ONNX string casts do.
fn format_elem(d: &TensorData, i: usize) -> Vec<u8> {
    let s = match d {
        TensorData::Bool(v) => (v[i] as u8).to_string(),
        d if d.dtype().is_float() => {
            let f = d.get_f64(i);
            if f.is_nan() {
                "NaN".to_string()
            } else if f.is_infinite() {
                if f > 0.0 { "INF" } else { "-INF" }.to_string()
            } else {
                format!("{f}")
            }
        }
        TensorData::U64(v) => v[i].to_string(),
        d => d.get_i64(i).to_string(),
    };
    s.into_bytes()
}

/// Parses one string element as a number.
fn parse_elem(ctx: &OpCtx<'_>, s: &[u8]) -> Result<f64, ExecError> {
    let text = String::from_utf8_lossy(s);
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    match lower.as_str() {
        "nan" => return Ok(f64::NAN),
        "inf" | "+inf" | "infinity" => return Ok(f64::INFINITY),
        "-inf" | "-infinity" => return Ok(f64::NEG_INFINITY),
        "true" => return Ok(1.0),
        "false" => return Ok(0.0),
        _ => {}
    }
    t.parse::<f64>()
        .map_err(|_| ctx.err(format!("cannot parse {t:?} as a number")))
}

macro_rules! from_ints {
    ($d:expr, $n:expr, $t:ty) => {
        (0..$n).map(|i| $d.get_i64(i) as $t).collect()
    };
}

macro_rules! from_floats {
    ($d:expr, $n:expr, $t:ty) => {
        (0..$n).map(|i| $d.get_f64(i) as $t).collect()
    };
}

/// `d` converted to `to`; `saturate` only matters for FP8 targets.
pub(crate) fn cast_data(
    ctx: &OpCtx<'_>,
    t: &Tensor,
    to: DType,
    saturate: bool,
) -> Result<TensorData, ExecError> {
    let d = t.data();
    let from = d.dtype();
    let n = d.len();
    if from == to {
        return Ok(d.clone());
    }
    if let TensorData::String(v) = d {
        let nums: Vec<f64> = v
            .iter()
            .map(|s| parse_elem(ctx, s))
            .collect::<Result<_, _>>()?;
        let as_f64 = Tensor::new(t.shape().to_vec(), TensorData::F64(nums))
            .map_err(|e| ctx.err(e.to_string()))?;
        return cast_data(ctx, &as_f64, to, saturate);
    }
    if from == DType::F8E4M3 {
        // Every FP8 value (NaN's sign included) is exact in f32, and f32 casts to
        // every other type as FP8 would.
        let v = f32_view(t).ok_or_else(|| ctx.err("float input could not be read"))?;
        let as_f32 = Tensor::new(t.shape().to_vec(), TensorData::F32(v.into_owned()))
            .map_err(|e| ctx.err(e.to_string()))?;
        return cast_data(ctx, &as_f32, to, saturate);
    }
    if let TensorData::I4(v) = d {
        // Every INT4 value is an INT8 one, and converts to every type as that would.
        let as_i8 = Tensor::new(t.shape().to_vec(), TensorData::I8(v.clone()))
            .map_err(|e| ctx.err(e.to_string()))?;
        return cast_data(ctx, &as_i8, to, saturate);
    }
    if to == DType::I4 {
        // Float values are exact in f64; integers and bools keep their low four bits.
        return Ok(TensorData::I4(if from.is_float() {
            (0..n).map(|i| int4_from_f64(d.get_f64(i))).collect()
        } else {
            (0..n).map(|i| int4_wrapping(d.get_i64(i))).collect()
        }));
    }
    if to == DType::F8E4M3 {
        // Through f32, as onnxruntime converts: f64 and integers narrow to f32 first.
        let v: Vec<f32> = match f32_view(t) {
            Some(v) => v.into_owned(),
            None => (0..n).map(|i| d.get_f64(i) as f32).collect(),
        };
        return Ok(TensorData::F8E4M3(f8_vec_from_f32(&v, saturate)));
    }
    if to == DType::String {
        return Ok(TensorData::String(
            (0..n).map(|i| format_elem(d, i)).collect(),
        ));
    }
    if from.is_float() && matches!(to, DType::F32 | DType::F16 | DType::BF16) && from != DType::F64
    {
        let v = f32_view(t).ok_or_else(|| ctx.err("float input could not be read"))?;
        return Ok(from_f32(to, v.into_owned()));
    }
    let int_source = !from.is_float();
    Ok(match to {
        DType::Bool => TensorData::Bool((0..n).map(|i| d.get_f64(i) != 0.0).collect()),
        DType::F32 => TensorData::F32(match d {
            TensorData::I64(v) => v.iter().map(|&x| x as f32).collect(),
            TensorData::U64(v) => v.iter().map(|&x| x as f32).collect(),
            _ => from_floats!(d, n, f32),
        }),
        DType::F64 => TensorData::F64(from_floats!(d, n, f64)),
        DType::F16 => TensorData::F16((0..n).map(|i| f16::from_f64(d.get_f64(i))).collect()),
        DType::BF16 => TensorData::BF16((0..n).map(|i| bf16::from_f64(d.get_f64(i))).collect()),
        DType::I8 if int_source => TensorData::I8(from_ints!(d, n, i8)),
        DType::U8 if int_source => TensorData::U8(from_ints!(d, n, u8)),
        DType::I16 if int_source => TensorData::I16(from_ints!(d, n, i16)),
        DType::U16 if int_source => TensorData::U16(from_ints!(d, n, u16)),
        DType::I32 if int_source => TensorData::I32(from_ints!(d, n, i32)),
        DType::U32 if int_source => TensorData::U32(from_ints!(d, n, u32)),
        DType::I64 if int_source => TensorData::I64(from_ints!(d, n, i64)),
        DType::U64 if int_source => TensorData::U64(from_ints!(d, n, u64)),
        DType::I8 => TensorData::I8(from_floats!(d, n, i8)),
        DType::U8 => TensorData::U8(from_floats!(d, n, u8)),
        DType::I16 => TensorData::I16(from_floats!(d, n, i16)),
        DType::U16 => TensorData::U16(from_floats!(d, n, u16)),
        DType::I32 => TensorData::I32(from_floats!(d, n, i32)),
        DType::U32 => TensorData::U32(from_floats!(d, n, u32)),
        DType::I64 => TensorData::I64(from_floats!(d, n, i64)),
        DType::U64 => TensorData::U64(from_floats!(d, n, u64)),
        DType::String | DType::F8E4M3 | DType::I4 => unreachable!("handled above"),
    })
}

fn cast(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let code = ctx
        .attr("to")
        .and_then(|a| a.as_int())
        .ok_or_else(|| ctx.err("attribute `to` is required"))?;
    let to = i32::try_from(code)
        .ok()
        .and_then(DType::from_onnx_code)
        .ok_or_else(|| ctx.err(format!("unsupported target type code {code}")))?;
    let data = cast_data(ctx, x, to, saturate(ctx)?)?;
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

/// The `saturate` attribute (opset 19; default 1), which only FP8 targets use.
fn saturate(ctx: &OpCtx<'_>) -> Result<bool, ExecError> {
    Ok(ctx.attr_int("saturate", 1)? != 0)
}

fn cast_like(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let x = ctx.input(0)?;
    let to = ctx.input(1)?.dtype();
    let data = cast_data(ctx, x, to, saturate(ctx)?)?;
    Ok(vec![ctx.tensor(x.shape().to_vec(), data)?])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use half::f16;
    use rtq_ir::{Attr, DType, Tensor, TensorData};

    fn cast(x: &Tensor, to: DType) -> Result<Tensor, String> {
        let n = rtq_test_support::node("Cast", &[("to", Attr::Int(to.onnx_code() as i64))], 1);
        eval_node(&n, &[Some(x)])
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn float_to_int_truncates_and_saturates() {
        let x = Tensor::from_f32(vec![5], vec![1.9, -1.9, 300.0, f32::NAN, -1e10]);
        let y = cast(&x, DType::I64).unwrap();
        assert_eq!(y.as_i64().unwrap(), &[1, -1, 300, 0, -10_000_000_000]);
        let y = cast(&x, DType::U8).unwrap();
        assert_eq!(y.data(), &TensorData::U8(vec![1, 0, 255, 0, 0]));
    }

    #[test]
    fn int_to_int_wraps_and_bool_tests_nonzero() {
        let x = Tensor::from_i64(vec![3], vec![257, -1, 0]);
        assert_eq!(
            cast(&x, DType::U8).unwrap().data(),
            &TensorData::U8(vec![1, 255, 0])
        );
        assert_eq!(
            cast(&x, DType::Bool).unwrap().data(),
            &TensorData::Bool(vec![true, true, false])
        );
        let big = Tensor::from_i64(vec![1], vec![(1 << 53) + 1]);
        assert_eq!(
            cast(&big, DType::I32).unwrap().data(),
            &TensorData::I32(vec![1])
        );
    }

    #[test]
    fn f32_to_f16_rounds_to_nearest_even() {
        let x = Tensor::from_f32(vec![3], vec![1.0 + 1.0 / 2048.0, 65504.0, 1e6]);
        let y = cast(&x, DType::F16).unwrap();
        let v: Vec<f32> = match y.data() {
            TensorData::F16(v) => v.iter().map(|h| h.to_f32()).collect(),
            other => panic!("{other:?}"),
        };
        assert_eq!(v[0], 1.0);
        assert_eq!(v[1], 65504.0);
        assert!(v[2].is_infinite());
        let back = cast(&y, DType::F32).unwrap();
        assert_eq!(back.as_f32().unwrap()[1], 65504.0);
        assert_eq!(f16::from_f32(1.0).to_f32(), back.as_f32().unwrap()[0]);
    }

    fn fp8_codes(t: &Tensor) -> Vec<u8> {
        match t.data() {
            TensorData::F8E4M3(v) => v.iter().map(|c| c.to_bits()).collect(),
            other => panic!("not FP8: {other:?}"),
        }
    }

    fn cast_with(x: &Tensor, to: DType, saturate: i64) -> Tensor {
        let attrs = [
            ("to", Attr::Int(to.onnx_code() as i64)),
            ("saturate", Attr::Int(saturate)),
        ];
        let n = rtq_test_support::node("Cast", &attrs, 1);
        eval_node(&n, &[Some(x)]).unwrap().remove(0)
    }

    #[test]
    fn float_to_fp8_rounds_to_even_and_follows_saturate() {
        let p = |k: i32| 2f32.powi(k);
        let xs = vec![
            448.0,
            464.0,
            480.0,
            1e6,
            -1e6,
            f32::NAN,
            f32::INFINITY,
            p(-9),
            p(-10),
            -0.0,
            1.0625,
            1.1875,
        ];
        let x = Tensor::from_f32(vec![xs.len()], xs);
        let sat = [
            0x7E, 0x7E, 0x7E, 0x7E, 0xFE, 0x7F, 0x7E, 0x01, 0x00, 0x80, 0x38, 0x3A,
        ];
        let nosat = [
            0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F, 0x7F, 0x01, 0x00, 0x80, 0x38, 0x3A,
        ];
        // `saturate` defaults to 1.
        assert_eq!(fp8_codes(&cast(&x, DType::F8E4M3).unwrap()), sat);
        assert_eq!(fp8_codes(&cast_with(&x, DType::F8E4M3, 1)), sat);
        assert_eq!(fp8_codes(&cast_with(&x, DType::F8E4M3, 0)), nosat);
    }

    #[test]
    fn other_types_to_fp8_go_through_f32() {
        // 0.001 is just above 2^-10, half the smallest subnormal; 0.0009 just below.
        let d = Tensor::new(
            vec![4],
            TensorData::F64(vec![1.0625, -500.0, 0.001, 0.0009]),
        )
        .unwrap();
        assert_eq!(
            fp8_codes(&cast(&d, DType::F8E4M3).unwrap()),
            [0x38, 0xFE, 0x01, 0x00]
        );
        assert_eq!(
            fp8_codes(&cast_with(&d, DType::F8E4M3, 0)),
            [0x38, 0xFF, 0x01, 0x00]
        );
        let i = Tensor::from_i64(vec![3], vec![3, -17, 1000]);
        // 17 is a tie between 16 and 18: even mantissa, 16.
        assert_eq!(
            fp8_codes(&cast(&i, DType::F8E4M3).unwrap()),
            [0x44, 0xD8, 0x7E]
        );
        let h = Tensor::new(vec![1], TensorData::F16(vec![f16::from_f32(0.75)])).unwrap();
        assert_eq!(fp8_codes(&cast(&h, DType::F8E4M3).unwrap()), [0x34]);
    }

    #[test]
    fn fp8_to_other_types_is_exact() {
        let all: Vec<rtq_ir::F8E4M3> = (0..=255).map(rtq_ir::F8E4M3::from_bits).collect();
        let x = Tensor::new(vec![256], TensorData::F8E4M3(all)).unwrap();
        let f = cast(&x, DType::F32).unwrap();
        let f = f.as_f32().unwrap();
        assert_eq!(f[0x7E], 448.0);
        assert_eq!(f[0x01], 2f32.powi(-9));
        assert_eq!(f[0x80].to_bits(), (-0.0f32).to_bits());
        assert_eq!(f[0x7F].to_bits(), 0x7FC0_0000);
        assert_eq!(f[0xFF].to_bits(), 0xFFC0_0000);
        // Back to FP8 gives every code again.
        let back = cast(&Tensor::from_f32(vec![256], f.to_vec()), DType::F8E4M3).unwrap();
        assert_eq!(fp8_codes(&back), (0..=255).collect::<Vec<u8>>());
        // f16 and f64 hold every FP8 value exactly.
        let h = cast(&x, DType::F16).unwrap().to_f32_vec();
        let d = cast(&x, DType::F64).unwrap().to_f32_vec();
        for i in (0..256).filter(|&i| i & 0x7F != 0x7F) {
            assert_eq!(h[i], f[i], "{i:#x}");
            assert_eq!(d[i], f[i], "{i:#x}");
        }
        let ints = cast(&x, DType::I32).unwrap();
        assert_eq!(ints.data().get_i64(0x7E), 448);
        assert_eq!(ints.data().get_i64(0xFF), 0);
        // The same type is a copy.
        assert_eq!(
            fp8_codes(&cast(&x, DType::F8E4M3).unwrap()),
            (0..=255).collect::<Vec<u8>>()
        );
    }

    fn int4_values(t: &Tensor) -> Vec<i8> {
        match t.data() {
            TensorData::I4(v) => v.clone(),
            other => panic!("not INT4: {other:?}"),
        }
    }

    #[test]
    fn floats_to_int4_round_half_to_even_and_saturate() {
        let xs = vec![
            0.5f32,
            1.5,
            2.5,
            -2.5,
            3.49,
            -3.51,
            7.5,
            8.0,
            100.0,
            -8.5,
            -9.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ];
        let want = [0i8, 2, 2, -2, 3, -4, 7, 7, 7, -8, -8, 0, 7, -8];
        let x = Tensor::from_f32(vec![xs.len()], xs.clone());
        assert_eq!(int4_values(&cast(&x, DType::I4).unwrap()), want);
        let h: Vec<f16> = xs.iter().map(|&v| f16::from_f32(v)).collect();
        let h = Tensor::new(vec![h.len()], TensorData::F16(h)).unwrap();
        assert_eq!(int4_values(&cast(&h, DType::I4).unwrap()), want);
        let d = Tensor::new(vec![2], TensorData::F64(vec![6.5, -7.500001])).unwrap();
        assert_eq!(int4_values(&cast(&d, DType::I4).unwrap()), [6, -8]);
    }

    #[test]
    fn integers_to_int4_keep_the_low_four_bits() {
        let x = Tensor::from_i64(vec![8], vec![0, 7, 8, 15, 16, -8, -9, 100]);
        assert_eq!(
            int4_values(&cast(&x, DType::I4).unwrap()),
            [0, 7, -8, -1, 0, -8, 7, 4]
        );
        let b = Tensor::new(vec![2], TensorData::Bool(vec![true, false])).unwrap();
        assert_eq!(int4_values(&cast(&b, DType::I4).unwrap()), [1, 0]);
        let u = Tensor::new(vec![2], TensorData::U8(vec![255, 9])).unwrap();
        assert_eq!(int4_values(&cast(&u, DType::I4).unwrap()), [-1, -7]);
    }

    #[test]
    fn int4_to_other_types_is_exact() {
        let all: Vec<i8> = (-8..=7).collect();
        let x = Tensor::new(vec![16], TensorData::I4(all.clone())).unwrap();
        let f: Vec<f32> = all.iter().map(|&v| f32::from(v)).collect();
        assert_eq!(
            cast(&x, DType::F32).unwrap().as_f32().unwrap(),
            f.as_slice()
        );
        assert_eq!(cast(&x, DType::F16).unwrap().to_f32_vec(), f);
        assert_eq!(
            cast(&x, DType::I8).unwrap().data(),
            &TensorData::I8(all.clone())
        );
        assert_eq!(
            cast(&x, DType::I64).unwrap().as_i64().unwrap(),
            all.iter().map(|&v| i64::from(v)).collect::<Vec<_>>()
        );
        // Unsigned targets wrap as INT8 would.
        assert_eq!(cast(&x, DType::U8).unwrap().data().get_i64(0), 248);
        let b = cast(&x, DType::Bool).unwrap();
        assert_eq!(b.data().get_i64(8), 0);
        assert_eq!(b.data().get_i64(0), 1);
        let s = cast(&x, DType::String).unwrap();
        assert_eq!(
            s.data(),
            &TensorData::String(all.iter().map(|v| v.to_string().into_bytes()).collect())
        );
        // The same type is a copy; and back from every other type.
        assert_eq!(int4_values(&cast(&x, DType::I4).unwrap()), all);
        for to in [DType::F32, DType::F16, DType::I8, DType::I32, DType::F64] {
            let y = cast(&x, to).unwrap();
            assert_eq!(int4_values(&cast(&y, DType::I4).unwrap()), all, "{to}");
        }
    }

    #[test]
    fn strings_parse_and_format() {
        let s = Tensor::new(
            vec![2],
            TensorData::String(vec![b"1.5".to_vec(), b"-3".to_vec()]),
        )
        .unwrap();
        assert_eq!(
            cast(&s, DType::F32).unwrap().as_f32().unwrap(),
            &[1.5, -3.0]
        );
        assert_eq!(cast(&s, DType::I64).unwrap().as_i64().unwrap(), &[1, -3]);
        let bad = Tensor::new(vec![1], TensorData::String(vec![b"abc".to_vec()])).unwrap();
        assert!(cast(&bad, DType::F32).unwrap_err().contains("cannot parse"));
        let x = Tensor::from_i64(vec![1], vec![42]);
        assert_eq!(
            cast(&x, DType::String).unwrap().data(),
            &TensorData::String(vec![b"42".to_vec()])
        );
    }
}
