//! Decoding image files into normalised input tensors.

use super::options::{DataOptions, Layout};
use super::spec::InputSpec;
use crate::CalibError;
use image::imageops::{self, FilterType};
use rtq_ir::{DType, Tensor};
use std::path::Path;

/// Channels, height and width an image input wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ImageGeometry {
    /// 1 (grey) or 3 (colour).
    pub channels: usize,
    /// Rows.
    pub height: usize,
    /// Columns.
    pub width: usize,
}

/// Works out the geometry from `DataOptions::input_shape`, else from the
/// input's fixed dims (channels default to 3 when dynamic).
pub(crate) fn geometry(
    file: &Path,
    input: &InputSpec,
    opts: &DataOptions,
) -> Result<ImageGeometry, CalibError> {
    let (ca, ha, wa) = opts.layout.chw_axes();
    let model = |axis: usize| {
        if input.shape.len() == 4 {
            input.shape[axis]
        } else {
            None
        }
    };
    let (mut c, mut h, mut w) = (model(ca), model(ha), model(wa));
    if let Some(s) = &opts.input_shape {
        let (oc, oh, ow) = match (s.len(), opts.layout) {
            (2, _) => (None, s[0], s[1]),
            (3, Layout::Nchw) => (Some(s[0]), s[1], s[2]),
            (3, Layout::Nhwc) => (Some(s[2]), s[0], s[1]),
            _ => (
                s.get(ca).copied(),
                s.get(ha).copied().unwrap_or(0),
                s.get(wa).copied().unwrap_or(0),
            ),
        };
        c = oc.or(c);
        (h, w) = (Some(oh), Some(ow));
    }
    let problem = |reason: String| CalibError::Inputs {
        file: file.to_path_buf(),
        reason: format!("input `{}` {}: {reason}", input.name, input.shape_string()),
    };
    if input.shape.len() != 4 {
        return Err(problem(format!(
            "images feed rank-4 {} inputs only",
            opts.layout.to_string().to_uppercase()
        )));
    }
    let (Some(height), Some(width)) = (h.filter(|&x| x > 0), w.filter(|&x| x > 0)) else {
        return Err(problem(
            "the image height and width are dynamic; give them with the input shape option".into(),
        ));
    };
    let channels = c.unwrap_or(3);
    if channels != 1 && channels != 3 {
        return Err(problem(format!(
            "images have 1 or 3 channels, not {channels} (is the layout {} right?)",
            opts.layout
        )));
    }
    Ok(ImageGeometry {
        channels,
        height,
        width,
    })
}

/// Loads `file` as a `[1, C, H, W]` (or `[1, H, W, C]`) tensor of the input's
/// float type: RGB (or BGR, or grey), bilinear-resized to H x W, then
/// `(pixel / 255 - mean[c]) / std[c]`.
pub(crate) fn load_image(
    file: &Path,
    input: &InputSpec,
    opts: &DataOptions,
) -> Result<Tensor, CalibError> {
    if !input.dtype.is_float() {
        return Err(CalibError::DType {
            file: file.to_path_buf(),
            tensor: input.name.clone(),
            reason: format!(
                "images feed float inputs only; the input is {}",
                input.dtype
            ),
        });
    }
    let g = geometry(file, input, opts)?;
    let decode_err = |reason: String| CalibError::Decode {
        file: file.to_path_buf(),
        reason,
    };
    let img = image::ImageReader::open(file)
        .map_err(|source| CalibError::Io {
            path: file.to_path_buf(),
            source,
        })?
        .with_guessed_format()
        .map_err(|source| CalibError::Io {
            path: file.to_path_buf(),
            source,
        })?
        .decode()
        .map_err(|e| decode_err(format!("cannot decode image: {e}")))?;
    if img.width() == 0 || img.height() == 0 {
        return Err(decode_err("image is empty".into()));
    }
    let (w32, h32) = (
        u32::try_from(g.width).map_err(|_| decode_err("width too large".into()))?,
        u32::try_from(g.height).map_err(|_| decode_err("height too large".into()))?,
    );
    // Float pixels in [0, 1] (u8 samples become exactly p / 255), resized in float.
    let (pixels, src_channels): (Vec<f32>, usize) = if g.channels == 3 {
        let rgb = img.to_rgb32f();
        (
            imageops::resize(&rgb, w32, h32, FilterType::Triangle).into_raw(),
            3,
        )
    } else {
        let grey = img.to_luma32f();
        (
            imageops::resize(&grey, w32, h32, FilterType::Triangle).into_raw(),
            1,
        )
    };
    let (c, h, w) = (g.channels, g.height, g.width);
    let mut mean = Vec::with_capacity(c);
    let mut stds = Vec::with_capacity(c);
    for ch in 0..c {
        mean.push(opts.channel_mean(ch, c)?);
        stds.push(opts.channel_std(ch, c)?);
    }
    let mut out = vec![0f32; c * h * w];
    for y in 0..h {
        for x in 0..w {
            let px = &pixels[(y * w + x) * src_channels..][..src_channels];
            for ch in 0..c {
                let src = if opts.bgr && c == 3 { 2 - ch } else { ch };
                let v = (px[src] - mean[ch]) / stds[ch];
                let at = match opts.layout {
                    Layout::Nchw => (ch * h + y) * w + x,
                    Layout::Nhwc => (y * w + x) * c + ch,
                };
                out[at] = v;
            }
        }
    }
    let shape = match opts.layout {
        Layout::Nchw => vec![1, c, h, w],
        Layout::Nhwc => vec![1, h, w, c],
    };
    let tensor = Tensor::from_f32(shape, out);
    Ok(if input.dtype == DType::F32 {
        tensor
    } else {
        tensor.cast(input.dtype)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(shape: &[Option<usize>]) -> InputSpec {
        InputSpec::new("img", DType::F32, shape.to_vec())
    }

    #[test]
    fn geometry_from_model_or_options() {
        let f = Path::new("a.png");
        let o = DataOptions::default();
        let g = geometry(f, &spec(&[Some(1), Some(3), Some(32), Some(16)]), &o).unwrap();
        assert_eq!((g.channels, g.height, g.width), (3, 32, 16));
        let dynamic = spec(&[None, Some(1), None, None]);
        let e = geometry(f, &dynamic, &o).unwrap_err().to_string();
        assert!(
            e.starts_with("a.png: input `img` [?,1,?,?]") && e.contains("dynamic"),
            "{e}"
        );
        let o2 = DataOptions {
            input_shape: Some(vec![8, 4]),
            ..Default::default()
        };
        let g = geometry(f, &dynamic, &o2).unwrap();
        assert_eq!((g.channels, g.height, g.width), (1, 8, 4));
        let nhwc = DataOptions {
            layout: Layout::Nhwc,
            input_shape: Some(vec![1, 10, 20, 3]),
            ..Default::default()
        };
        let g = geometry(f, &spec(&[None, None, None, None]), &nhwc).unwrap();
        assert_eq!((g.channels, g.height, g.width), (3, 10, 20));
        let e = geometry(f, &spec(&[Some(1), Some(224), Some(224), Some(3)]), &o).unwrap_err();
        assert!(e.to_string().contains("not 224"), "{e}");
        assert!(geometry(f, &spec(&[Some(3), Some(8)]), &o).is_err());
    }
}
