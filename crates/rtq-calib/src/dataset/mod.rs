//! Calibration data: a directory of `.npy`, `.npz` and image files, each
//! loaded into one or more samples feeding every model input.
//!
//! * `.npy` feeds the model's single input. If the input's leading (batch)
//!   dim is fixed to `B` and the array's leading dim is `k * B`, the array is
//!   split into `k` samples; otherwise its shape must match (dynamic dims match
//!   anything; an array lacking a leading batch dim of 1 gets one).
//! * `.npz` maps array names to input names: every input must be present and
//!   no other array may be; all arrays must split into the same number of samples.
//! * `.png`, `.jpg`, `.jpeg` feed the single (float, rank-4) input: see [`DataOptions`].
//! * A sample pack (`.rtqpack`, see [`PackWriter`]) given in place of the directory
//!   holds `.npy`/`.npz` samples back to back, each read as its own file would be.
//!
//! Arrays are converted to the input's element type only when no element
//! changes value (e.g. float64 holding float32-exact values). NaN or Inf in
//! loaded data is an error. Every error names the file and the input.

mod convert;
mod images;
mod npy;
mod options;
mod pack;
mod spec;

pub use options::{DataOptions, Layout};
pub use pack::{PackWriter, PackedKind, PACK_EXTENSION};
pub use spec::InputSpec;

use crate::CalibError;
use convert::{convert_lossless, count_non_finite, ConvertError};
use pack::Pack;
use rtq_ir::Tensor;
use spec::{fit, split_batches, Fit};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// One sample: a tensor for every model input, as `(input name, tensor)` in input order.
pub type Sample = Vec<(String, Tensor)>;

/// The kinds of file a calibration set reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FileKind {
    Npy,
    Npz,
    Image,
}

impl FileKind {
    /// The kind for a file name's extension (any case), if usable.
    fn of(path: &Path) -> Option<FileKind> {
        let ext = path.extension()?.to_str()?.to_ascii_lowercase();
        match ext.as_str() {
            "npy" => Some(FileKind::Npy),
            "npz" => Some(FileKind::Npz),
            "png" | "jpg" | "jpeg" => Some(FileKind::Image),
            _ => None,
        }
    }
}

/// The usable files of a calibration-data directory, sorted by name (or the
/// samples of a pack, named `<pack>/calibration sample <i>`).
#[derive(Debug, Clone)]
pub struct CalibrationSet {
    dir: PathBuf,
    files: Vec<PathBuf>,
    /// The pack the set reads, when it was opened on one.
    pack: Option<Arc<Pack>>,
    options: DataOptions,
    /// Set from outside to stop every pass over the data at its next file.
    cancel: Option<Arc<AtomicBool>>,
}

impl CalibrationSet {
    /// Lists the `.npy`, `.npz`, `.png`, `.jpg` and `.jpeg` files directly in
    /// `dir` (other entries are ignored), sorted by file name; or, when `dir` is a
    /// `.rtqpack` file, reads the pack's index.
    ///
    /// Fails, naming the directory, if it is missing, not a directory, or holds
    /// no usable file; or if `opts` is invalid.
    pub fn open(dir: &Path, opts: &DataOptions) -> Result<CalibrationSet, CalibError> {
        opts.validate()?;
        if dir.is_file() && dir.extension().is_some_and(|e| e == PACK_EXTENSION) {
            return CalibrationSet::open_pack(dir, opts);
        }
        let dir_err = |reason: String| CalibError::DataDir {
            dir: dir.to_path_buf(),
            reason,
        };
        if !dir.exists() {
            return Err(dir_err("does not exist".into()));
        }
        if !dir.is_dir() {
            return Err(dir_err("is not a directory".into()));
        }
        let io_err = |source| CalibError::Io {
            path: dir.to_path_buf(),
            source,
        };
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io_err)? {
            let path = entry.map_err(io_err)?.path();
            if path.is_file() && FileKind::of(&path).is_some() {
                files.push(path);
            }
        }
        if files.is_empty() {
            return Err(dir_err(
                "holds no calibration files (.npy, .npz, .png, .jpg, .jpeg)".into(),
            ));
        }
        files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
        Ok(CalibrationSet {
            dir: dir.to_path_buf(),
            files,
            pack: None,
            options: opts.clone(),
            cancel: None,
        })
    }

    /// The samples of the pack at `path`.
    fn open_pack(path: &Path, opts: &DataOptions) -> Result<CalibrationSet, CalibError> {
        let pack = Pack::open(path)?;
        if pack.len() == 0 {
            return Err(CalibError::DataDir {
                dir: path.to_path_buf(),
                reason: "the sample pack holds no sample".into(),
            });
        }
        Ok(CalibrationSet {
            dir: path.to_path_buf(),
            files: (0..pack.len())
                .map(|i| path.join(format!("calibration sample {i}")))
                .collect(),
            pack: Some(Arc::new(pack)),
            options: opts.clone(),
            cancel: None,
        })
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether the set has no file (never true for an opened set).
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The files, in load order.
    pub fn files(&self) -> &[PathBuf] {
        &self.files
    }

    /// The loading options.
    pub fn options(&self) -> &DataOptions {
        &self.options
    }

    /// The same set, whose [`CalibrationSet::load`] fails with
    /// [`CalibError::Cancelled`] once `flag` is set: every pass over the data (all of
    /// them load file by file) then stops at its next file.
    pub fn cancel_with(mut self, flag: Arc<AtomicBool>) -> CalibrationSet {
        self.cancel = Some(flag);
        self
    }

    /// Loads file `index` into one or more samples feeding `inputs`.
    pub fn load(&self, index: usize, inputs: &[InputSpec]) -> Result<Vec<Sample>, CalibError> {
        if self
            .cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
        {
            return Err(CalibError::Cancelled);
        }
        let file = self.files.get(index).ok_or(CalibError::IndexOutOfRange {
            dir: self.dir.clone(),
            index,
            len: self.files.len(),
        })?;
        let Some(pack) = &self.pack else {
            return load_file(file, inputs, &self.options);
        };
        self.options.validate()?;
        let (kind, bytes) = pack.read(index)?;
        match kind {
            PackedKind::Npy => {
                let tensor = npy::decode_npy(&bytes, file, None)?;
                npy_samples(file, inputs, tensor, self.options.input_scale)
            }
            PackedKind::Npz => {
                let arrays = npy::decode_npz(std::io::Cursor::new(bytes), file)?;
                load_npz_arrays(file, inputs, arrays, self.options.input_scale)
            }
        }
    }
}

/// Loads one `.npy`, `.npz` or image file into samples feeding `inputs`
/// (see the module docs for the rules).
pub fn load_file(
    file: &Path,
    inputs: &[InputSpec],
    opts: &DataOptions,
) -> Result<Vec<Sample>, CalibError> {
    opts.validate()?;
    let inputs_err = |reason: String| CalibError::Inputs {
        file: file.to_path_buf(),
        reason,
    };
    let kind = FileKind::of(file).ok_or_else(|| {
        inputs_err("not a calibration file (.npy, .npz, .png, .jpg, .jpeg)".into())
    })?;
    match kind {
        FileKind::Npy => {
            let tensor = npy::read_npy(file)?;
            npy_samples(file, inputs, tensor, opts.input_scale)
        }
        FileKind::Npz => {
            let arrays = npy::read_npz(file)?;
            load_npz_arrays(file, inputs, arrays, opts.input_scale)
        }
        FileKind::Image => {
            let input = single_input(file, inputs, "image")?;
            let tensor = images::load_image(file, input, opts)?;
            match fit(input, tensor.shape()) {
                Some(Fit::Batches(1)) => Ok(vec![vec![(input.name.clone(), tensor)]]),
                _ => Err(CalibError::ShapeMismatch {
                    file: file.to_path_buf(),
                    input: input.name.clone(),
                    actual: tensor.shape().to_vec(),
                    expected: input.shape_string(),
                }),
            }
        }
    }
}

/// The model's one input, which `what` files feed; an error naming `file` when the
/// model has none or several.
fn single_input<'a>(
    file: &Path,
    inputs: &'a [InputSpec],
    what: &str,
) -> Result<&'a InputSpec, CalibError> {
    let inputs_err = |reason: String| CalibError::Inputs {
        file: file.to_path_buf(),
        reason,
    };
    match inputs {
        [one] => Ok(one),
        [] => Err(inputs_err("the model has no inputs to feed".into())),
        _ => Err(inputs_err(format!(
            "{what} files feed a single input, but the model has {} ({}); use .npz files",
            inputs.len(),
            names(inputs.iter().map(|i| i.name.as_str()))
        ))),
    }
}

/// The samples of one `.npy` array (read from `file`) for the model's single input.
fn npy_samples(
    file: &Path,
    inputs: &[InputSpec],
    tensor: Tensor,
    input_scale: Option<f32>,
) -> Result<Vec<Sample>, CalibError> {
    let input = single_input(file, inputs, ".npy")?;
    let parts = prepare(file, input, tensor, input_scale)?;
    Ok(parts
        .into_iter()
        .map(|t| vec![(input.name.clone(), t)])
        .collect())
}

/// Integer `tensor` for a float `input`: multiplied by `input_scale` into f32, or
/// refused without one. Anything else passes unchanged.
fn scale_integers(
    file: &Path,
    input: &InputSpec,
    tensor: Tensor,
    input_scale: Option<f32>,
) -> Result<Tensor, CalibError> {
    let from = tensor.dtype();
    if !input.dtype.is_float() || from.is_float() {
        return Ok(tensor);
    }
    let Some(scale) = input_scale else {
        return Err(CalibError::DType {
            file: file.to_path_buf(),
            tensor: input.name.clone(),
            reason: format!(
                "{from} data for a {} input: integer samples are usually raw pixels, which the \
                 model does not expect; pass --input-scale (e.g. 1/255) to convert them, or save \
                 the array as {}",
                input.dtype, input.dtype
            ),
        });
    };
    let values: Vec<f32> = tensor.to_f32_vec().into_iter().map(|v| v * scale).collect();
    Ok(Tensor::from_f32(tensor.shape().to_vec(), values))
}

/// Maps an archive's arrays onto the inputs and splits them into samples.
fn load_npz_arrays(
    file: &Path,
    inputs: &[InputSpec],
    mut arrays: Vec<(String, Tensor)>,
    input_scale: Option<f32>,
) -> Result<Vec<Sample>, CalibError> {
    let inputs_err = |reason: String| CalibError::Inputs {
        file: file.to_path_buf(),
        reason,
    };
    if inputs.is_empty() {
        return Err(inputs_err("the model has no inputs to feed".into()));
    }
    let missing: Vec<&str> = inputs
        .iter()
        .filter(|i| !arrays.iter().any(|(n, _)| *n == i.name))
        .map(|i| i.name.as_str())
        .collect();
    if !missing.is_empty() {
        return Err(inputs_err(format!(
            "no array for input(s) {}; the archive holds {}",
            names(missing.into_iter()),
            names(arrays.iter().map(|(n, _)| n.as_str()))
        )));
    }
    let extra: Vec<&str> = arrays
        .iter()
        .filter(|(n, _)| !inputs.iter().any(|i| i.name == *n))
        .map(|(n, _)| n.as_str())
        .collect();
    if !extra.is_empty() {
        return Err(inputs_err(format!(
            "array(s) {} match no model input; the inputs are {}",
            names(extra.into_iter()),
            names(inputs.iter().map(|i| i.name.as_str()))
        )));
    }
    let mut per_input: Vec<Vec<Tensor>> = Vec::with_capacity(inputs.len());
    for input in inputs {
        let at = arrays
            .iter()
            .position(|(n, _)| *n == input.name)
            .ok_or_else(|| inputs_err(format!("no array for input `{}`", input.name)))?;
        let (_, tensor) = arrays.swap_remove(at);
        per_input.push(prepare(file, input, tensor, input_scale)?);
    }
    let counts: Vec<usize> = per_input.iter().map(Vec::len).collect();
    if counts.iter().any(|&k| k != counts[0]) {
        let detail: Vec<String> = inputs
            .iter()
            .zip(&counts)
            .map(|(i, k)| format!("`{}` gives {k}", i.name))
            .collect();
        return Err(inputs_err(format!(
            "arrays split into different numbers of batches: {}",
            detail.join(", ")
        )));
    }
    let mut samples: Vec<Sample> = (0..counts[0])
        .map(|_| Vec::with_capacity(inputs.len()))
        .collect();
    for (input, parts) in inputs.iter().zip(per_input) {
        for (sample, t) in samples.iter_mut().zip(parts) {
            sample.push((input.name.clone(), t));
        }
    }
    Ok(samples)
}

/// Checks one array for NaN/Inf, converts it to the input's type and fits it
/// to the input's shape, giving one tensor per batch. Integer data for a float
/// input is refused (raw pixels fed as they are ruin calibration silently) unless
/// `input_scale` says how to convert it.
fn prepare(
    file: &Path,
    input: &InputSpec,
    tensor: Tensor,
    input_scale: Option<f32>,
) -> Result<Vec<Tensor>, CalibError> {
    let tensor = scale_integers(file, input, tensor, input_scale)?;
    let bad = count_non_finite(tensor.data());
    if bad > 0 {
        return Err(CalibError::NonFiniteData {
            file: file.to_path_buf(),
            tensor: input.name.clone(),
            count: bad,
        });
    }
    let shape = tensor.shape().to_vec();
    let how = fit(input, &shape).ok_or_else(|| CalibError::ShapeMismatch {
        file: file.to_path_buf(),
        input: input.name.clone(),
        actual: shape.clone(),
        expected: input.shape_string(),
    })?;
    let from = tensor.dtype();
    let data = convert_lossless(tensor.into_data(), input.dtype).map_err(|e| CalibError::DType {
        file: file.to_path_buf(),
        tensor: input.name.clone(),
        reason: match e {
            ConvertError::Unsupported => format!("{from} data cannot feed a {} input", input.dtype),
            ConvertError::Lossy { count, example } => format!(
                "{count} {from} values (e.g. {example}) change when converted to the input's {}; save the array as {}",
                input.dtype, input.dtype
            ),
        },
    })?;
    let shape = match how {
        Fit::AddBatch => std::iter::once(1).chain(shape).collect(),
        Fit::Batches(_) => shape,
    };
    let tensor = Tensor::new(shape, data).map_err(|e| CalibError::Decode {
        file: file.to_path_buf(),
        reason: e.to_string(),
    })?;
    Ok(match how {
        Fit::Batches(k) => split_batches(tensor, k),
        Fit::AddBatch => vec![tensor],
    })
}

/// Names as "`a`, `b`".
fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<String> = it.map(|n| format!("`{n}`")).collect();
    if v.is_empty() {
        "nothing".into()
    } else {
        v.join(", ")
    }
}
