//! The kernel registry: op type -> kernel function, built once from every op family's
//! table, plus the single-node entry point used by constant folding.

use crate::ctx::OpCtx;
use crate::memo::Memo;
use crate::nested::Nested;
use crate::{ops, ExecError};
use rtq_ir::{Node, Tensor};
use std::collections::HashMap;
use std::sync::OnceLock;

/// A kernel: computes a node's outputs from its inputs.
pub(crate) type Kernel = fn(&OpCtx<'_>) -> Result<Vec<Tensor>, ExecError>;

fn table() -> &'static HashMap<&'static str, Kernel> {
    static TABLE: OnceLock<HashMap<&'static str, Kernel>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut map = HashMap::new();
        for family in ops::FAMILIES {
            for &(op, kernel) in *family {
                let previous = map.insert(op, kernel);
                debug_assert!(previous.is_none(), "op `{op}` registered twice");
            }
        }
        map
    })
}

/// Whether `domain` names the default ONNX domain.
pub(crate) fn is_default_domain(domain: &str) -> bool {
    domain.is_empty() || domain == "ai.onnx"
}

/// The kernel for `node`, if its (domain, op type) is implemented.
pub(crate) fn kernel_for(node: &Node) -> Option<Kernel> {
    if node.domain == ops::integer::INTEGER_DOMAIN {
        return ops::integer::KERNELS
            .iter()
            .chain(ops::fused::KERNELS)
            .chain(ops::chain::KERNELS)
            .chain(ops::conv::FUSED_KERNELS)
            .find(|(op, _)| *op == node.op_type)
            .map(|&(_, kernel)| kernel);
    }
    if !is_default_domain(&node.domain) {
        return None;
    }
    table().get(node.op_type.as_str()).copied()
}

/// The op type as reported in errors: prefixed by its domain unless it is the default.
pub(crate) fn qualified_op(node: &Node) -> String {
    if is_default_domain(&node.domain) {
        node.op_type.clone()
    } else {
        format!("{}.{}", node.domain, node.op_type)
    }
}

/// True if the executor implements `op_type` of the default ONNX domain.
pub fn supports(op_type: &str) -> bool {
    table().contains_key(op_type)
}

/// True if the executor implements `node`'s op (domain included).
pub fn supports_node(node: &Node) -> bool {
    kernel_for(node).is_some()
}

/// Every implemented op type of the default domain, sorted.
pub fn supported_ops() -> Vec<&'static str> {
    let mut ops: Vec<&'static str> = table().keys().copied().collect();
    ops.sort_unstable();
    ops
}

/// Runs `kernel` for `node` and checks it produced every output the node declares
/// (extra outputs computed by the kernel are dropped).
pub(crate) fn run_kernel(
    kernel: Kernel,
    node: &Node,
    inputs: &[Option<&Tensor>],
    memo: Option<&Memo>,
    nested: Option<&Nested<'_>>,
) -> Result<Vec<Tensor>, ExecError> {
    let ctx = OpCtx::new(node, inputs).with_memo(memo).with_nested(nested);
    let mut outputs = kernel(&ctx)?;
    let wanted = node.outputs.len();
    if wanted > 0 {
        if outputs.len() < wanted {
            return Err(ctx.err(format!(
                "the node declares {wanted} outputs but the op produces {}",
                outputs.len()
            )));
        }
        outputs.truncate(wanted);
    }
    Ok(outputs)
}

/// Evaluates one node on concrete inputs (`None` = omitted optional input). Used by
/// constant folding. Returns one tensor per declared output (all the op's outputs when
/// the node declares none).
pub fn eval_node(node: &Node, inputs: &[Option<&Tensor>]) -> Result<Vec<Tensor>, ExecError> {
    let kernel = kernel_for(node).ok_or_else(|| ExecError::Unsupported {
        node: node.name.clone(),
        op: qualified_op(node),
    })?;
    run_kernel(kernel, node, inputs, None, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(op: &str, domain: &str, outputs: usize) -> Node {
        Node {
            name: "n0".into(),
            domain: domain.into(),
            ..rtq_test_support::node(op, &[], outputs)
        }
    }

    #[test]
    fn registry_knows_core_ops() {
        for op in [
            "Conv",
            "Relu",
            "Gemm",
            "Resize",
            "QuantizeLinear",
            "DequantizeLinear",
        ] {
            assert!(supports(op), "{op}");
        }
        assert!(!supports("FooBar"));
        assert!(supported_ops().windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn other_domains_are_unsupported() {
        let n = node("Relu", "com.microsoft", 1);
        assert!(!supports_node(&n));
        let t = Tensor::scalar_f32(1.0);
        let err = eval_node(&n, &[Some(&t)]).unwrap_err().to_string();
        assert!(
            err.contains("com.microsoft.Relu") && err.contains("n0"),
            "{err}"
        );
        assert!(supports_node(&node("Relu", "ai.onnx", 1)));
    }

    #[test]
    fn too_many_declared_outputs_is_an_error() {
        let n = node("Relu", "", 2);
        let t = Tensor::scalar_f32(-1.0);
        let err = eval_node(&n, &[Some(&t)]).unwrap_err().to_string();
        assert!(err.contains("declares 2 outputs"), "{err}");
        let ok = eval_node(&node("Relu", "", 1), &[Some(&t)]).unwrap();
        assert_eq!(ok, vec![Tensor::scalar_f32(0.0)]);
    }
}
