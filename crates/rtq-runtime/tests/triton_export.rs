//! Triton export: exact config.pbtxt content and the repository layout.

#![cfg(feature = "triton")]

use rtq_runtime::triton::{
    render_config, write_triton_repository, DynamicBatching, InstanceKind, ModelSource,
    TritonModel, TritonOptions, TritonPlatform,
};
use rtq_runtime::{DataType, TensorInfo};

fn detector_io() -> (Vec<TensorInfo>, Vec<TensorInfo>) {
    (
        vec![
            TensorInfo::new("images", DataType::F16, vec![-1, 3, 640, 640]),
            TensorInfo::new("scale", DataType::F32, vec![-1]),
        ],
        vec![
            TensorInfo::new("boxes", DataType::F32, vec![-1, -1, 4]),
            TensorInfo::new("labels", DataType::I64, vec![-1, -1]),
        ],
    )
}

fn plan_model<'a>(inputs: &'a [TensorInfo], outputs: &'a [TensorInfo]) -> TritonModel<'a> {
    TritonModel {
        platform: TritonPlatform::TensorRtPlan,
        source: ModelSource::Bytes(b"plan bytes"),
        inputs,
        outputs,
        max_model_batch: Some(16),
    }
}

const BATCHED_CONFIG: &str = r#"name: "detector_int8"
platform: "tensorrt_plan"
max_batch_size: 8
input [
  {
    name: "images"
    data_type: TYPE_FP16
    dims: [ 3, 640, 640 ]
  },
  {
    name: "scale"
    data_type: TYPE_FP32
    dims: [ 1 ]
    reshape: { shape: [ ] }
  }
]
output [
  {
    name: "boxes"
    data_type: TYPE_FP32
    dims: [ -1, 4 ]
  },
  {
    name: "labels"
    data_type: TYPE_INT64
    dims: [ -1 ]
  }
]
instance_group [
  {
    count: 2
    kind: KIND_GPU
  }
]
dynamic_batching {
  preferred_batch_size: [ 4, 8 ]
  max_queue_delay_microseconds: 100
}
"#;

fn batched_options() -> TritonOptions {
    TritonOptions {
        max_batch_size: 8,
        instance_count: 2,
        kind: InstanceKind::Gpu,
        dynamic_batching: Some(DynamicBatching {
            preferred_batch_sizes: vec![4, 8],
            max_queue_delay_us: 100,
        }),
        version: 1,
    }
}

#[test]
fn tensorrt_config_with_dynamic_batching() {
    let (inputs, outputs) = detector_io();
    let config = render_config(
        "detector_int8",
        &plan_model(&inputs, &outputs),
        &batched_options(),
    )
    .unwrap();
    assert_eq!(config, BATCHED_CONFIG);
}

#[test]
fn onnx_config_without_batching_keeps_full_shapes() {
    let inputs = vec![TensorInfo::new(
        "input:0",
        DataType::F32,
        vec![1, 3, 224, 224],
    )];
    let outputs = vec![
        TensorInfo::new("logits", DataType::F32, vec![1, 1000]),
        TensorInfo::new("valid", DataType::Bool, vec![1]),
    ];
    let model = TritonModel {
        platform: TritonPlatform::OnnxRuntime,
        source: ModelSource::Bytes(b"onnx"),
        inputs: &inputs,
        outputs: &outputs,
        max_model_batch: None,
    };
    let options = TritonOptions {
        kind: InstanceKind::Cpu,
        instance_count: 4,
        ..Default::default()
    };
    let expected = r#"name: "resnet50"
platform: "onnxruntime_onnx"
max_batch_size: 0
input [
  {
    name: "input:0"
    data_type: TYPE_FP32
    dims: [ 1, 3, 224, 224 ]
  }
]
output [
  {
    name: "logits"
    data_type: TYPE_FP32
    dims: [ 1, 1000 ]
  },
  {
    name: "valid"
    data_type: TYPE_BOOL
    dims: [ 1 ]
  }
]
instance_group [
  {
    count: 4
    kind: KIND_CPU
  }
]
"#;
    assert_eq!(
        render_config("resnet50", &model, &options).unwrap(),
        expected
    );
}

#[test]
fn writes_the_repository_layout() {
    let repo = tempfile::tempdir().unwrap();
    let (inputs, outputs) = detector_io();
    let plan = vec![7u8; 4096];
    let model = TritonModel {
        source: ModelSource::Bytes(&plan),
        ..plan_model(&inputs, &outputs)
    };
    let options = TritonOptions {
        version: 3,
        ..batched_options()
    };
    let layout = write_triton_repository(repo.path(), "detector_int8", &model, &options).unwrap();
    assert_eq!(layout.model_dir, repo.path().join("detector_int8"));
    assert_eq!(
        layout.config_path,
        repo.path().join("detector_int8/config.pbtxt")
    );
    assert_eq!(
        layout.model_path,
        repo.path().join("detector_int8/3/model.plan")
    );
    assert_eq!(std::fs::read(&layout.model_path).unwrap(), plan);
    assert_eq!(
        std::fs::read_to_string(&layout.config_path).unwrap(),
        BATCHED_CONFIG
    );

    // An ONNX model copied from a file.
    let onnx = repo.path().join("src.onnx");
    std::fs::write(&onnx, b"onnx bytes").unwrap();
    let model = TritonModel {
        platform: TritonPlatform::OnnxRuntime,
        source: ModelSource::File(&onnx),
        ..plan_model(&inputs, &outputs)
    };
    let layout =
        write_triton_repository(repo.path(), "det_onnx", &model, &batched_options()).unwrap();
    assert_eq!(layout.model_path, repo.path().join("det_onnx/1/model.onnx"));
    assert_eq!(std::fs::read(&layout.model_path).unwrap(), b"onnx bytes");
    let config = std::fs::read_to_string(&layout.config_path).unwrap();
    assert!(
        config.starts_with("name: \"det_onnx\"\nplatform: \"onnxruntime_onnx\"\n"),
        "{config}"
    );
}

fn error(model: &TritonModel<'_>, options: &TritonOptions) -> String {
    render_config("m", model, options).unwrap_err().to_string()
}

#[test]
fn rejects_configurations_triton_would_refuse() {
    let (inputs, outputs) = detector_io();
    let model = plan_model(&inputs, &outputs);

    let fixed = vec![TensorInfo::new("x", DataType::F32, vec![1, 3])];
    let fixed_model = TritonModel {
        inputs: &fixed,
        ..model
    };
    assert_eq!(
        error(&fixed_model, &batched_options()),
        "Triton model `m`: tensor `x`: has a fixed first dimension 1 (x: float32[1,3]); Triton \
         batching (max_batch_size 8) needs a dynamic batch dimension: rebuild with a dynamic \
         batch or set max_batch_size 0"
    );

    let fp8 = vec![TensorInfo::new("q", DataType::Fp8E4M3, vec![-1, 8])];
    let fp8_model = TritonModel {
        outputs: &fp8,
        ..model
    };
    assert_eq!(
        error(&fp8_model, &batched_options()),
        "Triton model `m`: tensor `q`: Triton has no data type for fp8e4m3"
    );

    let too_big = TritonOptions {
        max_batch_size: 32,
        dynamic_batching: None,
        ..batched_options()
    };
    assert_eq!(
        error(&model, &too_big),
        "Triton model `m`: max_batch_size 32 exceeds the largest batch the model accepts (16)"
    );

    let bad_preferred = TritonOptions {
        dynamic_batching: Some(DynamicBatching {
            preferred_batch_sizes: vec![4, 9],
            max_queue_delay_us: 0,
        }),
        ..batched_options()
    };
    assert_eq!(
        error(&model, &bad_preferred),
        "Triton model `m`: preferred batch size 9 is outside 1..=8"
    );

    let unbatched_dynamic = TritonOptions {
        max_batch_size: 0,
        ..batched_options()
    };
    assert_eq!(
        error(&model, &unbatched_dynamic),
        "Triton model `m`: dynamic batching needs max_batch_size > 0"
    );

    let cpu_plan = TritonOptions {
        kind: InstanceKind::Cpu,
        ..batched_options()
    };
    assert_eq!(
        error(&model, &cpu_plan),
        "Triton model `m`: TensorRT plans run only on GPUs (KIND_GPU)"
    );

    let unknown = vec![TensorInfo {
        name: "y".into(),
        dtype: DataType::F32,
        shape: None,
    }];
    let unknown_model = TritonModel {
        outputs: &unknown,
        ..model
    };
    assert_eq!(
        error(&unknown_model, &batched_options()),
        "Triton model `m`: tensor `y`: the model does not declare its shape; Triton needs dims"
    );

    let dup = vec![TensorInfo::new("images", DataType::F32, vec![-1])];
    let dup_model = TritonModel {
        outputs: &dup,
        ..model
    };
    assert_eq!(
        error(&dup_model, &batched_options()),
        "Triton model `m`: tensor name `images` is used twice"
    );

    let err = render_config("../escape", &model, &batched_options()).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("Triton model `../escape`: model names must"),
        "{err}"
    );

    let zero = TritonOptions {
        instance_count: 0,
        ..batched_options()
    };
    assert_eq!(
        error(&model, &zero),
        "Triton model `m`: instance count must be at least 1"
    );
}

#[test]
fn names_are_escaped_in_the_config() {
    let inputs = vec![TensorInfo::new("a\"b", DataType::F32, vec![2])];
    let outputs = vec![TensorInfo::new("c\\d", DataType::F32, vec![2])];
    let model = TritonModel {
        platform: TritonPlatform::TensorRtPlan,
        source: ModelSource::Bytes(b"x"),
        inputs: &inputs,
        outputs: &outputs,
        max_model_batch: None,
    };
    let config = render_config("m", &model, &TritonOptions::default()).unwrap();
    assert!(config.contains("    name: \"a\\\"b\"\n"), "{config}");
    assert!(config.contains("    name: \"c\\\\d\"\n"), "{config}");
}
