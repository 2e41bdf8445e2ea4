//! Reading `.npy` arrays and `.npz` archives into tensors.

use crate::CalibError;
use npyz::{NpyFile, Order, TypeChar};
use rtq_ir::{Tensor, TensorData};
use std::io::{Read, Seek};
use std::path::Path;

/// Reads a whole `.npy` file.
pub(crate) fn read_npy(file: &Path) -> Result<Tensor, CalibError> {
    let bytes = std::fs::read(file).map_err(|source| CalibError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    decode_npy(&bytes, file, None)
}

/// Reads every array of an `.npz` archive, in archive order, as `(name, tensor)`.
pub(crate) fn read_npz(file: &Path) -> Result<Vec<(String, Tensor)>, CalibError> {
    let f = std::fs::File::open(file).map_err(|source| CalibError::Io {
        path: file.to_path_buf(),
        source,
    })?;
    decode_npz(std::io::BufReader::new(f), file)
}

/// Decodes every array of an `.npz` archive read from `reader` (`file` names it).
pub(crate) fn decode_npz<R: Read + Seek>(
    reader: R,
    file: &Path,
) -> Result<Vec<(String, Tensor)>, CalibError> {
    let decode_err = |reason: String| CalibError::Decode {
        file: file.to_path_buf(),
        reason,
    };
    let mut archive = npyz::npz::NpzArchive::new(reader)
        .map_err(|e| decode_err(format!("not a valid .npz archive: {e}")))?;
    let zip = archive.zip_archive();
    let mut out = Vec::with_capacity(zip.len());
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| decode_err(format!("cannot read archive entry {i}: {e}")))?;
        if entry.is_dir() {
            continue;
        }
        let entry_name = entry.name().to_string();
        let name = npyz::npz::array_name_from_file_name(&entry_name)
            .ok_or_else(|| {
                decode_err(format!("archive entry `{entry_name}` is not an .npy array"))
            })?
            .to_string();
        let mut bytes = Vec::with_capacity(entry.size().min(1 << 26) as usize);
        entry
            .read_to_end(&mut bytes)
            .map_err(|e| decode_err(format!("array `{name}`: cannot decompress: {e}")))?;
        let tensor = decode_npy(&bytes, file, Some(&name))?;
        out.push((name, tensor));
    }
    Ok(out)
}

/// Decodes the bytes of one `.npy` array (`array` names it inside an `.npz`).
pub(crate) fn decode_npy(
    bytes: &[u8],
    file: &Path,
    array: Option<&str>,
) -> Result<Tensor, CalibError> {
    let what = array.map_or_else(String::new, |a| format!("array `{a}`: "));
    let err = |reason: String| CalibError::Decode {
        file: file.to_path_buf(),
        reason: format!("{what}{reason}"),
    };
    // npyz multiplies the shape without overflow checks: check it first.
    if let Some(dims) = header_shape(bytes) {
        if dims
            .iter()
            .try_fold(1u64, |acc, &d| acc.checked_mul(d))
            .is_none()
        {
            return Err(err(format!("shape {dims:?} has too many elements")));
        }
    }
    let npy = NpyFile::new(bytes).map_err(|e| err(format!("not a valid .npy array: {e}")))?;
    let shape: Vec<usize> = npy
        .shape()
        .iter()
        .map(|&d| usize::try_from(d))
        .collect::<Result<_, _>>()
        .map_err(|_| err(format!("shape {:?} does not fit in memory", npy.shape())))?;
    let npyz::DType::Plain(ty) = npy.dtype() else {
        return Err(err(format!(
            "structured dtype {} is not supported",
            npy.dtype().descr()
        )));
    };
    let elems = npy.len();
    let item = ty.num_bytes().unwrap_or(0) as u64;
    if elems
        .checked_mul(item)
        .is_none_or(|need| need > bytes.len() as u64)
    {
        return Err(err(format!(
            "shape {shape:?} of {ty} needs more bytes than the {} the data holds",
            bytes.len()
        )));
    }
    let order = npy.order();
    let read_err = |e: std::io::Error| err(format!("cannot read {ty} data: {e}"));
    let data = match (ty.type_char(), ty.size_field()) {
        (TypeChar::Float, 2) => TensorData::F16(npy.into_vec().map_err(read_err)?),
        (TypeChar::Float, 4) => TensorData::F32(npy.into_vec().map_err(read_err)?),
        (TypeChar::Float, 8) => TensorData::F64(npy.into_vec().map_err(read_err)?),
        (TypeChar::Int, 1) => TensorData::I8(npy.into_vec().map_err(read_err)?),
        (TypeChar::Int, 2) => TensorData::I16(npy.into_vec().map_err(read_err)?),
        (TypeChar::Int, 4) => TensorData::I32(npy.into_vec().map_err(read_err)?),
        (TypeChar::Int, 8) => TensorData::I64(npy.into_vec().map_err(read_err)?),
        (TypeChar::Uint, 1) => TensorData::U8(npy.into_vec().map_err(read_err)?),
        (TypeChar::Uint, 2) => TensorData::U16(npy.into_vec().map_err(read_err)?),
        (TypeChar::Uint, 4) => TensorData::U32(npy.into_vec().map_err(read_err)?),
        (TypeChar::Uint, 8) => TensorData::U64(npy.into_vec().map_err(read_err)?),
        (TypeChar::Bool, 1) => TensorData::Bool(npy.into_vec().map_err(read_err)?),
        _ => return Err(err(format!("dtype {ty} is not supported"))),
    };
    let data = if order == Order::Fortran && shape.len() > 1 {
        fortran_to_c(&data, &shape)
    } else {
        data
    };
    Tensor::new(shape, data).map_err(|e| err(e.to_string()))
}

/// The `shape` tuple of an npy header, if it can be read (otherwise npyz reports the problem).
fn header_shape(bytes: &[u8]) -> Option<Vec<u64>> {
    if bytes.len() < 10 || !bytes.starts_with(b"\x93NUMPY") {
        return None;
    }
    let (len, start): (usize, usize) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        let b = bytes.get(8..12)?;
        (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
    };
    let header = std::str::from_utf8(bytes.get(start..start.checked_add(len)?)?).ok()?;
    let after = &header[header.find("'shape'")? + "'shape'".len()..];
    let open = after.find('(')?;
    let close = after.find(')')?;
    after
        .get(open + 1..close)?
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_end_matches('L').parse::<u64>().ok())
        .collect()
}

/// Reorders Fortran-order (column-major) elements into C (row-major) order.
fn fortran_to_c(data: &TensorData, shape: &[usize]) -> TensorData {
    let n: usize = shape.iter().product();
    // Column-major strides.
    let mut fstride = vec![1usize; shape.len()];
    for d in 1..shape.len() {
        fstride[d] = fstride[d - 1] * shape[d - 1];
    }
    let mut indices = Vec::with_capacity(n);
    let mut idx = vec![0usize; shape.len()];
    for _ in 0..n {
        indices.push(idx.iter().zip(&fstride).map(|(i, s)| i * s).sum());
        // Advance the row-major multi-index.
        for d in (0..shape.len()).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    data.gather(&indices)
}

#[cfg(test)]
mod tests {
    use super::*;
    use npyz::WriterBuilder;

    fn npy_bytes<T: npyz::Serialize + npyz::AutoSerialize + Copy>(
        shape: &[u64],
        order: Order,
        values: &[T],
    ) -> Vec<u8> {
        let mut buf = Vec::new();
        {
            let mut w = npyz::WriteOptions::<T>::new()
                .default_dtype()
                .shape(shape)
                .order(order)
                .writer(&mut buf)
                .begin_nd()
                .unwrap();
            w.extend(values.iter().copied()).unwrap();
            w.finish().unwrap();
        }
        buf
    }

    #[test]
    fn decodes_types_and_shapes() {
        let f = Path::new("x.npy");
        let b = npy_bytes(&[2, 2], Order::C, &[1.0f32, 2.0, 3.0, 4.0]);
        let t = decode_npy(&b, f, None).unwrap();
        assert_eq!(t, Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]));
        let b = npy_bytes(&[3], Order::C, &[1i64, -2, 3]);
        assert_eq!(
            decode_npy(&b, f, None).unwrap(),
            Tensor::from_i64(vec![3], vec![1, -2, 3])
        );
        let b = npy_bytes(&[2], Order::C, &[half::f16::ONE, half::f16::NEG_ONE]);
        assert_eq!(
            decode_npy(&b, f, None).unwrap().to_f32_vec(),
            vec![1.0, -1.0]
        );
    }

    #[test]
    fn fortran_order_becomes_row_major() {
        // Column-major storage of [[1, 2, 3], [4, 5, 6]].
        let b = npy_bytes(&[2, 3], Order::Fortran, &[1.0f64, 4.0, 2.0, 5.0, 3.0, 6.0]);
        let t = decode_npy(&b, Path::new("f.npy"), None).unwrap();
        assert_eq!(t.shape(), &[2, 3]);
        assert_eq!(t.to_f32_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    }

    #[test]
    fn corrupt_data_errors_name_the_file() {
        let f = Path::new("dir/bad.npy");
        let e = decode_npy(b"not numpy", f, None).unwrap_err().to_string();
        assert!(e.starts_with("dir/bad.npy: not a valid .npy array"), "{e}");
        let mut b = npy_bytes(&[4], Order::C, &[1.0f32, 2.0, 3.0, 4.0]);
        b.truncate(b.len() - 4);
        let e = decode_npy(&b, f, Some("arr")).unwrap_err().to_string();
        assert!(e.starts_with("dir/bad.npy: array `arr`:"), "{e}");
    }

    /// A version-1 npy file with header dict `dict` (numpy's layout) and raw `data`.
    fn raw_npy(dict: &str, data: &[u8]) -> Vec<u8> {
        let mut header = dict.to_string();
        let pad = (64 - (10 + header.len() + 1) % 64) % 64;
        header.extend(std::iter::repeat_n(' ', pad));
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn numpy_style_header_decodes() {
        let data: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let b = raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &data,
        );
        let t = decode_npy(&b, Path::new("n.npy"), None).unwrap();
        assert_eq!(t, Tensor::from_f32(vec![2], vec![1.5, -2.0]));
        // Big-endian data is swapped by the reader.
        let data: Vec<u8> = [1.5f32].iter().flat_map(|x| x.to_be_bytes()).collect();
        let b = raw_npy(
            "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }",
            &data,
        );
        assert_eq!(
            decode_npy(&b, Path::new("n.npy"), None)
                .unwrap()
                .to_f32_vec(),
            vec![1.5]
        );
        // Complex numbers are not supported, and the error says so.
        let b = raw_npy(
            "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
            &[0; 8],
        );
        let e = decode_npy(&b, Path::new("n.npy"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not supported"), "{e}");
    }

    #[test]
    fn huge_declared_shapes_are_rejected_before_allocating() {
        let data: Vec<u8> = [1.0f32; 4].iter().flat_map(|x| x.to_le_bytes()).collect();
        let overflow = raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (9999999999999999999, 99999), }",
            &data,
        );
        let e = decode_npy(&overflow, Path::new("h.npy"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("h.npy: shape") && e.contains("too many"),
            "{e}"
        );
        let big = raw_npy(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000,), }",
            &data,
        );
        let e = decode_npy(&big, Path::new("h.npy"), None)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("h.npy: shape [1000000000]") && e.contains("needs more bytes"),
            "{e}"
        );
    }
}
