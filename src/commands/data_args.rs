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
    /// Multiply integer .npy/.npz samples by this to feed a float input (e.g. 1/255 for
    /// raw pixels); without it such samples are refused.
    #[arg(long, value_name = "F|1/N")]
    pub input_scale: Option<String>,
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
        opts.input_scale = self.input_scale.as_deref().map(parse_scale).transpose()?;
        Ok(opts)
    }
}

/// A positive finite factor, as a number (`0.5`) or a fraction (`1/255`).
pub fn parse_scale(text: &str) -> Result<f32> {
    let value = match text.split_once('/') {
        Some((n, d)) => n
            .trim()
            .parse::<f64>()
            .ok()
            .zip(d.trim().parse::<f64>().ok())
            .map(|(n, d)| n / d),
        None => text.trim().parse::<f64>().ok(),
    };
    match value {
        Some(v) if v.is_finite() && v > 0.0 => Ok(v as f32),
        _ => bail!("--input-scale `{text}`: expected a positive number or fraction such as 1/255"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_scales() {
        assert_eq!(parse_scale("1/255").unwrap(), (1.0f64 / 255.0) as f32);
        assert_eq!(parse_scale(" 0.5 ").unwrap(), 0.5);
        for bad in ["0", "-1", "1/0", "x", "1/x"] {
            assert!(parse_scale(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn parses_shapes() {
        assert_eq!(parse_dims("1x3x224x224").unwrap(), vec![1, 3, 224, 224]);
        assert!(parse_dims("1x0").is_err());
        assert!(parse_dims("ax3").is_err());
    }
}
