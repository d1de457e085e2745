//! The client's instructions per call of one variant, counted by valgrind
//! (cachegrind), which the machine's load does not change: this bench run
//! again alone (`PROFILE=<variant>`) with `OPS=n` and `OPS=2n` calls,
//! against the same server, and the difference over `n`. The same runs
//! count the instruction fetches that miss a simulated L1 instruction cache
//! of 32 KiB, 8 ways (this VM's, fixed so the count does not depend on the
//! host): how much code a call runs, which fewer instructions can hide.

use std::process::Command;

/// Whether valgrind can be run.
pub fn valgrind_installed() -> bool {
    Command::new("valgrind").arg("--version").output().is_ok()
}

/// What a call of one variant costs the client, per call.
#[derive(Clone, Copy, Debug)]
pub struct PerCall {
    pub instructions: f64,
    /// Instruction fetches missing the simulated L1 instruction cache.
    pub i1_misses: f64,
}

/// What a run of some calls counted, all of the process.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Counts {
    instructions: u64,
    i1_misses: u64,
}

/// Per call of `profile` at `size`: the least run over `repeat` pairs of
/// runs of `ops` and `2 * ops` calls (a run may count some work that
/// depends on the wall clock, a heartbeat of the tracking listener say,
/// never less than the calls' own).
pub fn per_call(url: &str, profile: &str, size: &str, ops: usize, repeat: usize) -> PerCall {
    let least = |calls: usize| {
        (0..repeat.max(1))
            .map(|_| count(url, profile, size, calls))
            .min()
            .expect("one run at least")
    };
    let (once, twice) = (least(ops), least(2 * ops));
    let per_call = |of: fn(&Counts) -> u64| (of(&twice) as f64 - of(&once) as f64) / ops as f64;
    PerCall {
        instructions: per_call(|counts| counts.instructions),
        i1_misses: per_call(|counts| counts.i1_misses),
    }
}

/// What one run of `calls` calls of `profile` counted (all of the process:
/// its setup is the same whatever `calls`).
fn count(url: &str, profile: &str, size: &str, calls: usize) -> Counts {
    let exe = std::env::current_exe().expect("this bench's path");
    let output = Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=yes",
            "--I1=32768,8,64",
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
    // Lines such as `==12== I   refs:      4,703,545`.
    let field = |name: &str| -> u64 {
        stderr
            .lines()
            .find_map(|line| {
                let (_, rest) = line.split_once("== ")?;
                let (head, count) = rest.split_once(':')?;
                head.split_whitespace()
                    .eq(name.split(' '))
                    .then(|| count.trim().replace(',', ""))
            })
            .and_then(|count| count.parse().ok())
            .unwrap_or_else(|| panic!("no `{name}` count from valgrind:\n{stderr}"))
    };
    Counts {
        instructions: field("I refs"),
        i1_misses: field("I1 misses"),
    }
}
