//! Writing `.npy` files for calibration-data fixtures.

use npyz::WriterBuilder;
use std::path::Path;

/// Writes `values` (row-major, of `shape`) to `path` as a little-endian f32 `.npy`.
pub fn write_npy_f32(path: &Path, shape: &[usize], values: &[f32]) {
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let file = std::fs::File::create(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut writer = npyz::WriteOptions::<f32>::new()
        .default_dtype()
        .shape(&shape)
        .writer(std::io::BufWriter::new(file))
        .begin_nd()
        .expect("npy header");
    writer.extend(values.iter().copied()).expect("npy data");
    writer.finish().expect("npy finish");
}
