//! The server's side of a run of calls, from `redis-server` itself: the
//! time its commands took (`INFO commandstats`, reset with `CONFIG
//! RESETSTAT`) and the CPU its process used (`INFO cpu`).

use std::collections::BTreeMap;

use redis::Connection;

/// What the server spent on a run of `calls` calls of one variant, per
/// call.
#[derive(Debug, Clone, Default)]
pub struct ServerRun {
    /// Microseconds of command time (`usec` summed over every command),
    /// per call. A command a script runs is counted in its own line as well
    /// as inside the script's.
    pub usec: f64,
    /// Microseconds of the process's CPU (`used_cpu_sys` +
    /// `used_cpu_user`), per call: the commands, the I/O around them, and
    /// whatever else the server did meanwhile (its cron, 10 times a second).
    pub cpu_us: f64,
    /// Each command's calls and microseconds, per call of the variant.
    pub commands: BTreeMap<String, (f64, f64)>,
    /// Microseconds of wall time per call: over which the server's cron
    /// also ran.
    pub wall_us: f64,
}

/// Whether `name` is a command the measurement itself sends (`INFO`,
/// `CONFIG RESETSTAT`, which Redis 7 counts as `config|resetstat`), left
/// out of its counts.
fn own(name: &str) -> bool {
    name == "info" || name.starts_with("config")
}

/// Runs `run` (which makes `calls` calls) and says what the server spent
/// on it, read on `admin`, a connection of its own.
pub fn server_run(admin: &mut Connection, calls: usize, run: impl FnOnce()) -> ServerRun {
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(admin)
        .expect("CONFIG RESETSTAT");
    let before = cpu_seconds(admin);
    let started = std::time::Instant::now();
    run();
    let wall = started.elapsed();
    let after = cpu_seconds(admin);
    let per = calls as f64;
    let commands: BTreeMap<String, (f64, f64)> = commandstats(admin)
        .into_iter()
        .filter(|(name, _)| !own(name))
        .map(|(name, (count, usec))| (name, (count as f64 / per, usec as f64 / per)))
        .collect();
    ServerRun {
        usec: commands.values().map(|(_, usec)| usec).sum(),
        cpu_us: (after - before) * 1e6 / per,
        commands,
        wall_us: wall.as_secs_f64() * 1e6 / per,
    }
}

/// `used_cpu_sys` + `used_cpu_user` of the server process, in seconds.
pub fn cpu_seconds(connection: &mut Connection) -> f64 {
    let info: String = redis::cmd("INFO")
        .arg("cpu")
        .query(connection)
        .expect("INFO cpu");
    let field = |name: &str| -> f64 {
        info.lines()
            .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_else(|| panic!("INFO cpu has no {name}: {info}"))
    };
    field("used_cpu_sys") + field("used_cpu_user")
}

/// Each command's `calls` and `usec` since the last reset, by name
/// (`get`, `evalsha`, `mget`...).
pub fn commandstats(connection: &mut Connection) -> BTreeMap<String, (u64, u64)> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(connection)
        .expect("INFO commandstats");
    info.lines()
        .filter_map(|line| {
            // cmdstat_get:calls=2001,usec=705,usec_per_call=0.35,...
            let (name, fields) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let field = |key: &str| -> Option<u64> {
                fields
                    .split(',')
                    .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))?
                    .parse()
                    .ok()
            };
            Some((name.to_owned(), (field("calls")?, field("usec")?)))
        })
        .collect()
}

impl ServerRun {
    /// Each command's share, as `name calls× usec`, for a report line.
    pub fn breakdown(runs: &[&ServerRun]) -> String {
        let mut names: Vec<&String> = runs.iter().flat_map(|run| run.commands.keys()).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|name| {
                let of = |pick: fn(&(f64, f64)) -> f64| {
                    let values: Vec<f64> = runs
                        .iter()
                        .map(|run| run.commands.get(name).map_or(0.0, pick))
                        .collect();
                    crate::timing::median(&values)
                };
                format!("{name} {:.2}x {:.2} us", of(|c| c.0), of(|c| c.1))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}
