//! The CPU backend (feature `cpu`): ONNX models through rtq's frontend and CPU executor.

use crate::backend::{BackendKind, InferBackend};
use crate::validate::match_inputs;
use crate::{DataType, HostTensor, LayerTime, RuntimeError, TensorInfo};
use rtq_exec::Plan;
use rtq_ir::{DType, Dim, Graph, Tensor};
use std::path::{Path, PathBuf};

/// The runtime's type for an IR element type (`None` for strings).
fn from_ir(dtype: DType) -> Option<DataType> {
    Some(match dtype {
        DType::F32 => DataType::F32,
        DType::F16 => DataType::F16,
        DType::BF16 => DataType::BF16,
        DType::F64 => DataType::F64,
        DType::I8 => DataType::I8,
        DType::U8 => DataType::U8,
        DType::I16 => DataType::I16,
        DType::U16 => DataType::U16,
        DType::I32 => DataType::I32,
        DType::U32 => DataType::U32,
        DType::I64 => DataType::I64,
        DType::U64 => DataType::U64,
        DType::Bool => DataType::Bool,
        DType::F8E4M3 => DataType::Fp8E4M3,
        DType::I4 => DataType::Int4,
        DType::String => return None,
    })
}

/// The IR element type for a runtime type (`None` for TensorRT-only narrow types; FP8
/// E4M3 is ONNX's `FLOAT8E4M3FN` and INT4 ONNX's `INT4`, packed the same way).
fn to_ir(dtype: DataType) -> Option<DType> {
    Some(match dtype {
        DataType::F32 => DType::F32,
        DataType::F16 => DType::F16,
        DataType::BF16 => DType::BF16,
        DataType::F64 => DType::F64,
        DataType::I8 => DType::I8,
        DataType::U8 => DType::U8,
        DataType::I16 => DType::I16,
        DataType::U16 => DType::U16,
        DataType::I32 => DType::I32,
        DataType::U32 => DType::U32,
        DataType::I64 => DType::I64,
        DataType::U64 => DType::U64,
        DataType::Bool => DType::Bool,
        DataType::Fp8E4M3 => DType::F8E4M3,
        DataType::Int4 => DType::I4,
        DataType::Fp4E2M1 | DataType::E8M0 => return None,
    })
}

/// Describes graph value `id` as a [`TensorInfo`].
fn describe(graph: &Graph, id: rtq_ir::ValueId) -> Result<TensorInfo, RuntimeError> {
    let value = graph.value(id);
    let dtype = value.dtype.ok_or_else(|| {
        RuntimeError::tensor(&value.name, "the model does not declare its element type")
    })?;
    let dtype = from_ir(dtype).ok_or_else(|| {
        RuntimeError::tensor(
            &value.name,
            "string tensors are not supported by rtq-runtime",
        )
    })?;
    let shape = value.shape.as_ref().map(|dims| {
        dims.iter()
            .map(|d| match d {
                Dim::Known(n) => *n as i64,
                Dim::Sym(_) => -1,
            })
            .collect()
    });
    Ok(TensorInfo {
        name: value.name.clone(),
        dtype,
        shape,
    })
}

/// An ONNX model prepared for rtq's CPU executor.
pub(crate) struct CpuBackend {
    plan: Plan,
    inputs: Vec<TensorInfo>,
    outputs: Vec<TensorInfo>,
    source: PathBuf,
    nodes: usize,
    /// Nodes lowered to integer kernels at load.
    integer_ops: usize,
}

impl std::fmt::Debug for CpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuBackend")
            .field("source", &self.source)
            .field("inputs", &self.inputs)
            .field("outputs", &self.outputs)
            .finish()
    }
}

/// rtq's standard optimisation passes (as `rtq compile` runs them, like onnxruntime's
/// graph optimisations at session creation): identity removal, constant folding with
/// no size limit (the result is held once, as the executor would hold it at every
/// run), BatchNormalization and per-channel Mul/Add folded into the Conv before them,
/// dead-code elimination.
/// A graph with Q/DQ keeps its ops apart from the folding, so that running it with
/// float-emulated Q/DQ (`integer_kernels` off) computes what the model states op by op.
fn optimize(graph: &mut Graph) -> Result<(), rtq_passes::PassError> {
    let quantized = graph
        .nodes()
        .any(|(_, n)| matches!(n.op_type.as_str(), "QuantizeLinear" | "DequantizeLinear"));
    let disabled = match quantized {
        true => vec![
            rtq_passes::FoldBatchNorm::NAME.to_string(),
            rtq_passes::FoldChannelAffine::NAME.to_string(),
        ],
        false => Vec::new(),
    };
    let options = rtq_passes::OptimizeOptions {
        fold_size_limit: usize::MAX,
        disabled,
        ..Default::default()
    };
    rtq_passes::optimize(graph, &options).map(|_| ())
}

impl CpuBackend {
    /// Loads the ONNX model at `path` (external data next to it) and plans it.
    ///
    /// Nodes whose inputs are all constants are computed once here, not at every run
    /// (models that build their weights with `ConstantOfShape` or reshape constant
    /// tensors at run time would otherwise redo it per inference). With
    /// `integer_kernels`, INT8 Q/DQ patterns become integer ops first (see
    /// [`rtq_exec::lower_to_integer`]) where the CPU has VNNI or AVX2.
    pub(crate) fn load(path: &Path, integer_kernels: bool) -> Result<CpuBackend, RuntimeError> {
        let failed = |message: String| RuntimeError::ModelLoad {
            path: path.to_path_buf(),
            message,
        };
        let mut graph = rtq_frontend::load_model(path).map_err(|e| failed(e.to_string()))?;
        // Element types and shapes first: the integer ops keep those of the values they
        // produce, which the fusions below need (a Q/DQ model often declares none).
        rtq_passes::infer_shapes(&mut graph).map_err(|e| failed(e.to_string()))?;
        let isa = rtq_exec::igemm::Isa::detect();
        let integer_ops = if integer_kernels && isa != rtq_exec::igemm::Isa::Portable {
            rtq_exec::lower_to_integer(&mut graph, isa).len()
        } else {
            0
        };
        optimize(&mut graph).map_err(|e| failed(e.to_string()))?;
        // After shape inference (fusion needs the element types), each fusion followed
        // by removing what it left.
        use rtq_passes::Pass;
        let dce = |graph: &mut Graph| {
            rtq_passes::DeadCodeElimination
                .run(graph)
                .map(|_| ())
                .map_err(|e| failed(e.to_string()))
        };
        if rtq_exec::fuse_activations(&mut graph) > 0 {
            dce(&mut graph)?;
        }
        // Quantization ahead of Concat and nearest Resize, so that the chains computing
        // their inputs end in it.
        rtq_exec::hoist_quantize(&mut graph);
        if rtq_exec::fuse_chains(&mut graph) > 0 {
            dce(&mut graph)?;
        }
        // Then integer convolutions take the quantizing chains after them.
        if rtq_exec::fuse_conv_tails(&mut graph) > 0 {
            dce(&mut graph)?;
        }
        let mut backend = CpuBackend::from_graph(&graph, path)?;
        backend.integer_ops = integer_ops;
        Ok(backend)
    }

    /// Plans an IR graph; `source` names it in messages.
    ///
    /// Graph inputs with a default (an initializer of the same name) are not listed as
    /// inputs: the executor uses the default.
    pub(crate) fn from_graph(graph: &Graph, source: &Path) -> Result<CpuBackend, RuntimeError> {
        let plan = Plan::new(graph).map_err(|e| RuntimeError::ModelLoad {
            path: source.to_path_buf(),
            message: e.to_string(),
        })?;
        let inputs = graph
            .inputs
            .iter()
            .filter(|&&id| graph.value(id).constant.is_none())
            .map(|&id| describe(graph, id))
            .collect::<Result<Vec<_>, _>>()?;
        let outputs = graph
            .outputs
            .iter()
            .map(|&id| describe(graph, id))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(CpuBackend {
            plan,
            inputs,
            outputs,
            source: source.to_path_buf(),
            nodes: graph.node_count(),
            integer_ops: 0,
        })
    }

    fn execution_error(&self, message: String) -> RuntimeError {
        RuntimeError::Execution {
            model: self.source.display().to_string(),
            message,
        }
    }
}

impl InferBackend for CpuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Cpu
    }

    fn description(&self) -> String {
        if self.integer_ops > 0 {
            format!(
                "rtq CPU executor ({} nodes, {} on {} integer kernels)",
                self.nodes,
                self.integer_ops,
                rtq_exec::igemm::Isa::detect().name()
            )
        } else {
            format!("rtq CPU executor ({} nodes)", self.nodes)
        }
    }

    fn inputs(&self) -> &[TensorInfo] {
        &self.inputs
    }

    fn outputs(&self) -> &[TensorInfo] {
        &self.outputs
    }

    fn infer(&self, inputs: &[HostTensor]) -> Result<Vec<HostTensor>, RuntimeError> {
        // Inputs, intermediates and outputs in the plan's kept buffers: a warm engine
        // allocates only the bytes it returns.
        self.plan.with_buffers(|| {
            let feeds = self.feeds(inputs)?;
            let results = self
                .plan
                .run(&feeds)
                .map_err(|e| self.execution_error(e.to_string()))?;
            for (_, t) in feeds {
                rtq_exec::recycle_tensor(t);
            }
            self.outputs_of(results)
        })
    }

    fn profile(&self, inputs: &[HostTensor]) -> Result<Option<Vec<LayerTime>>, RuntimeError> {
        let feeds = self.feeds(inputs)?;
        let (_, times) = self
            .plan
            .run_profiled(&feeds)
            .map_err(|e| self.execution_error(e.to_string()))?;
        Ok(Some(
            self.plan
                .nodes()
                .zip(times)
                .map(|(node, t)| LayerTime {
                    name: node.name.clone(),
                    op: if node.domain.is_empty() {
                        node.op_type.clone()
                    } else {
                        format!("{}::{}", node.domain, node.op_type)
                    },
                    ms: t.as_secs_f64() * 1e3,
                })
                .collect(),
        ))
    }
}

impl CpuBackend {
    /// `inputs` as the executor's feeds, in the model's order.
    fn feeds(&self, inputs: &[HostTensor]) -> Result<Vec<(String, Tensor)>, RuntimeError> {
        match_inputs(&self.inputs, inputs)?
            .into_iter()
            .map(|t| {
                let dtype = to_ir(t.dtype()).ok_or_else(|| {
                    RuntimeError::tensor(
                        &t.name,
                        format!("{} tensors cannot run on the CPU", t.dtype()),
                    )
                })?;
                let tensor = rtq_exec::tensor_from_le_bytes(dtype, t.shape().to_vec(), t.bytes())
                    .map_err(|e| RuntimeError::tensor(&t.name, e.to_string()))?;
                Ok((t.name.clone(), tensor))
            })
            .collect()
    }

    /// The executor's `results` as host tensors named after the graph outputs.
    fn outputs_of(&self, results: Vec<Tensor>) -> Result<Vec<HostTensor>, RuntimeError> {
        let names = self.plan.output_names();
        if results.len() != names.len() {
            return Err(self.execution_error(format!(
                "the executor returned {} outputs for {} graph outputs",
                results.len(),
                names.len()
            )));
        }
        names
            .into_iter()
            .zip(results)
            .map(|(name, tensor)| {
                let dtype = from_ir(tensor.dtype()).ok_or_else(|| {
                    RuntimeError::tensor(&name, "string outputs are not supported by rtq-runtime")
                })?;
                let shape = tensor.shape().to_vec();
                HostTensor::new(name, dtype, shape, rtq_exec::into_le_bytes(tensor))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn relu_graph() -> Graph {
        let mut g = Graph::new("g", 13);
        let x = g.add_input("x", DType::F32, vec![Dim::Sym("N".into()), Dim::Known(3)]);
        let y = g.add_value(
            "y",
            Some(DType::F32),
            Some(vec![Dim::Sym("N".into()), Dim::Known(3)]),
        );
        g.add_node("relu", "Relu", vec![Some(x)], vec![y], BTreeMap::new());
        g.outputs.push(y);
        g
    }

    #[test]
    fn types_map_both_ways() {
        for dt in DataType::ALL {
            if let Some(ir) = to_ir(dt) {
                assert_eq!(from_ir(ir), Some(dt));
            }
        }
        assert_eq!(from_ir(DType::String), None);
        assert_eq!(to_ir(DataType::Fp8E4M3), Some(DType::F8E4M3));
        assert_eq!(to_ir(DataType::Int4), Some(DType::I4));
        assert_eq!(to_ir(DataType::Fp4E2M1), None);
    }

    /// `y = DequantizeLinear(q, scale)` and `codes = Identity(q)` on a 3-element input
    /// `q` of `dtype`, planned at `opset`.
    fn dequantize_and_pass_through(dtype: DType, opset: i64, scale: f32) -> CpuBackend {
        let mut g = Graph::new("g", opset);
        let q = g.add_input("q", dtype, vec![Dim::Known(3)]);
        let s = g.add_constant("s", Tensor::scalar_f32(scale));
        let y = g.add_value("y", Some(DType::F32), Some(vec![Dim::Known(3)]));
        let c = g.add_value("codes", Some(dtype), Some(vec![Dim::Known(3)]));
        g.add_node(
            "dq",
            "DequantizeLinear",
            vec![Some(q), Some(s)],
            vec![y],
            BTreeMap::new(),
        );
        g.add_node("id", "Identity", vec![Some(q)], vec![c], BTreeMap::new());
        g.outputs.extend([y, c]);
        CpuBackend::from_graph(&g, Path::new("q.onnx")).unwrap()
    }

    #[test]
    fn fp8_tensors_cross_the_host_boundary_as_bytes() {
        // FP8 codes in, DequantizeLinear, float out; and the codes through Identity.
        let backend = dequantize_and_pass_through(DType::F8E4M3, 19, 2.0);
        assert_eq!(backend.inputs()[0].dtype, DataType::Fp8E4M3);
        // 1.0, -0.5, 448.
        let codes = vec![0x38, 0xB0, 0x7E];
        let x = HostTensor::new("q", DataType::Fp8E4M3, vec![3], codes.clone()).unwrap();
        let out = backend.infer(&[x]).unwrap();
        assert_eq!(out[0].to_f32_vec().unwrap(), vec![2.0, -1.0, 896.0]);
        assert_eq!(out[1].dtype(), DataType::Fp8E4M3);
        assert_eq!(out[1].bytes(), codes.as_slice());
        assert_eq!(out[1].to_f32_vec().unwrap(), vec![1.0, -0.5, 448.0]);
    }

    #[test]
    fn int4_tensors_cross_the_host_boundary_packed() {
        // Three INT4 values in, DequantizeLinear, float out; and the packed bytes
        // through Identity (an odd count: the last high nibble is padding).
        let backend = dequantize_and_pass_through(DType::I4, 21, 0.5);
        assert_eq!(backend.inputs()[0].dtype, DataType::Int4);
        // -1, -8 in the first byte, 7 in the second.
        let packed = vec![0x8F, 0x07];
        let x = HostTensor::new("q", DataType::Int4, vec![3], packed.clone()).unwrap();
        let out = backend.infer(&[x]).unwrap();
        assert_eq!(out[0].to_f32_vec().unwrap(), vec![-0.5, -4.0, 3.5]);
        assert_eq!(out[1].dtype(), DataType::Int4);
        assert_eq!(out[1].bytes(), packed.as_slice());
        assert_eq!(out[1].to_f32_vec().unwrap(), vec![-1.0, -8.0, 7.0]);
        // A byte short is refused, naming the input.
        let short = HostTensor::new("q", DataType::Int4, vec![4], vec![0x11]);
        assert!(short.is_err());
    }

    #[test]
    fn runs_a_graph_and_describes_its_io() {
        let backend = CpuBackend::from_graph(&relu_graph(), Path::new("relu.onnx")).unwrap();
        assert_eq!(
            backend.inputs(),
            &[TensorInfo::new("x", DataType::F32, vec![-1, 3])]
        );
        assert_eq!(
            backend.outputs(),
            &[TensorInfo::new("y", DataType::F32, vec![-1, 3])]
        );
        let x = HostTensor::from_f32("x", vec![2, 3], &[-1.0, 2.0, -3.0, 4.0, 0.0, -0.5]).unwrap();
        let out = backend.infer(&[x]).unwrap();
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].name, "y");
        assert_eq!(out[0].shape(), &[2, 3]);
        assert_eq!(
            out[0].to_f32_vec().unwrap(),
            vec![0.0, 2.0, 0.0, 4.0, 0.0, 0.0]
        );
        assert_eq!(backend.last_device_time_ms(), None);
    }
}
