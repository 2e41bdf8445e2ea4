//! How image files are turned into input tensors.

use crate::CalibError;
use std::fmt;
use std::str::FromStr;

/// Memory layout of an image input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Layout {
    /// Batch, channels, height, width.
    #[default]
    Nchw,
    /// Batch, height, width, channels.
    Nhwc,
}

impl Layout {
    /// Positions of (channels, height, width) in a rank-4 shape of this layout.
    pub fn chw_axes(self) -> (usize, usize, usize) {
        match self {
            Layout::Nchw => (1, 2, 3),
            Layout::Nhwc => (3, 1, 2),
        }
    }
}

impl FromStr for Layout {
    type Err = CalibError;

    /// Parses `nchw` or `nhwc` (any case).
    fn from_str(s: &str) -> Result<Layout, CalibError> {
        match s.trim().to_ascii_lowercase().as_str() {
            "nchw" => Ok(Layout::Nchw),
            "nhwc" => Ok(Layout::Nhwc),
            _ => Err(CalibError::InvalidOption {
                option: "layout",
                reason: format!("`{s}` is neither `nchw` nor `nhwc`"),
            }),
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layout::Nchw => "nchw",
            Layout::Nhwc => "nhwc",
        })
    }
}

/// Options for loading calibration data; only images use them.
///
/// An image becomes `((pixel / 255) - mean[c]) / std[c]` per channel `c` of
/// the model input (after the optional RGB->BGR swap), with a batch dimension
/// of 1.
#[derive(Debug, Clone, PartialEq)]
pub struct DataOptions {
    /// Image input shape, overriding the model input's dimensions: `[H, W]`,
    /// `[C, H, W]` / `[H, W, C]`, or the full `[N, C, H, W]` / `[N, H, W, C]`
    /// (following `layout`). `None`: take them from the model input's fixed dims.
    pub input_shape: Option<Vec<usize>>,
    /// Per-channel mean, in the model's channel order: one value (used for
    /// every channel) or one per channel; empty means 0.
    pub mean: Vec<f32>,
    /// Per-channel standard deviation, like `mean`; empty means 1.
    pub std: Vec<f32>,
    /// Layout of the image input.
    pub layout: Layout,
    /// Feed channels as BGR instead of RGB (3-channel inputs only).
    pub bgr: bool,
    /// Integer `.npy`/`.npz` arrays feeding float inputs are multiplied by this
    /// (e.g. 1/255); `None` refuses them.
    pub input_scale: Option<f32>,
}

impl Default for DataOptions {
    fn default() -> Self {
        DataOptions {
            input_shape: None,
            mean: vec![0.0],
            std: vec![1.0],
            layout: Layout::Nchw,
            bgr: false,
            input_scale: None,
        }
    }
}

impl DataOptions {
    /// Checks every field, naming the first bad one.
    pub fn validate(&self) -> Result<(), CalibError> {
        if let Some(shape) = &self.input_shape {
            if !(2..=4).contains(&shape.len()) || shape.contains(&0) {
                return Err(CalibError::InvalidOption {
                    option: "input_shape",
                    reason: format!(
                        "{shape:?} is not [H,W], a 3-D or 4-D image shape of positive dimensions"
                    ),
                });
            }
        }
        if let Some(m) = self.mean.iter().find(|m| !m.is_finite()) {
            return Err(CalibError::InvalidOption {
                option: "mean",
                reason: format!("{m} is not finite"),
            });
        }
        if let Some(s) = self.std.iter().find(|s| !(s.is_finite() && **s != 0.0)) {
            return Err(CalibError::InvalidOption {
                option: "std",
                reason: format!("{s} is not a finite non-zero value"),
            });
        }
        Ok(())
    }

    /// The mean of channel `c` for an input of `channels` channels.
    pub(crate) fn channel_mean(&self, c: usize, channels: usize) -> Result<f32, CalibError> {
        per_channel(&self.mean, "mean", 0.0, c, channels)
    }

    /// The standard deviation of channel `c` for an input of `channels` channels.
    pub(crate) fn channel_std(&self, c: usize, channels: usize) -> Result<f32, CalibError> {
        per_channel(&self.std, "std", 1.0, c, channels)
    }
}

fn per_channel(
    values: &[f32],
    option: &'static str,
    default: f32,
    c: usize,
    channels: usize,
) -> Result<f32, CalibError> {
    match values.len() {
        0 => Ok(default),
        1 => Ok(values[0]),
        n if n == channels => Ok(values[c]),
        n => Err(CalibError::InvalidOption {
            option,
            reason: format!("has {n} values but the image input has {channels} channels"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_parses_and_prints() {
        assert_eq!("NHWC".parse::<Layout>().unwrap(), Layout::Nhwc);
        assert_eq!(" nchw".parse::<Layout>().unwrap(), Layout::Nchw);
        assert!("chw".parse::<Layout>().is_err());
        assert_eq!(Layout::Nhwc.to_string(), "nhwc");
        assert_eq!(Layout::Nhwc.chw_axes(), (3, 1, 2));
    }

    #[test]
    fn validation_names_the_option() {
        assert!(DataOptions::default().validate().is_ok());
        let bad_std = DataOptions {
            std: vec![1.0, 0.0, 1.0],
            ..Default::default()
        };
        assert!(bad_std
            .validate()
            .unwrap_err()
            .to_string()
            .contains("`std`"));
        let bad_shape = DataOptions {
            input_shape: Some(vec![224]),
            ..Default::default()
        };
        assert!(bad_shape
            .validate()
            .unwrap_err()
            .to_string()
            .contains("input_shape"));
    }

    #[test]
    fn per_channel_values_broadcast_or_index() {
        let o = DataOptions {
            mean: vec![0.1, 0.2, 0.3],
            std: vec![],
            ..Default::default()
        };
        assert_eq!(o.channel_mean(2, 3).unwrap(), 0.3);
        assert_eq!(o.channel_std(2, 3).unwrap(), 1.0);
        assert!(o.channel_mean(0, 1).is_err());
        assert_eq!(DataOptions::default().channel_mean(1, 3).unwrap(), 0.0);
    }
}
