//! Single flight: one origin call per key at a time in this process, its
//! answer handed to every caller waiting on it, whether they wait by
//! blocking a thread or as a future.
//!
//! A flight is led by one caller. It *lands* with the origin's answer or
//! error, which every waiter gets; or it is *vacated* when its leader stops
//! without one (the origin panicked, a Redis failure, a dropped future), and
//! then exactly one waiter takes it over while the others keep waiting. No
//! lock is held while a leader works: the flight's state is only touched to
//! join, land, vacate and take over.

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
        let mut by_key = self.by_key.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(flight) = by_key.get(key) {
            let mut state = flight.lock();
            return match state.phase {
                Phase::Vacant => {
                    state.phase = Phase::Leading;
                    Role::Lead(self.leader(key, flight.clone()))
                }
                _ => Role::Wait(Waiter {
                    flights: self,
                    key: key.to_owned(),
                    flight: flight.clone(),
                }),
            };
        }
        let flight = Arc::new(Flight {
            state: Mutex::new(State {
                phase: Phase::Leading,
                wakers: Vec::new(),
            }),
            changed: Condvar::new(),
        });
        by_key.insert(key.to_owned(), flight.clone());
        Role::Lead(self.leader(key, flight))
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
    pub(crate) fn land(mut self, landing: Landing) {
        self.landed = true;
        {
            let mut by_key = self
                .flights
                .by_key
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if by_key
                .get(&self.key)
                .is_some_and(|flight| Arc::ptr_eq(flight, &self.flight))
            {
                by_key.remove(&self.key);
            }
        }
        self.flight.set(Phase::Landed(landing));
    }
}

impl Drop for Leader<'_> {
    fn drop(&mut self) {
        if !self.landed {
            self.flight.set(Phase::Vacant);
        }
    }
}

/// A caller waiting on another's flight.
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
}
