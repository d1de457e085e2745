//! Numbers as the key format writes them: integers in exact decimal, floats in
//! JavaScript's `Number#toString` form. Both are formatted on the stack, never
//! into a heap `String`.

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

/// Writes a float as JavaScript's `Number#toString` does (ECMA-262
/// `Number::toString`, radix 10): the shortest digits that read back as the
/// same value, the closer of two and the even one on an exact tie,
/// positional between 1e-7 and 1e21. An `f32` gets the shortest digits that
/// read back as the same `f32`. `ryu-js` implements exactly that.
pub(crate) fn js_number<F: ryu_js::Float>(value: F, f: impl FnOnce(&str)) {
    f(ryu_js::Buffer::new().format(value));
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
            js_number(value, |text| assert_eq!(text, expected, "{value:?}"));
        }
    }

    #[test]
    fn f32_uses_its_own_shortest_digits() {
        js_number(0.1f32, |text| assert_eq!(text, "0.1"));
        js_number(-16777216f32, |text| assert_eq!(text, "-16777216"));
        js_number(3.4028235e38f32, |text| assert_eq!(text, "3.4028235e+38"));
    }
}
