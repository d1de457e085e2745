//! Numbers as the key format writes them: integers in exact decimal, floats in
//! JavaScript's `Number#toString` form. Both are formatted into stack buffers,
//! never into a heap `String`.

use core::fmt::{self, LowerExp, Write as _};

/// A decimal integer formatted into a stack buffer.
pub(crate) struct Decimal {
    buf: [u8; 40],
    start: usize,
}

/// `00` to `99`, two ASCII digits each.
const DIGIT_PAIRS: [u8; 200] = {
    let mut table = [0; 200];
    let mut n = 0;
    while n < 100 {
        table[2 * n] = b'0' + (n / 10) as u8;
        table[2 * n + 1] = b'0' + (n % 10) as u8;
        n += 1;
    }
    table
};

/// [`DIGIT_PAIRS`] as text, so that digits can be written as `&'static str`
/// pieces without validating them as UTF-8 again.
const PAIRS_TEXT: &str = match core::str::from_utf8(&DIGIT_PAIRS) {
    Ok(text) => text,
    Err(_) => panic!("ASCII digits"),
};

impl Decimal {
    /// An empty buffer, to be filled in place by one of the `set_` methods
    /// (filling in place, rather than returning a filled buffer, keeps the
    /// compiler from moving the buffer right after its bytes were written,
    /// which stalls on store forwarding).
    #[inline(always)]
    pub(crate) const fn new() -> Self {
        Decimal {
            buf: [0; 40],
            start: 40,
        }
    }

    /// Formats an unsigned integer.
    #[cfg(test)]
    pub(crate) fn unsigned(value: u128) -> Self {
        let mut decimal = Self::new();
        decimal.set_unsigned(value);
        decimal
    }

    /// Formats a signed integer, with a leading `-` when negative.
    #[cfg(test)]
    pub(crate) fn signed(value: i128) -> Self {
        let mut decimal = Self::new();
        decimal.set_signed(value);
        decimal
    }

    /// Formats an unsigned 64-bit integer.
    #[cfg(test)]
    pub(crate) fn u64(value: u64) -> Self {
        let mut decimal = Self::new();
        decimal.set_u64(value);
        decimal
    }

    /// Formats a signed 64-bit integer.
    #[cfg(test)]
    pub(crate) fn i64(value: i64) -> Self {
        let mut decimal = Self::new();
        decimal.set_i64(value);
        decimal
    }

    /// Formats an unsigned integer into this (empty) buffer.
    #[inline]
    pub(crate) fn set_unsigned(&mut self, value: u128) -> &Self {
        match u64::try_from(value) {
            // The common case stays in 64-bit arithmetic, which is much cheaper.
            Ok(n) => self.set_u64(n),
            Err(_) => {
                let mut n = value;
                while n != 0 {
                    self.push_digit((n % 10) as u8);
                    n /= 10;
                }
                self
            }
        }
    }

    /// Formats an unsigned 64-bit integer into this (empty) buffer, two
    /// digits at a time.
    #[inline]
    pub(crate) fn set_u64(&mut self, mut n: u64) -> &Self {
        while n >= 100 {
            let pair = (n % 100) as usize;
            n /= 100;
            self.start -= 2;
            self.buf[self.start..self.start + 2]
                .copy_from_slice(&DIGIT_PAIRS[2 * pair..2 * pair + 2]);
        }
        if n >= 10 {
            let pair = n as usize;
            self.start -= 2;
            self.buf[self.start..self.start + 2]
                .copy_from_slice(&DIGIT_PAIRS[2 * pair..2 * pair + 2]);
        } else {
            self.push_digit(n as u8);
        }
        self
    }

    /// Formats a signed 64-bit integer into this (empty) buffer, with a
    /// leading `-` when negative.
    #[inline]
    pub(crate) fn set_i64(&mut self, value: i64) -> &Self {
        self.set_u64(value.unsigned_abs());
        if value < 0 {
            self.push_minus();
        }
        self
    }

    /// Formats a signed integer into this (empty) buffer, with a leading `-`
    /// when negative.
    #[inline]
    pub(crate) fn set_signed(&mut self, value: i128) -> &Self {
        self.set_unsigned(value.unsigned_abs());
        if value < 0 {
            self.push_minus();
        }
        self
    }

    #[inline]
    fn push_minus(&mut self) {
        self.start -= 1;
        self.buf[self.start] = b'-';
    }

    #[inline]
    fn push_digit(&mut self, digit: u8) {
        self.start -= 1;
        self.buf[self.start] = b'0' + digit;
    }

    /// The number's text, as ASCII bytes.
    #[inline]
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// Appends the number's text to `out`, a character at a time: numbers
    /// are short, and this needs neither a copy call nor UTF-8 validation.
    #[inline]
    pub(crate) fn push_to(&self, out: &mut String) {
        for &byte in self.as_bytes() {
            out.push(char::from(byte));
        }
    }

    /// Calls `f` with the number's text, in order, as static pieces (`-`,
    /// then one or two digits at a time): no UTF-8 validation needed.
    #[inline]
    pub(crate) fn for_each_piece(&self, mut f: impl FnMut(&'static str)) {
        let mut digits = self.as_bytes();
        if let [b'-', rest @ ..] = digits {
            f("-");
            digits = rest;
        }
        let digit = |byte: u8| usize::from(byte.wrapping_sub(b'0'));
        if let [first, rest @ ..] = digits
            && digits.len() % 2 == 1
        {
            let d = digit(*first);
            f(PAIRS_TEXT.get(2 * d + 1..2 * d + 2).unwrap_or_default());
            digits = rest;
        }
        for pair in digits.chunks_exact(2) {
            let n = digit(pair[0]) * 10 + digit(pair[1]);
            f(PAIRS_TEXT.get(2 * n..2 * n + 2).unwrap_or_default());
        }
    }

    #[cfg(test)]
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII digits and '-' were written.
        core::str::from_utf8(&self.buf[self.start..]).unwrap_or_default()
    }
}

/// A small text buffer on the stack, long enough for any number this module
/// writes; writing past its `N` bytes fails with `fmt::Error` and writes
/// nothing.
pub(crate) struct StackText<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> StackText<N> {
    pub(crate) const fn new() -> Self {
        StackText {
            buf: [0; N],
            len: 0,
        }
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only whole `&str`s are ever appended, so the bytes are UTF-8.
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }

    fn push_bytes(&mut self, bytes: &[u8]) -> fmt::Result {
        let end = self.len + bytes.len();
        let dest = self.buf.get_mut(self.len..end).ok_or(fmt::Error)?;
        dest.copy_from_slice(bytes);
        self.len = end;
        Ok(())
    }

    fn push_zeros(&mut self, count: usize) -> fmt::Result {
        (0..count).try_for_each(|_| self.push_bytes(b"0"))
    }
}

impl<const N: usize> fmt::Write for StackText<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.push_bytes(s.as_bytes())
    }
}

/// The longest JavaScript number text: a sign, 17 digits, a point and an
/// exponent (`-1.2345678901234567e-308`), or 21 digits and a sign.
pub(crate) type JsNumber = StackText<32>;

/// Formats a float as JavaScript's `Number#toString` does (ECMA-262
/// `Number::toString`, radix 10): the shortest digits that read back as the
/// same value, positional between 1e-7 and 1e21, exponential outside.
///
/// `LowerExp` of Rust's floats already yields the shortest round-trip digits
/// (for an `f32`, the shortest that read back as the same `f32`); this lays
/// them out the way JavaScript does.
pub(crate) fn js_number<F: LowerExp + Into<f64> + Copy>(value: F) -> JsNumber {
    let mut out = JsNumber::new();
    // Writing into a 32-byte buffer cannot fail for any float: see `JsNumber`.
    let _ = write_js_number(&mut out, value);
    out
}

fn write_js_number<F: LowerExp + Into<f64> + Copy>(out: &mut JsNumber, value: F) -> fmt::Result {
    let wide: f64 = value.into();
    if wide.is_nan() {
        return out.write_str("NaN");
    }
    if wide == 0.0 {
        // Both 0 and -0.
        return out.write_str("0");
    }
    if wide < 0.0 {
        out.write_str("-")?;
    }
    if wide.is_infinite() {
        return out.write_str("Infinity");
    }

    // `{:e}` writes `[-]d[.ddd]e[-]x`; the sign is already written.
    let mut sci = StackText::<40>::new();
    write!(sci, "{value:e}")?;
    let magnitude = sci.as_str().trim_start_matches('-');
    let (mantissa, exponent) = magnitude.split_once('e').ok_or(fmt::Error)?;
    let exponent: i32 = exponent.parse().map_err(|_| fmt::Error)?;
    let mut digits = StackText::<24>::new();
    mantissa
        .bytes()
        .filter(u8::is_ascii_digit)
        .try_for_each(|d| digits.push_bytes(&[d]))?;
    let digits = digits.as_str();

    // The value is 0.d1d2...dk × 10^n in ECMA-262's terms.
    let k = digits.len() as i32;
    let n = exponent + 1;
    if k <= n && n <= 21 {
        out.write_str(digits)?;
        out.push_zeros((n - k) as usize)
    } else if 0 < n && n <= 21 {
        let (int, frac) = digits.split_at(n as usize);
        out.write_str(int)?;
        out.write_str(".")?;
        out.write_str(frac)
    } else if -6 < n && n <= 0 {
        out.write_str("0.")?;
        out.push_zeros((-n) as usize)?;
        out.write_str(digits)
    } else {
        let (first, rest) = digits.split_at(1);
        out.write_str(first)?;
        if !rest.is_empty() {
            out.write_str(".")?;
            out.write_str(rest)?;
        }
        let sign = if n - 1 < 0 { '-' } else { '+' };
        write!(out, "e{sign}{}", (n - 1).unsigned_abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_exact_decimal() {
        assert_eq!(Decimal::unsigned(0).as_str(), "0");
        assert_eq!(Decimal::unsigned(1970).as_str(), "1970");
        assert_eq!(
            Decimal::unsigned(u128::MAX).as_str(),
            "340282366920938463463374607431768211455"
        );
        assert_eq!(
            Decimal::signed(i128::MIN).as_str(),
            "-170141183460469231731687303715884105728"
        );
        assert_eq!(Decimal::signed(-5).as_str(), "-5");
        for n in [0, 1, 9, 10, 99, 100, 101, 999, 1000, 1970, 65535, u64::MAX] {
            assert_eq!(Decimal::u64(n).as_str(), n.to_string());
            let mut pieces = String::new();
            Decimal::u64(n).for_each_piece(|piece| pieces.push_str(piece));
            assert_eq!(pieces, n.to_string());
        }
        for n in [i128::MIN, -1970, -5, 0, 7, 10, i128::MAX] {
            let mut pieces = String::new();
            Decimal::signed(n).for_each_piece(|piece| pieces.push_str(piece));
            assert_eq!(pieces, n.to_string());
        }
        for n in [i64::MIN, -100, -10, -1, 0, 5, 42, i64::MAX] {
            assert_eq!(Decimal::i64(n).as_str(), n.to_string());
        }
    }

    #[test]
    fn floats_follow_javascript() {
        let cases: &[(f64, &str)] = &[
            (1.5, "1.5"),
            (-0.0, "0"),
            (0.0, "0"),
            (100.0, "100"),
            (1e21, "1e+21"),
            (1e20, "100000000000000000000"),
            (1e-7, "1e-7"),
            (0.000001, "0.000001"),
            (0.1 + 0.2, "0.30000000000000004"),
            (123456789.125, "123456789.125"),
            (5e-324, "5e-324"),
            (f64::MAX, "1.7976931348623157e+308"),
            (-2.5, "-2.5"),
            (-1.5e-9, "-1.5e-9"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
        ];
        for &(value, expected) in cases {
            assert_eq!(js_number(value).as_str(), expected, "{value:?}");
        }
    }

    #[test]
    fn f32_uses_its_own_shortest_digits() {
        assert_eq!(js_number(0.1f32).as_str(), "0.1");
        assert_eq!(js_number(-16777216f32).as_str(), "-16777216");
        assert_eq!(js_number(3.4028235e38f32).as_str(), "3.4028235e+38");
    }
}
