//! Gathering a strided view (offset, extents, signed strides) of a buffer into a dense
//! row-major one: the common engine of Transpose, Slice, Expand, Tile and
//! DepthToSpace/SpaceToDepth.

use crate::par;

/// A strided view: element `idx` lives at `offset + sum(idx[i] * strides[i])`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct View {
    /// Offset of the first element.
    pub offset: usize,
    /// Extents.
    pub shape: Vec<usize>,
    /// Element steps per axis (may be 0 or negative).
    pub strides: Vec<isize>,
}

/// Row-major strides of a dense `shape`.
pub(crate) fn dense_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut s = 1isize;
    for i in (0..shape.len()).rev() {
        strides[i] = s;
        s *= shape[i] as isize;
    }
    strides
}

impl View {
    /// Drops unit axes and fuses neighbours that are contiguous relative to each other.
    fn simplified(&self) -> (Vec<usize>, Vec<isize>) {
        let mut dims: Vec<usize> = Vec::with_capacity(self.shape.len());
        let mut strides: Vec<isize> = Vec::with_capacity(self.shape.len());
        for (&d, &s) in self.shape.iter().zip(&self.strides) {
            if d == 1 {
                continue;
            }
            if let (Some(ld), Some(ls)) = (dims.last_mut(), strides.last_mut()) {
                if *ls == s * d as isize {
                    *ld *= d;
                    *ls = s;
                    continue;
                }
            }
            dims.push(d);
            strides.push(s);
        }
        if dims.is_empty() {
            dims.push(1);
            strides.push(0);
        }
        (dims, strides)
    }
}

/// The elements of `view` over `src`, densely in row-major order. The caller
/// guarantees every addressed element lies inside `src`.
pub(crate) fn gather<T: Clone + Default + Send + Sync>(src: &[T], view: &View) -> Vec<T> {
    let n: usize = view.shape.iter().product();
    let mut out = vec![T::default(); n];
    if n == 0 {
        return out;
    }
    let (dims, strides) = view.simplified();
    let inner = dims[dims.len() - 1];
    let s_in = strides[strides.len() - 1];
    let outer = &dims[..dims.len() - 1];
    let rows = n / inner;
    let rows_per_chunk = if n >= par::PAR_MIN_ELEMS {
        rows.div_ceil(rayon::current_num_threads().max(1) * 4)
            .max(1)
    } else {
        rows
    };
    par::chunks_mut(&mut out, rows_per_chunk * inner, n, |chunk_idx, chunk| {
        // Offset of the chunk's first row.
        let first_row = chunk_idx * rows_per_chunk;
        let mut idx = vec![0usize; outer.len()];
        let mut off = view.offset as isize;
        let mut rem = first_row;
        for d in (0..outer.len()).rev() {
            idx[d] = rem % outer[d];
            rem /= outer[d];
            off += idx[d] as isize * strides[d];
        }
        for row in chunk.chunks_mut(inner) {
            if s_in == 1 {
                let start = off as usize;
                row.clone_from_slice(&src[start..start + inner]);
            } else {
                for (j, o) in row.iter_mut().enumerate() {
                    *o = src[(off + j as isize * s_in) as usize].clone();
                }
            }
            for d in (0..outer.len()).rev() {
                idx[d] += 1;
                off += strides[d];
                if idx[d] < outer[d] {
                    break;
                }
                off -= strides[d] * outer[d] as isize;
                idx[d] = 0;
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transposed_view() {
        // [[0,1,2],[3,4,5]] transposed.
        let src: Vec<i32> = (0..6).collect();
        let v = View {
            offset: 0,
            shape: vec![3, 2],
            strides: vec![1, 3],
        };
        assert_eq!(gather(&src, &v), vec![0, 3, 1, 4, 2, 5]);
    }

    #[test]
    fn reversed_and_broadcast_views() {
        let src: Vec<i32> = (0..4).collect();
        let rev = View {
            offset: 3,
            shape: vec![4],
            strides: vec![-1],
        };
        assert_eq!(gather(&src, &rev), vec![3, 2, 1, 0]);
        let bc = View {
            offset: 1,
            shape: vec![2, 3],
            strides: vec![1, 0],
        };
        assert_eq!(gather(&src, &bc), vec![1, 1, 1, 2, 2, 2]);
    }

    #[test]
    fn big_views_match_serial_order() {
        let (a, b) = (300usize, 257usize);
        let src: Vec<u32> = (0..(a * b) as u32).collect();
        let v = View {
            offset: 0,
            shape: vec![b, a],
            strides: vec![1, b as isize],
        };
        let out = gather(&src, &v);
        for i in 0..b {
            for j in 0..a {
                assert_eq!(out[i * a + j], (j * b + i) as u32);
            }
        }
        assert_eq!(dense_strides(&[2, 3, 4]), vec![12, 4, 1]);
    }
}
