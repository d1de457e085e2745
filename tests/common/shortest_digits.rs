//! The shortest decimal digits of a float as ECMA-262 `Number::toString`
//! chooses them, for the tests' spec models: the fewest digits that read back
//! as the value, and on an exact tie between two candidates, the even one.
//! Written from the specification, not from the crate's code.

use std::fmt::LowerExp;
use std::str::FromStr;

/// The digits (no leading or trailing zeros) and the exponent `n` with
/// `x = 0.digits × 10^n`, for a finite `x > 0`.
pub fn shortest_digits<T>(x: T) -> (String, i32)
where
    T: LowerExp + Copy + FromStr + PartialEq,
{
    let (digits, exponent) = split_exp(&format!("{x:e}"));
    let k = digits.len();
    // The exact value: a double's expansion has at most 767 significant digits.
    let (exact, exact_exponent) = split_exp(&format!("{x:.800e}"));
    let exact = format!("{exact:0<801}");
    let is_tie = exact_exponent == exponent
        && exact.as_bytes()[k] == b'5'
        && exact.bytes().skip(k + 1).all(|b| b == b'0');
    if is_tie {
        let low = &exact[..k];
        let high = (low.parse::<u128>().expect("digits") + 1).to_string();
        let reads_back = |candidate: &str| {
            format!("{}.{}e{exponent}", &candidate[..1], &candidate[1..])
                .parse::<T>()
                .is_ok_and(|value| value == x)
        };
        if high.len() == k && reads_back(low) && reads_back(&high) {
            let even = if low.as_bytes()[k - 1] % 2 == 0 {
                low.to_owned()
            } else {
                high
            };
            let even = even.trim_end_matches('0').to_owned();
            return (even, exponent + 1);
        }
    }
    (digits, exponent + 1)
}

/// `[-]d[.ddd]e[-]x` as its digits without trailing zeros, and `x`.
fn split_exp(text: &str) -> (String, i32) {
    let (mantissa, exponent) = text.split_once('e').expect("an exponent");
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (digits.to_owned(), exponent.parse().expect("an exponent"))
}
