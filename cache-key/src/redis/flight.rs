//! Single flight: one origin call per key at a time in this process, its
//! answer handed to every caller waiting on it, whether they wait by
//! blocking a thread or as a future.
//!
//! A flight is led by one caller. It *lands* with the origin's answer or
//! error, which every waiter gets; or it is *vacated* when its leader stops
//! without one (the origin panicked, a Redis failure, a dropped future), and
//! then exactly one waiter takes it over while the others keep waiting. No
//! lock is held while a leader works: the flight's state is only touched to
//! join, land, vacate, take over and stop waiting.
//!
//! The map of flights holds only flights someone leads or waits on: a
//! landed flight leaves it at once, a vacated one when it has no waiter
//! left (its last waiter stopped, by a landing or by being dropped, as a
//! cancelled future is). So it never holds more flights than callers in
//! flight, whatever they do: land, panic, err or give up.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::task::Waker;

/// What a flight landed with, its types erased: a `V` or an `Arc<E>`,
/// checked on the way out (callers of one key may use other error types).
#[derive(Clone)]
pub(crate) enum Landing {
    Value(Arc<dyn Any + Send + Sync>),
    Error(Arc<dyn Any + Send + Sync>),
}

enum Phase {
    Leading,
    Vacant,
    Landed(Landing),
}

struct State {
    phase: Phase,
    wakers: Vec<Waker>,
    /// [`Waiter`]s alive: a vacant flight without any is dropped from the map.
    waiters: usize,
}

/// One origin call for one key, and its waiters.
struct Flight {
    state: Mutex<State>,
    changed: Condvar,
}

impl Flight {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Every change is one assignment: a panic never leaves it half-made.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the phase and wakes every waiter, blocked or polled.
    fn set(&self, phase: Phase) {
        let wakers = {
            let mut state = self.lock();
            state.phase = phase;
            std::mem::take(&mut state.wakers)
        };
        self.changed.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// The flights in progress, by key.
#[derive(Default)]
pub(crate) struct Flights {
    by_key: Mutex<HashMap<String, Arc<Flight>>>,
}

/// A caller's part in a flight.
pub(crate) enum Role<'f> {
    Lead(Leader<'f>),
    Wait(Waiter<'f>),
}

/// What a waiter gets: the landing, or the flight itself to lead.
pub(crate) enum Waited<'f> {
    Landed(Landing),
    Lead(Leader<'f>),
}

impl Flights {
    /// Joins the flight of `key`, leading it if there is none (or it is
    /// vacant).
    pub(crate) fn join(&self, key: &str) -> Role<'_> {
        let mut by_key = self.lock();
        if let Some(flight) = by_key.get(key) {
            let mut state = flight.lock();
            return match state.phase {
                Phase::Vacant => {
                    state.phase = Phase::Leading;
                    Role::Lead(self.leader(key, flight.clone()))
                }
                _ => {
                    state.waiters += 1;
                    Role::Wait(Waiter {
                        flights: self,
                        key: key.to_owned(),
                        flight: flight.clone(),
                    })
                }
            };
        }
        let flight = Arc::new(Flight {
            state: Mutex::new(State {
                phase: Phase::Leading,
                wakers: Vec::new(),
                waiters: 0,
            }),
            changed: Condvar::new(),
        });
        by_key.insert(key.to_owned(), flight.clone());
        Role::Lead(self.leader(key, flight))
    }

    /// How many flights the map holds.
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Arc<Flight>>> {
        // Every change is one insert or remove: a panic never leaves it half-made.
        self.by_key.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Drops `flight` from the map if it is still `key`'s there. Called with
    /// the map's lock held (taken before the flight's, always).
    fn forget(by_key: &mut HashMap<String, Arc<Flight>>, key: &str, flight: &Arc<Flight>) {
        if by_key
            .get(key)
            .is_some_and(|known| Arc::ptr_eq(known, flight))
        {
            by_key.remove(key);
        }
    }

    fn leader(&self, key: &str, flight: Arc<Flight>) -> Leader<'_> {
        Leader {
            flights: self,
            key: key.to_owned(),
            flight,
            landed: false,
        }
    }
}

/// The caller leading a flight. Dropped without [`land`](Self::land), it
/// vacates the flight for one waiter to take over.
pub(crate) struct Leader<'f> {
    flights: &'f Flights,
    key: String,
    flight: Arc<Flight>,
    landed: bool,
}

impl Leader<'_> {
    /// Ends the flight with `landing`: every waiter gets it, and the next
    /// caller of the key starts a flight of its own.
    pub(crate) fn land(self, landing: Landing) {
        self.land_with(|| landing);
    }

    /// [`land`](Self::land)s what `landing` makes, made only when someone
    /// waits for it (a caller alone pays no copy of the answer).
    pub(crate) fn land_with(mut self, landing: impl FnOnce() -> Landing) {
        self.landed = true;
        let mut by_key = self.flights.lock();
        Flights::forget(&mut by_key, &self.key, &self.flight);
        // Counted under the map's lock: no waiter can join once it is gone.
        let waited = self.flight.lock().waiters > 0;
        drop(by_key);
        if waited {
            self.flight.set(Phase::Landed(landing()));
        }
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if self.landed {
            return;
        }
        let mut by_key = self.flights.lock();
        let mut state = self.flight.lock();
        if state.waiters == 0 {
            // Nobody to take it over: the next caller starts a flight anew.
            Flights::forget(&mut by_key, &self.key, &self.flight);
        }
        drop(by_key);
        state.phase = Phase::Vacant;
        let wakers = std::mem::take(&mut state.wakers);
        drop(state);
        self.flight.changed.notify_all();
        wakers.into_iter().for_each(Waker::wake);
    }
}

/// A caller waiting on another's flight; counted in the flight's `waiters`
/// until dropped.
pub(crate) struct Waiter<'f> {
    flights: &'f Flights,
    key: String,
    flight: Arc<Flight>,
}

impl<'f> Waiter<'f> {
    /// Blocks until the flight lands or is vacated (then this caller leads it).
    pub(crate) fn wait(self) -> Waited<'f> {
        let mut state = self.flight.lock();
        loop {
            if let Some(waited) = self.settle(&mut state) {
                return waited;
            }
            state = self
                .flight
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// [`wait`](Self::wait) as a future.
    #[cfg(feature = "redis-async")]
    pub(crate) async fn landed(self) -> Waited<'f> {
        std::future::poll_fn(|cx| {
            let mut state = self.flight.lock();
            match self.settle(&mut state) {
                Some(waited) => std::task::Poll::Ready(waited),
                None => {
                    if !state.wakers.iter().any(|w| w.will_wake(cx.waker())) {
                        state.wakers.push(cx.waker().clone());
                    }
                    std::task::Poll::Pending
                }
            }
        })
        .await
    }

    /// What the flight's phase means for this waiter, taking a vacant
    /// flight over; `None` while it is led.
    fn settle(&self, state: &mut State) -> Option<Waited<'f>> {
        match &state.phase {
            Phase::Leading => None,
            Phase::Landed(landing) => Some(Waited::Landed(landing.clone())),
            Phase::Vacant => {
                state.phase = Phase::Leading;
                Some(Waited::Lead(
                    self.flights.leader(&self.key, self.flight.clone()),
                ))
            }
        }
    }
}

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        let mut by_key = self.flights.lock();
        let mut state = self.flight.lock();
        state.waiters -= 1;
        // The last waiter of a flight nobody leads: nobody will land it.
        if state.waiters == 0 && matches!(state.phase, Phase::Vacant) {
            Flights::forget(&mut by_key, &self.key, &self.flight);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;
    use std::time::Duration;

    fn value(landing: &Landing) -> u32 {
        match landing {
            Landing::Value(value) => *value.downcast_ref::<u32>().unwrap(),
            Landing::Error(_) => panic!("an error landed"),
        }
    }

    #[test]
    fn waiters_get_the_landing_and_the_next_caller_leads_anew() {
        let flights = Flights::default();
        let Role::Lead(leader) = flights.join("k") else {
            panic!("the first caller leads");
        };
        let Role::Wait(waiter) = flights.join("k") else {
            panic!("the second caller waits");
        };
        thread::scope(|scope| {
            let waiting = scope.spawn(|| waiter.wait());
            thread::sleep(Duration::from_millis(20));
            leader.land(Landing::Value(Arc::new(7u32)));
            match waiting.join().unwrap() {
                Waited::Landed(landing) => assert_eq!(value(&landing), 7),
                Waited::Lead(_) => panic!("the flight landed"),
            }
        });
        assert!(matches!(flights.join("k"), Role::Lead(_)));
    }

    #[test]
    fn a_vacated_flight_is_taken_over_by_exactly_one_waiter() {
        let flights = Flights::default();
        let Role::Lead(leader) = flights.join("k") else {
            panic!("the first caller leads");
        };
        let waiters: Vec<_> = (0..4)
            .map(|_| match flights.join("k") {
                Role::Wait(waiter) => waiter,
                Role::Lead(_) => panic!("the flight is led"),
            })
            .collect();
        let (taken, landed) = (Mutex::new(Vec::new()), Mutex::new(0));
        thread::scope(|scope| {
            let handles: Vec<_> = waiters
                .into_iter()
                .map(|waiter| {
                    let (taken, landed) = (&taken, &landed);
                    scope.spawn(move || match waiter.wait() {
                        Waited::Lead(leader) => taken.lock().unwrap().push(leader),
                        Waited::Landed(landing) => {
                            assert_eq!(value(&landing), 9);
                            *landed.lock().unwrap() += 1;
                        }
                    })
                })
                .collect();
            drop(leader); // as a panicking origin would
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while taken.lock().unwrap().is_empty() {
                assert!(std::time::Instant::now() < deadline, "nobody took over");
                thread::sleep(Duration::from_millis(1));
            }
            thread::sleep(Duration::from_millis(20));
            let mut taken = taken.lock().unwrap();
            assert_eq!(taken.len(), 1, "one waiter leads");
            taken.pop().unwrap().land(Landing::Value(Arc::new(9u32)));
            drop(taken);
            handles.into_iter().for_each(|h| h.join().unwrap());
            assert_eq!(*landed.lock().unwrap(), 3);
        });
    }

    #[test]
    fn a_flight_nobody_waits_on_leaves_the_map_when_vacated() {
        let flights = Flights::default();
        for i in 0..1_000 {
            let Role::Lead(leader) = flights.join(&format!("k{i}")) else {
                panic!("the first caller leads");
            };
            drop(leader); // a panicking origin, a Redis error, a dropped future
        }
        assert_eq!(flights.len(), 0);
    }

    #[test]
    fn a_vacated_flight_leaves_the_map_with_its_last_waiter() {
        let flights = Flights::default();
        let Role::Lead(leader) = flights.join("k") else {
            panic!("the first caller leads");
        };
        let waiters: Vec<_> = (0..3)
            .map(|_| match flights.join("k") {
                Role::Wait(waiter) => waiter,
                Role::Lead(_) => panic!("the flight is led"),
            })
            .collect();
        drop(leader);
        assert_eq!(flights.len(), 1, "kept for its waiters to take over");
        // Every waiter gives up (cancelled futures) before taking it over.
        drop(waiters);
        assert_eq!(flights.len(), 0);
        assert!(matches!(flights.join("k"), Role::Lead(_)));
    }

    #[test]
    fn a_waiter_that_takes_a_flight_over_keeps_it_until_it_lands() {
        let flights = Flights::default();
        let Role::Lead(leader) = flights.join("k") else {
            panic!("the first caller leads");
        };
        let Role::Wait(waiter) = flights.join("k") else {
            panic!("the second caller waits");
        };
        drop(leader);
        let Waited::Lead(leader) = waiter.wait() else {
            panic!("the waiter takes the vacant flight over");
        };
        assert_eq!(flights.len(), 1);
        assert!(matches!(flights.join("k"), Role::Wait(_)));
        leader.land(Landing::Value(Arc::new(1u32)));
        assert_eq!(flights.len(), 0);
    }
}
