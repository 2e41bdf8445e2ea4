//! Einsum over float tensors: explicit or implicit output, repeated labels (traces and
//! diagonals), `...` broadcasting. Evaluated directly (each output element sums the
//! products over the contracted labels), which suits the small contractions exporters
//! emit; large matrix products should appear as MatMul.

use crate::ctx::OpCtx;
use crate::float::tensor_from_f32;
use crate::par;
use crate::registry::Kernel;
use crate::ExecError;
use rtq_ir::Tensor;

/// Einsum kernels by op type.
pub(crate) const KERNELS: &[(&str, Kernel)] = &[("Einsum", einsum)];

/// Expands one term (`ab...c`) into labels, using `ell` for the `...` dims of rank `n`.
fn expand_term(
    ctx: &OpCtx<'_>,
    term: &str,
    ell: &[char],
    ell_rank: Option<usize>,
) -> Result<Vec<char>, ExecError> {
    let mut out = Vec::new();
    let mut rest = term;
    let mut seen_ellipsis = false;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if seen_ellipsis {
                return Err(ctx.err(format!("term `{term}` has two ellipses")));
            }
            seen_ellipsis = true;
            let n = ell_rank.unwrap_or(ell.len());
            out.extend_from_slice(&ell[ell.len() - n..]);
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !c.is_ascii_alphabetic() {
            return Err(ctx.err(format!("invalid character {c:?} in term `{term}`")));
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Ok(out)
}

fn einsum(ctx: &OpCtx<'_>) -> Result<Vec<Tensor>, ExecError> {
    let eq: String = ctx
        .attr_str("equation", "")?
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    if eq.is_empty() {
        return Err(ctx.err("attribute `equation` is required"));
    }
    let inputs = ctx.variadic()?;
    let dtype = ctx.float_dtype(0)?;
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != inputs.len() {
        return Err(ctx.err(format!(
            "equation `{eq}` has {} terms for {} inputs",
            terms.len(),
            inputs.len()
        )));
    }
    // Ellipsis labels: private characters outside ASCII, shared right-aligned.
    let max_ell = terms
        .iter()
        .zip(&inputs)
        .filter(|(t, _)| t.contains("..."))
        .map(|(t, x)| x.rank().saturating_sub(t.replace("...", "").len()))
        .max()
        .unwrap_or(0);
    let ell: Vec<char> = (0..max_ell)
        .map(|i| char::from_u32(0x3b1 + i as u32).unwrap_or('?'))
        .collect();
    let mut operand_labels = Vec::with_capacity(terms.len());
    for (t, x) in terms.iter().zip(&inputs) {
        let n = x.rank().saturating_sub(t.replace("...", "").len());
        let labels = expand_term(ctx, t, &ell, Some(n))?;
        if labels.len() != x.rank() {
            return Err(ctx.err(format!(
                "term `{t}` has {} labels for an input of rank {}",
                labels.len(),
                x.rank()
            )));
        }
        operand_labels.push(labels);
    }
    // Extent of every label (1 broadcasts).
    let mut all: Vec<char> = Vec::new();
    let mut extent: Vec<usize> = Vec::new();
    for (labels, x) in operand_labels.iter().zip(&inputs) {
        for (&c, &d) in labels.iter().zip(x.shape()) {
            match all.iter().position(|&l| l == c) {
                Some(i) if extent[i] == d || d == 1 => {}
                Some(i) if extent[i] == 1 => extent[i] = d,
                Some(i) => {
                    return Err(ctx.err(format!("label `{c}` has extents {} and {d}", extent[i])))
                }
                None => {
                    all.push(c);
                    extent.push(d);
                }
            }
        }
    }
    let out_labels: Vec<char> = match rhs {
        Some(r) => expand_term(ctx, r, &ell, None)?,
        None => {
            let mut once: Vec<char> = all
                .iter()
                .copied()
                .filter(|c| !ell.contains(c))
                .filter(|c| {
                    operand_labels
                        .iter()
                        .flatten()
                        .filter(|&&l| l == *c)
                        .count()
                        == 1
                })
                .collect();
            once.sort_unstable();
            ell.iter().copied().chain(once).collect()
        }
    };
    for c in &out_labels {
        if !all.contains(c) {
            return Err(ctx.err(format!("output label `{c}` appears in no input")));
        }
    }
    let contracted: Vec<usize> = (0..all.len())
        .filter(|&i| !out_labels.contains(&all[i]))
        .collect();
    let out_idx: Vec<usize> = out_labels
        .iter()
        .map(|c| all.iter().position(|l| l == c).unwrap_or(0))
        .collect();
    // Per operand, its stride for every label (summed for repeated labels; 0 when absent
    // or broadcast).
    let datas: Vec<_> = (0..inputs.len())
        .map(|i| ctx.float_input(i))
        .collect::<Result<_, _>>()?;
    let strides: Vec<Vec<usize>> = operand_labels
        .iter()
        .zip(&inputs)
        .map(|(labels, x)| {
            let mut s = vec![0usize; all.len()];
            let mut step = 1usize;
            for (k, &c) in labels.iter().enumerate().rev() {
                let li = all.iter().position(|&l| l == c).unwrap_or(0);
                if x.shape()[k] != 1 {
                    s[li] += step;
                }
                step *= x.shape()[k];
            }
            s
        })
        .collect();
    let out_shape: Vec<usize> = out_idx.iter().map(|&i| extent[i]).collect();
    let out_len: usize = out_shape.iter().product();
    let inner_len: usize = contracted.iter().map(|&i| extent[i]).product();
    let mut out = vec![0.0f32; out_len];
    par::chunks_mut(
        &mut out,
        1,
        out_len * inner_len.max(1) * inputs.len(),
        |o, dst| {
            let mut base = vec![0usize; inputs.len()];
            let mut rem = o;
            for k in (0..out_idx.len()).rev() {
                let li = out_idx[k];
                let v = rem % extent[li];
                rem /= extent[li];
                for (b, s) in base.iter_mut().zip(&strides) {
                    *b += v * s[li];
                }
            }
            let mut acc = 0.0f64;
            for c in 0..inner_len {
                let mut offs = base.clone();
                let mut rem = c;
                for &li in contracted.iter().rev() {
                    let v = rem % extent[li];
                    rem /= extent[li];
                    for (b, s) in offs.iter_mut().zip(&strides) {
                        *b += v * s[li];
                    }
                }
                let p: f64 = offs.iter().zip(&datas).map(|(&i, d)| d[i] as f64).product();
                acc += p;
            }
            dst[0] = acc as f32;
        },
    );
    Ok(vec![tensor_from_f32(dtype, out_shape, out)])
}

#[cfg(test)]
mod tests {
    use crate::eval_node;
    use rtq_ir::{Attr, Tensor};

    fn run(eq: &str, inputs: &[&Tensor]) -> Result<Tensor, String> {
        let n = rtq_test_support::node("Einsum", &[("equation", Attr::String(eq.into()))], 1);
        let ins: Vec<Option<&Tensor>> = inputs.iter().map(|t| Some(*t)).collect();
        eval_node(&n, &ins)
            .map(|mut v| v.remove(0))
            .map_err(|e| e.to_string())
    }

    #[test]
    fn matmul_transpose_trace_and_batch() {
        let a = Tensor::from_f32(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]);
        let b = Tensor::from_f32(vec![2, 2], vec![5.0, 6.0, 7.0, 8.0]);
        assert_eq!(
            run("ij,jk->ik", &[&a, &b]).unwrap().as_f32().unwrap(),
            &[19.0, 22.0, 43.0, 50.0]
        );
        assert_eq!(
            run("ij,jk", &[&a, &b]).unwrap().as_f32().unwrap(),
            &[19.0, 22.0, 43.0, 50.0]
        );
        assert_eq!(
            run("ij->ji", &[&a]).unwrap().as_f32().unwrap(),
            &[1.0, 3.0, 2.0, 4.0]
        );
        assert_eq!(run("ii->", &[&a]).unwrap().as_f32().unwrap(), &[5.0]);
        assert_eq!(run("ii->i", &[&a]).unwrap().as_f32().unwrap(), &[1.0, 4.0]);
        let x = Tensor::from_f32(vec![2, 1, 2], vec![1.0, 1.0, 2.0, 2.0]);
        let y = run("...ij,jk->...ik", &[&x, &b]).unwrap();
        assert_eq!(y.shape(), &[2, 1, 2]);
        assert_eq!(y.as_f32().unwrap(), &[12.0, 14.0, 24.0, 28.0]);
        assert!(run("ij,jk->iz", &[&a, &b]).is_err());
        assert!(run("ijk,jk->ik", &[&a, &b]).is_err());
    }
}
