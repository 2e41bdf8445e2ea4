//! Signed 4-bit integers (ONNX `INT4`): their range, the saturating conversion onto
//! them, and the packing ONNX stores them in.
//!
//! In memory an INT4 tensor holds one `i8` per element, in `[-8, 7]`. ONNX stores two
//! elements per byte, the first (even index) in the low nibble and the next in the
//! high nibble; an odd count leaves the last byte's high nibble zero. `raw_data` holds
//! `ceil(n / 2)` such bytes, and `int32_data` one of them per entry (its low byte).

/// The smallest INT4 value.
pub const INT4_MIN: i8 = -8;

/// The largest INT4 value.
pub const INT4_MAX: i8 = 7;

/// `x` rounded half to even and saturated to `[-8, 7]`, as QuantizeLinear rounds; NaN
/// becomes 0.
pub fn int4_from_f64(x: f64) -> i8 {
    if x.is_nan() {
        return 0;
    }
    x.round_ties_even()
        .clamp(f64::from(INT4_MIN), f64::from(INT4_MAX)) as i8
}

/// The value of the low four bits of `nibble` (two's complement, sign-extended).
pub fn int4_from_nibble(nibble: u8) -> i8 {
    ((nibble << 4) as i8) >> 4
}

/// Bytes `count` packed INT4 elements take: `ceil(count / 2)`.
pub const fn int4_packed_len(count: usize) -> usize {
    count.div_ceil(2)
}

/// `values` packed two per byte, first in the low nibble. Each value keeps its low
/// four bits (values in `[-8, 7]` round-trip through [`unpack_int4`]); an odd count
/// leaves the last high nibble zero.
pub fn pack_int4(values: &[i8]) -> Vec<u8> {
    let nibble = |v: i8| (v as u8) & 0x0F;
    values
        .chunks(2)
        .map(|pair| nibble(pair[0]) | pair.get(1).map_or(0, |&hi| nibble(hi) << 4))
        .collect()
}

/// The `count` values packed in `bytes` (sign-extended nibbles, low nibble first), or
/// `None` unless `bytes` holds exactly `ceil(count / 2)` bytes. The high nibble of an
/// odd count's last byte is padding and ignored.
pub fn unpack_int4(bytes: &[u8], count: usize) -> Option<Vec<i8>> {
    if bytes.len() != int4_packed_len(count) {
        return None;
    }
    let mut out = Vec::with_capacity(count + 1);
    for &b in bytes {
        out.push(int4_from_nibble(b));
        out.push(int4_from_nibble(b >> 4));
    }
    out.truncate(count);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nibbles_sign_extend() {
        let want = [0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1];
        for (n, &w) in want.iter().enumerate() {
            assert_eq!(int4_from_nibble(n as u8), w, "{n:#x}");
            // The high nibble is ignored.
            assert_eq!(int4_from_nibble(n as u8 | 0xA0), w, "{n:#x}");
        }
    }

    #[test]
    fn packing_puts_the_first_element_in_the_low_nibble() {
        assert_eq!(pack_int4(&[1, 2]), [0x21]);
        assert_eq!(pack_int4(&[-8, 7]), [0x78]);
        assert_eq!(pack_int4(&[7, -8]), [0x87]);
        assert_eq!(pack_int4(&[-1, -1, 3]), [0xFF, 0x03]);
        assert_eq!(pack_int4(&[]), Vec::<u8>::new());
        assert_eq!(pack_int4(&[-8]), [0x08]);
    }

    #[test]
    fn pack_unpack_round_trips_every_length_and_value() {
        let all: Vec<i8> = (INT4_MIN..=INT4_MAX).collect();
        for n in 0..=33 {
            let values: Vec<i8> = (0..n).map(|i| all[(i * 7 + n) % 16]).collect();
            let packed = pack_int4(&values);
            assert_eq!(packed.len(), n.div_ceil(2), "{n}");
            assert_eq!(packed.len(), int4_packed_len(n));
            assert_eq!(unpack_int4(&packed, n).as_deref(), Some(&values[..]), "{n}");
        }
        // Every pair of values.
        for &lo in &all {
            for &hi in &all {
                let b = pack_int4(&[lo, hi]);
                assert_eq!(unpack_int4(&b, 2).unwrap(), [lo, hi]);
            }
        }
    }

    #[test]
    fn unpacking_checks_the_length_and_ignores_padding() {
        assert_eq!(unpack_int4(&[0x21], 3), None);
        assert_eq!(unpack_int4(&[0x21, 0x00], 2), None);
        assert_eq!(unpack_int4(&[], 0), Some(vec![]));
        // Three values: the last byte's high nibble is padding.
        assert_eq!(unpack_int4(&[0x8F, 0xF7], 3), Some(vec![-1, -8, 7]));
    }

    #[test]
    fn conversion_rounds_half_to_even_and_saturates() {
        for (x, want) in [
            (0.5, 0),
            (1.5, 2),
            (2.5, 2),
            (-0.5, 0),
            (-1.5, -2),
            (-2.5, -2),
            (3.49, 3),
            (-3.51, -4),
            (6.5, 6),
            (7.49, 7),
            (7.5, 7),
            (100.0, 7),
            (-7.5, -8),
            (-8.5, -8),
            (-1e30, -8),
            (f64::INFINITY, 7),
            (f64::NEG_INFINITY, -8),
            (f64::NAN, 0),
            (-0.0, 0),
        ] {
            assert_eq!(int4_from_f64(x), want, "{x}");
        }
    }
}
