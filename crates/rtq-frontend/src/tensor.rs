use crate::FrontendError;
use rtq_ir::{unpack_int4, DType, Tensor, TensorData, F8E4M3};
use rtq_onnx_proto::TensorProto;
use std::path::Path;

/// Decodes a `TensorProto` (typed fields, `raw_data` or external data under `base_dir`).
pub fn tensor_from_proto(
    proto: &TensorProto,
    base_dir: Option<&Path>,
) -> Result<Tensor, FrontendError> {
    let name = proto.name.clone().unwrap_or_default();
    let bad = |m: String| FrontendError::bad_tensor(&name, m);
    let code = proto.data_type.unwrap_or(0);
    let dtype = DType::from_onnx_code(code)
        .ok_or_else(|| bad(format!("data type {code} is not supported")))?;
    let mut shape = Vec::with_capacity(proto.dims.len());
    for &d in &proto.dims {
        shape.push(
            usize::try_from(d)
                .map_err(|_| bad(format!("negative dimension {d} in {:?}", proto.dims)))?,
        );
    }
    let count = shape
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| bad(format!("shape {:?} overflows", proto.dims)))?;
    if proto.segment.is_some() {
        return Err(bad("segmented tensors are not supported".into()));
    }
    let result = if proto.data_location == Some(rtq_onnx_proto::DATA_LOCATION_EXTERNAL) {
        let bytes = read_external(proto, base_dir, &name)?;
        Tensor::from_le_bytes(dtype, shape, &bytes)
    } else if let Some(raw) = proto
        .raw_data
        .as_ref()
        .filter(|r| !r.is_empty() || count == 0)
    {
        if dtype == DType::String {
            return Err(bad("string tensors cannot use raw_data".into()));
        }
        // Checked: a shape whose element count fits in usize can still overflow in bytes.
        // (INT4 packs two elements per byte.)
        let needed = dtype.stored_bytes(count).ok_or_else(|| {
            bad(format!(
                "shape {:?} of {dtype} overflows in bytes",
                proto.dims
            ))
        })?;
        if raw.len() != needed {
            return Err(bad(format!(
                "raw_data has {} bytes, shape {:?} of {dtype} needs {needed}",
                raw.len(),
                proto.dims,
            )));
        }
        Tensor::from_le_bytes(dtype, shape, raw)
    } else {
        Tensor::new(shape, typed_fields(proto, dtype, count))
    };
    result.map_err(|e| bad(e.to_string()))
}

/// The elements of `p`'s typed field for `dtype`; `count` is the shape's element count
/// (INT4 needs it to drop the padding nibble).
fn typed_fields(p: &TensorProto, dtype: DType, count: usize) -> TensorData {
    use half::{bf16, f16};
    let i32s = &p.int32_data;
    match dtype {
        DType::F32 => TensorData::F32(p.float_data.clone()),
        DType::F64 => TensorData::F64(p.double_data.clone()),
        DType::I64 => TensorData::I64(p.int64_data.clone()),
        DType::U64 => TensorData::U64(p.uint64_data.clone()),
        DType::U32 => TensorData::U32(p.uint64_data.iter().map(|&v| v as u32).collect()),
        DType::I32 => TensorData::I32(i32s.clone()),
        DType::I16 => TensorData::I16(i32s.iter().map(|&v| v as i16).collect()),
        DType::U16 => TensorData::U16(i32s.iter().map(|&v| v as u16).collect()),
        DType::I8 => TensorData::I8(i32s.iter().map(|&v| v as i8).collect()),
        DType::U8 => TensorData::U8(i32s.iter().map(|&v| v as u8).collect()),
        DType::Bool => TensorData::Bool(i32s.iter().map(|&v| v != 0).collect()),
        // Half types keep their bit patterns in the low 16 bits of int32_data.
        DType::F16 => TensorData::F16(i32s.iter().map(|&v| f16::from_bits(v as u16)).collect()),
        DType::BF16 => TensorData::BF16(i32s.iter().map(|&v| bf16::from_bits(v as u16)).collect()),
        // 8-bit floats keep their bit patterns in the low 8 bits of int32_data.
        DType::F8E4M3 => {
            TensorData::F8E4M3(i32s.iter().map(|&v| F8E4M3::from_bits(v as u8)).collect())
        }
        DType::String => TensorData::String(p.string_data.clone()),
        // INT4: one packed byte (two elements, the first in the low nibble) per entry.
        // A wrong number of entries yields every nibble, which the shape check rejects.
        DType::I4 => {
            let packed: Vec<u8> = i32s.iter().map(|&v| v as u8).collect();
            let all = 2 * packed.len();
            let values = unpack_int4(&packed, count).or_else(|| unpack_int4(&packed, all));
            TensorData::I4(values.unwrap_or_default())
        }
    }
}

fn read_external(
    p: &TensorProto,
    base_dir: Option<&Path>,
    name: &str,
) -> Result<Vec<u8>, FrontendError> {
    let bad = |m: String| FrontendError::bad_tensor(name, m);
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for entry in &p.external_data {
        let value = entry.value.clone().unwrap_or_default();
        match entry.key.as_deref() {
            Some("location") => location = Some(value),
            Some("offset") => {
                offset = value
                    .parse()
                    .map_err(|_| bad(format!("bad external offset `{value}`")))?
            }
            Some("length") => {
                length = Some(
                    value
                        .parse::<u64>()
                        .map_err(|_| bad(format!("bad external length `{value}`")))?,
                )
            }
            _ => {}
        }
    }
    let location = location.ok_or_else(|| bad("external data without a location".into()))?;
    let rel = Path::new(&location);
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(bad(format!(
            "external data location `{location}` must stay inside the model's directory"
        )));
    }
    let base = base_dir.ok_or_else(|| {
        bad(format!(
            "external data `{location}` needs the model's directory (load the model from a file)"
        ))
    })?;
    let path = base.join(rel);
    let bytes = std::fs::read(&path)
        .map_err(|e| bad(format!("cannot read external data {}: {e}", path.display())))?;
    let start = usize::try_from(offset).map_err(|_| bad("external offset too large".into()))?;
    let end = match length {
        Some(len) => start
            .checked_add(len as usize)
            .ok_or_else(|| bad("external length overflows".into()))?,
        None => bytes.len(),
    };
    if start > end || end > bytes.len() {
        return Err(bad(format!(
            "external data {} has {} bytes, tensor needs bytes {start}..{end}",
            path.display(),
            bytes.len()
        )));
    }
    Ok(bytes[start..end].to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DType, dims: Vec<i64>) -> TensorProto {
        TensorProto {
            name: Some("t".into()),
            data_type: Some(dtype.onnx_code()),
            dims,
            ..Default::default()
        }
    }

    #[test]
    fn decodes_typed_and_raw_fields() {
        let mut p = proto(DType::F32, vec![2]);
        p.float_data = vec![1.5, -2.0];
        assert_eq!(
            tensor_from_proto(&p, None).unwrap().as_f32().unwrap(),
            &[1.5, -2.0]
        );
        let mut p = proto(DType::I64, vec![2]);
        p.raw_data = Some([7i64.to_le_bytes(), (-1i64).to_le_bytes()].concat());
        assert_eq!(
            tensor_from_proto(&p, None).unwrap().as_i64().unwrap(),
            &[7, -1]
        );
        let mut p = proto(DType::F16, vec![1]);
        p.int32_data = vec![half::f16::from_f32(0.5).to_bits() as i32];
        assert_eq!(tensor_from_proto(&p, None).unwrap().to_f32_vec(), vec![0.5]);
    }

    #[test]
    fn decodes_fp8_from_raw_data_and_int32_data() {
        // 1.0, -448, the smallest subnormal, NaN, -0.0.
        let codes = [0x38u8, 0xFE, 0x01, 0x7F, 0x80];
        let want: Vec<u8> = codes.to_vec();
        let bits = |t: Tensor| match t.into_data() {
            TensorData::F8E4M3(v) => v.iter().map(F8E4M3::to_bits).collect::<Vec<u8>>(),
            other => panic!("not FP8: {other:?}"),
        };
        let mut p = proto(DType::F8E4M3, vec![5]);
        p.raw_data = Some(codes.to_vec());
        assert_eq!(bits(tensor_from_proto(&p, None).unwrap()), want);
        // One value per int32, its bits in the low byte.
        let mut p = proto(DType::F8E4M3, vec![5]);
        p.int32_data = codes.iter().map(|&c| i32::from(c)).collect();
        assert_eq!(bits(tensor_from_proto(&p, None).unwrap()), want);
        // raw_data takes one byte per value.
        let mut p = proto(DType::F8E4M3, vec![2]);
        p.raw_data = Some(vec![0; 4]);
        let err = tensor_from_proto(&p, None).unwrap_err().to_string();
        assert!(err.contains("float8e4m3fn needs 2"), "{err}");
    }

    #[test]
    fn decodes_int4_from_raw_data_and_int32_data() {
        let i4 = |t: Tensor| match t.into_data() {
            TensorData::I4(v) => v,
            other => panic!("not INT4: {other:?}"),
        };
        // -1, -8 | 7, 0 | 3 (padding nibble): ceil(5 / 2) = 3 bytes, low nibble first.
        let packed = [0x8Fu8, 0x07, 0x03];
        let want = vec![-1i8, -8, 7, 0, 3];
        let mut p = proto(DType::I4, vec![5]);
        p.raw_data = Some(packed.to_vec());
        assert_eq!(i4(tensor_from_proto(&p, None).unwrap()), want);
        // One packed byte per int32 (its low byte; onnx's helper writes them so).
        let mut p = proto(DType::I4, vec![5]);
        p.int32_data = packed.iter().map(|&b| i32::from(b)).collect();
        assert_eq!(i4(tensor_from_proto(&p, None).unwrap()), want);
        let mut p = proto(DType::I4, vec![1, 2]);
        p.int32_data = vec![-121]; // 0x87 in the low byte: 7, -8.
        assert_eq!(i4(tensor_from_proto(&p, None).unwrap()), [7, -8]);
        // An even count takes n / 2 bytes.
        let mut p = proto(DType::I4, vec![2, 2]);
        p.raw_data = Some(vec![0x78, 0x21]);
        assert_eq!(i4(tensor_from_proto(&p, None).unwrap()), [-8, 7, 1, 2]);
        // One byte per value, or too few entries, is refused.
        let mut p = proto(DType::I4, vec![4]);
        p.raw_data = Some(vec![0; 4]);
        let err = tensor_from_proto(&p, None).unwrap_err().to_string();
        assert!(err.contains("int4 needs 2"), "{err}");
        let mut p = proto(DType::I4, vec![5]);
        p.int32_data = vec![0x21, 0x43];
        let err = tensor_from_proto(&p, None).unwrap_err().to_string();
        assert!(err.contains("tensor `t`") && err.contains("[5]"), "{err}");
        // Empty tensors have no bytes.
        let mut p = proto(DType::I4, vec![0]);
        p.raw_data = Some(vec![]);
        assert_eq!(i4(tensor_from_proto(&p, None).unwrap()), Vec::<i8>::new());
    }

    #[test]
    fn wrong_raw_size_names_tensor() {
        let mut p = proto(DType::F32, vec![3]);
        p.raw_data = Some(vec![0; 8]);
        let err = tensor_from_proto(&p, None).unwrap_err().to_string();
        assert!(
            err.contains("tensor `t`") && err.contains("8 bytes"),
            "{err}"
        );
    }

    #[test]
    fn byte_size_overflow_is_an_error_not_a_panic() {
        // 2^62 + 1 floats: the element count fits in usize, the byte count does not
        // (and wraps to 4, the raw_data length, without the check). Reproduced with
        // the decode_model fuzz target (fuzz/seeds/regress_raw_bytes_overflow-*).
        let mut p = proto(DType::F32, vec![(1i64 << 62) + 1]);
        p.raw_data = Some(vec![0; 4]);
        let err = tensor_from_proto(&p, None).unwrap_err().to_string();
        assert!(
            err.contains("tensor `t`") && err.contains("overflows"),
            "{err}"
        );
    }

    #[test]
    fn reads_external_data() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = [0f32, 1.0, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        std::fs::write(dir.path().join("w.bin"), &data).unwrap();
        let mut p = proto(DType::F32, vec![2]);
        p.data_location = Some(rtq_onnx_proto::DATA_LOCATION_EXTERNAL);
        let kv = |k: &str, v: &str| rtq_onnx_proto::StringStringEntryProto {
            key: Some(k.into()),
            value: Some(v.into()),
        };
        p.external_data = vec![
            kv("location", "w.bin"),
            kv("offset", "8"),
            kv("length", "8"),
        ];
        let t = tensor_from_proto(&p, Some(dir.path())).unwrap();
        assert_eq!(t.as_f32().unwrap(), &[2.0, 3.0]);
        p.external_data = vec![kv("location", "../w.bin")];
        assert!(tensor_from_proto(&p, Some(dir.path())).is_err());
    }
}
