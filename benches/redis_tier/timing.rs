//! How `redis_tier` times a thing against its raw alternative: calls
//! interleaved one by one (round trips), in blocks (calls in process),
//! threads and tasks one variant after the other; a ratio per round, and
//! the median and range of each over the rounds.

use std::future::Future;
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Instant;

/// Nanoseconds per call of `thing` and of `raw`, over `ops` calls of each,
/// one of each in turn (which goes first alternating), so that the
/// machine's drift weighs on both alike. For calls of some µs or more (a
/// round trip), where the clock's own cost does not show.
pub fn per_call(
    ops: usize,
    mut thing: impl FnMut(usize),
    mut raw: impl FnMut(usize),
) -> (f64, f64) {
    let ns = per_calls(ops, 2, |variant, i| match variant {
        0 => thing(i),
        _ => raw(i),
    });
    (ns[0], ns[1])
}

/// Nanoseconds per call of each of `variants` variants (`call(variant, i)`
/// makes call `i` of one), over `ops` calls of each, one of each in turn,
/// the first of each turn rotating (`i % variants`: for two, the order
/// alternates), as [`per_call`].
pub fn per_calls(ops: usize, variants: usize, call: impl FnMut(usize, usize)) -> Vec<f64> {
    per_calls_by(Clock::Wall(Instant::now()), ops, variants, call)
}

/// Where [`per_calls_by`] reads the time.
#[derive(Clone, Copy)]
pub enum Clock {
    /// The wall clock, from this instant.
    Wall(Instant),
    /// The CPU time of every thread of this process (an async call's
    /// runtime threads too; `redis-server` is a process of its own): what
    /// the client spent on a call, natively. Reading it is a system call.
    ProcessCpu,
}

impl Clock {
    fn now_ns(self) -> u128 {
        match self {
            Clock::Wall(since) => since.elapsed().as_nanos(),
            Clock::ProcessCpu => {
                let mut now = libc::timespec {
                    tv_sec: 0,
                    tv_nsec: 0,
                };
                // SAFETY: `now` is a valid `timespec` for the call to write.
                let status =
                    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut now) };
                assert_eq!(status, 0, "clock_gettime(CLOCK_PROCESS_CPUTIME_ID)");
                now.tv_sec as u128 * 1_000_000_000 + now.tv_nsec as u128
            }
        }
    }
}

/// [`per_calls`] by `clock`: nanoseconds of it per call of each variant.
pub fn per_calls_by(
    clock: Clock,
    ops: usize,
    variants: usize,
    mut call: impl FnMut(usize, usize),
) -> Vec<f64> {
    let mut total = vec![0u128; variants];
    for i in 0..ops {
        for turn in 0..variants {
            let variant = (i + turn) % variants;
            let started = clock.now_ns();
            call(variant, i);
            total[variant] += clock.now_ns() - started;
        }
    }
    total.iter().map(|&ns| ns as f64 / ops as f64).collect()
}

/// [`per_call`] for async calls, awaited one at a time by the caller's
/// task.
pub async fn per_call_async(
    ops: usize,
    mut thing: impl AsyncFnMut(usize),
    mut raw: impl AsyncFnMut(usize),
) -> (f64, f64) {
    let ns = per_calls_async(ops, 2, async |variant, i| match variant {
        0 => thing(i).await,
        _ => raw(i).await,
    })
    .await;
    (ns[0], ns[1])
}

/// [`per_calls`] for async calls, awaited one at a time by the caller's
/// task.
pub async fn per_calls_async(
    ops: usize,
    variants: usize,
    call: impl AsyncFnMut(usize, usize),
) -> Vec<f64> {
    per_calls_async_by(Clock::Wall(Instant::now()), ops, variants, call).await
}

/// [`per_calls_async`] by `clock`.
pub async fn per_calls_async_by(
    clock: Clock,
    ops: usize,
    variants: usize,
    mut call: impl AsyncFnMut(usize, usize),
) -> Vec<f64> {
    let mut total = vec![0u128; variants];
    for i in 0..ops {
        for turn in 0..variants {
            let variant = (i + turn) % variants;
            let started = clock.now_ns();
            call(variant, i).await;
            total[variant] += clock.now_ns() - started;
        }
    }
    total.iter().map(|&ns| ns as f64 / ops as f64).collect()
}

/// One round's measurement of each of `runs`, one after the other, the
/// first rotating by `round` (for two, `raw` first every other round, as
/// [`Case::pair`]), so that none always runs on a machine another warmed.
pub fn in_turn(round: usize, runs: &mut [&mut dyn FnMut() -> f64]) -> Vec<f64> {
    let mut measured = vec![0.0; runs.len()];
    for turn in 0..runs.len() {
        let variant = (round + turn) % runs.len();
        measured[variant] = runs[variant]();
    }
    measured
}

/// Nanoseconds per call of `thing` and of `raw` in process: `blocks`
/// blocks of `block` calls of each, a block of each in turn (which goes
/// first alternating), each block timed as a whole so that the clock's own
/// cost (some 20 ns a read) is spread over its calls; the median block of
/// each, so that a block the scheduler interrupted does not weigh.
pub fn per_block(
    blocks: usize,
    block: usize,
    mut thing: impl FnMut(),
    mut raw: impl FnMut(),
) -> (f64, f64) {
    fn time(block: usize, call: &mut impl FnMut()) -> f64 {
        let started = Instant::now();
        for _ in 0..block {
            call();
        }
        started.elapsed().as_nanos() as f64 / block as f64
    }
    let (mut thing_ns, mut raw_ns) = (Vec::with_capacity(blocks), Vec::with_capacity(blocks));
    for b in 0..blocks {
        if b % 2 == 0 {
            thing_ns.push(time(block, &mut thing));
            raw_ns.push(time(block, &mut raw));
        } else {
            raw_ns.push(time(block, &mut raw));
            thing_ns.push(time(block, &mut thing));
        }
    }
    (median(&thing_ns), median(&raw_ns))
}

/// Calls per second of `threads` threads each calling `call` `ops` times:
/// from the first thread's start to the last one's end, as each thread
/// clocks them (a clock read outside the threads would also count the time
/// until it is scheduled again, which in-process calls do not swamp).
pub fn throughput(threads: usize, ops: usize, call: impl Fn(usize, usize) + Sync) -> f64 {
    let start = Barrier::new(threads);
    let spans: Vec<(Instant, Instant)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let (start, call) = (&start, &call);
                scope.spawn(move || {
                    start.wait();
                    let started = Instant::now();
                    for i in 0..ops {
                        call(t, i);
                    }
                    (started, Instant::now())
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let first = spans.iter().map(|span| span.0).min().unwrap();
    let last = spans.iter().map(|span| span.1).max().unwrap();
    (threads * ops) as f64 / (last - first).as_secs_f64()
}

/// Calls per second of `tasks` tasks, each awaiting `call` `ops` times.
pub async fn tasks<F, Fut>(tasks: usize, ops: usize, call: F) -> f64
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let started = Instant::now();
    let handles: Vec<_> = (0..tasks)
        .map(|t| {
            let call = call.clone();
            tokio::spawn(async move {
                for _ in 0..ops {
                    call(t).await;
                }
            })
        })
        .collect();
    for handle in handles {
        handle.await.unwrap();
    }
    (tasks * ops) as f64 / started.elapsed().as_secs_f64()
}

/// The median of `values` (the upper one of an even count).
pub fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// The least and the largest of `values`.
pub fn range(values: &[f64]) -> (f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, max)
}

/// A median and the range it was taken over.
#[derive(Debug, Clone, Copy)]
pub struct Spread {
    pub median: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        let (lo, hi) = range(values);
        Spread {
            median: median(values),
            lo,
            hi,
        }
    }
}

/// One case's measurements over the rounds: per variant, per round.
pub struct Case {
    pub name: String,
    pub unit: &'static str,
    pub thing: Vec<f64>,
    pub raw: Vec<f64>,
    /// Whether a larger number is better (throughput) or worse (time).
    pub higher_is_better: bool,
    /// What the report calls the alternative (`raw` unless told).
    pub base: &'static str,
}

impl Case {
    pub fn new(name: impl Into<String>, unit: &'static str, higher_is_better: bool) -> Case {
        Case {
            name: name.into(),
            unit,
            thing: Vec::new(),
            raw: Vec::new(),
            higher_is_better,
            base: "raw",
        }
    }

    /// The case with its alternative called `base` in the report.
    pub fn against(mut self, base: &'static str) -> Case {
        self.base = base;
        self
    }

    /// Both variants' measurements of one round.
    pub fn push(&mut self, (thing, raw): (f64, f64)) {
        self.thing.push(thing);
        self.raw.push(raw);
    }

    /// One round's measurement of each variant, one after the other:
    /// `raw` first when `swap` (every other round), so that neither always
    /// runs on a machine the other warmed.
    pub fn pair(
        &mut self,
        swap: bool,
        thing: &mut dyn FnMut() -> f64,
        raw: &mut dyn FnMut() -> f64,
    ) {
        if swap {
            let raw = raw();
            self.raw.push(raw);
            self.thing.push(thing());
        } else {
            self.thing.push(thing());
            self.raw.push(raw());
        }
    }

    /// The thing over its raw alternative, per round.
    pub fn ratio(&self) -> Spread {
        let ratios: Vec<f64> = (self.thing.iter().zip(&self.raw))
            .map(|(thing, raw)| thing / raw)
            .collect();
        Spread::of(&ratios)
    }

    pub fn report(&self) {
        let (thing, raw, ratio) = (Spread::of(&self.thing), Spread::of(&self.raw), self.ratio());
        // A time's ratio moves with the raw call's own (a round trip on
        // loopback takes 10 to 90 us here, by the machine's load); what the
        // thing adds to it, per round, moves less.
        let added = match self.higher_is_better {
            true => String::new(),
            false => {
                let added: Vec<f64> = (self.thing.iter().zip(&self.raw))
                    .map(|(thing, raw)| thing - raw)
                    .collect();
                let added = Spread::of(&added);
                format!(
                    "  added {:.0} ({:.0} to {:.0})",
                    added.median, added.lo, added.hi
                )
            }
        };
        println!(
            "  {:<46} {:>9.1} {} ({:.1}-{:.1})  {} {:>9.1} ({:.1}-{:.1})  ratio {:.2} ({:.2}-{:.2}){}{added}",
            self.name,
            thing.median,
            self.unit,
            thing.lo,
            thing.hi,
            self.base,
            raw.median,
            raw.lo,
            raw.hi,
            ratio.median,
            ratio.lo,
            ratio.hi,
            if self.higher_is_better {
                format!("  (of {} throughput)", self.base)
            } else {
                format!("  (of {} time)", self.base)
            },
        );
    }
}

/// A thing against its raw alternative with the floor under it, from the
/// same round's measurements of the three: the thing over the raw
/// alternative, the floor over the same raw alternative, and the thing over
/// the floor.
pub struct Floored {
    pub thing: Case,
    pub floor: Case,
    pub over: Case,
}

impl Floored {
    /// `name` the thing's case, `floor` what the floor is.
    pub fn new(name: &str, floor: &str, unit: &'static str, higher_is_better: bool) -> Floored {
        Floored {
            thing: Case::new(name, unit, higher_is_better),
            floor: Case::new(format!("floor: {floor}"), unit, higher_is_better),
            over: Case::new(format!("{name}: over the floor"), unit, higher_is_better)
                .against("floor"),
        }
    }

    /// One round's measurement of the thing, the raw alternative and the
    /// floor.
    pub fn push(&mut self, [thing, raw, floor]: [f64; 3]) {
        self.thing.push((thing, raw));
        self.floor.push((floor, raw));
        self.over.push((thing, floor));
    }

    pub fn report(&self) {
        self.thing.report();
        self.floor.report();
        self.over.report();
    }
}
