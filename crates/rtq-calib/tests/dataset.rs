//! Calibration-data loading from real files written to a temp directory.

use npyz::WriterBuilder;
use rtq_calib::{CalibError, CalibrationSet, DataOptions, InputSpec, Layout};
use rtq_ir::{DType, Tensor, TensorData};
use std::path::{Path, PathBuf};

fn write_npy<T: npyz::AutoSerialize + Copy>(path: &Path, shape: &[u64], values: &[T]) {
    let mut w = npyz::WriteOptions::<T>::new()
        .default_dtype()
        .shape(shape)
        .writer(std::io::BufWriter::new(
            std::fs::File::create(path).unwrap(),
        ))
        .begin_nd()
        .unwrap();
    w.extend(values.iter().copied()).unwrap();
    w.finish().unwrap();
}

fn write_npz(path: &Path, arrays: &[(&str, &[u64], &[f32])]) {
    let mut npz = npyz::npz::NpzWriter::create(path).unwrap();
    for (name, shape, values) in arrays {
        let mut w = npz
            .array::<f32>(name, Default::default())
            .unwrap()
            .default_dtype()
            .shape(shape)
            .begin_nd()
            .unwrap();
        w.extend(values.iter().copied()).unwrap();
        w.finish().unwrap();
    }
}

fn f32_input(name: &str, shape: &[Option<usize>]) -> InputSpec {
    InputSpec::new(name, DType::F32, shape.to_vec())
}

fn open(dir: &Path) -> CalibrationSet {
    CalibrationSet::open(dir, &DataOptions::default()).unwrap()
}

#[test]
fn lists_usable_files_sorted_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_npy(&d.join("b.npy"), &[1], &[1.0f32]);
    write_npy(&d.join("a.NPY"), &[1], &[1.0f32]);
    write_npz(&d.join("c.npz"), &[("x", &[1], &[1.0])]);
    std::fs::write(d.join("notes.txt"), "ignored").unwrap();
    std::fs::create_dir(d.join("sub.npy")).unwrap();
    let set = open(d);
    let names: Vec<_> = set
        .files()
        .iter()
        .map(|p| p.file_name().unwrap().to_owned())
        .collect();
    assert_eq!(names, ["a.NPY", "b.npy", "c.npz"]);
    assert_eq!(set.len(), 3);
    assert!(!set.is_empty());
    let e = set
        .load(3, &[f32_input("x", &[Some(1)])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("file index 3 is out of range (3 files)"), "{e}");
}

#[test]
fn directory_errors_name_the_directory() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope");
    let e = CalibrationSet::open(&missing, &DataOptions::default()).unwrap_err();
    assert!(matches!(e, CalibError::DataDir { .. }));
    assert_eq!(
        e.to_string(),
        format!(
            "calibration data directory {}: does not exist",
            missing.display()
        )
    );

    let file = dir.path().join("file.npy");
    write_npy(&file, &[1], &[1.0f32]);
    let e = CalibrationSet::open(&file, &DataOptions::default())
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "calibration data directory {}: is not a directory",
            file.display()
        )
    );

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::write(empty.join("readme.md"), "no data").unwrap();
    let e = CalibrationSet::open(&empty, &DataOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with(&format!(
            "calibration data directory {}: holds no calibration files",
            empty.display()
        )),
        "{e}"
    );
}

#[test]
fn npy_splits_into_batches_of_the_fixed_batch_size() {
    let dir = tempfile::tempdir().unwrap();
    let values: Vec<f32> = (0..18).map(|x| x as f32).collect();
    write_npy(&dir.path().join("six.npy"), &[6, 3], &values);
    let set = open(dir.path());
    let input = f32_input("data", &[Some(2), Some(3)]);
    let samples = set.load(0, std::slice::from_ref(&input)).unwrap();
    assert_eq!(samples.len(), 3);
    for (k, sample) in samples.iter().enumerate() {
        assert_eq!(sample.len(), 1);
        assert_eq!(sample[0].0, "data");
        let expected: Vec<f32> = (k * 6..k * 6 + 6).map(|x| x as f32).collect();
        assert_eq!(sample[0].1, Tensor::from_f32(vec![2, 3], expected));
    }

    // A dynamic batch takes the whole array as one sample.
    let dynamic = f32_input("data", &[None, Some(3)]);
    let samples = set.load(0, &[dynamic]).unwrap();
    assert_eq!(samples.len(), 1);
    assert_eq!(samples[0][0].1.shape(), &[6, 3]);

    // A leading dim that is not a multiple of the batch size does not fit.
    let four = f32_input("data", &[Some(4), Some(3)]);
    let e = set.load(0, &[four]).unwrap_err().to_string();
    assert!(
        e.ends_with("six.npy: shape [6,3] does not match input `data` [4,3]"),
        "{e}"
    );
}

#[test]
fn npy_without_batch_dim_gets_one() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("chw.npy"), &[3, 2], &[1.0f32; 6]);
    let samples = open(dir.path())
        .load(0, &[f32_input("x", &[Some(1), Some(3), Some(2)])])
        .unwrap();
    assert_eq!(samples[0][0].1.shape(), &[1, 3, 2]);
}

#[test]
fn shape_mismatch_names_file_and_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("img3.npy");
    write_npy(&file, &[1, 3, 32, 32], &vec![0.5f32; 3 * 32 * 32]);
    let input = f32_input("data", &[Some(1), Some(3), Some(224), Some(224)]);
    let e = open(dir.path()).load(0, &[input]).unwrap_err();
    assert!(matches!(e, CalibError::ShapeMismatch { .. }));
    assert_eq!(
        e.to_string(),
        format!(
            "{}: shape [1,3,32,32] does not match input `data` [1,3,224,224]",
            file.display()
        )
    );
}

#[test]
fn nan_and_inf_are_load_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sample.npy");
    write_npy(
        &file,
        &[5],
        &[1.0f32, f32::NAN, f32::INFINITY, 2.0, f32::NEG_INFINITY],
    );
    let e = open(dir.path())
        .load(0, &[f32_input("data", &[Some(5)])])
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: tensor `data` contains 3 NaN/Inf values",
            file.display()
        )
    );
}

#[test]
fn npy_needs_a_single_input() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("x.npy"), &[2], &[1.0f32, 2.0]);
    let e = open(dir.path())
        .load(0, &[f32_input("a", &[Some(2)]), f32_input("b", &[Some(2)])])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("x.npy: .npy files feed a single input, but the model has 2 (`a`, `b`)"),
        "{e}"
    );
}

#[test]
fn dtype_conversion_only_when_lossless() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(
        &dir.path().join("a_exact.npy"),
        &[3],
        &[0.5f64, 255.0, -3.25],
    );
    write_npy(&dir.path().join("b_lossy.npy"), &[3], &[0.1f64, 0.5, 0.2]);
    write_npy(&dir.path().join("c_ids.npy"), &[2], &[7i32, 9]);
    let set = open(dir.path());
    let f32_in = f32_input("x", &[Some(3)]);
    let s = set.load(0, std::slice::from_ref(&f32_in)).unwrap();
    assert_eq!(
        s[0][0].1,
        Tensor::from_f32(vec![3], vec![0.5, 255.0, -3.25])
    );
    let e = set.load(1, &[f32_in]).unwrap_err().to_string();
    assert!(
        e.contains("b_lossy.npy: tensor `x`: 2 double values (e.g. 0.1) change"),
        "{e}"
    );
    let f16_in = InputSpec::new("x", DType::F16, vec![Some(3)]);
    let s = set.load(0, &[f16_in]).unwrap();
    assert_eq!(s[0][0].1.dtype(), DType::F16);
    let ids = InputSpec::new("ids", DType::I64, vec![Some(2)]);
    let s = set.load(2, &[ids]).unwrap();
    assert_eq!(s[0][0].1, Tensor::from_i64(vec![2], vec![7, 9]));
}

#[test]
fn integer_samples_for_float_inputs_need_an_explicit_scale() {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("pixels.npy"), &[4], &[7u8, 128, 253, 0]);
    let x = f32_input("x", &[Some(4)]);
    // Raw pixels fed to a float input as they are would calibrate garbage: refused.
    let e = open(dir.path())
        .load(0, std::slice::from_ref(&x))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("pixels.npy: tensor `x`: uint8 data for a float input")
            && e.contains("--input-scale"),
        "{e}"
    );
    // With a scale they are converted: v * scale, in f32.
    let scale = 1.0f32 / 255.0;
    let opts = DataOptions {
        input_scale: Some(scale),
        ..DataOptions::default()
    };
    let set = CalibrationSet::open(dir.path(), &opts).unwrap();
    let s = set.load(0, &[x]).unwrap();
    let expected: Vec<f32> = [7u8, 128, 253, 0]
        .iter()
        .map(|&v| v as f32 * scale)
        .collect();
    assert_eq!(s[0][0].1, Tensor::from_f32(vec![4], expected));
}

#[test]
fn npz_maps_arrays_to_inputs() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a: Vec<f32> = (0..8).map(|x| x as f32).collect();
    let b: Vec<f32> = (0..4).map(|x| -(x as f32)).collect();
    write_npz(
        &d.join("a_ok.npz"),
        &[("mask", &[4, 1], &b), ("image", &[4, 2], &a)],
    );
    write_npz(&d.join("b_missing.npz"), &[("image", &[4, 2], &a)]);
    write_npz(
        &d.join("c_extra.npz"),
        &[
            ("image", &[2, 2], &a[..4]),
            ("mask", &[2, 1], &b[..2]),
            ("junk", &[1], &[0.0]),
        ],
    );
    write_npz(
        &d.join("d_uneven.npz"),
        &[("image", &[4, 2], &a), ("mask", &[2, 1], &b[..2])],
    );
    let set = open(d);
    let inputs = [
        f32_input("image", &[Some(2), Some(2)]),
        f32_input("mask", &[Some(2), Some(1)]),
    ];
    let samples = set.load(0, &inputs).unwrap();
    assert_eq!(samples.len(), 2);
    for (k, s) in samples.iter().enumerate() {
        assert_eq!(s[0].0, "image");
        assert_eq!(s[1].0, "mask");
        assert_eq!(s[0].1.to_f32_vec(), a[k * 4..k * 4 + 4].to_vec());
        assert_eq!(s[1].1.to_f32_vec(), b[k * 2..k * 2 + 2].to_vec());
    }
    let e = set.load(1, &inputs).unwrap_err().to_string();
    assert!(
        e.contains("b_missing.npz: no array for input(s) `mask`; the archive holds `image`"),
        "{e}"
    );
    let e = set.load(2, &inputs).unwrap_err().to_string();
    assert!(
        e.contains("c_extra.npz: array(s) `junk` match no model input"),
        "{e}"
    );
    let e = set.load(3, &inputs).unwrap_err().to_string();
    assert!(e.contains("d_uneven.npz: arrays split into different numbers of batches: `image` gives 2, `mask` gives 1"), "{e}");
}

#[test]
fn corrupt_files_are_decode_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.npy"), b"definitely not numpy").unwrap();
    std::fs::write(dir.path().join("bad.npz"), b"not a zip").unwrap();
    std::fs::write(dir.path().join("bad.png"), b"not a png").unwrap();
    let set = open(dir.path());
    let input = f32_input("x", &[Some(1), Some(3), Some(2), Some(2)]);
    for k in 0..3 {
        let e = set.load(k, std::slice::from_ref(&input)).unwrap_err();
        assert!(matches!(e, CalibError::Decode { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with(&set.files()[k].display().to_string()),
            "{e}"
        );
    }
}

/// A 2x2 RGB PNG with pixels (r, g, b) = row-major [(0,64,128), (255,0,10), (1,2,3), (100,200,250)].
fn write_png(dir: &Path) -> PathBuf {
    let px: Vec<u8> = vec![0, 64, 128, 255, 0, 10, 1, 2, 3, 100, 200, 250];
    let path = dir.join("img.png");
    image::RgbImage::from_raw(2, 2, px)
        .unwrap()
        .save(&path)
        .unwrap();
    path
}

#[test]
fn image_normalisation_is_exact() {
    let dir = tempfile::tempdir().unwrap();
    write_png(dir.path());
    let mean = [0.485f32, 0.456, 0.406];
    let std = [0.229f32, 0.224, 0.225];
    let rgb: [[f32; 3]; 4] = [
        [0., 64., 128.],
        [255., 0., 10.],
        [1., 2., 3.],
        [100., 200., 250.],
    ];
    let norm = |p: f32, c: usize| (p / 255.0 - mean[c]) / std[c];

    // NCHW, RGB.
    let opts = DataOptions {
        mean: mean.to_vec(),
        std: std.to_vec(),
        ..Default::default()
    };
    let set = CalibrationSet::open(dir.path(), &opts).unwrap();
    let input = f32_input("data", &[Some(1), Some(3), Some(2), Some(2)]);
    let s = set.load(0, &[input]).unwrap();
    assert_eq!(s.len(), 1);
    let t = &s[0][0].1;
    assert_eq!(t.shape(), &[1, 3, 2, 2]);
    let mut expected = Vec::new();
    for c in 0..3 {
        for px in &rgb {
            expected.push(norm(px[c], c));
        }
    }
    assert_eq!(t.as_f32().unwrap(), expected.as_slice());

    // NHWC, BGR, size from the options (the model input is dynamic).
    let opts = DataOptions {
        mean: mean.to_vec(),
        std: std.to_vec(),
        layout: Layout::Nhwc,
        bgr: true,
        input_shape: Some(vec![2, 2]),
        input_scale: None,
    };
    let set = CalibrationSet::open(dir.path(), &opts).unwrap();
    let input = f32_input("data", &[None, None, None, Some(3)]);
    let t = &set.load(0, &[input]).unwrap()[0][0].1;
    assert_eq!(t.shape(), &[1, 2, 2, 3]);
    let mut expected = Vec::new();
    for px in &rgb {
        for c in 0..3 {
            expected.push(norm(px[2 - c], c));
        }
    }
    assert_eq!(t.as_f32().unwrap(), expected.as_slice());
}

#[test]
fn images_are_resized_and_typed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("flat.jpg");
    // A flat grey JPEG stays flat after decoding and bilinear resizing.
    image::RgbImage::from_pixel(8, 6, image::Rgb([128, 128, 128]))
        .save(&path)
        .unwrap();
    let set = open(dir.path());
    let input = InputSpec::new("x", DType::F16, vec![Some(1), Some(3), Some(3), Some(4)]);
    let t = &set.load(0, &[input]).unwrap()[0][0].1;
    assert_eq!(t.shape(), &[1, 3, 3, 4]);
    let TensorData::F16(v) = t.data() else {
        panic!("expected f16")
    };
    for x in v {
        assert!((x.to_f32() - 128.0 / 255.0).abs() < 4e-3, "{x}");
    }
    // Grey (1-channel) inputs get luma.
    let grey = f32_input("x", &[Some(1), Some(1), Some(2), Some(2)]);
    let t = &set.load(0, &[grey]).unwrap()[0][0].1;
    assert_eq!(t.shape(), &[1, 1, 2, 2]);

    // Integer inputs cannot take images; a batch other than 1 does not fit.
    let ints = InputSpec::new("x", DType::I64, vec![Some(1), Some(3), Some(2), Some(2)]);
    let e = set.load(0, &[ints]).unwrap_err().to_string();
    assert!(
        e.contains("flat.jpg: tensor `x`: images feed float inputs only"),
        "{e}"
    );
    let batch4 = f32_input("x", &[Some(4), Some(3), Some(2), Some(2)]);
    let e = set.load(0, &[batch4]).unwrap_err().to_string();
    assert!(
        e.ends_with("flat.jpg: shape [1,3,2,2] does not match input `x` [4,3,2,2]"),
        "{e}"
    );
}

#[test]
fn a_sample_pack_loads_as_its_files_would() {
    use rtq_calib::{PackWriter, PackedKind};
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // The same samples as files and as a pack (in file-name order).
    write_npy(
        &d.join("a.npy"),
        &[2, 3],
        &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0],
    );
    write_npz(&d.join("b.npz"), &[("x", &[1, 3], &[7.0, 8.0, 9.0])]);
    let pack_path = d.join("samples.rtqpack");
    let mut pack = PackWriter::new(std::fs::File::create(&pack_path).unwrap());
    pack.append(PackedKind::Npy, &std::fs::read(d.join("a.npy")).unwrap())
        .unwrap();
    pack.append(PackedKind::Npz, &std::fs::read(d.join("b.npz")).unwrap())
        .unwrap();
    pack.finish().unwrap();
    std::fs::remove_file(d.join("a.npy")).unwrap();
    std::fs::remove_file(d.join("b.npz")).unwrap();

    let inputs = [f32_input("x", &[Some(1), Some(3)])];
    let set = open(&pack_path);
    assert_eq!(set.len(), 2);
    assert_eq!(set.dir(), pack_path);
    let first = set.load(0, &inputs).unwrap();
    assert_eq!(
        first.len(),
        2,
        "the [2, 3] array splits into two batches of 1"
    );
    assert_eq!(first[1][0].1.to_f32_vec(), [4.0, 5.0, 6.0]);
    assert_eq!(
        set.load(1, &inputs).unwrap()[0][0].1.to_f32_vec(),
        [7.0, 8.0, 9.0]
    );

    // Errors name the sample inside the pack.
    let e = set
        .load(0, &[f32_input("x", &[Some(1), Some(4)])])
        .unwrap_err()
        .to_string();
    assert!(e.contains("samples.rtqpack/calibration sample 0"), "{e}");
    // Not a pack: refused, naming the file.
    let fake = d.join("fake.rtqpack");
    std::fs::write(&fake, b"no pack at all, only text").unwrap();
    let e = CalibrationSet::open(&fake, &DataOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fake.rtqpack") && e.contains("not a valid sample pack"),
        "{e}"
    );
    // An empty pack is an unusable data set.
    let empty = d.join("empty.rtqpack");
    PackWriter::new(std::fs::File::create(&empty).unwrap())
        .finish()
        .unwrap();
    let e = CalibrationSet::open(&empty, &DataOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("holds no sample"), "{e}");
}
