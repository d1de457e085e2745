//! A fixed number of calls of one benchmark, outside criterion, for counting
//! instructions (`benches/instructions.sh`): a count does not move with the
//! machine's load as a time does. Included by the benches with `#[path]`.

use std::hint::black_box;

use criterion::BenchmarkGroup;
use criterion::measurement::Measurement;

/// Runs `routine` under criterion as `group`/`variant`; or, when
/// `BENCH_FIXED_LOOP` is set, only the benchmark it names (`group/variant:N`)
/// runs, `N` times, and the process ends: two runs that differ only in `N`
/// differ by exactly `N` calls.
pub fn bench<M: Measurement, R>(
    group: &mut BenchmarkGroup<'_, M>,
    group_name: &str,
    variant: &str,
    mut routine: impl FnMut() -> R,
) {
    let Ok(spec) = std::env::var("BENCH_FIXED_LOOP") else {
        group.bench_function(variant, |b| b.iter(&mut routine));
        return;
    };
    let (name, calls) = spec
        .rsplit_once(':')
        .and_then(|(name, calls)| Some((name, calls.parse::<u64>().ok()?)))
        .expect("BENCH_FIXED_LOOP is group/variant:N");
    // Every other benchmark is skipped: only this one runs, and only here.
    if name.split_once('/') == Some((group_name, variant)) {
        for _ in 0..calls {
            black_box(routine());
        }
        std::process::exit(0);
    }
}
