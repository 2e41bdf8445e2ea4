//! trtexec-style shape specifications (`input:1x3x224x224,mask:1x128`) and the
//! min/opt/max shape profiles built from them.

use crate::RuntimeError;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Parses a trtexec-style shape list: comma-separated `name:DxDxD` entries.
///
/// * Dimensions are non-negative integers separated by `x`; an empty dimension list
///   (`name:`) is a scalar.
/// * The name is everything before the last `:`, so TensorFlow-style names such as
///   `input:0:1x3` work; a name may also be quoted (`'in,put':1x3` or `"a":2`) to
///   contain commas or colons.
/// * Whitespace around entries, names and dimensions is ignored. A name may appear once.
pub fn parse_shape_list(spec: &str) -> Result<Vec<(String, Vec<usize>)>, RuntimeError> {
    let err = |message: String| RuntimeError::ShapeSpec {
        spec: spec.to_string(),
        message,
    };
    let mut out: Vec<(String, Vec<usize>)> = Vec::new();
    let mut rest = spec.trim();
    if rest.is_empty() {
        return Err(err("no `name:dims` entry".into()));
    }
    while !rest.is_empty() {
        // The name: quoted, or up to the last ':' before the next ','.
        let (name, after_name) =
            if let Some(quote) = rest.chars().next().filter(|c| *c == '\'' || *c == '"') {
                let body = &rest[1..];
                let end = body
                    .find(quote)
                    .ok_or_else(|| err(format!("unterminated {quote} quote")))?;
                let after = body[end + 1..].trim_start();
                let after = after.strip_prefix(':').ok_or_else(|| {
                    err(format!(
                        "expected `:` after the quoted name `{}`",
                        &body[..end]
                    ))
                })?;
                (body[..end].to_string(), after)
            } else {
                let entry_end = rest.find(',').unwrap_or(rest.len());
                let entry = &rest[..entry_end];
                let colon = entry
                    .rfind(':')
                    .ok_or_else(|| err(format!("entry `{}` is not `name:dims`", entry.trim())))?;
                (entry[..colon].trim().to_string(), &rest[colon + 1..])
            };
        if name.is_empty() {
            return Err(err("an entry has an empty tensor name".into()));
        }
        let dims_end = after_name.find(',').unwrap_or(after_name.len());
        let dims_text = after_name[..dims_end].trim();
        let dims = if dims_text.is_empty() {
            Vec::new()
        } else {
            dims_text
                .split('x')
                .map(|d| {
                    let d = d.trim();
                    d.parse::<usize>().map_err(|_| {
                        err(format!(
                            "dimension `{d}` of `{name}` is not a non-negative integer"
                        ))
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        if out.iter().any(|(n, _)| *n == name) {
            return Err(err(format!("`{name}` appears more than once")));
        }
        out.push((name, dims));
        rest = after_name[dims_end..]
            .strip_prefix(',')
            .unwrap_or("")
            .trim_start();
        if dims_end < after_name.len() && rest.is_empty() {
            return Err(err("trailing `,`".into()));
        }
    }
    Ok(out)
}

/// Formats shapes the way [`parse_shape_list`] reads them.
pub fn format_shape_list<'a>(shapes: impl IntoIterator<Item = (&'a str, &'a [usize])>) -> String {
    shapes
        .into_iter()
        .map(|(name, dims)| {
            let dims: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            let needs_quotes = name.contains(',') || name.contains('\'');
            if needs_quotes {
                format!("\"{name}\":{}", dims.join("x"))
            } else {
                format!("{name}:{}", dims.join("x"))
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// The min/opt/max shapes of one dynamic input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputShapes {
    /// Smallest accepted shape.
    pub min: Vec<usize>,
    /// Shape TensorRT tunes kernels for.
    pub opt: Vec<usize>,
    /// Largest accepted shape.
    pub max: Vec<usize>,
}

impl InputShapes {
    /// The same shape as min, opt and max.
    pub fn fixed(shape: Vec<usize>) -> InputShapes {
        InputShapes {
            min: shape.clone(),
            opt: shape.clone(),
            max: shape,
        }
    }

    /// Checks equal ranks and `min <= opt <= max` in every dimension; `name` names the input.
    pub fn validate(&self, name: &str) -> Result<(), RuntimeError> {
        let bad = |message: String| RuntimeError::tensor(name, message);
        if self.min.len() != self.opt.len() || self.opt.len() != self.max.len() {
            return Err(bad(format!(
                "min {:?}, opt {:?} and max {:?} shapes have different ranks",
                self.min, self.opt, self.max
            )));
        }
        for axis in 0..self.min.len() {
            let (lo, mid, hi) = (self.min[axis], self.opt[axis], self.max[axis]);
            if !(lo <= mid && mid <= hi) {
                return Err(bad(format!(
                    "dimension {axis} needs min <= opt <= max, got {lo}, {mid}, {hi}"
                )));
            }
        }
        Ok(())
    }
}

/// Optimization-profile shapes for the dynamic inputs of a model, by input name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ShapeProfiles {
    inputs: BTreeMap<String, InputShapes>,
}

impl ShapeProfiles {
    /// No shapes.
    pub fn new() -> ShapeProfiles {
        ShapeProfiles::default()
    }

    /// Builds profiles from trtexec's options: `shapes` (`--shapes`, min = opt = max) and
    /// `min`/`opt`/`max` (`--minShapes`/`--optShapes`/`--maxShapes`).
    ///
    /// As in trtexec, an input given only in `opt` gets min = max = opt; an input given in
    /// `min` or `max` needs all three. An input may not be in both `shapes` and the others.
    pub fn from_trtexec(
        shapes: Option<&str>,
        min: Option<&str>,
        opt: Option<&str>,
        max: Option<&str>,
    ) -> Result<ShapeProfiles, RuntimeError> {
        let parse = |s: Option<&str>| -> Result<BTreeMap<String, Vec<usize>>, RuntimeError> {
            Ok(match s {
                Some(s) => parse_shape_list(s)?.into_iter().collect(),
                None => BTreeMap::new(),
            })
        };
        let (fixed, min, opt, max) = (parse(shapes)?, parse(min)?, parse(opt)?, parse(max)?);
        let mut profiles = ShapeProfiles::new();
        for (name, shape) in fixed {
            if min.contains_key(&name) || opt.contains_key(&name) || max.contains_key(&name) {
                return Err(RuntimeError::tensor(
                    &name,
                    "shapes given both with --shapes and with --minShapes/--optShapes/--maxShapes",
                ));
            }
            profiles.insert(&name, InputShapes::fixed(shape))?;
        }
        let names: std::collections::BTreeSet<&String> =
            min.keys().chain(opt.keys()).chain(max.keys()).collect();
        for name in names {
            let shapes = match (min.get(name), opt.get(name), max.get(name)) {
                (None, Some(o), None) => InputShapes::fixed(o.clone()),
                (Some(lo), Some(o), Some(hi)) => InputShapes {
                    min: lo.clone(),
                    opt: o.clone(),
                    max: hi.clone(),
                },
                (lo, o, hi) => {
                    let missing: Vec<&str> =
                        [("--minShapes", lo), ("--optShapes", o), ("--maxShapes", hi)]
                            .into_iter()
                            .filter(|(_, v)| v.is_none())
                            .map(|(flag, _)| flag)
                            .collect();
                    return Err(RuntimeError::tensor(
                        name,
                        format!(
                            "missing from {}: give min, opt and max shapes together",
                            missing.join(" and ")
                        ),
                    ));
                }
            };
            profiles.insert(name, shapes)?;
        }
        Ok(profiles)
    }

    /// Adds (or replaces) the shapes of input `name` after validating them.
    pub fn insert(&mut self, name: &str, shapes: InputShapes) -> Result<(), RuntimeError> {
        shapes.validate(name)?;
        self.inputs.insert(name.to_string(), shapes);
        Ok(())
    }

    /// The shapes of input `name`.
    pub fn get(&self, name: &str) -> Option<&InputShapes> {
        self.inputs.get(name)
    }

    /// All inputs and their shapes, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &InputShapes)> {
        self.inputs.iter().map(|(n, s)| (n.as_str(), s))
    }

    /// Whether no input has shapes.
    pub fn is_empty(&self) -> bool {
        self.inputs.is_empty()
    }

    /// Number of inputs with shapes.
    pub fn len(&self) -> usize {
        self.inputs.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(spec: &str) -> Vec<(String, Vec<usize>)> {
        parse_shape_list(spec).unwrap()
    }

    fn error(spec: &str) -> String {
        parse_shape_list(spec).unwrap_err().to_string()
    }

    #[test]
    fn parses_trtexec_lists() {
        assert_eq!(
            parsed("input:1x3x224x224,other:1x10"),
            vec![
                ("input".to_string(), vec![1, 3, 224, 224]),
                ("other".to_string(), vec![1, 10])
            ]
        );
        assert_eq!(parsed(" x : 4 x 8 "), vec![("x".to_string(), vec![4, 8])]);
        assert_eq!(parsed("scalar:"), vec![("scalar".to_string(), vec![])]);
        assert_eq!(
            parsed("input:0:2x3"),
            vec![("input:0".to_string(), vec![2, 3])]
        );
        assert_eq!(
            parsed("'a,b':1x2,\"c:d\":3"),
            vec![
                ("a,b".to_string(), vec![1, 2]),
                ("c:d".to_string(), vec![3])
            ]
        );
        assert_eq!(parsed("empty:0x4"), vec![("empty".to_string(), vec![0, 4])]);
    }

    #[test]
    fn rejects_malformed_lists() {
        assert_eq!(error(""), "shape spec ``: no `name:dims` entry");
        assert_eq!(
            error("input"),
            "shape spec `input`: entry `input` is not `name:dims`"
        );
        assert_eq!(
            error("input:1x-1"),
            "shape spec `input:1x-1`: dimension `-1` of `input` is not a non-negative integer"
        );
        assert_eq!(
            error("input:1xx2"),
            "shape spec `input:1xx2`: dimension `` of `input` is not a non-negative integer"
        );
        assert_eq!(
            error(":1x2"),
            "shape spec `:1x2`: an entry has an empty tensor name"
        );
        assert_eq!(
            error("a:1,a:2"),
            "shape spec `a:1,a:2`: `a` appears more than once"
        );
        assert_eq!(error("a:1,"), "shape spec `a:1,`: trailing `,`");
        assert_eq!(error("'a:1"), "shape spec `'a:1`: unterminated ' quote");
    }

    #[test]
    fn formatting_round_trips() {
        let shapes = parsed("input:1x3x224x224,'we,ird':2,s:");
        let text = format_shape_list(shapes.iter().map(|(n, d)| (n.as_str(), d.as_slice())));
        assert_eq!(text, "input:1x3x224x224,\"we,ird\":2,s:");
        assert_eq!(parsed(&text), shapes);
    }

    #[test]
    fn profiles_from_trtexec_options() {
        let p = ShapeProfiles::from_trtexec(
            Some("mask:1x128"),
            Some("images:1x3x224x224"),
            Some("images:8x3x224x224,ids:4"),
            Some("images:16x3x224x224"),
        )
        .unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p.get("mask").unwrap(), &InputShapes::fixed(vec![1, 128]));
        assert_eq!(p.get("ids").unwrap(), &InputShapes::fixed(vec![4]));
        let images = p.get("images").unwrap();
        assert_eq!(images.min, vec![1, 3, 224, 224]);
        assert_eq!(images.opt, vec![8, 3, 224, 224]);
        assert_eq!(images.max, vec![16, 3, 224, 224]);
    }

    #[test]
    fn profiles_reject_inconsistent_options() {
        let err =
            ShapeProfiles::from_trtexec(None, Some("x:1x3"), None, Some("x:4x3")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor `x`: missing from --optShapes: give min, opt and max shapes together"
        );
        let err = ShapeProfiles::from_trtexec(None, Some("x:8x3"), Some("x:4x3"), Some("x:16x3"))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "tensor `x`: dimension 0 needs min <= opt <= max, got 8, 4, 16"
        );
        let err = ShapeProfiles::from_trtexec(None, Some("x:1x3"), Some("x:4"), Some("x:16x3"))
            .unwrap_err();
        assert!(err.to_string().contains("different ranks"), "{err}");
        let err = ShapeProfiles::from_trtexec(Some("x:1"), None, Some("x:1"), None).unwrap_err();
        assert!(err.to_string().contains("both with --shapes"), "{err}");
    }

    #[test]
    fn profiles_serialize_as_a_map() {
        let p = ShapeProfiles::from_trtexec(Some("x:2x3"), None, None, None).unwrap();
        assert_eq!(
            serde_json::to_string(&p).unwrap(),
            r#"{"x":{"min":[2,3],"opt":[2,3],"max":[2,3]}}"#
        );
    }
}
