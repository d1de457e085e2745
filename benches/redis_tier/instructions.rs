//! The client's instructions per call of one variant, counted by valgrind
//! (cachegrind), which the machine's load does not change: this bench run
//! again alone (`PROFILE=<variant>`) with `OPS=n` and `OPS=2n` calls,
//! against the same server, and the difference over `n`.

use std::process::Command;

/// Whether valgrind can be run.
pub fn valgrind_installed() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok()
}

/// Instructions per call of `profile` at `size`, the least over `repeat`
/// pairs of runs of `ops` and `2 * ops` calls (a run may count some work
/// that depends on the wall clock, a heartbeat of the tracking listener
/// say, never less than the calls' own).
pub fn per_call(url: &str, profile: &str, size: &str, ops: usize, repeat: usize) -> f64 {
    let least = |calls: usize| {
        (0..repeat.max(1))
            .map(|_| count(url, profile, size, calls))
            .min()
            .expect("one run at least")
    };
    let (once, twice) = (least(ops), least(2 * ops));
    (twice as f64 - once as f64) / ops as f64
}

/// The instructions of one run of `calls` calls of `profile` (all of the
/// process: its setup is the same whatever `calls`).
fn count(url: &str, profile: &str, size: &str, calls: usize) -> u64 {
    let exe = std::env::current_exe().expect("this bench's path");
    let output = Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
        ])
        .arg(exe)
        .arg("--bench")
        .env("PROFILE", profile)
        .env("SIZE", size)
        .env("OPS", calls.to_string())
        .env("REDIS_URL", url)
        .output()
        .expect("valgrind runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "PROFILE={profile} under valgrind failed:\n{stderr}"
    );
    stderr
        .lines()
        .find_map(|line| {
            line.split_once(" refs:")
                .filter(|(head, _)| head.trim_end().ends_with(" I"))
                .map(|(_, count)| count.trim())
        })
        .map(|count| count.replace(',', ""))
        .and_then(|count| count.parse().ok())
        .unwrap_or_else(|| panic!("no instruction count from valgrind:\n{stderr}"))
}
