//! Arithmetic on possibly-symbolic dimensions.
//!
//! A dimension is `Known(n)`, a named symbol (`N`, `batch`: the same name is the same
//! extent everywhere in the model) or the unnamed unknown `?`. These helpers never
//! claim more than they know: anything not provable becomes `?`.

use rtq_ir::{Dim, Shape};

/// Name of the unknown dimension.
pub(crate) const UNKNOWN: &str = "?";

/// The unknown dimension `?`.
pub(crate) fn unknown() -> Dim {
    Dim::Sym(UNKNOWN.to_string())
}

/// A shape of `rank` unknown dimensions.
pub(crate) fn unknown_shape(rank: usize) -> Shape {
    vec![unknown(); rank]
}

/// Whether `d` is unknown (`?` or an empty symbol).
pub(crate) fn is_unknown(d: &Dim) -> bool {
    matches!(d, Dim::Sym(s) if s == UNKNOWN || s.is_empty())
}

/// Whether `d` is a named symbol (not `?`).
pub(crate) fn is_named(d: &Dim) -> bool {
    matches!(d, Dim::Sym(_)) && !is_unknown(d)
}

/// Whether `a` and `b` are provably the same extent.
pub(crate) fn same(a: &Dim, b: &Dim) -> bool {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => x == y,
        (Dim::Sym(x), Dim::Sym(y)) => x == y && !is_unknown(a),
        _ => false,
    }
}

/// Combines two facts about one extent; `None` if they contradict (different known
/// extents). Known beats symbolic, named beats unknown, otherwise the first wins.
pub(crate) fn unify(a: &Dim, b: &Dim) -> Option<Dim> {
    match (a, b) {
        (Dim::Known(x), Dim::Known(y)) => (x == y).then(|| a.clone()),
        (Dim::Known(_), _) => Some(a.clone()),
        (_, Dim::Known(_)) => Some(b.clone()),
        _ if is_unknown(a) => Some(b.clone()),
        _ => Some(a.clone()),
    }
}

/// The extent of multidirectional (numpy) broadcasting of `a` and `b`; `None` if two
/// known extents differ and neither is 1.
pub(crate) fn broadcast(a: &Dim, b: &Dim) -> Option<Dim> {
    match (a, b) {
        (Dim::Known(1), _) => Some(b.clone()),
        (_, Dim::Known(1)) => Some(a.clone()),
        (Dim::Known(x), Dim::Known(y)) => (x == y).then(|| a.clone()),
        // A known extent other than 1 wins: the symbol must be 1 or equal to it.
        (Dim::Known(_), _) => Some(a.clone()),
        (_, Dim::Known(_)) => Some(b.clone()),
        _ if same(a, b) => Some(a.clone()),
        _ => Some(unknown()),
    }
}

/// Broadcasts two shapes (right-aligned); on conflict returns the first bad axis of the
/// result.
pub(crate) fn broadcast_shapes(a: &[Dim], b: &[Dim]) -> Result<Shape, usize> {
    let rank = a.len().max(b.len());
    let one = Dim::Known(1);
    (0..rank)
        .map(|i| {
            let da = (i + a.len()).checked_sub(rank).map_or(&one, |j| &a[j]);
            let db = (i + b.len()).checked_sub(rank).map_or(&one, |j| &b[j]);
            broadcast(da, db).ok_or(i)
        })
        .collect()
}

/// The product of `dims`: known when all are known (or one is 0), the symbol itself when
/// exactly one named symbol is multiplied by ones, otherwise unknown.
pub(crate) fn product(dims: &[Dim]) -> Dim {
    if dims.contains(&Dim::Known(0)) {
        return Dim::Known(0);
    }
    let mut known: usize = 1;
    let mut syms = Vec::new();
    for d in dims {
        match d {
            Dim::Known(n) => match known.checked_mul(*n) {
                Some(k) => known = k,
                None => return unknown(),
            },
            Dim::Sym(_) => syms.push(d),
        }
    }
    match syms.as_slice() {
        [] => Dim::Known(known),
        [s] if known == 1 && is_named(s) => (*s).clone(),
        _ => unknown(),
    }
}

/// `a * k` for a constant factor.
pub(crate) fn scale(a: &Dim, k: usize) -> Dim {
    match a {
        Dim::Known(n) => n.checked_mul(k).map_or_else(unknown, Dim::Known),
        _ if k == 1 => a.clone(),
        _ if k == 0 => Dim::Known(0),
        _ => unknown(),
    }
}

/// `a + k` for a constant (possibly negative) offset; `None` if the result would be
/// negative.
pub(crate) fn offset(a: &Dim, k: i64) -> Option<Dim> {
    match a {
        Dim::Known(n) => {
            let v = i64::try_from(*n).ok()?.checked_add(k)?;
            usize::try_from(v).ok().map(Dim::Known)
        }
        _ if k == 0 => Some(a.clone()),
        _ => Some(unknown()),
    }
}

/// The extent `product(numerator) / product(denominator)` when provable: common named
/// symbols cancel. `Err(())` when both sides are fully known and do not divide.
pub(crate) fn quotient(numerator: &[Dim], denominator: &[Dim]) -> Result<Dim, ()> {
    let mut num_syms: Vec<&Dim> = Vec::new();
    let mut den_syms: Vec<&Dim> = Vec::new();
    let mut kn: usize = 1;
    let mut kd: usize = 1;
    for d in numerator {
        match d {
            Dim::Known(n) => kn = kn.checked_mul(*n).ok_or(())?,
            _ => num_syms.push(d),
        }
    }
    for d in denominator {
        match d {
            Dim::Known(n) => kd = kd.checked_mul(*n).ok_or(())?,
            _ => {
                if let Some(pos) = num_syms.iter().position(|s| same(s, d)) {
                    num_syms.remove(pos);
                } else {
                    den_syms.push(d);
                }
            }
        }
    }
    if !den_syms.is_empty() || kd == 0 {
        return Ok(unknown());
    }
    match num_syms.as_slice() {
        [] if kn % kd == 0 => Ok(Dim::Known(kn / kd)),
        [] => Err(()),
        [s] if kn == kd => Ok((*s).clone()),
        _ => Ok(unknown()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: usize) -> Dim {
        Dim::Known(n)
    }

    fn s(name: &str) -> Dim {
        Dim::Sym(name.to_string())
    }

    #[test]
    fn broadcasting_keeps_symbols_and_rejects_conflicts() {
        assert_eq!(broadcast(&k(1), &s("N")), Some(s("N")));
        assert_eq!(broadcast(&s("N"), &s("N")), Some(s("N")));
        assert_eq!(broadcast(&s("N"), &s("M")), Some(unknown()));
        assert_eq!(broadcast(&s("?"), &s("?")), Some(unknown()));
        assert_eq!(broadcast(&k(3), &s("N")), Some(k(3)));
        assert_eq!(broadcast(&k(3), &k(4)), None);
        assert_eq!(
            broadcast_shapes(&[s("N"), k(3), k(1)], &[k(5)]),
            Ok(vec![s("N"), k(3), k(5)])
        );
        assert_eq!(broadcast_shapes(&[k(3)], &[k(2), k(4)]), Err(1));
        assert_eq!(broadcast_shapes(&[], &[k(2)]), Ok(vec![k(2)]));
    }

    #[test]
    fn unify_prefers_more_specific_facts() {
        assert_eq!(unify(&s("N"), &k(2)), Some(k(2)));
        assert_eq!(unify(&unknown(), &s("N")), Some(s("N")));
        assert_eq!(unify(&s("N"), &unknown()), Some(s("N")));
        assert_eq!(unify(&k(2), &k(3)), None);
        assert!(same(&s("N"), &s("N")) && !same(&unknown(), &unknown()));
    }

    #[test]
    fn products_and_quotients() {
        assert_eq!(product(&[k(2), k(3)]), k(6));
        assert_eq!(product(&[s("N"), k(1)]), s("N"));
        assert_eq!(product(&[s("N"), k(3)]), unknown());
        assert_eq!(product(&[s("N"), k(0)]), k(0));
        assert_eq!(product(&[]), k(1));
        assert_eq!(
            quotient(&[s("N"), k(512), k(1), k(1)], &[k(512)]),
            Ok(s("N"))
        );
        assert_eq!(quotient(&[s("N"), k(4), k(6)], &[s("N"), k(3)]), Ok(k(8)));
        assert_eq!(quotient(&[k(10)], &[k(3)]), Err(()));
        assert_eq!(quotient(&[s("N"), k(6)], &[k(3)]), Ok(unknown()));
        assert_eq!(quotient(&[k(6)], &[s("M")]), Ok(unknown()));
    }

    #[test]
    fn scale_and_offset() {
        assert_eq!(scale(&k(3), 2), k(6));
        assert_eq!(scale(&s("H"), 1), s("H"));
        assert_eq!(scale(&s("H"), 2), unknown());
        assert_eq!(offset(&k(3), -1), Some(k(2)));
        assert_eq!(offset(&k(3), -4), None);
        assert_eq!(offset(&s("H"), 0), Some(s("H")));
        assert_eq!(offset(&s("H"), 2), Some(unknown()));
    }
}
