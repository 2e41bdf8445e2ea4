use std::fmt;

/// One dimension of a tensor shape: a known extent or a named symbol (`dim_param`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A fixed extent.
    Known(usize),
    /// A dynamic extent named by the model (e.g. `batch`), or `?` when unnamed.
    Sym(String),
}

/// A tensor shape whose dimensions may be symbolic.
pub type Shape = Vec<Dim>;

impl Dim {
    /// The extent if it is known.
    pub fn known(&self) -> Option<usize> {
        match self {
            Dim::Known(n) => Some(*n),
            Dim::Sym(_) => None,
        }
    }

    /// Whether the dimension is a symbol.
    pub fn is_symbolic(&self) -> bool {
        matches!(self, Dim::Sym(_))
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Self {
        Dim::Known(n)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// All extents of `shape` if every one is known.
pub fn known_shape(shape: &[Dim]) -> Option<Vec<usize>> {
    shape.iter().map(Dim::known).collect()
}

/// Formats a shape as `[1,3,H,W]`.
pub fn format_shape(shape: &[Dim]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(","))
}
