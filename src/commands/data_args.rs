//! Options describing how sample files (npy/npz/images) become model inputs.

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use rtq_calib::{DataOptions, Layout};

/// Image layout of the model input.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LayoutArg {
    /// Channels first.
    Nchw,
    /// Channels last.
    Nhwc,
}

/// How calibration/evaluation files are turned into input tensors.
#[derive(Debug, Clone, Args)]
pub struct DataArgs {
    /// Input shape for images, e.g. 1x3x224x224 (default: the model input's fixed dims).
    #[arg(long, value_name = "NxCxHxW")]
    pub input_shape: Option<String>,
    /// Per-channel mean subtracted from images scaled to [0,1], e.g. 0.485,0.456,0.406.
    #[arg(long, value_delimiter = ',', value_name = "M,M,M")]
    pub mean: Vec<f32>,
    /// Per-channel standard deviation images are divided by, e.g. 0.229,0.224,0.225.
    #[arg(long, value_delimiter = ',', value_name = "S,S,S")]
    pub std: Vec<f32>,
    /// Memory layout of image inputs.
    #[arg(long, value_enum, default_value = "nchw")]
    pub layout: LayoutArg,
    /// Feed images as BGR instead of RGB.
    #[arg(long)]
    pub bgr: bool,
}

/// Parses `1x3x224x224`.
pub fn parse_dims(text: &str) -> Result<Vec<usize>> {
    let dims: Vec<usize> = text
        .split(['x', 'X', ','])
        .map(|d| {
            d.trim()
                .parse::<usize>()
                .with_context(|| format!("bad dimension `{d}` in `{text}`"))
        })
        .collect::<Result<_>>()?;
    if dims.is_empty() || dims.contains(&0) {
        bail!("bad shape `{text}`: dimensions must be positive");
    }
    Ok(dims)
}

impl DataArgs {
    /// The loader options.
    pub fn to_options(&self) -> Result<DataOptions> {
        if self.std.iter().any(|&s| s <= 0.0 || !s.is_finite()) {
            bail!("--std values must be positive");
        }
        let defaults = DataOptions::default();
        let mut opts = DataOptions {
            input_shape: self.input_shape.as_deref().map(parse_dims).transpose()?,
            mean: if self.mean.is_empty() {
                defaults.mean.clone()
            } else {
                self.mean.clone()
            },
            std: if self.std.is_empty() {
                defaults.std.clone()
            } else {
                self.std.clone()
            },
            ..defaults
        };
        opts.layout = match self.layout {
            LayoutArg::Nchw => Layout::Nchw,
            LayoutArg::Nhwc => Layout::Nhwc,
        };
        opts.bgr = self.bgr;
        Ok(opts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_shapes() {
        assert_eq!(parse_dims("1x3x224x224").unwrap(), vec![1, 3, 224, 224]);
        assert!(parse_dims("1x0").is_err());
        assert!(parse_dims("ax3").is_err());
    }
}
