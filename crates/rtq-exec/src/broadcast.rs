//! Numpy-style multidirectional broadcasting: output shapes, and a row-wise iteration
//! engine that merges adjacent dimensions so the innermost loop runs over contiguous
//! (or constant) data.

use rayon::prelude::*;

use crate::par::{self, PAR_MIN_ELEMS, PIECE};

/// The broadcast shape of `shapes`, or `None` when two extents clash.
pub(crate) fn broadcast_shapes(shapes: &[&[usize]]) -> Option<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for shape in shapes {
        let offset = rank - shape.len();
        for (i, &d) in shape.iter().enumerate() {
            let o = &mut out[offset + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

/// Whether `shape` broadcasts unidirectionally to `target` (e.g. a bias to an output).
pub(crate) fn broadcasts_to(shape: &[usize], target: &[usize]) -> bool {
    shape.len() <= target.len()
        && shape
            .iter()
            .rev()
            .zip(target.iter().rev())
            .all(|(&s, &t)| s == 1 || s == t)
}

/// `N` inputs viewed against a common output shape, with size-1 output dimensions
/// dropped and mergeable neighbours fused.
pub(crate) struct Layout<const N: usize> {
    dims: Vec<usize>,
    strides: [Vec<usize>; N],
}

impl<const N: usize> Layout<N> {
    /// The layout of `inputs` (each broadcastable to `out`) against `out`.
    pub fn new(out: &[usize], inputs: [&[usize]; N]) -> Layout<N> {
        let rank = out.len();
        let mut full: [Vec<usize>; N] = std::array::from_fn(|_| vec![0; rank]);
        for (k, shape) in inputs.iter().enumerate() {
            let offset = rank - shape.len();
            let mut stride = 1usize;
            for i in (0..shape.len()).rev() {
                full[k][offset + i] = if shape[i] == 1 { 0 } else { stride };
                stride *= shape[i];
            }
        }
        let mut dims: Vec<usize> = Vec::with_capacity(rank);
        let mut strides: [Vec<usize>; N] = std::array::from_fn(|_| Vec::with_capacity(rank));
        for i in 0..rank {
            if out[i] == 1 {
                continue;
            }
            let mergeable = !dims.is_empty()
                && (0..N).all(|k| {
                    let last = *strides[k].last().unwrap_or(&0);
                    last == full[k][i] * out[i]
                });
            if mergeable {
                let d = dims.len() - 1;
                dims[d] *= out[i];
                for k in 0..N {
                    strides[k][d] = full[k][i];
                }
            } else {
                dims.push(out[i]);
                for k in 0..N {
                    strides[k].push(full[k][i]);
                }
            }
        }
        if dims.is_empty() {
            dims.push(1);
            for s in strides.iter_mut() {
                s.push(0);
            }
        }
        Layout { dims, strides }
    }

    /// Length of the innermost (merged) dimension.
    pub fn inner(&self) -> usize {
        self.dims[self.dims.len() - 1]
    }

    /// Each input's stride along the innermost dimension (0 or 1).
    pub fn inner_strides(&self) -> [usize; N] {
        std::array::from_fn(|k| self.strides[k][self.dims.len() - 1])
    }

    /// Calls `f(out_row, offsets)` for every row of the innermost dimension, where
    /// `offsets` are each input's element offset at the start of the row; rows are
    /// processed in parallel for big outputs. `out` must hold the whole output.
    pub fn for_each_row<O: Send>(
        &self,
        out: &mut [O],
        f: impl Fn(&mut [O], [usize; N]) + Sync + Send,
    ) {
        let inner = self.inner();
        if out.is_empty() || inner == 0 {
            return;
        }
        let rows = out.len() / inner;
        let outer = &self.dims[..self.dims.len() - 1];
        let run = |first_row: usize, chunk: &mut [O]| {
            let mut idx = vec![0usize; outer.len()];
            let mut offs = [0usize; N];
            let mut rem = first_row;
            for d in (0..outer.len()).rev() {
                idx[d] = rem % outer[d];
                rem /= outer[d];
                for (o, s) in offs.iter_mut().zip(&self.strides) {
                    *o += idx[d] * s[d];
                }
            }
            for row in chunk.chunks_mut(inner) {
                f(row, offs);
                for d in (0..outer.len()).rev() {
                    idx[d] += 1;
                    for (o, s) in offs.iter_mut().zip(&self.strides) {
                        *o += s[d];
                    }
                    if idx[d] < outer[d] {
                        break;
                    }
                    for (o, s) in offs.iter_mut().zip(&self.strides) {
                        *o -= s[d] * outer[d];
                    }
                    idx[d] = 0;
                }
            }
        };
        if out.len() >= PAR_MIN_ELEMS && rows > 1 {
            let threads = rayon::current_num_threads().max(1);
            let rows_per_chunk = rows.div_ceil(threads * 4).max(1);
            out.par_chunks_mut(rows_per_chunk * inner)
                .enumerate()
                .for_each(|(i, chunk)| run(i * rows_per_chunk, chunk));
        } else {
            run(0, out);
        }
    }
}

/// `f(a, b)` over the broadcast of `a` (shape `ash`) and `b` (shape `bsh`); `None` when
/// the shapes do not broadcast.
pub(crate) fn binary<A, B, O>(
    a: &[A],
    ash: &[usize],
    b: &[B],
    bsh: &[usize],
    f: impl Fn(A, B) -> O + Sync + Send,
) -> Option<(Vec<usize>, Vec<O>)>
where
    A: Copy + Sync,
    B: Copy + Sync,
    O: Copy + Send + Default,
{
    let shape = broadcast_shapes(&[ash, bsh])?;
    let n: usize = shape.iter().product();
    if ash == bsh {
        // Slices zipped in each piece: the loop vectorizes (rayon's zipped iterators
        // collect element by element).
        let out = par::written(n, PIECE, n, |i, dst| {
            let (xa, xb) = (&a[i * PIECE..][..dst.len()], &b[i * PIECE..][..dst.len()]);
            for ((d, &x), &y) in dst.iter_mut().zip(xa).zip(xb) {
                d.write(f(x, y));
            }
        });
        return Some((shape, out));
    }
    // Every row is written: the output needs no zero fill.
    let mut out = par::uninit_vec::<O>(n);
    let layout = Layout::new(&shape, [ash, bsh]);
    let [sa, sb] = layout.inner_strides();
    layout.for_each_row(&mut out, |row, [oa, ob]| {
        let len = row.len();
        match (sa, sb) {
            (1, 1) => {
                let (xa, xb) = (&a[oa..oa + len], &b[ob..ob + len]);
                for ((d, &x), &y) in row.iter_mut().zip(xa).zip(xb) {
                    d.write(f(x, y));
                }
            }
            (0, 1) => {
                let (x, xb) = (a[oa], &b[ob..ob + len]);
                for (d, &y) in row.iter_mut().zip(xb) {
                    d.write(f(x, y));
                }
            }
            (1, 0) => {
                let (xa, y) = (&a[oa..oa + len], b[ob]);
                for (d, &x) in row.iter_mut().zip(xa) {
                    d.write(f(x, y));
                }
            }
            _ => {
                let v = f(a[oa], b[ob]);
                row.iter_mut().for_each(|o| {
                    o.write(v);
                });
            }
        }
    });
    // SAFETY: `for_each_row` hands every row of `out` to the closure, which writes
    // each of its elements.
    Some((shape, unsafe { par::assume_written(out) }))
}

/// `f(c, x, y)` over the broadcast of three inputs; `None` when the shapes do not
/// broadcast.
pub(crate) fn ternary<C, X, O>(
    c: (&[C], &[usize]),
    x: (&[X], &[usize]),
    y: (&[X], &[usize]),
    f: impl Fn(C, &X, &X) -> O + Sync + Send,
) -> Option<(Vec<usize>, Vec<O>)>
where
    C: Copy + Sync,
    X: Sync,
    O: Clone + Send + Default,
{
    let shape = broadcast_shapes(&[c.1, x.1, y.1])?;
    let n: usize = shape.iter().product();
    let mut out = vec![O::default(); n];
    let layout = Layout::new(&shape, [c.1, x.1, y.1]);
    let [sc, sx, sy] = layout.inner_strides();
    layout.for_each_row(&mut out, |row, [oc, ox, oy]| {
        for (i, o) in row.iter_mut().enumerate() {
            *o = f(c.0[oc + i * sc], &x.0[ox + i * sx], &y.0[oy + i * sy]);
        }
    });
    Some((shape, out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_broadcast_like_numpy() {
        assert_eq!(
            broadcast_shapes(&[&[2, 1, 4], &[3, 1]]),
            Some(vec![2, 3, 4])
        );
        assert_eq!(broadcast_shapes(&[&[], &[5]]), Some(vec![5]));
        assert_eq!(broadcast_shapes(&[&[0, 3], &[1, 3]]), Some(vec![0, 3]));
        assert_eq!(broadcast_shapes(&[&[2, 3], &[4, 3]]), None);
        assert!(broadcasts_to(&[3, 1], &[2, 3, 4]));
        assert!(!broadcasts_to(&[2, 3, 4], &[3, 4]));
    }

    #[test]
    fn binary_broadcasts_both_ways() {
        // [2,1] + [1,3]
        let (shape, out) = binary(&[10, 20], &[2, 1], &[1, 2, 3], &[1, 3], |a, b| a + b).unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(out, vec![11, 12, 13, 21, 22, 23]);
        // channel bias [1,2,1,1] against [1,2,2,2]
        let x: Vec<i32> = (0..8).collect();
        let (_, out) = binary(&x, &[1, 2, 2, 2], &[100, 200], &[1, 2, 1, 1], |a, b| a + b).unwrap();
        assert_eq!(out, vec![100, 101, 102, 103, 204, 205, 206, 207]);
        // scalar
        let (shape, out) = binary(&[5], &[], &[1, 2], &[2], |a, b| a * b).unwrap();
        assert_eq!((shape, out), (vec![2], vec![5, 10]));
    }

    #[test]
    fn big_broadcast_matches_serial_reference() {
        let (n, c, hw) = (2, 3, 20000);
        let x: Vec<i64> = (0..(n * c * hw) as i64).collect();
        let b = [1i64, 2, 3];
        let (_, out) = binary(&x, &[n, c, hw], &b, &[c, 1], |a, b| a * b).unwrap();
        for (i, &v) in out.iter().enumerate() {
            let ch = (i / hw) % c;
            assert_eq!(v, x[i] * b[ch]);
        }
        // Same shapes, over several parallel pieces (not a whole number of them).
        let y: Vec<i64> = x.iter().map(|v| v % 7 - 3).collect();
        let (shape, out) = binary(&x, &[n, c, hw], &y, &[n, c, hw], |a, b| a - b).unwrap();
        assert_eq!(shape, vec![n, c, hw]);
        assert!(out.iter().enumerate().all(|(i, &v)| v == x[i] - y[i]));
    }

    #[test]
    fn ternary_selects() {
        let (shape, out) = ternary(
            (&[true, false], &[2, 1]),
            (&[1, 2, 3], &[3]),
            (&[9], &[]),
            |c, x: &i32, y: &i32| if c { *x } else { *y },
        )
        .unwrap();
        assert_eq!(shape, vec![2, 3]);
        assert_eq!(out, vec![1, 2, 3, 9, 9, 9]);
    }
}
