//! The portable integer product: plain loops the compiler vectorizes where it can.

use super::Strided;

/// Columns `n0..n0 + cols` of `B` (`k x n`) as `kp x nr` i16 values (padding 0).
pub(super) fn pack_b(
    b: Strided<'_>,
    k: usize,
    kp: usize,
    n0: usize,
    cols: usize,
    nr: usize,
) -> Vec<i16> {
    let mut out = vec![0i16; kp * nr];
    for kk in 0..k {
        let dst = &mut out[kk * nr..][..cols];
        for (c, d) in dst.iter_mut().enumerate() {
            *d = i16::from(b.data[kk * b.row + (n0 + c) * b.col]);
        }
    }
    out
}

/// Panel width of the portable path.
pub(super) const NR: usize = 16;

/// `acc` (`mr x NR`) <- the weight tile (`mr x kp` bytes) times the packed panel
/// (`kp x NR`).
pub(super) fn tile(a: &[i8], b: &[i16], kp: usize, mr: usize, acc: &mut [i32]) {
    for (r, row) in acc.chunks_exact_mut(NR).take(mr).enumerate() {
        let mut sum = [0i32; NR];
        for (&w, x) in a[r * kp..][..kp].iter().zip(b.chunks_exact(NR)) {
            let w = i32::from(w);
            let x: &[i16; NR] = x.try_into().expect("NR values");
            for (s, &x) in sum.iter_mut().zip(x) {
                *s += w * i32::from(x);
            }
        }
        row.copy_from_slice(&sum);
    }
}
