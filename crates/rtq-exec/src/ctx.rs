//! What a kernel sees: its node (attributes, output count) and its input tensors, with
//! accessors that turn every problem into an [`ExecError`] naming the node.

use crate::float::f32_view;
use crate::memo::Memo;
use crate::nested::Nested;
use crate::ExecError;
use rtq_ir::{Attr, DType, Node, Tensor};
use std::borrow::Cow;

/// A kernel's view of one node evaluation.
pub(crate) struct OpCtx<'a> {
    /// The node being evaluated.
    pub node: &'a Node,
    inputs: &'a [Option<&'a Tensor>],
    memo: Option<&'a Memo>,
    nested: Option<&'a Nested<'a>>,
}

impl<'a> OpCtx<'a> {
    /// A context over `node` and its `inputs` (`None` for omitted optional inputs).
    pub fn new(node: &'a Node, inputs: &'a [Option<&'a Tensor>]) -> OpCtx<'a> {
        OpCtx {
            node,
            inputs,
            memo: None,
            nested: None,
        }
    }

    /// The same context inside a nested observation ([`crate::Plan::run_observed_nested`]):
    /// control-flow kernels run their bodies observed.
    pub fn with_nested(self, nested: Option<&'a Nested<'a>>) -> OpCtx<'a> {
        OpCtx { nested, ..self }
    }

    /// The nested observation this evaluation is part of, if any.
    pub fn nested(&self) -> Option<&'a Nested<'a>> {
        self.nested
    }

    /// The same context with the plan's memo for this node (see [`Memo`]).
    pub fn with_memo(self, memo: Option<&'a Memo>) -> OpCtx<'a> {
        OpCtx { memo, ..self }
    }

    /// Where the kernel may keep work derived from the node's constant inputs (every
    /// input but the first, and but a `FusedConv`'s residual); `None` when they may
    /// change between evaluations.
    pub fn memo(&self) -> Option<&'a Memo> {
        self.memo
    }

    /// An error about this node.
    pub fn err(&self, message: impl Into<String>) -> ExecError {
        ExecError::BadInput {
            node: self.node.name.clone(),
            op: self.node.op_type.clone(),
            message: message.into(),
        }
    }

    /// Number of outputs the node asks for (at least 1).
    pub fn num_outputs(&self) -> usize {
        self.node.outputs.len().max(1)
    }

    /// The optional input at `slot`.
    pub fn opt_input(&self, slot: usize) -> Option<&'a Tensor> {
        self.inputs.get(slot).copied().flatten()
    }

    /// The required input at `slot`.
    pub fn input(&self, slot: usize) -> Result<&'a Tensor, ExecError> {
        self.opt_input(slot)
            .ok_or_else(|| self.err(format!("required input {slot} is missing")))
    }

    /// The present inputs of a variadic op (at least one).
    pub fn variadic(&self) -> Result<Vec<&'a Tensor>, ExecError> {
        let all: Vec<&Tensor> = self.inputs.iter().flatten().copied().collect();
        if all.is_empty() {
            return Err(self.err("needs at least one input"));
        }
        Ok(all)
    }

    /// The required float input at `slot`, read as f32.
    pub fn float_input(&self, slot: usize) -> Result<Cow<'a, [f32]>, ExecError> {
        let t = self.input(slot)?;
        f32_view(t).ok_or_else(|| {
            self.err(format!(
                "input {slot} must be a float tensor, got {}",
                t.dtype()
            ))
        })
    }

    /// The optional float input at `slot`, read as f32.
    pub fn opt_float_input(&self, slot: usize) -> Result<Option<Cow<'a, [f32]>>, ExecError> {
        match self.opt_input(slot) {
            Some(_) => self.float_input(slot).map(Some),
            None => Ok(None),
        }
    }

    /// The float type of input `slot` (the output type of most float kernels).
    pub fn float_dtype(&self, slot: usize) -> Result<DType, ExecError> {
        let dtype = self.input(slot)?.dtype();
        if dtype.is_float() {
            Ok(dtype)
        } else {
            Err(self.err(format!("input {slot} must be a float tensor, got {dtype}")))
        }
    }

    /// Every element of the optional integer input `slot` as i64 (for shape-like inputs:
    /// axes, pads, sizes, repeats...).
    pub fn opt_ints_input(&self, slot: usize) -> Result<Option<Vec<i64>>, ExecError> {
        let Some(t) = self.opt_input(slot) else {
            return Ok(None);
        };
        match t.dtype() {
            DType::I64
            | DType::I32
            | DType::I16
            | DType::I8
            | DType::U8
            | DType::U16
            | DType::U32
            | DType::U64 => Ok(Some(t.to_i64_vec())),
            other => Err(self.err(format!(
                "input {slot} must be an integer tensor, got {other}"
            ))),
        }
    }

    /// Every element of the required integer input `slot` as i64.
    pub fn ints_input(&self, slot: usize) -> Result<Vec<i64>, ExecError> {
        self.opt_ints_input(slot)?
            .ok_or_else(|| self.err(format!("required input {slot} is missing")))
    }

    /// The single element of scalar (or one-element) input `slot` as f64.
    pub fn scalar_input(&self, slot: usize) -> Result<Option<f64>, ExecError> {
        let Some(t) = self.opt_input(slot) else {
            return Ok(None);
        };
        if t.len() != 1 {
            return Err(self.err(format!(
                "input {slot} must hold one element, got shape {:?}",
                t.shape()
            )));
        }
        if t.dtype() == DType::String {
            return Err(self.err(format!("input {slot} must be numeric, got a string")));
        }
        Ok(Some(t.data().get_f64(0)))
    }

    /// The attribute `name`, if set.
    pub fn attr(&self, name: &str) -> Option<&'a Attr> {
        self.node.attrs.get(name)
    }

    /// Integer attribute `name`, or `default`; errors if set with another type.
    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64, ExecError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => a
                .as_int()
                .ok_or_else(|| self.err(format!("attribute `{name}` must be an integer"))),
        }
    }

    /// Float attribute `name`, or `default`; errors if set with a non-numeric type.
    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32, ExecError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => a
                .as_float()
                .ok_or_else(|| self.err(format!("attribute `{name}` must be a float"))),
        }
    }

    /// String attribute `name`, or `default`; errors if set with another type.
    pub fn attr_str(&self, name: &str, default: &'a str) -> Result<&'a str, ExecError> {
        match self.attr(name) {
            None => Ok(default),
            Some(a) => a
                .as_str()
                .ok_or_else(|| self.err(format!("attribute `{name}` must be a string"))),
        }
    }

    /// Integer-list attribute `name`, if set; errors if set with another type.
    pub fn attr_ints(&self, name: &str) -> Result<Option<Vec<i64>>, ExecError> {
        match self.attr(name) {
            None => Ok(None),
            Some(a) => a
                .as_ints()
                .map(Some)
                .ok_or_else(|| self.err(format!("attribute `{name}` must be integers"))),
        }
    }

    /// Float-list attribute `name`, if set; errors if set with another type.
    pub fn attr_floats(&self, name: &str) -> Result<Option<Vec<f32>>, ExecError> {
        match self.attr(name) {
            None => Ok(None),
            Some(Attr::Float(f)) => Ok(Some(vec![*f])),
            Some(a) => a
                .as_floats()
                .map(|f| Some(f.to_vec()))
                .ok_or_else(|| self.err(format!("attribute `{name}` must be floats"))),
        }
    }

    /// `axis` (possibly negative) normalised against `rank`.
    pub fn axis(&self, axis: i64, rank: usize) -> Result<usize, ExecError> {
        let r = rank as i64;
        let a = if axis < 0 { axis + r } else { axis };
        if a < 0 || a >= r {
            return Err(self.err(format!(
                "axis {axis} is out of range for a rank-{rank} tensor"
            )));
        }
        Ok(a as usize)
    }

    /// Several axes normalised against `rank`; errors on duplicates.
    pub fn axes(&self, axes: &[i64], rank: usize) -> Result<Vec<usize>, ExecError> {
        let mut out = Vec::with_capacity(axes.len());
        for &a in axes {
            let n = self.axis(a, rank)?;
            if out.contains(&n) {
                return Err(self.err(format!("axis {a} is repeated in {axes:?}")));
            }
            out.push(n);
        }
        Ok(out)
    }

    /// The element count of an output `shape` computed from user data, or an error when
    /// it overflows or exceeds what could ever be allocated.
    pub fn numel(&self, shape: &[usize]) -> Result<usize, ExecError> {
        const MAX_ELEMS: usize = (isize::MAX as usize) / 16;
        shape
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d))
            .filter(|&n| n <= MAX_ELEMS)
            .ok_or_else(|| self.err(format!("output shape {shape:?} is too large")))
    }

    /// A tensor of `shape` over `data`, or an error if the element count differs.
    pub fn tensor(&self, shape: Vec<usize>, data: rtq_ir::TensorData) -> Result<Tensor, ExecError> {
        Tensor::new(shape, data).map_err(|e| self.err(format!("output: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn node(attrs: BTreeMap<String, Attr>) -> Node {
        Node {
            name: "n".into(),
            attrs,
            ..rtq_test_support::node("Op", &[], 0)
        }
    }

    #[test]
    fn axes_normalise_and_reject_out_of_range() {
        let n = node(BTreeMap::new());
        let ctx = OpCtx::new(&n, &[]);
        assert_eq!(ctx.axis(-1, 4).unwrap(), 3);
        assert!(ctx.axis(0, 0).is_err());
        assert_eq!(ctx.numel(&[2, 3]).unwrap(), 6);
        assert!(ctx.numel(&[usize::MAX, 2]).is_err());
        assert!(ctx.numel(&[1 << 40, 1 << 30]).is_err());
        assert!(ctx.axis(4, 4).is_err());
        assert!(ctx.axis(-5, 4).is_err());
        assert!(ctx.axes(&[1, -3], 4).is_err());
        let msg = ctx.axis(7, 2).unwrap_err().to_string();
        assert!(msg.contains("`n` (Op)") && msg.contains("axis 7"), "{msg}");
    }

    #[test]
    fn typed_attribute_accessors_reject_wrong_types() {
        let mut attrs = BTreeMap::new();
        attrs.insert("mode".to_string(), Attr::Int(3));
        attrs.insert("alpha".to_string(), Attr::Float(0.5));
        let n = node(attrs);
        let ctx = OpCtx::new(&n, &[]);
        assert!(ctx.attr_str("mode", "x").is_err());
        assert_eq!(ctx.attr_int("mode", 0).unwrap(), 3);
        assert_eq!(ctx.attr_float("alpha", 0.0).unwrap(), 0.5);
        assert_eq!(ctx.attr_int("absent", 7).unwrap(), 7);
        assert!(ctx.input(0).is_err());
    }
}
