//! Symbolic values of small integer tensors ("data propagation").
//!
//! Exporters compute shapes at run time (`Shape -> Gather -> Concat -> Reshape`). When
//! the input shape holds symbols (a dynamic batch `N`), constant folding cannot help,
//! but the elements are still known symbolically: `[N, 512]`. Tracking them lets
//! Reshape, Expand, ConstantOfShape, Tile, ... infer exact shapes.

use super::ctx::NodeCtx;
use super::dims::is_unknown;
use rtq_ir::{DType, Dim, ValueId};
use std::collections::HashMap;

/// Most elements tracked per value.
const MAX_ELEMENTS: usize = 64;

/// One element of an integer tensor: a known integer, a named symbolic extent, or unknown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SymInt {
    /// A known value.
    Int(i64),
    /// The extent of a symbolic dimension.
    Sym(String),
    /// Nothing known.
    Unknown,
}

/// Symbolic elements per value (rank-0 and rank-1 integer tensors only).
pub(crate) type SymTable = HashMap<ValueId, Vec<SymInt>>;

impl SymInt {
    /// The integer, if known.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            SymInt::Int(v) => Some(*v),
            _ => None,
        }
    }

    /// The element for dimension `d`.
    pub fn from_dim(d: &Dim) -> SymInt {
        match d {
            Dim::Known(n) => i64::try_from(*n).map_or(SymInt::Unknown, SymInt::Int),
            _ if is_unknown(d) => SymInt::Unknown,
            Dim::Sym(s) => SymInt::Sym(s.clone()),
        }
    }
}

/// The symbolic elements of the node's first output, for the ops that move integer
/// elements around; `None` when not tracked.
pub(crate) fn propagate(ctx: &NodeCtx<'_>) -> Option<Vec<SymInt>> {
    let out = match ctx.node.op_type.as_str() {
        "Shape" => {
            let dims = ctx.shape(0)?;
            let rank = dims.len() as i64;
            let clamp = |v: i64| (if v < 0 { v + rank } else { v }).clamp(0, rank) as usize;
            let start = clamp(ctx.attr_int("start", 0));
            let end = clamp(ctx.attr_int("end", rank)).max(start);
            dims[start..end].iter().map(SymInt::from_dim).collect()
        }
        "Size" => {
            let d = super::dims::product(ctx.shape(0)?);
            vec![SymInt::from_dim(&d)]
        }
        "Identity" => ctx.sym_ints(0)?,
        "Constant" => {
            let t = ctx.node.attr("value").and_then(rtq_ir::Attr::as_tensor);
            match (t, ctx.node.attr("value_ints"), ctx.node.attr("value_int")) {
                (Some(t), _, _) if matches!(t.dtype(), DType::I64 | DType::I32) => {
                    t.to_i64_vec().into_iter().map(SymInt::Int).collect()
                }
                (None, Some(v), _) | (None, None, Some(v)) => {
                    v.as_ints()?.into_iter().map(SymInt::Int).collect()
                }
                _ => return None,
            }
        }
        "Cast" => {
            let to = DType::from_onnx_code(i32::try_from(ctx.attr_int("to", 0)).ok()?)?;
            if !matches!(to, DType::I64 | DType::I32) {
                return None;
            }
            ctx.sym_ints(0)?
        }
        "Squeeze" | "Unsqueeze" | "Reshape" | "Flatten" => {
            let v = ctx.sym_ints(0)?;
            // Only rank-0 <-> rank-1 moves of one element or flattening a vector.
            (v.len() <= MAX_ELEMENTS).then_some(v)?
        }
        "Concat" => {
            let mut out = Vec::new();
            for slot in 0..ctx.num_inputs() {
                out.extend(ctx.sym_ints(slot)?);
            }
            out
        }
        "Gather" => {
            let data = ctx.sym_ints(0)?;
            if ctx.rank(0)? > 1 || ctx.attr_int("axis", 0) != 0 {
                return None;
            }
            let n = data.len() as i64;
            ctx.ints(1)?
                .iter()
                .map(|&i| {
                    let i = if i < 0 { i + n } else { i };
                    usize::try_from(i).ok().and_then(|i| data.get(i).cloned())
                })
                .collect::<Option<Vec<_>>>()?
        }
        "Slice" => {
            let data = ctx.sym_ints(0)?;
            if ctx.rank(0)? != 1 {
                return None;
            }
            let (starts, ends) = (ctx.ints(1)?, ctx.ints(2)?);
            let step = match ctx.input(4) {
                Some(_) => *ctx.ints(4)?.first()?,
                None => 1,
            };
            if starts.len() != 1 || ends.len() != 1 || step == 0 {
                return None;
            }
            if let Some(_axes) = ctx.input(3) {
                let axes = ctx.ints(3)?;
                if axes != [0] && axes != [-1] {
                    return None;
                }
            }
            let n = data.len() as i64;
            let idx = slice_indices(starts[0], ends[0], step, n);
            idx.into_iter().map(|i| data[i].clone()).collect()
        }
        "Add" | "Sub" | "Mul" | "Div" => {
            let (a, b) = (ctx.sym_ints(0)?, ctx.sym_ints(1)?);
            let n = a.len().max(b.len());
            if (a.len() != n && a.len() != 1) || (b.len() != n && b.len() != 1) {
                return None;
            }
            let pick = |v: &[SymInt], i: usize| v[if v.len() == 1 { 0 } else { i }].clone();
            (0..n)
                .map(|i| arith(&ctx.node.op_type, &pick(&a, i), &pick(&b, i)))
                .collect()
        }
        "ReduceProd" => {
            let v = ctx.sym_ints(0)?;
            let dims: Vec<Dim> = v.iter().map(to_dim).collect::<Option<_>>()?;
            vec![SymInt::from_dim(&super::dims::product(&dims))]
        }
        _ => return None,
    };
    (out.len() <= MAX_ELEMENTS).then_some(out)
}

/// The element as a dimension (`None` for negative integers).
pub(crate) fn to_dim(v: &SymInt) -> Option<Dim> {
    match v {
        SymInt::Int(n) => usize::try_from(*n).ok().map(Dim::Known),
        SymInt::Sym(s) => Some(Dim::Sym(s.clone())),
        SymInt::Unknown => Some(super::dims::unknown()),
    }
}

fn arith(op: &str, a: &SymInt, b: &SymInt) -> SymInt {
    use SymInt::{Int, Sym};
    match (op, a, b) {
        ("Add", Int(x), Int(y)) => x.checked_add(*y).map_or(SymInt::Unknown, Int),
        ("Sub", Int(x), Int(y)) => x.checked_sub(*y).map_or(SymInt::Unknown, Int),
        ("Mul", Int(x), Int(y)) => x.checked_mul(*y).map_or(SymInt::Unknown, Int),
        // ONNX integer division truncates toward zero, as Rust's does.
        ("Div", Int(x), Int(y)) if *y != 0 => x.checked_div(*y).map_or(SymInt::Unknown, Int),
        ("Add" | "Sub", Sym(_), Int(0)) | ("Mul" | "Div", Sym(_), Int(1)) => a.clone(),
        ("Add", Int(0), Sym(_)) | ("Mul", Int(1), Sym(_)) => b.clone(),
        ("Div", Sym(x), Sym(y)) if x == y => Int(1),
        ("Sub", Sym(x), Sym(y)) if x == y => Int(0),
        _ => SymInt::Unknown,
    }
}

/// The indices ONNX Slice picks from a length-`n` axis for `start`, `end`, `step != 0`.
pub(crate) fn slice_indices(start: i64, end: i64, step: i64, n: i64) -> Vec<usize> {
    let norm = |v: i64| if v < 0 { v.saturating_add(n) } else { v };
    let (start, end) = (norm(start), norm(end));
    let mut out = Vec::new();
    if n <= 0 {
        return out;
    }
    if step > 0 {
        let (mut i, end) = (start.clamp(0, n), end.clamp(0, n));
        while i < end {
            out.push(i as usize);
            i = i.saturating_add(step);
        }
    } else {
        // Negative steps clamp the start to [0, n-1] and the end to [-1, n-1].
        let (mut i, end) = (start.clamp(0, n - 1), end.clamp(-1, n - 1));
        while i > end {
            out.push(i as usize);
            i = i.saturating_add(step);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_indices_follow_onnx_clamping() {
        assert_eq!(slice_indices(0, i64::MAX, 1, 4), vec![0, 1, 2, 3]);
        assert_eq!(slice_indices(-2, i64::MAX, 1, 4), vec![2, 3]);
        assert_eq!(slice_indices(1, -1, 1, 4), vec![1, 2]);
        assert_eq!(slice_indices(-1, i64::MIN, -1, 4), vec![3, 2, 1, 0]);
        assert_eq!(slice_indices(10, 0, -2, 4), vec![3, 1]);
        assert_eq!(slice_indices(3, 1, 1, 4), Vec::<usize>::new());
        assert_eq!(slice_indices(0, 4, 3, 4), vec![0, 3]);
        // A start before the beginning clamps to 0 for negative steps too.
        assert_eq!(slice_indices(-100, i64::MIN, -2, 5), vec![0]);
        assert_eq!(slice_indices(0, 1, 1, 0), Vec::<usize>::new());
    }

    #[test]
    fn arithmetic_keeps_symbols_only_when_exact() {
        let n = SymInt::Sym("N".into());
        assert_eq!(arith("Mul", &n, &SymInt::Int(1)), n);
        assert_eq!(arith("Mul", &n, &SymInt::Int(2)), SymInt::Unknown);
        assert_eq!(arith("Div", &n, &n), SymInt::Int(1));
        assert_eq!(
            arith("Div", &SymInt::Int(7), &SymInt::Int(0)),
            SymInt::Unknown
        );
        assert_eq!(
            arith("Div", &SymInt::Int(-7), &SymInt::Int(2)),
            SymInt::Int(-3)
        );
        assert_eq!(arith("Add", &SymInt::Int(0), &n), n);
    }
}
