//! The listener of tracked counters: a thread of its own, subscribed to the
//! channel counter writes are published on, which drops the counters named
//! there (`redis/tracking.rs` says what it promises). It serves both
//! drivers: it is I/O of its own, never on a caller's path.

use std::sync::{Arc, Weak};
use std::thread;
use std::time::Duration;

use ::redis::{Client, Value};

use super::tracking::{CHANNEL, Tracked, Tracking};

/// Starts the listener for `tracked`, subscribing through the first of
/// `subscribers` that answers. It stops once `tracked` is dropped.
pub(crate) fn start(tracked: &Arc<Tracked>, subscribers: &[Client], tracking: Tracking) {
    let tracked = Arc::downgrade(tracked);
    let subscribers = subscribers.to_vec();
    let spawned = thread::Builder::new()
        .name("cache-key tracking".to_owned())
        .spawn(move || listen(&tracked, &subscribers, tracking.heartbeat()));
    // Without its thread the counters are never kept: reads stay strict.
    drop(spawned);
}

fn listen(tracked: &Weak<Tracked>, subscribers: &[Client], heartbeat: Duration) {
    let mut next = 0;
    loop {
        if tracked.strong_count() == 0 {
            return;
        }
        let client = &subscribers[next % subscribers.len()];
        next += 1;
        if let Ok(mut connection) = client.get_connection_with_timeout(heartbeat) {
            subscribed(tracked, &mut connection, heartbeat);
        }
        if let Some(tracked) = tracked.upgrade() {
            tracked.lost();
        }
        thread::sleep(heartbeat);
    }
}

/// Listens on `connection` until it fails, or `tracked` is dropped.
fn subscribed(tracked: &Weak<Tracked>, connection: &mut ::redis::Connection, heartbeat: Duration) {
    let mut pubsub = connection.as_pubsub();
    if pubsub.set_read_timeout(Some(heartbeat)).is_err() || pubsub.subscribe(CHANNEL).is_err() {
        return;
    }
    match tracked.upgrade() {
        Some(tracked) => tracked.subscribed(),
        None => return,
    }
    loop {
        let message = pubsub.get_message();
        let Some(tracked) = tracked.upgrade() else {
            return;
        };
        match message {
            Ok(message) => match message.get_payload::<String>() {
                Ok(name) => tracked.changed(&name),
                // A message of another kind: the subscription is not what
                // it should be.
                Err(_) => return,
            },
            // Silent for a heartbeat: alive if it answers a `PING` within
            // another.
            Err(error) if error.is_timeout() => {
                if pubsub.ping::<Value>().is_err() {
                    return;
                }
            }
            Err(_) => return,
        }
    }
}
