//! Rules for matrix products: MatMul (numpy semantics), Gemm, Einsum, and their quantized
//! forms.

use super::ctx::{Fact, NodeCtx};
use super::dims::{broadcast_shapes, unify};
use crate::PassError;
use rtq_ir::{DType, Dim};

/// `MatMul`, `MatMulInteger`, `QLinearMatMul`: batch dimensions broadcast, 1-D operands
/// are promoted and their extra axis removed, the contracted extents must agree.
pub(crate) fn matmul(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let (a_slot, b_slot, dtype) = match ctx.node.op_type.as_str() {
        "QLinearMatMul" => (0, 3, ctx.dtype(7).or(ctx.dtype(0))),
        "MatMulInteger" => (0, 1, Some(DType::I32)),
        _ => (0, 1, ctx.dtype(0)),
    };
    let (Some(a), Some(b)) = (ctx.shape(a_slot), ctx.shape(b_slot)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if a.is_empty() || b.is_empty() {
        return Err(ctx.conflict(
            "matrix product of a scalar",
            ctx.describe(a_slot),
            ctx.describe(b_slot),
        ));
    }
    let a2: Vec<Dim> = if a.len() == 1 {
        vec![Dim::Known(1), a[0].clone()]
    } else {
        a.to_vec()
    };
    let b2: Vec<Dim> = if b.len() == 1 {
        vec![b[0].clone(), Dim::Known(1)]
    } else {
        b.to_vec()
    };
    let (ra, rb) = (a2.len(), b2.len());
    if unify(&a2[ra - 1], &b2[rb - 2]).is_none() {
        return Err(ctx.conflict(
            "contracted dimensions differ",
            ctx.describe(a_slot),
            ctx.describe(b_slot),
        ));
    }
    let mut out = broadcast_shapes(&a2[..ra - 2], &b2[..rb - 2]).map_err(|_| {
        ctx.conflict(
            "batch dimensions are not broadcastable",
            ctx.describe(a_slot),
            ctx.describe(b_slot),
        )
    })?;
    if a.len() > 1 {
        out.push(a2[ra - 2].clone());
    }
    if b.len() > 1 {
        out.push(b2[rb - 1].clone());
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Gemm`: `[M, N]` from `A` (`[M, K]` or `[K, M]` with `transA`) and `B` (`[K, N]` or
/// `[N, K]` with `transB`); `C` must broadcast to `[M, N]`.
pub(crate) fn gemm(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let (Some(a), Some(b)) = (ctx.shape(0), ctx.shape(1)) else {
        return Ok(vec![Fact::new(dtype, None)]);
    };
    if a.len() != 2 || b.len() != 2 {
        return Err(ctx.conflict(
            "Gemm operands must be matrices",
            ctx.describe(0),
            ctx.describe(1),
        ));
    }
    let (m, ka) = if ctx.attr_int("transA", 0) != 0 {
        (&a[1], &a[0])
    } else {
        (&a[0], &a[1])
    };
    let (kb, n) = if ctx.attr_int("transB", 0) != 0 {
        (&b[1], &b[0])
    } else {
        (&b[0], &b[1])
    };
    if unify(ka, kb).is_none() {
        return Err(ctx.conflict(
            "contracted dimensions differ",
            ctx.describe(0),
            ctx.describe(1),
        ));
    }
    let out = vec![m.clone(), n.clone()];
    if let Some(c) = ctx.shape(2) {
        // Unidirectional: C's extents must be 1 or equal to the output's.
        let fits = c.len() <= 2
            && c.iter()
                .rev()
                .zip(out.iter().rev())
                .all(|(cd, od)| matches!(cd, Dim::Known(1)) || unify(cd, od).is_some());
        if !fits {
            return Err(ctx.conflict(
                format!("C does not broadcast to the output [{m},{n}]"),
                ctx.describe(2),
                format!("{} and {}", ctx.describe(0), ctx.describe(1)),
            ));
        }
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// `Einsum(equation)`: each subscript letter names one extent (extents with the same
/// letter must agree, 1 broadcasts), `...` stands for broadcast batch axes; the output
/// follows the explicit `->` part or, implicitly, `...` then the letters used once, sorted.
pub(crate) fn einsum(ctx: &NodeCtx<'_>) -> Result<Vec<Fact>, PassError> {
    let dtype = ctx.dtype(0);
    let equation: String = ctx
        .node
        .attr_str("equation", "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match equation.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (equation.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ctx.num_inputs() {
        return Err(ctx.invalid(format!(
            "equation `{equation}` has {} operands for {} inputs",
            terms.len(),
            ctx.num_inputs()
        )));
    }
    let mut letters: Vec<(char, Dim)> = Vec::new();
    let mut counts: Vec<(char, usize)> = Vec::new();
    let mut ellipsis: Option<Vec<Dim>> = None;
    for (slot, term) in terms.iter().enumerate() {
        let Some(shape) = ctx.shape(slot) else {
            return Ok(vec![Fact::new(dtype, None)]);
        };
        let (head, tail) = match term.split_once("...") {
            Some((h, t)) => (h, Some(t)),
            None => (*term, None),
        };
        let explicit = head.chars().count() + tail.map_or(0, |t| t.chars().count());
        let bad_rank = || {
            ctx.invalid(format!(
                "operand `{term}` does not fit {}",
                ctx.describe(slot)
            ))
        };
        let batch_len = match tail {
            Some(_) => shape.len().checked_sub(explicit).ok_or_else(bad_rank)?,
            None if shape.len() == explicit => 0,
            None => return Err(bad_rank()),
        };
        let head_len = head.chars().count();
        if tail.is_some() {
            let batch = &shape[head_len..head_len + batch_len];
            ellipsis = Some(match ellipsis {
                None => batch.to_vec(),
                Some(prev) => broadcast_shapes(&prev, batch).map_err(|_| {
                    ctx.conflict(
                        "`...` axes do not broadcast",
                        ctx.describe(0),
                        ctx.describe(slot),
                    )
                })?,
            });
        }
        let letter_dims = head.chars().zip(&shape[..head_len]).chain(
            tail.unwrap_or("")
                .chars()
                .zip(&shape[head_len + batch_len..]),
        );
        for (c, d) in letter_dims {
            if !c.is_ascii_alphabetic() {
                return Err(ctx.invalid(format!("equation `{equation}` holds `{c}`")));
            }
            match letters.iter_mut().find(|(l, _)| *l == c) {
                Some((_, prev)) => {
                    *prev = super::dims::broadcast(prev, d).ok_or_else(|| {
                        ctx.conflict(
                            format!("extents of subscript `{c}` differ"),
                            ctx.describe(0),
                            ctx.describe(slot),
                        )
                    })?;
                }
                None => letters.push((c, d.clone())),
            }
            match counts.iter_mut().find(|(l, _)| *l == c) {
                Some((_, n)) => *n += 1,
                None => counts.push((c, 1)),
            }
        }
    }
    let out_letters: Vec<char> = match rhs {
        Some(r) => r.replace("...", "").chars().collect(),
        None => {
            let mut once: Vec<char> = counts
                .iter()
                .filter(|(_, n)| *n == 1)
                .map(|(c, _)| *c)
                .collect();
            once.sort_unstable();
            once
        }
    };
    let mut out = Vec::new();
    let explicit_ellipsis_at = rhs.and_then(|r| r.find("...")).map(|p| r_count(rhs, p));
    let batch = ellipsis.unwrap_or_default();
    match explicit_ellipsis_at {
        Some(pos) => {
            for &c in &out_letters[..pos.min(out_letters.len())] {
                out.push(letter_dim(ctx, &letters, c, &equation)?);
            }
            out.extend(batch);
            for &c in &out_letters[pos.min(out_letters.len())..] {
                out.push(letter_dim(ctx, &letters, c, &equation)?);
            }
        }
        None => {
            if rhs.is_none() {
                out.extend(batch);
            }
            for &c in &out_letters {
                out.push(letter_dim(ctx, &letters, c, &equation)?);
            }
        }
    }
    Ok(vec![Fact::shaped(dtype, out)])
}

/// Number of letters before byte position `pos` of the output term.
fn r_count(rhs: Option<&str>, pos: usize) -> usize {
    rhs.map_or(0, |r| {
        r[..pos].chars().filter(char::is_ascii_alphabetic).count()
    })
}

fn letter_dim(
    ctx: &NodeCtx<'_>,
    letters: &[(char, Dim)],
    c: char,
    equation: &str,
) -> Result<Dim, PassError> {
    letters
        .iter()
        .find(|(l, _)| *l == c)
        .map(|(_, d)| d.clone())
        .ok_or_else(|| {
            ctx.invalid(format!(
                "output subscript `{c}` of `{equation}` is not an input subscript"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{infer_one, s, sym, Case};
    use rtq_ir::{Attr, DType};

    #[test]
    fn matmul_broadcasts_batches_and_handles_vectors() {
        let f = infer_one(
            "MatMul",
            &[
                (DType::F32, vec![sym("N"), s(1), s(5), s(3)]),
                (DType::F32, vec![s(7), s(3), s(2)]),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].shape, Some(vec![sym("N"), s(7), s(5), s(2)]));
        let f = infer_one(
            "MatMul",
            &[(DType::F32, vec![s(3)]), (DType::F32, vec![s(3), s(4)])],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(4)]));
        let f = infer_one(
            "MatMul",
            &[(DType::F32, vec![s(2), s(3)]), (DType::F32, vec![s(3)])],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].shape, Some(vec![s(2)]));
        let f = infer_one(
            "MatMul",
            &[(DType::F32, vec![s(3)]), (DType::F32, vec![s(3)])],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].shape, Some(vec![]));
        let f = infer_one(
            "MatMulInteger",
            &[(DType::U8, vec![s(2), s(3)]), (DType::I8, vec![s(3), s(4)])],
            &[],
        )
        .unwrap();
        assert_eq!(f[0].dtype, Some(DType::I32));
    }

    #[test]
    fn matmul_inner_mismatch_is_a_conflict() {
        let err = infer_one(
            "MatMul",
            &[
                (DType::F32, vec![s(2), s(3)]),
                (DType::F32, vec![s(4), s(5)]),
            ],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("[2,3]") && err.contains("[4,5]"), "{err}");
    }

    #[test]
    fn einsum_explicit_implicit_and_ellipsis() {
        let case = |eq: &str, shapes: Vec<Vec<rtq_ir::Dim>>| {
            let mut c = Case::new("Einsum").attr("equation", Attr::String(eq.into()));
            for sh in shapes {
                c = c.input(DType::F32, sh);
            }
            c.shape()
        };
        assert_eq!(
            case("ij,jk->ik", vec![vec![s(2), s(3)], vec![s(3), s(4)]]),
            Some(vec![s(2), s(4)])
        );
        assert_eq!(
            case("ij,jk", vec![vec![s(2), s(3)], vec![s(3), s(4)]]),
            Some(vec![s(2), s(4)])
        );
        assert_eq!(case("ii->i", vec![vec![s(3), s(3)]]), Some(vec![s(3)]));
        assert_eq!(case("ij->", vec![vec![s(3), s(5)]]), Some(vec![]));
        assert_eq!(case("ba", vec![vec![s(3), s(5)]]), Some(vec![s(5), s(3)]));
        assert_eq!(
            case(
                "...ij,...jk->...ik",
                vec![vec![sym("N"), s(2), s(3)], vec![s(1), s(3), s(4)]]
            ),
            Some(vec![sym("N"), s(2), s(4)])
        );
        assert_eq!(
            case("i...->...i", vec![vec![s(2), s(5), s(6)]]),
            Some(vec![s(5), s(6), s(2)])
        );
        assert!(Case::new("Einsum")
            .attr("equation", Attr::String("ij,jk->ik".into()))
            .input(DType::F32, vec![s(2), s(3)])
            .input(DType::F32, vec![s(4), s(5)])
            .infer()
            .is_err());
    }

    #[test]
    fn gemm_transposes_and_checks_c() {
        let shape = Case::new("Gemm")
            .input(DType::F32, vec![s(3), sym("N")])
            .input(DType::F32, vec![s(10), s(3)])
            .input(DType::F32, vec![s(10)])
            .attr("transA", Attr::Int(1))
            .attr("transB", Attr::Int(1))
            .shape();
        assert_eq!(shape, Some(vec![sym("N"), s(10)]));
        let err = Case::new("Gemm")
            .input(DType::F32, vec![s(2), s(3)])
            .input(DType::F32, vec![s(3), s(4)])
            .input(DType::F32, vec![s(5)])
            .infer()
            .unwrap_err();
        assert!(err.to_string().contains("[5]"), "{err}");
    }
}
