//! Running a loop compiled for the widest vectors the CPU has.
//!
//! The crate is built for baseline x86-64 (SSE2) so that it runs everywhere; loops that
//! the compiler vectorizes gain 2-4x when compiled for AVX2 or AVX-512. [`Simd::run`]
//! ([`multiversioned`]) calls an `#[inline(always)]` loop through a function compiled
//! with those features, chosen once at run time. Elementwise results do not depend on the choice (no fused
//! multiply-add is formed: Rust does not contract `a * b + c`).

/// The widest vector instruction set available.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Simd {
    /// AVX-512 F and BW.
    Avx512,
    /// AVX2.
    Avx2,
    /// The baseline.
    Base,
}

impl Simd {
    /// Whether this CPU has AVX-512 F and BW (never on other architectures).
    pub(crate) fn has_avx512() -> bool {
        Simd::detect() == Simd::Avx512
    }

    /// The best this CPU has (detected once).
    pub(crate) fn detect() -> Simd {
        static BEST: std::sync::OnceLock<Simd> = std::sync::OnceLock::new();
        *BEST.get_or_init(|| {
            #[cfg(target_arch = "x86_64")]
            {
                if is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") {
                    return Simd::Avx512;
                }
                if is_x86_feature_detected!("avx2") {
                    return Simd::Avx2;
                }
            }
            Simd::Base
        })
    }
}

/// The 16-lane mask (an AVX-512 `__mmask16`) of the positions `first + lane` that lie
/// inside `lo..hi`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[inline(always)]
pub(crate) fn lane_mask(first: isize, lo: isize, hi: isize) -> u16 {
    let start = (lo - first).clamp(0, 16);
    let end = (hi - first).clamp(0, 16);
    if start >= end {
        return 0;
    }
    let ones = if end - start == 16 {
        u16::MAX
    } else {
        (1u16 << (end - start)) - 1
    };
    ones << start
}

/// Relu of 16 lanes as the Relu op computes it: zero where `v <= 0` (-0 included),
/// NaN kept.
///
/// # Safety
/// AVX-512 F must be available.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub(crate) unsafe fn relu_512(v: std::arch::x86_64::__m512) -> std::arch::x86_64::__m512 {
    use std::arch::x86_64::*;
    let zero = _mm512_setzero_ps();
    _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LE_OQ>(v, zero), v, zero)
}

/// Defines `fn $name(args) -> ret` calling the `#[inline(always)]` function `$body`
/// compiled for AVX-512, AVX2 or the baseline, whichever [`Simd::detect`] finds.
macro_rules! multiversioned {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? => $body:path) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,avx512bw")]
                unsafe fn avx512($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2")]
                unsafe fn avx2($($arg: $ty),*) $(-> $ret)? {
                    $body($($arg),*)
                }
                match $crate::simd::Simd::detect() {
                    // SAFETY: `detect` found the features.
                    $crate::simd::Simd::Avx512 => return unsafe { avx512($($arg),*) },
                    // SAFETY: as above.
                    $crate::simd::Simd::Avx2 => return unsafe { avx2($($arg),*) },
                    $crate::simd::Simd::Base => {}
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use multiversioned;
