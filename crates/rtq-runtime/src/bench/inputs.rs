//! Synthetic inputs for benchmarks: zeros or seeded random data matching a model's
//! input descriptions, with a way to fix dynamic dimensions.

use crate::tensor::element_count;
use crate::{DataType, Engine, HostTensor, RuntimeError, TensorInfo};
use half::{bf16, f16};
use std::collections::BTreeMap;

/// What synthetic inputs hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputFill {
    /// All zeros.
    Zeros,
    /// Seeded pseudo-random values (the same seed gives the same data): floats uniform
    /// in [-1, 1), integers uniform in [0, 16), booleans fair coin flips. The TensorRT
    /// narrow types (FP8, INT4, FP4, E8M0) are zero-filled.
    Random {
        /// Generator seed.
        seed: u64,
    },
}

impl Default for InputFill {
    /// Random data with seed 0.
    fn default() -> Self {
        InputFill::Random { seed: 0 }
    }
}

/// How to shape and fill synthetic inputs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct InputSpec {
    /// Explicit shapes by input name (e.g. from `--shapes input:8x3x224x224`).
    pub shapes: BTreeMap<String, Vec<usize>>,
    /// Extent for a dynamic first (batch) dimension without an explicit shape.
    pub batch_size: Option<usize>,
    /// Content.
    pub fill: InputFill,
}

/// SplitMix64: a small, well-distributed 64-bit generator (deterministic per seed).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [-1, 1).
    fn next_signed_unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }

    /// Uniform in [0, 16).
    fn next_small(&mut self) -> u64 {
        self.next_u64() >> 60
    }
}

/// The concrete shape used for `info`: an explicit shape, else its dimensions with each
/// dynamic one taken from `preferred` (e.g. a TensorRT profile's opt shape), the batch
/// size (first dimension only) or 1.
pub fn resolve_shape(
    info: &TensorInfo,
    spec: &InputSpec,
    preferred: Option<&[usize]>,
) -> Result<Vec<usize>, RuntimeError> {
    let declared = info.known_shape()?;
    if let Some(shape) = spec.shapes.get(&info.name) {
        if shape.len() != declared.len() {
            return Err(RuntimeError::tensor(
                &info.name,
                format!(
                    "shape {shape:?} has rank {}, the model declares {info}",
                    shape.len()
                ),
            ));
        }
        for (axis, (&want, &got)) in declared.iter().zip(shape).enumerate() {
            if want >= 0 && want as usize != got {
                return Err(RuntimeError::tensor(
                    &info.name,
                    format!("shape {shape:?}: dimension {axis} must be {want} ({info})"),
                ));
            }
        }
        return Ok(shape.clone());
    }
    let preferred = preferred.filter(|p| p.len() == declared.len());
    Ok(declared
        .iter()
        .enumerate()
        .map(|(axis, &d)| {
            if d >= 0 {
                d as usize
            } else if let (0, Some(batch)) = (axis, spec.batch_size) {
                batch
            } else {
                preferred.map_or(1, |p| p[axis])
            }
        })
        .collect())
}

/// Fills a tensor of `dtype` and `shape` as `fill` says.
fn make_tensor(
    name: &str,
    dtype: DataType,
    shape: Vec<usize>,
    rng: Option<&mut SplitMix64>,
) -> Result<HostTensor, RuntimeError> {
    let n = element_count(name, &shape)?;
    let Some(rng) = rng else {
        return HostTensor::zeros(name, dtype, shape);
    };
    let mut bytes = Vec::with_capacity(dtype.byte_len(n));
    for _ in 0..n {
        match dtype {
            DataType::F32 => bytes.extend((rng.next_signed_unit() as f32).to_le_bytes()),
            DataType::F64 => bytes.extend(rng.next_signed_unit().to_le_bytes()),
            DataType::F16 => bytes.extend(f16::from_f64(rng.next_signed_unit()).to_le_bytes()),
            DataType::BF16 => bytes.extend(bf16::from_f64(rng.next_signed_unit()).to_le_bytes()),
            DataType::I8 => bytes.push(rng.next_small() as u8),
            DataType::U8 => bytes.push(rng.next_small() as u8),
            DataType::I16 => bytes.extend((rng.next_small() as i16).to_le_bytes()),
            DataType::U16 => bytes.extend((rng.next_small() as u16).to_le_bytes()),
            DataType::I32 => bytes.extend((rng.next_small() as i32).to_le_bytes()),
            DataType::U32 => bytes.extend((rng.next_small() as u32).to_le_bytes()),
            DataType::I64 => bytes.extend((rng.next_small() as i64).to_le_bytes()),
            DataType::U64 => bytes.extend(rng.next_small().to_le_bytes()),
            DataType::Bool => bytes.push((rng.next_u64() >> 63) as u8),
            DataType::Fp8E4M3 | DataType::Int4 | DataType::Fp4E2M1 | DataType::E8M0 => {
                return HostTensor::zeros(name, dtype, shape)
            }
        }
    }
    HostTensor::new(name, dtype, shape, bytes)
}

/// Synthetic inputs for `infos`; `preferred(name)` supplies shapes for dynamic inputs
/// (see [`resolve_shape`]).
pub fn make_inputs_for(
    infos: &[TensorInfo],
    spec: &InputSpec,
    preferred: impl Fn(&str) -> Option<Vec<usize>>,
) -> Result<Vec<HostTensor>, RuntimeError> {
    for name in spec.shapes.keys() {
        if !infos.iter().any(|i| &i.name == name) {
            let known: Vec<&str> = infos.iter().map(|i| i.name.as_str()).collect();
            return Err(RuntimeError::tensor(
                name,
                format!(
                    "a shape was given, but the model has no such input (inputs: {})",
                    known.join(", ")
                ),
            ));
        }
    }
    let mut rng = match spec.fill {
        InputFill::Zeros => None,
        InputFill::Random { seed } => Some(SplitMix64(seed)),
    };
    infos
        .iter()
        .map(|info| {
            let shape = resolve_shape(info, spec, preferred(&info.name).as_deref())?;
            make_tensor(&info.name, info.dtype, shape, rng.as_mut())
        })
        .collect()
}

/// Synthetic inputs for every input of `engine` (dynamic dimensions from `spec`, the
/// engine's preferred shapes, or 1).
pub fn make_inputs(engine: &Engine, spec: &InputSpec) -> Result<Vec<HostTensor>, RuntimeError> {
    make_inputs_for(engine.inputs(), spec, |name| {
        engine.preferred_input_shape(name)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn infos() -> Vec<TensorInfo> {
        vec![
            TensorInfo::new("images", DataType::F32, vec![-1, 3, -1, -1]),
            TensorInfo::new("ids", DataType::I64, vec![-1, 4]),
            TensorInfo::new("flag", DataType::Bool, vec![]),
        ]
    }

    #[test]
    fn dynamic_dims_come_from_shapes_batch_preferred_or_one() {
        let infos = infos();
        let spec = InputSpec {
            shapes: [("ids".to_string(), vec![7, 4])].into_iter().collect(),
            batch_size: Some(8),
            fill: InputFill::Zeros,
        };
        let preferred = |name: &str| (name == "images").then(|| vec![2, 3, 224, 320]);
        let made = make_inputs_for(&infos, &spec, preferred).unwrap();
        assert_eq!(made[0].shape(), &[8, 3, 224, 320]);
        assert_eq!(made[1].shape(), &[7, 4]);
        assert_eq!(made[2].shape(), &[] as &[usize]);
        assert!(made[0].bytes().iter().all(|&b| b == 0));
        let plain = make_inputs_for(&infos, &InputSpec::default(), |_| None).unwrap();
        assert_eq!(plain[0].shape(), &[1, 3, 1, 1]);
    }

    #[test]
    fn explicit_shapes_are_checked() {
        let infos = infos();
        let bad = |shapes: &[(&str, Vec<usize>)]| {
            let spec = InputSpec {
                shapes: shapes
                    .iter()
                    .map(|(n, s)| (n.to_string(), s.clone()))
                    .collect(),
                ..Default::default()
            };
            make_inputs_for(&infos, &spec, |_| None)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(&[("ids", vec![2, 5])]),
            "tensor `ids`: shape [2, 5]: dimension 1 must be 4 (ids: int64[?,4])"
        );
        assert_eq!(
            bad(&[("ids", vec![2])]),
            "tensor `ids`: shape [2] has rank 1, the model declares ids: int64[?,4]"
        );
        assert_eq!(
            bad(&[("nope", vec![1])]),
            "tensor `nope`: a shape was given, but the model has no such input (inputs: images, ids, flag)"
        );
    }

    #[test]
    fn random_fill_is_seeded_and_in_range() {
        let infos = infos();
        let spec = |seed| InputSpec {
            fill: InputFill::Random { seed },
            batch_size: Some(4),
            ..Default::default()
        };
        let a = make_inputs_for(&infos, &spec(7), |_| None).unwrap();
        let b = make_inputs_for(&infos, &spec(7), |_| None).unwrap();
        let c = make_inputs_for(&infos, &spec(8), |_| None).unwrap();
        assert_eq!(a, b);
        assert_ne!(a[0], c[0]);
        let floats = a[0].to_f32_vec().unwrap();
        assert!(floats.iter().all(|v| (-1.0..1.0).contains(v)));
        assert!(floats.iter().any(|&v| v < -0.1) && floats.iter().any(|&v| v > 0.1));
        let ids = a[1].to_i64_vec().unwrap();
        assert_eq!(ids.len(), 16);
        assert!(ids.iter().all(|v| (0..16).contains(v)));
        assert!(
            ids.iter().any(|&v| v != ids[0]),
            "ids are all equal: {ids:?}"
        );
        assert!(a[2].bytes()[0] <= 1);
    }
}
