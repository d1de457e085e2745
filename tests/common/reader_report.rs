//! The report a reader run as a child test process prints: one line
//! `READER name=value ...`, which its parent reads back.

use std::fmt;
use std::process::Output;
use std::str::FromStr;

/// The `READER ...` line of a child test process that succeeded.
pub struct ReaderReport {
    line: String,
}

impl ReaderReport {
    /// The report in `output`; panics when the child failed or printed none.
    pub fn of(output: Output) -> ReaderReport {
        assert!(output.status.success(), "the reader failed");
        let stdout = String::from_utf8(output.stdout).expect("UTF-8 output");
        // libtest prints the test's name on the same line.
        let line = stdout
            .lines()
            .find_map(|line| line.find("READER ").map(|at| line[at..].to_owned()))
            .unwrap_or_else(|| panic!("no reader report in {stdout}"));
        ReaderReport { line }
    }

    /// The value of `name=...` in the report.
    pub fn field<T: FromStr>(&self, name: &str) -> T
    where
        T::Err: fmt::Debug,
    {
        let prefix = format!("{name}=");
        let value = (self.line.split_whitespace())
            .find_map(|part| part.strip_prefix(&prefix))
            .unwrap_or_else(|| panic!("no {name} in {}", self.line));
        value
            .parse()
            .unwrap_or_else(|error| panic!("{name} in {}: {error:?}", self.line))
    }
}

impl fmt::Display for ReaderReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.line)
    }
}
