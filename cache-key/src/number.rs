//! Numbers as the key format writes them: integers in exact decimal (by
//! `itoa`), floats in JavaScript's `Number#toString` form, both formatted on
//! the stack.

/// An integer's decimal digits: a one-digit integer (a typical schema,
/// generation or page) from a table, since `itoa` formats out of line;
/// any other in `buffer`.
#[inline]
pub(crate) fn digits<I: itoa::Integer + TryInto<u8>>(buffer: &mut itoa::Buffer, n: I) -> &str {
    match n.try_into() {
        Ok(digit @ 0..=9) => {
            let at = usize::from(digit);
            "0123456789".get(at..=at).unwrap_or_default()
        }
        _ => buffer.format(n),
    }
}

/// Appends an integer's digits a character at a time: they are short, and
/// this needs no copy call.
#[inline]
pub(crate) fn push_digits(out: &mut String, digits: &str) {
    for byte in digits.bytes() {
        out.push(char::from(byte));
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
    fn digits_agree_with_display() {
        let mut buffer = itoa::Buffer::new();
        for n in -120i64..=120 {
            assert_eq!(digits(&mut buffer, n), n.to_string());
        }
        for n in [u64::MAX, 10, 9, 0] {
            assert_eq!(digits(&mut buffer, n), n.to_string());
        }
        assert_eq!(digits(&mut buffer, i128::MIN), i128::MIN.to_string());
        assert_eq!(digits(&mut buffer, 7u8), "7");
        assert_eq!(digits(&mut buffer, -7i8), "-7");
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
