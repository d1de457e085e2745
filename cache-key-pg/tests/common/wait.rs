//! Waiting for a state a consumer, another process or PostgreSQL reaches.

use std::time::Duration;

/// Polls `state` every 20 ms until it is `Ok`, and returns what it held
/// then; a failure after 60 s, with what `state` last said instead.
pub async fn until<T>(mut state: impl AsyncFnMut() -> Result<T, String>) -> T {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        match state().await {
            Ok(reached) => return reached,
            Err(now) => assert!(
                tokio::time::Instant::now() < deadline,
                "not reached in 60 s: {now}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
